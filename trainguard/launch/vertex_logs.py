"""The tail of a Vertex AI CustomJob's logs, read from Cloud Logging, for triage.

A failed CustomJob's ``error.message`` says how a replica ended ("The replica workerpool0-0 exited
with a non-zero status of 1"), not why; the why (a CUDA OOM, a missing module, a 403 on the
bucket) is in the replicas' output, which Vertex AI sends to Cloud Logging. This module reads the
last lines of it with ``entries.list`` (``POST https://logging.googleapis.com/v2/entries:list``)
through :func:`trainguard.gcp.authorized_session`, so ``TRAINGUARD_ENDPOINT_LOGGING`` points it
elsewhere.

What is asked for is what ``gcloud ai custom-jobs stream-logs`` asks for: entries of the monitored
resource ``ml_job`` whose ``job_id`` label is the CustomJob's numeric ID; each entry's text is
``jsonPayload.message`` or else ``textPayload``, and its replica is the resource's ``task_name``
label (``workerpool0-0``). Entries are read newest first and returned oldest first, one line per
line of text, as ``[workerpool0-0] line`` (the local backend's style), at most
:data:`MAX_TAIL_LINES` of them.

Reading logs never turns a classified failure into a crash: whatever goes wrong (no
``roles/logging.viewer``, no credentials, no answer within ``timeout_s``) becomes one note line
instead, worded so that the failure classifier does not mistake it for the job's own failure.
Lines are redacted and bounded (:mod:`trainguard.launch.echo`), the tail as a whole too, and
notes never carry the server's message or anything of the credentials.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "LOG_VIEWER_ROLE",
    "MAX_TAIL_LINES",
    "DEFAULT_TIMEOUT_S",
    "MAX_PAGE_SIZE",
    "RESOURCE_TYPE",
    "LogTail",
    "job_filter",
    "list_body",
    "task_name",
    "entry_text",
    "entry_lines",
    "tail_lines",
    "unreadable_note",
    "read_log_tail",
]

LOG_VIEWER_ROLE = "roles/logging.viewer"
MAX_TAIL_LINES = 400
DEFAULT_TIMEOUT_S = 10.0
# entries.list rejects a pageSize above 1000; its read quota is small, so few large pages it is.
MAX_PAGE_SIZE = 1000
_MAX_PAGES = 10
RESOURCE_TYPE = "ml_job"
_UNKNOWN_TASK = "unknown_task"  # what gcloud prints for an entry without a task name
# Replica clocks and Vertex's may differ a little: read from a minute before the job was created.
_CLOCK_SLACK = timedelta(minutes=1)


@dataclass(frozen=True)
class LogTail:
    """What was read: the lines (oldest first) and, when reading failed, the note saying why.

    Attributes:
        lines: ``[task] text`` lines, oldest first (possibly only part of the tail).
        note: one line saying the logs could not be (fully) read, and why; '' when they were.
    """

    lines: tuple[str, ...] = ()
    note: str = ""

    @property
    def text(self) -> str:
        """The lines and the note, one per line (what goes into ``TrainResult.log_tail``),
        redacted and bounded."""
        from trainguard.launch.echo import safe_tail

        return safe_tail([*self.lines, *([self.note] if self.note else [])])


class _OutOfTime(Exception):
    """The time budget ran out between pages."""


# --- pure parts --------------------------------------------------------------------------------


def _rfc3339(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def job_filter(job_id: str, since: datetime | None = None) -> str:
    """The Logging query for a CustomJob's entries (``since`` limits the scan, as Google advises).

    Args:
        job_id: the CustomJob's numeric ID (the last part of its resource name).
        since: when the job was created; entries from a minute before it are read.
    """
    terms = [f'resource.type="{RESOURCE_TYPE}"', f'resource.labels.job_id="{job_id}"']
    if since is not None:
        terms.append(f'timestamp>="{_rfc3339(since - _CLOCK_SLACK)}"')
    return " AND ".join(terms)


def list_body(
    project: str,
    job_id: str,
    since: datetime | None = None,
    page_size: int = MAX_TAIL_LINES,
    page_token: str = "",
) -> dict:
    """The ``entries.list`` request body: the job's entries in ``project``, newest first."""
    if not 0 < page_size <= MAX_PAGE_SIZE:
        raise ValueError(f"page_size must be in 1..{MAX_PAGE_SIZE}, got {page_size}")
    body: dict[str, Any] = {
        "resourceNames": [f"projects/{project}"],
        "filter": job_filter(job_id, since),
        "orderBy": "timestamp desc",
        "pageSize": page_size,
    }
    if page_token:
        body["pageToken"] = page_token
    return body


def task_name(entry: Mapping[str, Any]) -> str:
    """The replica an entry came from (``workerpool0-0``, or ``service`` for Vertex's own)."""
    resource_labels = (entry.get("resource") or {}).get("labels") or {}
    labels = entry.get("labels") or {}
    # Older entries carried it in the entry's labels, as gcloud still allows for.
    return resource_labels.get("task_name") or labels.get("ml.googleapis.com/task_name") or _UNKNOWN_TASK


def entry_text(entry: Mapping[str, Any]) -> str:
    """An entry's text: ``jsonPayload.message``, else ``textPayload``, else ''."""
    payload = entry.get("jsonPayload")
    if isinstance(payload, Mapping):
        message = payload.get("message")
        return message if isinstance(message, str) else ""
    text = entry.get("textPayload")
    return text if isinstance(text, str) else ""


def entry_lines(entry: Mapping[str, Any]) -> list[str]:
    """One ``[task] text`` line per line of the entry's text (none for an empty entry)."""
    from trainguard.launch.echo import safe_line

    text = entry_text(entry).rstrip("\n")
    if not text.strip():
        return []
    task = task_name(entry)
    return [safe_line(f"[{task}] {line}".rstrip()) for line in text.splitlines()]


def tail_lines(
    entries_newest_first: Iterable[Mapping[str, Any]], max_lines: int = MAX_TAIL_LINES
) -> list[str]:
    """The last ``max_lines`` lines of the entries, oldest first."""
    if max_lines <= 0:
        return []
    out: list[str] = []
    for entry in entries_newest_first:
        # Newest first: prepend this entry's lines before the (newer) ones already taken.
        out[:0] = entry_lines(entry)
        if len(out) >= max_lines:
            break
    return out[-max_lines:]


def unreadable_note(
    exc: BaseException, project: str, timeout_s: float = DEFAULT_TIMEOUT_S, partial: bool = False
) -> str:
    """One line saying the job's logs could not be read, why, and the role that reads them.

    The server's own message is left out on purpose: Cloud Logging's 403 says "Permission denied
    for all log views", which the failure classifier would read as the *job's* permission problem.
    """
    what = "all of the job's logs" if partial else "the job's logs"
    return (
        f"[trainguard] could not read {what} from Cloud Logging: {_why(exc, project, timeout_s)};"
        f" reading them needs {LOG_VIEWER_ROLE} on project {project}"
    )


def _why(exc: BaseException, project: str, timeout_s: float) -> str:
    import requests
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc

    from trainguard.errors import TrainguardError

    if isinstance(exc, _OutOfTime):
        return f"reading took longer than {timeout_s:g} s"
    if isinstance(exc, gexc.GoogleAPICallError):
        code = int(getattr(exc, "code", None) or 0)
        return {
            401: "HTTP 401, the credentials were not accepted",
            403: f"HTTP 403, the caller may not list log entries in project {project}",
            404: f"HTTP 404, Cloud Logging does not know project {project}",
            429: "HTTP 429, Cloud Logging's read-request limit was reached; try again in a minute",
        }.get(code, f"HTTP {code}")
    if isinstance(exc, requests.Timeout | TimeoutError):
        return f"no answer within {timeout_s:g} s"
    if isinstance(exc, requests.ConnectionError | ConnectionError):
        return "Cloud Logging could not be reached"
    if isinstance(exc, auth_exc.DefaultCredentialsError):
        return "no Application Default Credentials here (gcloud auth application-default login)"
    if isinstance(exc, auth_exc.RefreshError | auth_exc.TransportError):
        return "the credentials could not be refreshed"
    if isinstance(exc, TrainguardError):  # a malformed TRAINGUARD_ENDPOINT_LOGGING
        return str(exc)
    if isinstance(exc, ValueError):
        return "the answer was not the JSON entries.list returns"
    return f"{type(exc).__name__}"


# --- the call ----------------------------------------------------------------------------------


def read_log_tail(
    project: str,
    job_id: str,
    since: datetime | None = None,
    *,
    max_lines: int = MAX_TAIL_LINES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    session_factory: Callable[[], tuple[Any, str]] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> LogTail:
    """Reads the last ``max_lines`` lines of a CustomJob's logs; never raises for API trouble.

    Args:
        project: the project the job ran in (its logs are there).
        job_id: the CustomJob's numeric ID.
        since: when the job was created (limits the scan); None reads the whole retention.
        max_lines: the most lines returned.
        timeout_s: the time for all of it: the token refresh and every page (finding
            Application Default Credentials is google-auth's own, short, lookup).
        session_factory: returns (session, base_url); by default
            ``trainguard.gcp.authorized_session("LOGGING")``.
        clock: monotonic seconds.

    Returns:
        The lines read (oldest first) and, when something went wrong, a note saying what.
    """
    from trainguard import gcp

    deadline = clock() + timeout_s
    entries: list[Mapping[str, Any]] = []
    session = None
    try:
        session, base = (session_factory or (lambda: gcp.authorized_session("LOGGING")))()
        url = f"{base}/v2/entries:list"
        page_size = min(MAX_PAGE_SIZE, max(1, max_lines))
        token = ""
        lines = 0
        for _ in range(_MAX_PAGES):
            remaining = deadline - clock()
            if remaining <= 0:
                raise _OutOfTime()
            page = gcp.rest_json(
                session,
                "POST",
                url,
                timeout=remaining,
                body=list_body(project, job_id, since, page_size, token),
            )
            got = _entries(page)
            entries.extend(got)
            lines += sum(len(entry_lines(e)) for e in got)
            token = page.get("nextPageToken") or ""
            # An empty page with a token means "not done searching yet": go on (see entries.list).
            if not token or lines >= max_lines:
                break
    except Exception as exc:  # any failure to read logs is a note, never a crash
        return LogTail(
            tuple(tail_lines(entries, max_lines)),
            unreadable_note(exc, project, timeout_s, partial=bool(entries)),
        )
    finally:
        if session is not None:
            session.close()
    return LogTail(tuple(tail_lines(entries, max_lines)))


def _entries(page: Any) -> Sequence[Mapping[str, Any]]:
    if not isinstance(page, Mapping):
        raise ValueError("entries.list answered something other than a JSON object")
    entries = page.get("entries") or []
    if not isinstance(entries, list):
        raise ValueError("entries.list answered entries that are not a list")
    return [e for e in entries if isinstance(e, Mapping)]
