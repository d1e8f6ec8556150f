"""What a Google API error says beyond its HTTP status: read from the body, the way Google sends it.

Every Google API answers errors with ``{"error": {"code", "message", "status", "details"}}``
(``details``: ``google.rpc.ErrorInfo`` with ``reason``/``domain``/``metadata``, ``Help`` links,
``BadRequest.fieldViolations``, ``QuotaFailure``); the discovery-era APIs (Compute Engine, Cloud
Storage) add ``errors: [{"domain", "reason", "message"}]``. The status alone is not enough to say
what to do, and the bodies below are what tells cases apart (each rule cites where it was seen):

* **A disabled API** — 403, ErrorInfo reason ``SERVICE_DISABLED`` with ``metadata.service``,
  ``metadata.consumer`` (``projects/N``: the project the *credentials* bill to, which may not be
  the job's) and ``activationUrl``; the discovery APIs also say ``errors[].reason
  accessNotConfigured``; older answers only have the message "X API has not been used in project N
  before or it is disabled. Enable it by visiting https://console.developers.google.com/apis/api/
  SERVICE/overview?project=N". The fix is ``gcloud services enable``, never a role.
* **A quota refusal** — Vertex refuses ``customJobs.create`` over a quota *limit* with 429
  RESOURCE_EXHAUSTED "The following quota metrics exceed quota limits: aiplatform.googleapis.com/…"
  and no ErrorInfo (GoogleCloudPlatform/stable-diffusion-on-gcp#12, google-deepmind/xmanager#29).
  Retrying cannot help until the limit is raised.
* **A rate limit** — 429 "Quota exceeded for quota metric 'Resource management (CRUD) requests'
  and limit '… per minute per region'", ErrorInfo reason ``RATE_LIMIT_EXCEEDED``
  (GoogleCloudPlatform/vertex-ai-samples#1000): it passes within a minute; retry.
* **A project that is not one** — 403 "Permission denied on resource project NAME." with reason
  ``CONSUMER_INVALID`` (GoogleCloudPlatform/training-data-analyst#1811: a display name given as
  the project ID).

The corpus under ``tests/fixtures/google_errors`` holds the real texts these rules are measured on.

Example (a body as Vertex AI sends it; a ``google.api_core`` exception works the same)::

    >>> body = {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message":
    ...     "The following quota metrics exceed quota limits: "
    ...     "aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus"}}
    >>> facts = ErrorFacts.of(body)
    >>> kind(facts) == QUOTA_LIMIT
    True
    >>> quota_metrics(facts)
    ('aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus',)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "SERVICE_DISABLED",
    "CONSUMER_INVALID",
    "PERMISSION",
    "QUOTA_LIMIT",
    "RATE_LIMIT",
    "OTHER",
    "KINDS",
    "GCLOUD_PROJECTS",
    "ErrorFacts",
    "DisabledService",
    "kind",
    "disabled_service",
    "quota_metrics",
    "field_violation",
    "spec_path",
]

SERVICE_DISABLED = "service_disabled"
CONSUMER_INVALID = "consumer_invalid"
PERMISSION = "permission"
QUOTA_LIMIT = "quota_limit"
RATE_LIMIT = "rate_limit"
OTHER = "other"
KINDS = (SERVICE_DISABLED, CONSUMER_INVALID, PERMISSION, QUOTA_LIMIT, RATE_LIMIT, OTHER)

#: The projects gcloud's own OAuth clients bill to when user credentials have no quota project: an
#: API "disabled" there cannot be enabled by the user (python-docs-samples#244,
#: cloud-vision#19 and python-dialogflow#297 name 32555940559; 764086051850 is the
#: application-default login client's). The fix is a quota project, not ``services enable``.
GCLOUD_PROJECTS = frozenset({"32555940559", "764086051850"})

_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_CALL_PREFIX = re.compile(r"^(?:GET|POST|PUT|PATCH|DELETE) \S+: ")
_BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
_DISABLED_TEXT = re.compile(
    r"(?P<title>[A-Z][\w ()&.,-]*?) has not been used in project (?P<project>\S+?) before or it is "
    r"disabled|Project has not activated the (?P<activated>\S+) API|The API \((?P<old>[^)]+)\) is "
    r"not enabled for your project|is not found and cannot be used for API calls"
)
_ACTIVATION = re.compile(
    r"https://console\.developers\.google\.com/apis/api/(?P<service>[\w.-]+)/overview\?project=(?P<project>[\w:.-]+)"
)
# "The following quota metrics exceed quota limits: A, B" (Vertex, over an allocation limit);
# the legacy AI Platform says "The request for 2 K80 accelerators exceeds the allowed maximum of …"
# (GoogleCloudPlatform/training-data-analyst#2284).
_OVER_LIMIT = re.compile(r"The following quota metrics exceed quota limits:\s*(?P<metrics>[^\n\"]*)")
_ALLOWED_MAXIMUM = re.compile(r"exceeds the allowed maximum of")
_RATE_REASONS = frozenset({"RATE_LIMIT_EXCEEDED", "rateLimitExceeded", "userRateLimitExceeded"})
# The rate-limit sentence of Google's API front end: "Quota exceeded for quota metric 'Write
# requests' and limit 'Write requests per minute' of service …" (python-docs-samples#3482), and
# Vertex's "Quota exceeded for aiplatform.googleapis.com/…_per_minute_…".
_RATE_TEXT = re.compile(r"Quota exceeded for (?:quota metric '|[\w.-]+\.googleapis\.com/)")
_CONSUMER_TEXT = re.compile(r"Permission denied on resource project [^.]+\.")
_PERMISSION_REASONS = frozenset(
    {"IAM_PERMISSION_DENIED", "ACCESS_TOKEN_SCOPE_INSUFFICIENT", "forbidden", "insufficientPermissions"}
)
_PERMISSION_TEXT = re.compile(
    r"Permission '[\w.]+' denied|does not have [\w.]+ access|Required '[\w.]+' permission|"
    r"insufficient authentication scopes|caller does not have permission",
    re.IGNORECASE,
)
# Vertex's create validation: "List of found errors:\t1.Field: job_spec.worker_pool_specs[0].
# machine_spec.accelerator_type; Message: Both `accelerator_type` and `accelerator_count` should
# be specified or none. \t" (prefect-archive/prefect-gcp#175).
_FOUND_ERROR = re.compile(r"\d+\.Field: (?P<field>[\w.\[\]]+); Message: (?P<message>[^\t]*?)\s*(?:\t|$)")
# A check that names the field in a sentence: "custom_job.job_spec.service_account must be
# specified when uploading to TensorBoard" (kubeflow/pipelines#7123).
_LEADING_FIELD = re.compile(r"^(?P<field>custom_job\.[\w.\[\]]+) (?P<message>.+)$", re.DOTALL)


@dataclass(frozen=True)
class ErrorFacts:
    """What one error answer says, whichever client raised it.

    Attributes:
        code: the HTTP status (None when unknown).
        status: the canonical status name (``RESOURCE_EXHAUSTED``), '' when absent.
        message: the error's message.
        reason, domain, metadata: the first ErrorInfo detail ('' / {} without one).
        legacy_reasons: ``errors[].reason`` of the discovery-era APIs (``accessNotConfigured``).
        violations: ``BadRequest.fieldViolations`` as (field, description).
        details: the raw ``details`` list.
    """

    code: int | None
    message: str
    status: str = ""
    reason: str = ""
    domain: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    legacy_reasons: tuple[str, ...] = ()
    violations: tuple[tuple[str, str], ...] = ()
    details: tuple[Any, ...] = ()

    @classmethod
    def of(cls, source: Any) -> ErrorFacts:
        """From a ``google.api_core`` exception or a decoded body ``{"error": {...}}``."""
        if isinstance(source, Mapping):
            return cls.from_body(source)
        return cls.from_exception(source)

    @classmethod
    def from_body(cls, body: Mapping[str, Any], code: int | None = None) -> ErrorFacts:
        """From a decoded error body (``{"error": {...}}`` or its inner object)."""
        error = body.get("error", body) if isinstance(body, Mapping) else {}
        if not isinstance(error, Mapping):
            return cls(code, str(error))
        raw_code = error.get("code", code)
        details = tuple(d for d in error.get("details") or () if isinstance(d, Mapping))
        return cls._build(
            int(raw_code) if isinstance(raw_code, int | str) and str(raw_code).isdigit() else code,
            str(error.get("message") or ""),
            str(error.get("status") or ""),
            details,
            tuple(
                str(e.get("reason") or "")
                for e in error.get("errors") or ()
                if isinstance(e, Mapping) and e.get("reason")
            ),
        )

    @classmethod
    def from_exception(cls, exc: BaseException) -> ErrorFacts:
        """From a ``google.api_core.exceptions.GoogleAPICallError`` (or anything with ``code``)."""
        code = getattr(exc, "code", None)
        status = getattr(getattr(exc, "grpc_status_code", None), "name", "") or ""
        details = tuple(getattr(exc, "details", None) or ())
        legacy = tuple(
            str(e.get("reason") or "")
            for e in getattr(exc, "errors", None) or ()
            if isinstance(e, Mapping) and e.get("reason")
        )
        # google-api-core puts "POST https://…: " before the body's message (REST clients).
        message = _CALL_PREFIX.sub("", str(getattr(exc, "message", None) or exc), count=1)
        facts = cls._build(code if isinstance(code, int) else None, message, status, details, legacy)
        if not facts.reason and getattr(exc, "reason", None):  # api_core parsed an ErrorInfo
            facts = cls(
                facts.code,
                facts.message,
                facts.status,
                str(exc.reason),  # type: ignore[attr-defined]
                str(getattr(exc, "domain", "") or ""),
                dict(getattr(exc, "metadata", None) or {}),
                facts.legacy_reasons,
                facts.violations,
                facts.details,
            )
        return facts

    @classmethod
    def _build(
        cls, code: int | None, message: str, status: str, details: tuple, legacy: tuple[str, ...]
    ) -> ErrorFacts:
        info: Mapping[str, Any] = {}
        violations: list[tuple[str, str]] = []
        for detail in details:
            if not isinstance(detail, Mapping):
                continue
            kind_of = detail.get("@type", "")
            if kind_of == _ERROR_INFO and not info:
                info = detail
            elif kind_of == _BAD_REQUEST:
                violations += [
                    (str(v.get("field", "")), str(v.get("description", "")))
                    for v in detail.get("fieldViolations") or ()
                    if isinstance(v, Mapping)
                ]
        metadata = info.get("metadata") or {}
        return cls(
            code,
            message,
            status,
            str(info.get("reason") or ""),
            str(info.get("domain") or ""),
            {str(k): str(v) for k, v in metadata.items()} if isinstance(metadata, Mapping) else {},
            legacy,
            tuple(violations),
            details,
        )


def kind(facts: ErrorFacts) -> str:
    """What the error is, as one of :data:`KINDS` (see the module docstring for the evidence)."""
    text = facts.message
    if (
        facts.reason == "SERVICE_DISABLED"
        or "accessNotConfigured" in facts.legacy_reasons
        or _DISABLED_TEXT.search(text)
    ):
        return SERVICE_DISABLED
    if facts.reason == "CONSUMER_INVALID" or _CONSUMER_TEXT.search(text):
        return CONSUMER_INVALID
    if _OVER_LIMIT.search(text) or _ALLOWED_MAXIMUM.search(text):
        return QUOTA_LIMIT
    if (
        facts.code == 429
        or facts.status == "RESOURCE_EXHAUSTED"
        or facts.reason in _RATE_REASONS
        or any(r in _RATE_REASONS for r in facts.legacy_reasons)
        or _RATE_TEXT.search(text)
    ):
        return RATE_LIMIT
    if (
        facts.code in (401, 403)
        or facts.status in ("PERMISSION_DENIED", "UNAUTHENTICATED")
        or facts.reason in _PERMISSION_REASONS
        or any(r in _PERMISSION_REASONS for r in facts.legacy_reasons)
        or _PERMISSION_TEXT.search(text)
    ):
        return PERMISSION
    return OTHER


@dataclass(frozen=True)
class DisabledService:
    """An API that is off in the project the call was billed to.

    Attributes:
        service: ``cloudquotas.googleapis.com`` ('' when the answer does not name it).
        title: ``Cloud Quotas API`` ('' when not said).
        project: the consumer project as the answer names it (ID or number; '' when not said).
        activation_url: the console page that enables it.
    """

    service: str
    title: str
    project: str
    activation_url: str

    @property
    def billed_to_gcloud(self) -> bool:
        """True when the consumer is gcloud's own project (user credentials, no quota project)."""
        return self.project in GCLOUD_PROJECTS

    def label(self) -> str:
        """``Cloud Quotas API (cloudquotas.googleapis.com)``."""
        if self.title and self.service:
            return f"{self.title} ({self.service})"
        return self.title or self.service or "the API"

    def remedy(self, project: str, fallback_service: str = "", project_number: str = "") -> str:
        """What to run: ``gcloud services enable …``, or set a quota project when the call was
        billed to gcloud's own project (nothing the user can enable there).

        Args:
            project: the job's project (used when the answer names no consumer).
            fallback_service: the service the caller called, when the answer does not name it.
            project_number: the job's project number when known, to tell whether the consumer
                the answer names is the job's project.
        """
        service = self.service or fallback_service or "SERVICE"
        if self.billed_to_gcloud:
            return (
                f"your credentials bill API calls to gcloud's own project {self.project}: set a "
                f"quota project: gcloud auth application-default set-quota-project {project} "
                f"(and, if {service} is off there too: gcloud services enable {service} "
                f"--project={project})"
            )
        where = self.project or project
        line = f"enable the API: gcloud services enable {service} --project={where}"
        known_other = where not in (project, project_number) and (project_number or not where.isdigit())
        if project and known_other:
            line += (
                f" (the call was billed to {where}, the credentials' quota project, not {project};"
                f" or make {project} the quota project: gcloud auth application-default "
                f"set-quota-project {project})"
            )
        return line


def disabled_service(facts: ErrorFacts) -> DisabledService | None:
    """The disabled API an error names, or None when the error is not about a disabled API."""
    if kind(facts) != SERVICE_DISABLED:
        return None
    meta = facts.metadata
    service = meta.get("service", "")
    project = meta.get("containerInfo", "") or meta.get("consumer", "").removeprefix("projects/")
    url = meta.get("activationUrl", "")
    found = _ACTIVATION.search(facts.message)
    if found:
        service = service or found["service"]
        project = project or found["project"]
        url = url or found[0]
    title = meta.get("serviceTitle", "")
    text = _DISABLED_TEXT.search(facts.message)
    if text and not title:
        title = (text["title"] or text["old"] or "").strip()
        project = project or (text["project"] or "")
        service = service or (text["activated"] or "")
    if service and "." not in service:
        # Old answers name the console's ID: apis/api/monitoring/overview (python-docs-samples
        # #244), apis/api/storage_api/overview for storage-api.googleapis.com
        # (cloudyr/googleCloudStorageR#5).
        service = f"{service.replace('_', '-')}.googleapis.com"
    return DisabledService(service, title, project, url)


def quota_metrics(facts: ErrorFacts) -> tuple[str, ...]:
    """The metrics a quota refusal names (``aiplatform.googleapis.com/…``), in order."""
    found = _OVER_LIMIT.search(facts.message)
    if not found:
        return ()
    return tuple(m.strip() for m in found["metrics"].split(",") if m.strip())


def field_violation(facts: ErrorFacts) -> tuple[str, str]:
    """The first (field path, message) of a 400: from ``fieldViolations``, else from Vertex's
    "List of found errors: 1.Field: …; Message: …" text or a sentence that starts with the field
    (``custom_job.job_spec.…``); ('', '') when none names a field."""
    for path, description in facts.violations:
        if path:
            return path, description
    found = _FOUND_ERROR.search(facts.message) or _LEADING_FIELD.match(facts.message.strip())
    return (found["field"], found["message"].strip()) if found else ("", "")


def _camel(word: str) -> str:
    head, *rest = word.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def spec_path(vertex_field: str) -> str:
    """Vertex's field path as the spec file spells it.

    ``job_spec.worker_pool_specs[0].machine_spec.accelerator_type`` →
    ``workerPoolSpecs[0].machineSpec.acceleratorType``. Vertex names fields from the CustomJob
    (``job_spec.…``; older answers ``custom_job.job_spec.…``, kubeflow/pipelines#7123); the spec
    file is the CustomJobSpec, so the prefix goes. A path outside ``job_spec`` (``display_name``)
    is returned camelCased as it is.
    """
    path = vertex_field.removeprefix("custom_job.")
    path = path.removeprefix("job_spec.") if path.startswith("job_spec.") else path
    return ".".join(_camel(part) for part in path.split(".")) if path else ""
