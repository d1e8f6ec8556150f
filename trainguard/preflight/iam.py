"""Service-account IAM: can the job's identity write its outputs, and may the caller launch it?

The job runs as ``serviceAccount`` from the spec, or — when none is set — as the Vertex AI Custom
Code Service Agent ``service-PROJECT_NUMBER@gcp-sa-aiplatform-cc.iam.gserviceaccount.com``. For
that principal every needed (resource, permission) pair is asked of Policy Troubleshooter v3,
concurrently. Where the troubleshooter refuses (403) or cannot tell (UNKNOWN_INFO,
UNKNOWN_CONDITIONAL), a user-managed service account is impersonated and testIamPermissions is
asked on the project and the bucket *as* it; where that is not allowed either, the pair is UNKNOWN
with the ``gcloud`` line that would verify it. The caller's own rights (create CustomJobs, act as
the service account) are checked with testIamPermissions.

An ``encryptionSpec.kmsKeyName`` is checked here too (``trainguard.preflight.cmek``): the Vertex AI
Service Agent must be able to use the key. The permission → role table, IAM targets and the way a
failed call is reported are shared by every family (``trainguard.preflight.common``).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainguard import gcp
from trainguard.preflight import cmek
from trainguard.preflight.checks import PreflightContext, register
from trainguard.preflight.common import (
    CALLER_MEMBER,
    Target,
    api_retry,
    bucket_of,
    call_policy,
    covering_role,
    describe_failure,
    enable_line,
    endpoint_of,
    project_number,
    role_for,
    unknown_result,
)
from trainguard.preflight.results import CheckResult, Status

if TYPE_CHECKING:
    from trainguard.spec import JobSpec

__all__ = [
    "Need",
    "Answer",
    "GRANTED",
    "MISSING",
    "UNDECIDED",
    "agent_email",
    "job_needs",
    "summarize",
    "iam",
]

NAME = "iam"
_AGENT = "service-{number}@gcp-sa-aiplatform-cc.iam.gserviceaccount.com"


# --- what the job needs -----------------------------------------------------------------------


@dataclass(frozen=True)
class Need:
    """The job's identity needs ``permission`` on ``target``; ``severity`` if it lacks it."""

    target: Target
    permission: str
    why: str
    severity: Status = Status.FAIL


def agent_email(project_number: str) -> str:
    """The Vertex AI Custom Code Service Agent of a project (the default job identity)."""
    return _AGENT.format(number=project_number)


def job_needs(spec: JobSpec) -> list[Need]:
    """What the job's identity needs, from the spec alone (pure).

    ``storage.objects.create/get/list`` on the output bucket (Vertex writes the model, checkpoints
    and logs there; a resumed job lists and reads them), ``storage.objects.delete`` as a warning
    (overwriting or rotating a checkpoint needs it), and ``aiplatform.*`` only for the Vertex
    features the spec asks for (tensorboard, experiments).
    """
    needs: list[Need] = []
    bucket = bucket_of(spec.base_output_dir)
    if bucket:
        b = Target("bucket", bucket)
        needs += [
            Need(b, "storage.objects.create", "write the model, checkpoints and logs"),
            Need(b, "storage.objects.get", "read checkpoints back on restart"),
            Need(b, "storage.objects.list", "find the latest checkpoint"),
            Need(b, "storage.objects.delete", "overwrite or rotate checkpoints", Status.WARN),
        ]
    project = Target("project", spec.project)
    js = spec.job_spec
    if js.tensorboard:
        needs += [
            Need(
                project,
                "aiplatform.tensorboardExperiments.write",
                "upload TensorBoard logs (spec sets tensorboard)",
            ),
            Need(
                project, "aiplatform.tensorboardRuns.write", "upload TensorBoard logs (spec sets tensorboard)"
            ),
        ]
    if js.experiment:
        needs += [
            Need(
                project,
                "aiplatform.metadataStores.get",
                "log to Vertex AI Experiments (spec sets experiment)",
            ),
            Need(
                project, "aiplatform.contexts.update", "log to Vertex AI Experiments (spec sets experiment)"
            ),
        ]
    return needs


# --- asking the APIs --------------------------------------------------------------------------

GRANTED, MISSING, UNDECIDED = "granted", "missing", "undecided"


@dataclass
class Answer:
    """What is known about one Need: GRANTED, MISSING or UNDECIDED (with why)."""

    state: str
    via: str = ""
    reason: str = ""
    lacking: str = ""
    enable: str = ""  # the gcloud services enable line when an API it needed is off


def _troubleshoot(
    ctx: PreflightContext, email: str, needs: Sequence[Need], pool: cf.ThreadPoolExecutor
) -> dict[Need, Answer]:
    """Asks Policy Troubleshooter about every need, concurrently."""
    from google.cloud import policytroubleshooter_iam_v3 as pt

    try:
        client = gcp.troubleshooter_client()
    except Exception as exc:  # no ADC: every need stays undecided, with the reason
        evidence, lacking = describe_failure(
            exc,
            api="Policy Troubleshooter",
            permission="iam.roles.get",
            timeout_s=ctx.call_timeout_s,
            where=endpoint_of("POLICYTROUBLESHOOTER"),
        )
        return {n: Answer(UNDECIDED, reason=evidence, lacking=lacking) for n in needs}
    project = ctx.spec.project
    states = pt.TroubleshootIamPolicyResponse.OverallAccessState
    retry = api_retry(ctx.call_timeout_s)

    def ask(need: Need) -> Answer:
        request = pt.TroubleshootIamPolicyRequest(
            access_tuple=pt.AccessTuple(
                principal=email, full_resource_name=need.target.full_name, permission=need.permission
            )
        )
        try:
            response = client.troubleshoot_iam_policy(
                request=request, retry=retry, timeout=ctx.call_timeout_s
            )
        except Exception as exc:
            evidence, lacking = describe_failure(
                exc,
                api="Policy Troubleshooter",
                permission="resourcemanager.projects.getIamPolicy",
                timeout_s=ctx.call_timeout_s,
                where=endpoint_of("POLICYTROUBLESHOOTER"),
            )
            return Answer(UNDECIDED, reason=evidence, lacking=lacking, enable=enable_line(exc, project))
        state = response.overall_access_state
        if state == states.CAN_ACCESS:
            return Answer(GRANTED, via="Policy Troubleshooter")
        if state == states.CANNOT_ACCESS:
            return Answer(MISSING, via="Policy Troubleshooter")
        why = {
            states.UNKNOWN_INFO: "Policy Troubleshooter could not read every policy that "
            "applies (UNKNOWN_INFO)",
            states.UNKNOWN_CONDITIONAL: "access depends on an IAM condition (UNKNOWN_CONDITIONAL)",
        }.get(state, f"answer {state}")
        return Answer(UNDECIDED, reason=why, lacking="resourcemanager.projects.getIamPolicy")

    futures = {n: pool.submit(ask, n) for n in needs}
    return {n: f.result() for n, f in futures.items()}


def _impersonate(ctx: PreflightContext, email: str, needs: Sequence[Need]) -> dict[Need, Answer]:
    """testIamPermissions as the service account, on the project and on the bucket."""
    from google.auth import exceptions as auth_exceptions

    try:
        creds = gcp.impersonated_credentials(email)
        creds.refresh(gcp.timed_request(ctx.call_timeout_s))
    except auth_exceptions.RefreshError as exc:
        enable = enable_line(exc, ctx.spec.project)
        if enable:  # IAM Credentials is off: no role makes impersonation work
            reason, _ = describe_failure(
                exc,
                api="IAM Credentials",
                permission="iam.serviceAccounts.getAccessToken",
                timeout_s=ctx.call_timeout_s,
            )
            return {n: Answer(UNDECIDED, reason=reason, enable=enable) for n in needs}
        reason = f"cannot impersonate {email}: {_refresh_reason(exc)}"
        return {
            n: Answer(UNDECIDED, reason=reason, lacking="iam.serviceAccounts.getAccessToken") for n in needs
        }
    except Exception as exc:
        evidence, lacking = describe_failure(
            exc,
            api="IAM Credentials",
            permission="iam.serviceAccounts.getAccessToken",
            timeout_s=ctx.call_timeout_s,
            where=endpoint_of("IAMCREDENTIALS"),
        )
        return {n: Answer(UNDECIDED, reason=evidence, lacking=lacking) for n in needs}
    out: dict[Need, Answer] = {}
    by_target: dict[Target, list[Need]] = {}
    for need in needs:
        by_target.setdefault(need.target, []).append(need)
    for target, group in by_target.items():
        permissions = sorted({n.permission for n in group})
        try:
            if target.kind == "bucket":
                api = "Cloud Storage testIamPermissions"
                client = gcp.storage_client(ctx.spec.project, credentials=creds)
                granted = set(
                    client.bucket(target.name).test_iam_permissions(
                        permissions, timeout=ctx.call_timeout_s, retry=api_retry(ctx.call_timeout_s)
                    )
                )
            else:
                api = "Resource Manager testIamPermissions"
                session, base = gcp.authorized_session("CLOUDRESOURCEMANAGER", credentials=creds)
                data = gcp.rest_json(
                    session,
                    "POST",
                    f"{base}/v3/projects/{target.name}:testIamPermissions",
                    timeout=ctx.call_timeout_s,
                    retry=call_policy(ctx.call_timeout_s),
                    body={"permissions": permissions},
                )
                granted = set(data.get("permissions", []))
        except Exception as exc:
            evidence, lacking = describe_failure(
                exc, api=api, permission=permissions[0], timeout_s=ctx.call_timeout_s
            )
            enable = enable_line(exc, ctx.spec.project)
            for need in group:
                out[need] = Answer(UNDECIDED, reason=evidence, lacking=lacking, enable=enable)
            continue
        for need in group:
            state = GRANTED if need.permission in granted else MISSING
            out[need] = Answer(state, via="testIamPermissions as the service account")
    return out


def _refresh_reason(exc: BaseException) -> str:
    """The status in an IAM Credentials error body (the body holds no token)."""
    for arg in getattr(exc, "args", ())[1:]:
        try:
            error = json.loads(arg)["error"]
            return (
                f"{error.get('code')} {error.get('status', '')}: the caller lacks "
                "iam.serviceAccounts.getAccessToken (roles/iam.serviceAccountTokenCreator)"
            )
        except (TypeError, ValueError, KeyError):
            continue
    return "the token exchange failed (the caller needs roles/iam.serviceAccountTokenCreator)"


# --- the caller -------------------------------------------------------------------------------


def _caller_may_create(ctx: PreflightContext) -> CheckResult:
    """testIamPermissions as the caller: ``aiplatform.customJobs.create`` on the project."""
    spec = ctx.spec
    project = Target("project", spec.project)
    title = f"caller may create CustomJobs in {spec.project}"
    permission = "aiplatform.customJobs.create"
    try:
        session, base = gcp.authorized_session("CLOUDRESOURCEMANAGER")
        data = gcp.rest_json(
            session,
            "POST",
            f"{base}/v3/projects/{spec.project}:testIamPermissions",
            timeout=ctx.call_timeout_s,
            retry=call_policy(ctx.call_timeout_s),
            body={"permissions": [permission]},
        )
    except Exception as exc:
        return unknown_result(
            NAME,
            title,
            exc,
            api="Resource Manager testIamPermissions",
            permission="resourcemanager.projects.get",
            where=endpoint_of("CLOUDRESOURCEMANAGER"),
            verify=f"gcloud projects get-iam-policy {spec.project} "
            "--flatten=bindings[].members --filter=bindings.members:"
            "$(gcloud config get-value account)",
            timeout_s=ctx.call_timeout_s,
            project=ctx.spec.project,
        )
    if permission in data.get("permissions", []):
        return CheckResult(
            NAME, title, Status.PASS, f"the caller holds {permission} on project {spec.project}"
        )
    role = role_for(permission)
    return CheckResult(
        NAME,
        title,
        Status.FAIL,
        f"the caller lacks {permission} ({role}) on project {spec.project}; Vertex would reject the job",
        project.grant_command(CALLER_MEMBER, role),
        "permission",
        details={"missing": {permission: role}},
    )


def _caller_may_act_as(ctx: PreflightContext, sa: str) -> CheckResult:
    """testIamPermissions as the caller: ``iam.serviceAccounts.actAs`` on the job's account."""
    from google.api_core import exceptions

    title = f"caller may act as {sa}"
    permission = "iam.serviceAccounts.actAs"
    target = Target("service_account", sa)
    try:
        session, base = gcp.authorized_session("IAM")
        data = gcp.rest_json(
            session,
            "POST",
            f"{base}/v1/projects/-/serviceAccounts/{sa}:testIamPermissions",
            timeout=ctx.call_timeout_s,
            retry=call_policy(ctx.call_timeout_s),
            body={"permissions": [permission]},
        )
    except exceptions.NotFound:
        name, _, rest = sa.partition("@")
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"service account {sa} does not exist",
            f"gcloud iam service-accounts create {name} "
            f"--project={rest.split('.', 1)[0]}, or fix serviceAccount in the spec",
            "permission",
        )
    except Exception as exc:
        return unknown_result(
            NAME,
            title,
            exc,
            api="IAM testIamPermissions",
            permission="iam.serviceAccounts.getIamPolicy",
            where=endpoint_of("IAM"),
            verify=f"gcloud iam service-accounts get-iam-policy {sa}",
            timeout_s=ctx.call_timeout_s,
            project=ctx.spec.project,
        )
    if permission in data.get("permissions", []):
        return CheckResult(NAME, title, Status.PASS, f"the caller holds {permission} on {sa}")
    role = role_for(permission)
    return CheckResult(
        NAME,
        title,
        Status.FAIL,
        f"the caller lacks {permission} ({role}) on {sa}; Vertex would reject a job that runs as it",
        target.grant_command(CALLER_MEMBER, role),
        "permission",
        details={"missing": {permission: role}},
    )


# --- the job's identity -----------------------------------------------------------------------


def summarize(email: str, is_agent: bool, answers: dict[Need, Answer]) -> list[CheckResult]:
    """One result per target: PASS, FAIL (missing FAIL-severity permissions), WARN, UNKNOWN (pure)."""
    who = "Vertex AI Custom Code Service Agent" if is_agent else "job service account"
    member = f"serviceAccount:{email}"
    by_target: dict[Target, list[Need]] = {}
    for need in answers:
        by_target.setdefault(need.target, []).append(need)
    out = []
    for target, needs in by_target.items():
        title = f"{who} {email} on {target.label}"
        missing = [n for n in needs if answers[n].state == MISSING]
        undecided = [n for n in needs if answers[n].state == UNDECIDED]
        granted = [n for n in needs if answers[n].state == GRANTED]
        vias = sorted({answers[n].via for n in needs if answers[n].via})
        details = {
            "principal": email,
            "resource": target.full_name,
            "granted": [n.permission for n in granted],
            "missing": {n.permission: role_for(n.permission) for n in missing},
            "undecided": {n.permission: answers[n].reason for n in undecided},
            "via": vias,
        }
        if missing:
            status = Status.FAIL if any(n.severity == Status.FAIL for n in missing) else Status.WARN
            listed = "; ".join(f"{n.permission} ({role_for(n.permission)}: {n.why})" for n in missing)
            evidence = f"{email} lacks {listed} on {target.label}"
            if undecided:
                evidence += f"; undecided: {', '.join(n.permission for n in undecided)}"
            role = covering_role(n.permission for n in missing)
            out.append(
                CheckResult(
                    NAME,
                    title,
                    status,
                    evidence,
                    target.grant_command(member, role),
                    "permission",
                    details=details,
                )
            )
        elif undecided:
            first = undecided[0]
            reason = answers[first].reason
            others = [n.permission for n in undecided[1:]]
            remedy = f"verify by hand: {target.verify_command(email, first.permission)}"
            if "Application Default Credentials" in reason:
                remedy = f"run `gcloud auth application-default login`, or {remedy}"
            if others:
                remedy += f" (repeat for {', '.join(others)})"
            lacking = answers[first].lacking
            enables = list(dict.fromkeys(answers[n].enable for n in undecided if answers[n].enable))
            if enables:  # an API is off: enabling it, not a role, lets preflight decide
                remedy = f"{'; '.join(enables)}, then run trainguard preflight again; or {remedy}"
            elif lacking:
                remedy += f"; preflight needs {role_for(lacking)} to decide"
            evidence = (
                f"cannot tell whether {email} holds "
                f"{', '.join(n.permission for n in undecided)} on {target.label}: {reason}"
            )
            if is_agent and "impersonate" not in reason:
                evidence += " (a service agent cannot be impersonated)"
            out.append(
                CheckResult(NAME, title, Status.UNKNOWN, evidence, remedy, "permission", details=details)
            )
        else:
            out.append(
                CheckResult(
                    NAME,
                    title,
                    Status.PASS,
                    f"{email} holds {', '.join(n.permission for n in granted)} on "
                    f"{target.label} ({', '.join(vias)})",
                    details=details,
                )
            )
    return out


def _job_identity(ctx: PreflightContext, pool: cf.ThreadPoolExecutor) -> list[CheckResult]:
    spec = ctx.spec
    needs = job_needs(spec)
    if not needs:
        return [
            CheckResult(
                NAME,
                "job identity",
                Status.PASS,
                "the spec sets no baseOutputDirectory, tensorboard or experiment, so "
                "the job's identity needs no extra access",
            )
        ]
    email, is_agent = spec.service_account, not spec.service_account
    if is_agent:
        try:
            email = agent_email(project_number(spec.project, ctx.call_timeout_s))
        except Exception as exc:
            return [
                unknown_result(
                    NAME,
                    "Vertex AI Custom Code Service Agent",
                    exc,
                    api="Resource Manager",
                    permission="resourcemanager.projects.get",
                    verify=f"gcloud projects describe {spec.project} --format='value(projectNumber)'",
                    timeout_s=ctx.call_timeout_s,
                    project=ctx.spec.project,
                    failure_class="permission",
                )
            ]
    answers = _troubleshoot(ctx, email, needs, pool)
    undecided = [n for n in needs if answers[n].state == UNDECIDED]
    if undecided and not is_agent:
        fallback = _impersonate(ctx, email, undecided)
        for need, answer in fallback.items():
            if answer.state != UNDECIDED:
                answers[need] = answer
            else:  # keep both reasons: why the troubleshooter and the fallback could not decide
                first = answers[need].reason
                reason = first if first == answer.reason else f"{first}; {answer.reason}"
                answers[need] = Answer(
                    UNDECIDED,
                    reason=reason,
                    lacking=answer.lacking or answers[need].lacking,
                    enable="; ".join(filter(None, dict.fromkeys([answers[need].enable, answer.enable]))),
                )
    return summarize(email, is_agent, answers)


@register(NAME)
def iam(ctx: PreflightContext) -> list[CheckResult]:
    """The job identity's access to its outputs, the caller's right to launch it, the CMEK key."""
    with cf.ThreadPoolExecutor(max_workers=12, thread_name_prefix="preflight-iam") as pool:
        caller = [pool.submit(_caller_may_create, ctx)]
        if ctx.spec.service_account:
            caller.append(pool.submit(_caller_may_act_as, ctx, ctx.spec.service_account))
        key = pool.submit(cmek.check_key, ctx) if ctx.spec.kms_key_name else None
        job = _job_identity(ctx, pool)
        return job + [f.result() for f in caller] + (key.result() if key else [])
