"""The common part of the loopback Google API servers: routing, JSON, error bodies, faults.

Each server (``quotas``, ``monitoring``, ``troubleshooter``, ``iam``) subclasses ``GoogleApiServer``
and lists its routes; this module gives them what every Google REST API shares:

- error bodies as Google sends them: ``{"error": {"code", "message", "status", "details": [ErrorInfo]}}``;
- enums as numbers when the client asks for ``$alt=json;enum-encoding=int`` (GAPIC REST transports
  do), as names otherwise (plain REST callers);
- fault injection: an HTTP status for the next N matching calls (403, 429-then-success, 503) and
  delays (to exercise per-call timeouts and concurrency);
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

__all__ = ["ApiError", "Fault", "GoogleApiServer", "Request", "STATUS_NAMES", "error_body"]

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

    def __init__(self) -> None:
        self.faults: list[Fault] = []
        self.requests: list[Request] = []
        self.delay_s = 0.0  # added to every call (simulated network latency)
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
        """The 403 Google answers when the caller lacks ``permission`` on ``resource``."""
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
        delay = self.delay_s + sum(f.delay_s for f in faults)
        if delay:
            time.sleep(delay)
        for f in faults:
            if f.status:
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
