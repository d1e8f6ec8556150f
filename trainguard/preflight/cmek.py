"""CMEK: the job's ``encryptionSpec.kmsKeyName`` is a usable key for Vertex AI (part of ``iam``).

Vertex AI encrypts the job's resources with the key through its service agent
``service-PROJECT_NUMBER@gcp-sa-aiplatform.iam.gserviceaccount.com`` (the Vertex AI Service Agent,
not the Custom Code one the job runs as). The job is rejected, or fails, when

- the name is not ``projects/P/locations/L/keyRings/R/cryptoKeys/K`` or the key sits in another
  location than the job ("The Cloud KMS key must be in the same region as the resource":
  EncryptionSpec, Vertex AI REST reference) — decided offline;
- the key does not exist, is not a symmetric ``ENCRYPT_DECRYPT`` key, or has no enabled primary
  version (Cloud KMS ``cryptoKeys.get``);
- the service agent lacks ``cloudkms.cryptoKeyVersions.useToEncrypt`` / ``useToDecrypt`` on it:
  asked of Policy Troubleshooter on the key's full resource name (which sees inherited grants),
  else read from the key's own IAM policy (``getIamPolicy``), which can prove a grant but never
  its absence (it may come from the project): that case stays UNKNOWN.
"""

from __future__ import annotations

import concurrent.futures as cf
import re
from dataclasses import dataclass

from trainguard import gcp
from trainguard.preflight.checks import PreflightContext
from trainguard.preflight.common import (
    Target,
    api_retry,
    describe_failure,
    enable_line,
    endpoint_of,
    project_number,
    role_for,
    unknown_result,
)
from trainguard.preflight.results import CheckResult, Status

__all__ = [
    "KEY_NAME",
    "PERMISSIONS",
    "KEY_ROLE",
    "vertex_agent",
    "parse_key",
    "assess_key",
    "roles_granting",
    "check_key",
]

NAME = "iam"
KEY_NAME = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/keyRings/"
    r"(?P<ring>[^/]+)/cryptoKeys/(?P<key>[^/]+)$"
)
#: What the Vertex AI Service Agent needs on the key, and the role that grants both.
PERMISSIONS = ("cloudkms.cryptoKeyVersions.useToEncrypt", "cloudkms.cryptoKeyVersions.useToDecrypt")
KEY_ROLE = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
#: Predefined roles that grant each permission on a key (Cloud KMS roles reference).
_GRANTING = {
    "cloudkms.cryptoKeyVersions.useToEncrypt": (
        "roles/cloudkms.cryptoKeyEncrypterDecrypter",
        "roles/cloudkms.cryptoKeyEncrypter",
    ),
    "cloudkms.cryptoKeyVersions.useToDecrypt": (
        "roles/cloudkms.cryptoKeyEncrypterDecrypter",
        "roles/cloudkms.cryptoKeyDecrypter",
    ),
}
_AGENT = "service-{number}@gcp-sa-aiplatform.iam.gserviceaccount.com"


def vertex_agent(number: str) -> str:
    """The Vertex AI Service Agent of a project (the identity that uses a CMEK key)."""
    return _AGENT.format(number=number)


def roles_granting(permission: str) -> tuple[str, ...]:
    """The predefined roles that grant ``permission`` on a key."""
    return _GRANTING.get(permission, ())


@dataclass(frozen=True)
class KeyFacts:
    """What Cloud KMS says about a key: its purpose and its primary version's state."""

    purpose: str
    primary_state: str  # "" when the key has no primary version


def parse_key(name: str, region: str) -> CheckResult | None:
    """FAIL for a malformed name or a key outside ``region``; None when both are right (pure)."""
    title = f"CMEK key {name}"
    m = KEY_NAME.match(name)
    if not m:
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"encryptionSpec.kmsKeyName {name!r} is not a Cloud KMS key name",
            "set encryptionSpec.kmsKeyName to projects/PROJECT/locations/"
            f"{region}/keyRings/RING/cryptoKeys/KEY",
            "permission",
        )
    if m["location"] != region:
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"the key is in {m['location']}, the job runs in {region}: Vertex AI "
            "requires the key in the job's region",
            f"gcloud kms keys create {m['key']} --keyring={m['ring']} "
            f"--location={region} --purpose=encryption --project={m['project']} "
            f"(after gcloud kms keyrings create {m['ring']} --location={region} "
            f"--project={m['project']}), and point encryptionSpec.kmsKeyName at it",
            "permission",
            details={"key_location": m["location"]},
        )
    return None


def assess_key(name: str, facts: KeyFacts) -> CheckResult:
    """PASS for a symmetric key with an enabled primary version, else FAIL (pure)."""
    m = KEY_NAME.match(name)
    title = f"CMEK key {name}"
    where = (
        (f"{m['key']} --keyring={m['ring']} --location={m['location']} --project={m['project']}")
        if m
        else name
    )
    details = {"purpose": facts.purpose, "primary_state": facts.primary_state}
    if facts.purpose != "ENCRYPT_DECRYPT":
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"{name} has purpose {facts.purpose}; CMEK needs a symmetric ENCRYPT_DECRYPT key",
            "create a key with --purpose=encryption and use it as encryptionSpec.kmsKeyName",
            "permission",
            details=details,
        )
    if facts.primary_state != "ENABLED":
        state = facts.primary_state or "no primary version"
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"{name}'s primary version is {state}: nothing can be encrypted with it",
            f"gcloud kms keys versions create --key={where} --primary",
            "permission",
            details=details,
        )
    return CheckResult(
        NAME,
        title,
        Status.PASS,
        f"{name} exists in the job's region, ENCRYPT_DECRYPT, primary version ENABLED",
        details=details,
    )


def _key_facts(ctx: PreflightContext, name: str) -> KeyFacts:
    from google.cloud import kms_v1

    key = gcp.kms_client().get_crypto_key(
        name=name, timeout=ctx.call_timeout_s, retry=api_retry(ctx.call_timeout_s)
    )
    purpose = kms_v1.CryptoKey.CryptoKeyPurpose(key.purpose).name
    state = ""
    if key.primary and key.primary.name:
        state = kms_v1.CryptoKeyVersion.CryptoKeyVersionState(key.primary.state).name
    return KeyFacts(purpose, state)


def _troubleshoot(ctx: PreflightContext, email: str, target: Target) -> dict[str, bool | None]:
    """permission → True/False from Policy Troubleshooter, None where it cannot tell."""
    from google.cloud import policytroubleshooter_iam_v3 as pt

    client = gcp.troubleshooter_client()
    states = pt.TroubleshootIamPolicyResponse.OverallAccessState
    out: dict[str, bool | None] = {}
    for permission in PERMISSIONS:
        request = pt.TroubleshootIamPolicyRequest(
            access_tuple=pt.AccessTuple(
                principal=email, full_resource_name=target.full_name, permission=permission
            )
        )
        state = client.troubleshoot_iam_policy(
            request=request, timeout=ctx.call_timeout_s, retry=api_retry(ctx.call_timeout_s)
        ).overall_access_state
        out[permission] = {states.CAN_ACCESS: True, states.CANNOT_ACCESS: False}.get(state)
    return out


def _from_key_policy(ctx: PreflightContext, email: str, name: str) -> dict[str, bool | None]:
    """permission → True where the key's own policy grants it, None otherwise (not proof of
    absence: the grant may sit on the key ring or the project)."""
    policy = gcp.kms_client().get_iam_policy(
        request={"resource": name}, timeout=ctx.call_timeout_s, retry=api_retry(ctx.call_timeout_s)
    )
    member = f"serviceAccount:{email}"
    roles = {b.role for b in policy.bindings if member in b.members and not b.condition.expression}
    return {p: (True if roles & set(roles_granting(p)) else None) for p in PERMISSIONS}


def _undecided_remedy(verify: str, grant: str, enables: list[str]) -> str:
    """Enable the APIs found off (a role would not help), else the role preflight needs."""
    off = list(dict.fromkeys(filter(None, enables)))
    if off:
        return f"{'; '.join(off)}, then run trainguard preflight again; or verify by hand: {verify}"
    return (
        f"verify by hand: {verify}; preflight needs "
        f"{role_for('cloudkms.cryptoKeys.getIamPolicy')} to decide; or grant it: {grant}"
    )


def _agent_access(ctx: PreflightContext, name: str, number: str) -> CheckResult:
    email = vertex_agent(number)
    target = Target("kms_key", name)
    title = f"Vertex AI Service Agent {email} on key {name}"
    grant = target.grant_command(f"serviceAccount:{email}", KEY_ROLE)
    reasons = []
    enables: list[str] = []  # gcloud services enable lines of the APIs found off
    try:
        answers = _troubleshoot(ctx, email, target)
        via = "Policy Troubleshooter"
        if None in answers.values():
            reasons.append("Policy Troubleshooter could not read every policy that applies")
    except Exception as exc:
        answers = dict.fromkeys(PERMISSIONS)
        enables.append(enable_line(exc, ctx.spec.project))
        reasons.append(
            describe_failure(
                exc,
                api="Policy Troubleshooter",
                permission="cloudkms.cryptoKeys.getIamPolicy",
                timeout_s=ctx.call_timeout_s,
                where=endpoint_of("POLICYTROUBLESHOOTER"),
            )[0]
        )
    if None in answers.values():
        try:
            direct = _from_key_policy(ctx, email, name)
            answers = {p: answers[p] if answers[p] is not None else direct[p] for p in PERMISSIONS}
            via = "the key's IAM policy"
            if None in answers.values():
                reasons.append(
                    "the key's own IAM policy grants it no role with them (a grant on "
                    "the key ring or project cannot be seen from there)"
                )
        except Exception as exc:
            enables.append(enable_line(exc, ctx.spec.project))
            reasons.append(
                describe_failure(
                    exc,
                    api="Cloud KMS getIamPolicy",
                    permission="cloudkms.cryptoKeys.getIamPolicy",
                    timeout_s=ctx.call_timeout_s,
                    where=endpoint_of("CLOUDKMS"),
                )[0]
            )
    missing = [p for p in PERMISSIONS if answers[p] is False]
    unknown = [p for p in PERMISSIONS if answers[p] is None]
    details = {"principal": email, "resource": target.full_name, "missing": missing, "undecided": unknown}
    if missing:
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"{email} lacks {', '.join(missing)} ({KEY_ROLE}) on {name}: Vertex AI "
            "cannot encrypt the job's resources and rejects it",
            grant,
            "permission",
            details=details,
        )
    if unknown:
        return CheckResult(
            NAME,
            title,
            Status.UNKNOWN,
            f"cannot tell whether {email} holds {', '.join(unknown)} on {name}: {'; '.join(reasons)}",
            _undecided_remedy(target.verify_command(email, unknown[0]), grant, enables),
            "permission",
            details=details,
        )
    return CheckResult(
        NAME, title, Status.PASS, f"{email} holds {', '.join(PERMISSIONS)} on {name} ({via})", details=details
    )


def check_key(ctx: PreflightContext) -> list[CheckResult]:
    """The CMEK key: name and region (offline), existence and state, the service agent's use."""
    spec = ctx.spec
    name = spec.kms_key_name
    bad = parse_key(name, spec.region)
    if bad is not None:
        return [bad]
    title = f"CMEK key {name}"
    verify = f"gcloud kms keys describe {name}"
    with cf.ThreadPoolExecutor(max_workers=2, thread_name_prefix="preflight-cmek") as pool:
        facts_f = pool.submit(_key_facts, ctx, name)
        number_f = pool.submit(project_number, spec.project, ctx.call_timeout_s)
        results = []
        try:
            facts = facts_f.result()
        except Exception as exc:
            from google.api_core import exceptions

            if isinstance(exc, exceptions.NotFound):
                m = KEY_NAME.match(name)
                assert m is not None  # names that do not parse are refused before any call
                results.append(
                    CheckResult(
                        NAME,
                        title,
                        Status.FAIL,
                        f"{name} does not exist (Cloud KMS: not found)",
                        f"gcloud kms keys create {m['key']} --keyring={m['ring']} "
                        f"--location={m['location']} --purpose=encryption --project={m['project']}",
                        "permission",
                    )
                )
                return results  # no key, no point asking who may use it
            results.append(
                unknown_result(
                    NAME,
                    title,
                    exc,
                    api="Cloud KMS",
                    permission="cloudkms.cryptoKeys.get",
                    verify=verify,
                    timeout_s=ctx.call_timeout_s,
                    project=ctx.spec.project,
                    failure_class="permission",
                    where=endpoint_of("CLOUDKMS"),
                )
            )
        else:
            results.append(assess_key(name, facts))
        try:
            number = number_f.result()
        except Exception as exc:
            results.append(
                unknown_result(
                    NAME,
                    f"Vertex AI Service Agent on key {name}",
                    exc,
                    api="Resource Manager",
                    permission="resourcemanager.projects.get",
                    verify=f"gcloud projects describe {spec.project} --format='value(projectNumber)'",
                    timeout_s=ctx.call_timeout_s,
                    project=ctx.spec.project,
                    failure_class="permission",
                    where=endpoint_of("CLOUDRESOURCEMANAGER"),
                )
            )
            return results
    results.append(_agent_access(ctx, name, number))
    return results
