"""What every online check family shares: the permission → role table, IAM targets and their
``gcloud`` lines, the retry policy of a preflight call, and how a failed call is reported.

A check that cannot decide says so: ``unknown_result`` turns any failed call into UNKNOWN with
the reason (never a credential), the read-only role the caller lacks (from the 403's ErrorInfo or
the permission the call needs) and the ``gcloud`` line that verifies the fact by hand. A 403 is
not always a role: an API that is off in the project (ErrorInfo ``SERVICE_DISABLED``; Cloud
Quotas and Policy Troubleshooter are off in most projects) gets the ``gcloud services enable``
line, and a project ID that is no project (``CONSUMER_INVALID``) gets "check --project"
(:mod:`trainguard.api_errors` reads the bodies).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from trainguard import api_errors
from trainguard.preflight.results import CheckResult, Status
from trainguard.retry import RetryPolicy

__all__ = [
    "ROLES",
    "CALLER_MEMBER",
    "Target",
    "role_for",
    "covering_role",
    "bucket_of",
    "endpoint_of",
    "project_number",
    "call_policy",
    "api_retry",
    "describe_failure",
    "disabled_api",
    "enable_remedy",
    "enable_line",
    "unknown_result",
]

# --- facts: which predefined role grants which permission -----------------------------------

#: Predefined roles and the permissions of each that trainguard checks, least privilege first:
#: ``role_for`` and ``covering_role`` pick the first match, so order is the recommendation. The
#: read-only roles preflight itself needs are here too, so an UNKNOWN can name them.
ROLES: tuple[tuple[str, frozenset[str]], ...] = (
    ("roles/storage.objectViewer", frozenset({"storage.objects.get", "storage.objects.list"})),
    ("roles/storage.objectCreator", frozenset({"storage.objects.create"})),
    (
        "roles/storage.objectUser",
        frozenset(
            {
                "storage.objects.create",
                "storage.objects.get",
                "storage.objects.list",
                "storage.objects.delete",
            }
        ),
    ),
    ("roles/storage.bucketViewer", frozenset({"storage.buckets.get"})),
    (
        "roles/aiplatform.viewer",
        frozenset({"aiplatform.tensorboards.get", "aiplatform.persistentResources.get"}),
    ),
    (
        "roles/aiplatform.user",
        frozenset(
            {
                "aiplatform.customJobs.create",
                "aiplatform.tensorboardExperiments.write",
                "aiplatform.tensorboardRuns.write",
                "aiplatform.metadataStores.get",
                "aiplatform.contexts.update",
            }
        ),
    ),
    ("roles/iam.serviceAccountUser", frozenset({"iam.serviceAccounts.actAs"})),
    ("roles/iam.serviceAccountTokenCreator", frozenset({"iam.serviceAccounts.getAccessToken"})),
    (
        "roles/iam.securityReviewer",
        frozenset(
            {
                "resourcemanager.projects.getIamPolicy",
                "storage.buckets.getIamPolicy",
                "iam.roles.get",
                "iam.serviceAccounts.getIamPolicy",
                "cloudkms.cryptoKeys.getIamPolicy",
            }
        ),
    ),
    ("roles/browser", frozenset({"resourcemanager.projects.get"})),
    ("roles/cloudquotas.viewer", frozenset({"cloudquotas.quotas.get"})),
    ("roles/monitoring.viewer", frozenset({"monitoring.timeSeries.list"})),
    ("roles/artifactregistry.reader", frozenset({"artifactregistry.repositories.downloadArtifacts"})),
    (
        "roles/compute.networkViewer",
        frozenset({"compute.networks.get", "compute.globalAddresses.get", "compute.networkAttachments.get"}),
    ),
    (
        "roles/compute.viewer",
        frozenset(
            {
                "compute.reservations.get",
                "compute.reservationBlocks.get",
                "compute.reservationSubBlocks.get",
                "compute.networks.get",
                "compute.globalAddresses.get",
                "compute.networkAttachments.get",
            }
        ),
    ),
    ("roles/cloudkms.viewer", frozenset({"cloudkms.cryptoKeys.get"})),
    (
        "roles/cloudkms.cryptoKeyEncrypterDecrypter",
        frozenset({"cloudkms.cryptoKeyVersions.useToEncrypt", "cloudkms.cryptoKeyVersions.useToDecrypt"}),
    ),
)

#: How a remedy names the person running preflight (a pipeline would use its service account).
CALLER_MEMBER = "user:$(gcloud config get-value account)"


def role_for(permission: str) -> str:
    """The least-privileged predefined role in ``ROLES`` that grants ``permission``."""
    for role, permissions in ROLES:
        if permission in permissions:
            return role
    return "a role that grants " + permission


def covering_role(permissions: Iterable[str]) -> str:
    """The first role in ``ROLES`` that grants all of ``permissions`` (one binding fixes all)."""
    wanted = set(permissions)
    for role, granted in ROLES:
        if wanted <= granted:
            return role
    return role_for(sorted(wanted)[0])


def bucket_of(uri: str) -> str:
    """``gs://B/path`` → ``B`` ('' for anything else)."""
    m = re.match(r"^gs://([^/]+)", uri or "")
    return m.group(1) if m else ""


_KMS_KEY = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/keyRings/"
    r"(?P<ring>[^/]+)/cryptoKeys/(?P<key>[^/]+)$"
)


@dataclass(frozen=True)
class Target:
    """A resource IAM applies to: ``project``, ``bucket``, ``service_account`` or ``kms_key``.

    ``name`` is the project ID, the bucket, the email, or the key's resource name
    (``projects/P/locations/L/keyRings/R/cryptoKeys/K``).
    """

    kind: str
    name: str

    @property
    def full_name(self) -> str:
        """The full resource name Policy Troubleshooter takes."""
        if self.kind == "project":
            return f"//cloudresourcemanager.googleapis.com/projects/{self.name}"
        if self.kind == "bucket":
            return f"//storage.googleapis.com/projects/_/buckets/{self.name}"
        if self.kind == "kms_key":
            return f"//cloudkms.googleapis.com/{self.name}"
        return f"//iam.googleapis.com/projects/-/serviceAccounts/{self.name}"

    @property
    def label(self) -> str:
        return {
            "project": f"project {self.name}",
            "bucket": f"gs://{self.name}",
            "kms_key": f"key {self.name}",
        }.get(self.kind, f"service account {self.name}")

    def grant_command(self, member: str, role: str) -> str:
        """The exact ``gcloud … add-iam-policy-binding`` line that grants ``role`` here."""
        if self.kind == "project":
            return f"gcloud projects add-iam-policy-binding {self.name} --member={member} --role={role}"
        if self.kind == "bucket":
            return (
                f"gcloud storage buckets add-iam-policy-binding gs://{self.name} "
                f"--member={member} --role={role}"
            )
        if self.kind == "kms_key":
            m = _KMS_KEY.match(self.name)
            where = (
                (f"{m['key']} --keyring={m['ring']} --location={m['location']} --project={m['project']}")
                if m
                else self.name
            )
            return f"gcloud kms keys add-iam-policy-binding {where} --member={member} --role={role}"
        return (
            f"gcloud iam service-accounts add-iam-policy-binding {self.name} --member={member} --role={role}"
        )

    def verify_command(self, email: str, permission: str) -> str:
        """The ``gcloud`` line that asks Policy Troubleshooter about one pair by hand."""
        return (
            f"gcloud policy-intelligence troubleshoot-policy iam {self.full_name} "
            f"--principal-email={email} --permission={permission}"
        )


# --- calls ------------------------------------------------------------------------------------


def endpoint_of(api: str, region: str = "") -> str:
    """Where ``api`` is reached (``TRAINGUARD_ENDPOINT_<API>`` honoured), for messages."""
    from trainguard import gcp
    from trainguard.errors import ConfigError

    try:
        return gcp.endpoint(api, region).base_url
    except ConfigError:
        return ""


_NUMBERS: dict[tuple[str, str], str] = {}
_NUMBERS_LOCK = threading.Lock()


def project_number(project: str, call_timeout_s: float) -> str:
    """The number of ``project`` (Resource Manager ``GET /v3/projects/P`` → ``projects/N``).

    Several families need it (service agents are named by it); the answer is kept per project
    and endpoint, so one run asks once. Failures are not kept.

    Raises:
        Exception: whatever the call raised (report it with ``unknown_result``).
    """
    if project.isdigit():
        return project
    from trainguard import gcp

    key = (project, endpoint_of("CLOUDRESOURCEMANAGER"))
    with _NUMBERS_LOCK:
        if key in _NUMBERS:
            return _NUMBERS[key]
    session, base = gcp.authorized_session("CLOUDRESOURCEMANAGER")
    data = gcp.rest_json(
        session,
        "GET",
        f"{base}/v3/projects/{project}",
        timeout=call_timeout_s,
        retry=call_policy(call_timeout_s),
    )
    number = data["name"].split("/", 1)[1]
    with _NUMBERS_LOCK:
        _NUMBERS[key] = number
    return number


def call_policy(call_timeout_s: float) -> RetryPolicy:
    """The one retry policy of a preflight call: 429/5xx retried within a total deadline.

    The deadline is ``TRAINGUARD_RETRY_DEADLINE`` (10 s by default) but never more than twice
    the per-call time limit, so no single fact holds the report back much past the others.
    """
    policy = RetryPolicy.from_env(initial_s=0.2, max_delay_s=2.0)
    return policy.with_deadline(min(policy.deadline_s, max(2 * call_timeout_s, 1.0)))


def api_retry(call_timeout_s: float):
    """``call_policy`` as a ``google.api_core.retry.Retry`` for GAPIC and storage calls."""
    from google.api_core import exceptions

    return call_policy(call_timeout_s).api_core(
        exceptions.TooManyRequests,
        exceptions.ServiceUnavailable,
        exceptions.InternalServerError,
        exceptions.GatewayTimeout,
    )


def _connection_refused(exc: BaseException) -> bool:
    text = repr(exc).lower()
    return "refused" in text or "errno 111" in text


def _answer_of(exc: BaseException) -> api_errors.ErrorFacts | None:
    """The error answer behind a failed call: an api_core error (retries that ran out included),
    or the body google-auth's RefreshError carries (impersonation); None when nothing answered."""
    import json

    from google.api_core import exceptions
    from google.auth import exceptions as auth_exceptions

    seen: BaseException | None = exc
    for _ in range(4):
        if isinstance(seen, exceptions.RetryError):
            seen = seen.cause
        elif isinstance(seen, exceptions.GoogleAPICallError):
            return api_errors.ErrorFacts.of(seen)
        elif isinstance(seen, auth_exceptions.RefreshError):
            for arg in seen.args[1:]:
                try:
                    body = json.loads(arg) if isinstance(arg, str | bytes) else arg
                except ValueError:
                    continue
                if isinstance(body, dict) and isinstance(body.get("error"), dict):
                    return api_errors.ErrorFacts.from_body(body)
            return None
        else:
            return None
    return None


def disabled_api(exc: BaseException) -> api_errors.DisabledService | None:
    """The API a failed call found disabled (403 SERVICE_DISABLED), or None."""
    facts = _answer_of(exc)
    return api_errors.disabled_service(facts) if facts is not None else None


def enable_remedy(disabled: api_errors.DisabledService, project: str, verify: str = "") -> str:
    """The remedy of a check an off API kept from deciding: enable it, then run preflight again."""
    line = f"{disabled.remedy(project)}, then run trainguard preflight again"
    return f"{line} (or verify by hand: {verify})" if verify else line


def enable_line(exc: BaseException, project: str) -> str:
    """``gcloud services enable …`` when ``exc`` is a disabled API's answer, else ''."""
    disabled = disabled_api(exc)
    return disabled.remedy(project) if disabled is not None else ""


def describe_failure(
    exc: BaseException, *, api: str, permission: str, timeout_s: float, where: str = ""
) -> tuple[str, str]:
    """(evidence, the permission the caller lacks) for a failed call; never a credential.

    The permission is '' unless the API refused the caller (401/403): then it is the one the 403
    names (ErrorInfo metadata), else ``permission`` (what that call needs). ``where`` (the
    endpoint) is named when nothing answered, since a wrong endpoint override is the usual cause.
    """
    import requests
    from google.api_core import exceptions
    from google.auth import exceptions as auth_exceptions

    from trainguard.errors import EndpointUnreachable, TransientError

    at = f" at {where}" if where else ""
    if isinstance(exc, auth_exceptions.DefaultCredentialsError):
        return ("no Application Default Credentials on this machine", "")
    if isinstance(exc, auth_exceptions.TransportError):  # google-auth wraps requests' errors
        cause = exc.__cause__ or exc.__context__
        if cause is not None and not isinstance(cause, auth_exceptions.TransportError):
            return describe_failure(cause, api=api, permission=permission, timeout_s=timeout_s, where=where)
        if "timed out" in str(exc).lower():
            return (f"{api}{at} did not answer within {timeout_s:g} s", "")
        return (f"cannot reach {api}{at} (connection failed)", "")
    facts = _answer_of(exc)
    disabled = api_errors.disabled_service(facts) if facts is not None else None
    if disabled is not None:
        where_off = f" in project {disabled.project}" if disabled.project else ""
        return (f"{api}: {disabled.label()} is not enabled{where_off} (403 SERVICE_DISABLED)", "")
    if facts is not None and api_errors.kind(facts) == api_errors.CONSUMER_INVALID:
        text = facts.message.strip().splitlines()[0][:200]
        return (f"{api}: {text} (CONSUMER_INVALID: not a project ID this account can use)", "")
    if isinstance(exc, EndpointUnreachable | TransientError):
        return (f"{api}: {str(exc)[:300]}", "")
    if isinstance(exc, exceptions.RetryError) and exc.cause is not None:  # retries ran out
        return describe_failure(exc.cause, api=api, permission=permission, timeout_s=timeout_s, where=where)
    if isinstance(
        exc, requests.exceptions.Timeout | exceptions.RetryError | exceptions.DeadlineExceeded | TimeoutError
    ):
        return (f"{api}{at} did not answer within {timeout_s:g} s", "")
    if isinstance(exc, requests.exceptions.ConnectionError):
        how = "connection refused" if _connection_refused(exc) else "connection failed"
        return (f"cannot reach {api}{at} ({how})", "")
    if isinstance(exc, exceptions.Forbidden | exceptions.Unauthorized):
        lacking = (getattr(exc, "metadata", None) or {}).get("permission") or permission
        return (f"{api} refused the caller ({exc.code}): it lacks {lacking} ({role_for(lacking)})", lacking)
    if isinstance(
        exc,
        exceptions.TooManyRequests
        | exceptions.ServiceUnavailable
        | exceptions.InternalServerError
        | exceptions.GatewayTimeout,
    ):
        return (f"{api} still answered {exc.code} after retries", "")
    if isinstance(exc, exceptions.GoogleAPICallError):
        message = str(exc.message).split(": ", 1)[-1][:200]
        return (f"{api} answered {exc.code}: {message}", "")
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return (f"{api} call failed: {type(exc).__name__}: {text}", "")


def unknown_result(
    check: str,
    title: str,
    exc: BaseException,
    *,
    api: str,
    permission: str,
    verify: str,
    timeout_s: float,
    failure_class: str = "",
    where: str = "",
    project: str = "",
) -> CheckResult:
    """An UNKNOWN result that says why (what the caller lacks, or the API that is off) and how to
    verify by hand.

    Args:
        project: the job's project, for the ``gcloud services enable`` line of a disabled API
            (the answer's consumer project is used when it names one).
    """
    from google.auth import exceptions as auth_exceptions

    evidence, lacking = describe_failure(
        exc, api=api, permission=permission, timeout_s=timeout_s, where=where
    )
    disabled = disabled_api(exc)
    facts = _answer_of(exc)
    if disabled is not None:
        remedy = enable_remedy(disabled, project or disabled.project, verify)
    elif facts is not None and api_errors.kind(facts) == api_errors.CONSUMER_INVALID:
        remedy = (
            f"check --project: it must be the project ID (gcloud projects list shows it), not "
            f"its display name; then verify by hand: {verify}"
        )
    elif isinstance(exc, auth_exceptions.DefaultCredentialsError):
        remedy = f"run `gcloud auth application-default login`, or verify by hand: {verify}"
    elif lacking:
        remedy = f"verify by hand: {verify} (preflight needs {role_for(lacking)} to check this)"
    else:
        remedy = f"verify by hand: {verify}"
    return CheckResult(
        check,
        title,
        Status.UNKNOWN,
        evidence,
        remedy,
        failure_class,
        details={
            "lacking_permission": lacking,
            **({"disabled_service": disabled.service} if disabled is not None else {}),
        },
    )
