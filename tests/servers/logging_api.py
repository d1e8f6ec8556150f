"""A loopback Cloud Logging v2 server: ``entries.list`` over the logs of Vertex AI CustomJobs.

Answers ``POST /v2/entries:list`` with a ``ListLogEntriesRequest`` body (``resourceNames``,
``filter``, ``orderBy``, ``pageSize``, ``pageToken``) as Cloud Logging does:

- entries in the real ``LogEntry`` JSON shape: ``textPayload`` or ``jsonPayload.message``,
  ``severity`` as a name, RFC 3339 ``timestamp``/``receiveTimestamp``, ``insertId``, ``logName``
  and the monitored resource ``{"type": "ml_job", "labels": {"job_id", "project_id",
  "task_name"}}`` that Vertex AI custom training writes (``task_name`` = ``workerpool0-0``);
- ``orderBy`` ``timestamp asc`` (the default) or ``timestamp desc``, ties broken by ``insertId``;
- ``pageSize`` defaults to 50, above 1000 is INVALID_ARGUMENT; a page may hold fewer entries than
  asked (``max_page_size``), and ``nextPageToken`` is opaque and bound to its query; an empty page
  *with* a token (``unfinished_pages``: the search has not finished yet) is legal and means "ask
  again with the token";
- no entries: ``{}`` (empty fields are left out, as in proto3 JSON);
- the filter: terms joined by ``AND``, each ``key OP value`` with OP one of ``= != > >= < <=`` on
  ``resource.type``, ``resource.labels.*``, ``labels.*``, ``logName``, ``severity`` (by rank) and
  ``timestamp`` — what a client needs to ask for one job's logs; anything else is
  INVALID_ARGUMENT;
- errors in Google's body ``{"error": {"code", "message", "status", "details"}}``; a project the
  caller may not read answers what Cloud Logging answers, 403 ``Permission denied for all log
  views`` (PERMISSION_DENIED). The 400 messages are this server's own wording.

Example::

    server = LoggingServer(project="my-project").start()
    server.write_job_logs("8412345678901234567", ["Traceback (most recent call last):", ...])
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.servers.googleapi import ApiError, GoogleApiServer, Request

__all__ = ["LoggingServer", "logging_server", "SEVERITIES", "LIST_PATH"]

LIST_PATH = "/v2/entries:list"
SEVERITIES = {
    "DEFAULT": 0,
    "DEBUG": 100,
    "INFO": 200,
    "NOTICE": 300,
    "WARNING": 400,
    "ERROR": 500,
    "CRITICAL": 600,
    "ALERT": 700,
    "EMERGENCY": 800,
}
_DEFAULT_PAGE_SIZE = 50
_MAX_PAGE_SIZE = 1000
_TERM = re.compile(
    r'^\s*(?P<key>[\w.]+(?:\."[^"]*")?)\s*(?P<op>>=|<=|!=|=|>|<)\s*'
    r'(?P<value>"(?:[^"\\]|\\.)*"|\S+)\s*$'
)
_KEY = re.compile(
    r'^(?:resource\.type|resource\.labels\.\w+|labels\.(?:\w+|"[^"]*")|logName'
    r"|severity|timestamp)$"
)


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(value: str) -> datetime:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(400, f'Invalid timestamp "{value}" in filter.') from None


def _invalid(message: str) -> ApiError:
    return ApiError(400, message)


class LoggingServer(GoogleApiServer):
    """Cloud Logging ``entries.list`` for one project's log entries.

    Attributes:
        project, project_number: the project (readable by either name).
        readable: the projects the caller may read; others answer 403 (clear it to deny all).
        entries: the stored LogEntry dicts, in write order.
        max_page_size: the most entries one page holds, whatever ``pageSize`` asks (None: as
            asked).
        unfinished_pages: how many empty pages with a ``nextPageToken`` to answer first.
        before_list: called before each ``entries.list`` is answered (a test writes the logs of
            a job it only now knows the ID of).
    """

    domain = "logging.googleapis.com"
    service = "logging.googleapis.com"

    def __init__(self, project: str = "my-project", project_number: str = "123456789012") -> None:
        super().__init__()
        self.project = project
        self.project_number = project_number
        self.readable = {project, project_number}
        self.entries: list[dict] = []
        self.max_page_size: int | None = None
        self.unfinished_pages = 0
        self.before_list: Callable[[], None] | None = None
        self._insert_ids = itertools.count(1)
        self._clock = datetime.now(UTC)

    # -- writing logs (what Vertex AI's logging agent would have sent) --

    def write_job_logs(
        self,
        job_id: str,
        lines: Iterable[str],
        *,
        task: str = "workerpool0-0",
        severity: str = "ERROR",
        payload: str = "text",
        start: datetime | None = None,
        step: timedelta = timedelta(milliseconds=1),
    ) -> list[dict]:
        """Writes one entry per line for a CustomJob's replica ``task``; returns the entries.

        ``payload`` is ``text`` (``textPayload``) or ``json`` (``jsonPayload.message``). Entries
        are stamped from ``start`` (default: a moment after the last written entry) ``step``
        apart.
        """
        if severity not in SEVERITIES:
            raise ValueError(f"unknown severity {severity!r}")
        moment = start or self._clock + step
        written = []
        for line in lines:
            written.append(self._entry(job_id, line, task, severity, payload, moment))
            moment += step
        with self._lock:
            self.entries.extend(written)
            self._clock = max(self._clock, moment)
        return written

    def _entry(
        self, job_id: str, text: str, task: str, severity: str, payload: str, moment: datetime
    ) -> dict:
        entry: dict[str, Any] = {
            "insertId": f"{next(self._insert_ids):012x}",
            "resource": {
                "type": "ml_job",
                "labels": {"job_id": job_id, "project_id": self.project, "task_name": task},
            },
            "timestamp": _rfc3339(moment),
            "severity": severity,
            "logName": f"projects/{self.project}/logs/{task}",
            "receiveTimestamp": _rfc3339(moment + timedelta(milliseconds=250)),
        }
        if payload == "json":
            entry["jsonPayload"] = {"message": text, "levelname": severity}
        elif payload == "text":
            entry["textPayload"] = text
        else:
            raise ValueError(f"payload must be 'text' or 'json', not {payload!r}")
        return entry

    # -- inspection --

    def list_calls(self) -> list[Request]:
        """The ``entries.list`` requests received, in order."""
        return self.calls(re.escape(LIST_PATH), "POST")

    # -- the API --

    def routes(self):
        return [("POST", re.escape(LIST_PATH), self._list)]

    def _list(self, request: Request, m: re.Match) -> dict:
        if self.before_list is not None:
            self.before_list()
        body = request.body
        if not isinstance(body, dict):
            raise _invalid("Invalid JSON payload received. Expected an object.")
        names = list(body.get("resourceNames") or []) + [
            f"projects/{p}" for p in body.get("projectIds") or []
        ]
        if not names:
            raise _invalid("resource_names: must specify at least one resource name")
        for name in names:
            kind, _, ident = name.partition("/")
            if kind != "projects" or not ident or "/" in ident:
                raise _invalid(f'Invalid resource name "{name}".')
        if not any(name.partition("/")[2] in self.readable for name in names):
            raise ApiError(403, "Permission denied for all log views")
        order = (body.get("orderBy") or "timestamp asc").strip()
        if order not in ("timestamp asc", "timestamp desc"):
            raise _invalid(
                f'Invalid order_by "{order}": only "timestamp asc" and "timestamp desc" are supported.'
            )
        size = body.get("pageSize", _DEFAULT_PAGE_SIZE) or _DEFAULT_PAGE_SIZE
        if not isinstance(size, int) or not 0 < size <= _MAX_PAGE_SIZE:
            raise _invalid(f"Invalid page_size {size!r}: must be between 1 and {_MAX_PAGE_SIZE}.")
        flt = body.get("filter") or ""
        predicates = _parse_filter(flt)
        query_key = hashlib.sha256(json.dumps([sorted(names), flt, order]).encode()).hexdigest()
        start, unfinished = self._position(body.get("pageToken") or "", query_key)
        if unfinished < self.unfinished_pages:
            return {"nextPageToken": self._token(start, unfinished + 1, query_key)}
        # Every stored entry is in this server's project, readable by its ID or its number.
        asked = {name.partition("/")[2] for name in names} & self.readable
        with self._lock:
            matching = (
                [e for e in self.entries if all(p(e) for p in predicates)]
                if asked & {self.project, self.project_number}
                else []
            )
        matching.sort(key=lambda e: (e["timestamp"], e["insertId"]), reverse=order == "timestamp desc")
        take = min(size, self.max_page_size or size)
        page = matching[start : start + take]
        out: dict[str, Any] = {}
        if page:
            out["entries"] = page
        if start + take < len(matching):
            out["nextPageToken"] = self._token(start + take, unfinished, query_key)
        return out

    @staticmethod
    def _token(offset: int, unfinished: int, query_key: str) -> str:
        raw = json.dumps({"o": offset, "u": unfinished, "q": query_key[:16]}).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @staticmethod
    def _position(token: str, query_key: str) -> tuple[int, int]:
        if not token:
            return 0, 0
        try:
            data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            if data["q"] != query_key[:16]:
                raise ValueError
            return int(data["o"]), int(data["u"])
        except (ValueError, KeyError, TypeError):
            raise _invalid("page_token doesn't match arguments from the request") from None


def _parse_filter(text: str) -> list[Callable[[dict], bool]]:
    """The filter's AND-ed terms as predicates over a LogEntry dict."""
    predicates = []
    for term in (t for t in re.split(r"\s+AND\s+", text.strip()) if t.strip()):
        m = _TERM.match(term)
        if not m or not _KEY.match(m["key"]):
            raise _invalid(f"Unparseable filter: unsupported term {term.strip()!r}.")
        value = m["value"]
        if value.startswith('"'):
            value = json.loads(value)
        predicates.append(_predicate(m["key"], m["op"], value))
    return predicates


def _predicate(key: str, op: str, value: str) -> Callable[[dict], bool]:
    def field(entry: dict) -> Any:
        if key == "resource.type":
            return entry["resource"]["type"]
        if key.startswith("resource.labels."):
            return entry["resource"]["labels"].get(key.split(".", 2)[2])
        if key.startswith("labels."):
            return (entry.get("labels") or {}).get(key.split(".", 1)[1].strip('"'))
        return entry.get(key)

    if key == "severity":
        if value not in SEVERITIES:
            raise _invalid(f"Unparseable filter: unknown severity {value!r}.")
        wanted: Any = SEVERITIES[value]

        def get(entry: dict) -> Any:
            return SEVERITIES[entry.get("severity", "DEFAULT")]
    elif key == "timestamp":
        wanted = _parse_time(value)

        def get(entry: dict) -> Any:
            return _parse_time(entry["timestamp"])
    else:
        wanted = value
        get = field

    compare = {
        "=": lambda a, b: a == b,
        "!=": lambda a, b: a != b,
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
    }[op]

    def predicate(entry: dict) -> bool:
        have = get(entry)
        if have is None:
            return op == "!="
        try:
            return compare(have, wanted)
        except TypeError:
            return False

    return predicate


@pytest.fixture
def logging_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoggingServer]:
    """A running Cloud Logging server, with ``TRAINGUARD_ENDPOINT_LOGGING`` pointing at it."""
    with LoggingServer() as server:
        monkeypatch.setenv("TRAINGUARD_ENDPOINT_LOGGING", server.url)
        yield server
