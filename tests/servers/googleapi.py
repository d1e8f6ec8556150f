"""The common part of the loopback Google API servers: routing, JSON, error bodies, faults.

Each server (``quotas``, ``monitoring``, ``troubleshooter``, ``iam``) subclasses ``GoogleApiServer``
and lists its routes; this module gives them what every Google REST API shares:

- error bodies as Google sends them: ``{"error": {"code", "message", "status", "details": [ErrorInfo]}}``;
- enums as numbers when the client asks for ``$alt=json;enum-encoding=int`` (GAPIC REST transports
  do), as names otherwise (plain REST callers);
- fault injection: an HTTP status for the next N matching calls (403, 429-then-success, 503) and
  delays (to exercise per-call timeouts and concurrency);
- a disabled API (``disable()``): every call answers 403 ``SERVICE_DISABLED`` in the body Google
  sends (:func:`disabled_body`);
- a log of the requests, so tests can assert what the client sent.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.servers.loopback import LoopbackServer, Request

__all__ = [
    "ApiError",
    "Fault",
    "GoogleApiServer",
    "Request",
    "STATUS_NAMES",
    "SERVICE_TITLES",
    "error_body",
    "disabled_body",
]

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_DEFAULT_REASONS = {
    403: "IAM_PERMISSION_DENIED",
    429: "RATE_LIMIT_EXCEEDED",
    503: "SERVICE_UNAVAILABLE",
    401: "ACCESS_TOKEN_TYPE_UNSUPPORTED",
}


#: The title each API's SERVICE_DISABLED message gives it, as seen in public answers: Cloud Quotas
#: (hashicorp/terraform-provider-google#21165), IAM (openshift/installer#2187), Cloud Resource
#: Manager (nccgroup/ScoutSuite#1388), Compute Engine (fog/fog#3996), Vertex AI
#: (GoogleCloudPlatform/vertex-ai-samples#476), Cloud Storage JSON API
#: (cloudyr/googleCloudStorageR#5); the others are the APIs' names in the API Library.
SERVICE_TITLES = {
    "cloudquotas.googleapis.com": "Cloud Quotas API",
    "monitoring.googleapis.com": "Cloud Monitoring API",
    "policytroubleshooter.googleapis.com": "Policy Troubleshooter API",
    "iam.googleapis.com": "Identity and Access Management (IAM) API",
    "iamcredentials.googleapis.com": "IAM Service Account Credentials API",
    "cloudresourcemanager.googleapis.com": "Cloud Resource Manager API",
    "compute.googleapis.com": "Compute Engine API",
    "cloudkms.googleapis.com": "Cloud Key Management Service (KMS) API",
    "servicenetworking.googleapis.com": "Service Networking API",
    "aiplatform.googleapis.com": "Vertex AI API",
    "logging.googleapis.com": "Cloud Logging API",
    "storage-api.googleapis.com": "Cloud Storage JSON API",
}


def disabled_body(service: str, consumer: str, *, legacy: bool = False) -> dict:
    """The 403 an API answers when it is off in the consumer project (the project the call is
    billed to: the credentials' quota project, not necessarily the one in the path).

    The shape is a real one: message, ``status: PERMISSION_DENIED``, ErrorInfo ``SERVICE_DISABLED``
    with ``consumer``/``service``/``serviceTitle``/``containerInfo``/``activationUrl``, a
    LocalizedMessage and a Help link "Google developers console API activation"
    (lbjlaq/Antigravity-Manager#3058, GoogleCloudPlatform/vertex-ai-samples#476). The
    discovery-era APIs (Compute Engine, Cloud Storage; ``legacy``) also carry ``errors:
    [{"domain": "usageLimits", "reason": "accessNotConfigured", "extendedHelp"}]`` (fog/fog#3996,
    taylorwilsdon/google_workspace_mcp#126; the whole body as Drive sends it is quoted in the
    README of github.com/vasconcelos-giovanni/equilibra-que-da-ifrn).
    """
    title = SERVICE_TITLES.get(service, service)
    url = f"https://console.developers.google.com/apis/api/{service}/overview?project={consumer}"
    message = (
        f"{title} has not been used in project {consumer} before or it is disabled. Enable it by "
        f"visiting {url} then retry. If you enabled this API recently, wait a few minutes for the "
        "action to propagate to our systems and retry."
    )
    error: dict[str, Any] = {"code": 403, "message": message}
    if legacy:
        error["errors"] = [
            {
                "message": message,
                "domain": "usageLimits",
                "reason": "accessNotConfigured",
                "extendedHelp": "https://console.developers.google.com",
            }
        ]
    error["status"] = "PERMISSION_DENIED"
    error["details"] = [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "SERVICE_DISABLED",
            "domain": "googleapis.com",
            "metadata": {
                "consumer": f"projects/{consumer}",
                "service": service,
                "serviceTitle": title,
                "containerInfo": consumer,
                "activationUrl": url,
            },
        },
        {"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US", "message": message},
        {
            "@type": "type.googleapis.com/google.rpc.Help",
            "links": [{"description": "Google developers console API activation", "url": url}],
        },
    ]
    return {"error": error}


class ApiError(Exception):
    """Raised by a route to answer with a Google error body."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str = "",
        domain: str = "",
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or _DEFAULT_REASONS.get(code, "")
        self.domain = domain
        self.metadata = metadata or {}


def error_body(
    code: int, message: str, *, reason: str = "", domain: str = "", metadata: dict[str, str] | None = None
) -> dict:
    """The JSON body Google APIs answer errors with (google.rpc.Status + ErrorInfo)."""
    details = []
    if reason:
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": domain or "googleapis.com",
                "metadata": metadata or {},
            }
        )
    return {
        "error": {
            "code": code,
            "message": message,
            "status": STATUS_NAMES.get(code, "UNKNOWN"),
            "details": details,
        }
    }


@dataclass
class Fault:
    """An injected answer for the next ``times`` calls whose path matches ``path``.

    ``status`` 0 means "no error, just ``delay_s``". ``times`` None means every call.
    """

    path: str
    status: int = 0
    times: int | None = 1
    delay_s: float = 0.0
    method: str | None = None
    message: str = ""
    reason: str = ""
    metadata: dict[str, str] = field(default_factory=dict)

    def matches(self, method: str, path: str) -> bool:
        if self.times is not None and self.times <= 0:
            return False
        return (self.method in (None, method)) and re.search(self.path, path) is not None


Route = tuple[str, str, Callable[[Request, re.Match], Any]]


class GoogleApiServer(LoopbackServer):
    """A threaded JSON server on 127.0.0.1 with Google's error conventions.

    Subclasses implement ``routes()`` → ``[(method, path_regex, handler)]``; a handler takes the
    ``Request`` and the path match and returns the JSON-able answer (or raises ``ApiError``).
    """

    #: The service domain named in ErrorInfo details.
    domain = "googleapis.com"
    #: The API this server is (``cloudquotas.googleapis.com``), for a SERVICE_DISABLED answer.
    service = ""
    #: Whether the API is a discovery-era one whose errors also carry ``errors[]``.
    legacy_errors = False

    def __init__(self) -> None:
        self.faults: list[Fault] = []
        self.requests: list[Request] = []
        self.delay_s = 0.0  # added to every call (simulated network latency)
        self.disabled: dict[str, str] = {}  # service → the consumer project it is off in
        self._lock = threading.Lock()
        self._routes = [(m, re.compile(p), h) for m, p, h in self.routes()]

    # -- to implement --

    def routes(self) -> list[Route]:
        raise NotImplementedError

    # -- configuration --

    def fail(
        self,
        path: str,
        status: int,
        *,
        times: int | None = 1,
        method: str | None = None,
        message: str = "",
        reason: str = "",
        metadata: dict[str, str] | None = None,
    ) -> Fault:
        """Answers the next ``times`` calls matching ``path`` (regex) with ``status``."""
        fault = Fault(path, status, times, 0.0, method, message, reason, dict(metadata or {}))
        with self._lock:
            self.faults.append(fault)
        return fault

    def disable(self, service: str = "", consumer: str = "123456789012") -> None:
        """Turns an API off in ``consumer``: every call to it answers 403 SERVICE_DISABLED.

        Args:
            service: the API (default: this server's); a server that answers several APIs
                (``IamServer``) tells them apart with :meth:`service_for`.
            consumer: the project number the answer names as the consumer.
        """
        with self._lock:
            self.disabled[service or self.service] = consumer

    def service_for(self, path: str) -> str:
        """The API a request path belongs to (one per server, unless a server answers several)."""
        return self.service

    def slow(self, path: str, delay_s: float, *, times: int | None = None) -> Fault:
        """Delays calls matching ``path`` by ``delay_s`` seconds."""
        fault = Fault(path, 0, times, delay_s)
        with self._lock:
            self.faults.append(fault)
        return fault

    def calls(self, path: str = "", method: str | None = None) -> list[Request]:
        """Requests seen whose path matches ``path`` (regex)."""
        with self._lock:
            return [r for r in self.requests if re.search(path, r.path) and method in (None, r.method)]

    # -- helpers for subclasses --

    @staticmethod
    def enum(request: Request, names: dict[int, str], value: int) -> int | str:
        """An enum as the client asked for it: number with enum-encoding=int, else its name."""
        return value if request.int_enums else names[value]

    def forbidden(self, permission: str, resource: str) -> ApiError:
        """The 403 Google answers when the caller lacks ``permission`` on ``resource``: message
        and ErrorInfo ``IAM_PERMISSION_DENIED`` with ``permission``/``resource`` metadata, as
        gcloud printed it in GoogleCloudPlatform/t5x-on-vertex-ai#5."""
        return ApiError(
            403,
            f"Permission '{permission}' denied on resource '{resource}' (or it may not exist).",
            reason="IAM_PERMISSION_DENIED",
            domain=self.domain,
            metadata={"permission": permission, "resource": resource},
        )

    # -- dispatch (called from handler threads) --

    def _dispatch(self, request: Request) -> tuple[int, Any]:
        with self._lock:
            self.requests.append(request)
            faults = [f for f in self.faults if f.matches(request.method, request.path)]
            for f in faults:
                if f.times is not None:
                    f.times -= 1
            consumer = self.disabled.get(self.service_for(request.path))
        delay = self.delay_s + sum(f.delay_s for f in faults)
        if delay:
            time.sleep(delay)
        if consumer is not None:
            return 403, disabled_body(self.service_for(request.path), consumer, legacy=self.legacy_errors)
        for f in faults:
            if f.status:
                # The rate-limit sentence is Google's (python-docs-samples#3482 quotes one
                # word for word, with 'Write requests'); the 429 gets RATE_LIMIT_EXCEEDED.
                message = f.message or {
                    403: "The caller does not have permission",
                    429: "Quota exceeded for quota metric 'Read requests' and limit 'Read requests "
                    "per minute' of service.",
                    503: "The service is currently unavailable.",
                }.get(f.status, STATUS_NAMES.get(f.status, "error"))
                return f.status, error_body(
                    f.status,
                    message,
                    reason=f.reason or _DEFAULT_REASONS.get(f.status, ""),
                    domain=self.domain,
                    metadata=f.metadata,
                )
        for method, pattern, handler in self._routes:
            m = pattern.fullmatch(request.path)
            if m and method == request.method:
                try:
                    return 200, handler(request, m)
                except ApiError as exc:
                    return exc.code, error_body(
                        exc.code,
                        exc.message,
                        reason=exc.reason,
                        domain=exc.domain or self.domain,
                        metadata=exc.metadata,
                    )
        if any(p.fullmatch(request.path) for _, p, _ in self._routes):
            return 405, error_body(405, f"Method {request.method} not allowed")
        return 404, error_body(404, f"The requested URL {request.path} was not found on this server.")


class _Handler(BaseHTTPRequestHandler):
    owner: GoogleApiServer
    protocol_version = "HTTP/1.1"  # keep-alive, as Google's front ends

    def log_message(self, fmt: str, *args: object) -> None:  # quiet
        pass

    def _handle(self, method: str) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            self._send(400, error_body(400, "Invalid JSON payload received."))
            return
        request = Request(
            method=method,
            path=unquote(parts.path),
            query=parse_qs(parts.query, keep_blank_values=True),
            body=body,
            headers={k.lower(): v for k, v in self.headers.items()},
        )
        status, payload = self.owner._dispatch(request)
        self._send(status, payload)

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


GoogleApiServer.handler_class = _Handler
