"""vertex_logs' pure parts: the entries.list request, LogEntry → lines, the tail, the notes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import requests
from google.api_core import exceptions as gexc
from google.auth import exceptions as auth_exc

from trainguard.launch.base import diagnose
from trainguard.launch.vertex_logs import (
    LOG_VIEWER_ROLE,
    LogTail,
    entry_lines,
    entry_text,
    job_filter,
    list_body,
    read_log_tail,
    tail_lines,
    task_name,
    unreadable_note,
)

JOB_ID = "8412345678901234567"
EXIT_1 = "The replica workerpool0-0 exited with a non-zero status of 1."
HOST_OOM = "The replica workerpool0-0 ran out-of-memory and exited with a non-zero status of 9(SIGKILL)."


def entry(
    text: str | None = None,
    *,
    task: str | None = "workerpool0-0",
    json_message=None,
    labels: dict | None = None,
) -> dict:
    """A LogEntry as entries.list returns it for a Vertex AI custom training replica."""
    e: dict = {
        "insertId": "abc",
        "severity": "ERROR",
        "timestamp": "2025-05-01T10:00:00.000001Z",
        "logName": "projects/my-project/logs/workerpool0-0",
        "resource": {"type": "ml_job", "labels": {"job_id": JOB_ID, "project_id": "my-project"}},
    }
    if task is not None:
        e["resource"]["labels"]["task_name"] = task
    if text is not None:
        e["textPayload"] = text
    if json_message is not None:
        e["jsonPayload"] = {"message": json_message, "levelname": "ERROR"}
    if labels is not None:
        e["labels"] = labels
    return e


# --- the request ------------------------------------------------------------------------------


def test_filter_names_the_ml_job_resource_and_the_numeric_job_id():
    assert job_filter(JOB_ID) == f'resource.type="ml_job" AND resource.labels.job_id="{JOB_ID}"'


def test_filter_starts_a_minute_before_the_job_was_created():
    created = datetime(2025, 5, 1, 10, 0, 30, 123456, tzinfo=UTC)
    assert job_filter(JOB_ID, created).endswith(' AND timestamp>="2025-05-01T09:59:30.123456Z"')


def test_list_body_asks_for_the_newest_entries_of_the_project():
    body = list_body("my-project", JOB_ID, page_size=400)
    assert body == {
        "resourceNames": ["projects/my-project"],
        "filter": job_filter(JOB_ID),
        "orderBy": "timestamp desc",
        "pageSize": 400,
    }
    assert list_body("my-project", JOB_ID, page_token="t2")["pageToken"] == "t2"


@pytest.mark.parametrize("size", [0, 1001])
def test_list_body_rejects_a_page_size_the_api_rejects(size):
    with pytest.raises(ValueError, match="page_size"):
        list_body("my-project", JOB_ID, page_size=size)


# --- entries to lines -------------------------------------------------------------------------


def test_task_name_comes_from_the_resource_labels_then_the_entry_labels():
    assert task_name(entry("x")) == "workerpool0-0"
    assert (
        task_name(entry("x", task=None, labels={"ml.googleapis.com/task_name": "workerpool1-2"}))
        == "workerpool1-2"
    )
    assert task_name(entry("x", task=None)) == "unknown_task"


def test_entry_text_prefers_json_message_then_text_payload():
    assert entry_text(entry(json_message="from json")) == "from json"
    assert entry_text(entry("from text")) == "from text"
    assert entry_text({"protoPayload": {"@type": "x"}}) == ""


def test_entry_lines_prefix_every_line_with_the_replica():
    lines = entry_lines(entry('Traceback (most recent call last):\n  File "t.py", line 1\n'))
    assert lines == [
        "[workerpool0-0] Traceback (most recent call last):",
        '[workerpool0-0]   File "t.py", line 1',
    ]
    assert entry_lines(entry("   \n")) == []


def test_entry_lines_redact_credentials():
    (line,) = entry_lines(entry("token=ya29.a0AfH6SMBsecret Authorization: Bearer abc.def"))
    assert "ya29" not in line and "abc.def" not in line and "secret" not in line


def test_tail_is_oldest_first_and_keeps_the_newest_lines():
    newest_first = [entry(f"line {i}") for i in range(9, -1, -1)]  # entries.list, timestamp desc
    assert tail_lines(newest_first, 3) == [
        "[workerpool0-0] line 7",
        "[workerpool0-0] line 8",
        "[workerpool0-0] line 9",
    ]
    assert tail_lines(newest_first, 400)[0] == "[workerpool0-0] line 0"
    assert tail_lines(newest_first, 0) == []


def test_tail_cuts_a_multi_line_entry_at_the_limit():
    newest_first = [entry("c"), entry("a1\na2\na3")]
    assert tail_lines(newest_first, 3) == ["[workerpool0-0] a2", "[workerpool0-0] a3", "[workerpool0-0] c"]


def test_log_tail_text_puts_the_note_last():
    assert LogTail(("a", "b"), "note").text == "a\nb\nnote"
    assert LogTail(("a",)).text == "a"
    assert LogTail((), "note").text == "note"


# --- when logs cannot be read -----------------------------------------------------------------

FAILURES = [
    gexc.Forbidden("Permission denied for all log views"),  # what Cloud Logging answers
    gexc.Unauthorized("Request had invalid authentication credentials."),
    gexc.TooManyRequests("Quota exceeded for quota metric 'Read requests'"),
    gexc.ServiceUnavailable("The service is currently unavailable."),
    requests.ReadTimeout("HTTPConnectionPool(host='127.0.0.1', port=1): Read timed out."),
    requests.ConnectionError("[Errno 111] Connection refused"),
    auth_exc.DefaultCredentialsError("Could not automatically determine credentials."),
    auth_exc.RefreshError("invalid_grant: token=ya29.secret"),
    ValueError("Expecting value"),
]


@pytest.mark.parametrize("exc", FAILURES, ids=lambda e: type(e).__name__)
def test_note_says_why_and_the_role_and_never_outvotes_the_job_error(exc):
    note = unreadable_note(exc, "my-project", timeout_s=10)
    assert note.startswith("[trainguard] could not read the job's logs from Cloud Logging: ")
    assert f"needs {LOG_VIEWER_ROLE} on project my-project" in note
    assert "\n" not in note
    assert str(getattr(exc, "message", exc)) not in note  # the server's words stay out
    assert "ya29" not in note
    # The note is about trainguard's access, not the job's: triage still reads the job's error.
    assert diagnose(f"{HOST_OOM}\n{note}").failure_class == "host_oom"
    assert diagnose(f"{EXIT_1}\n{note}").failure_class == "unknown"


def test_note_names_the_http_status_and_the_time_limit():
    assert "HTTP 403, the caller may not list log entries in project p" in unreadable_note(
        gexc.Forbidden("x"), "p"
    )
    assert "no answer within 2.5 s" in unreadable_note(requests.ReadTimeout(), "p", 2.5)
    assert "could not read all of the job's logs" in unreadable_note(
        gexc.ServiceUnavailable("x"), "p", partial=True
    )


def test_reading_without_credentials_is_a_note_not_an_exception():
    def no_credentials():
        raise auth_exc.DefaultCredentialsError("Your default credentials were not found.")

    tail = read_log_tail("my-project", JOB_ID, session_factory=no_credentials)
    assert tail.lines == ()
    assert "no Application Default Credentials" in tail.note
    assert LOG_VIEWER_ROLE in tail.note


def test_reading_with_no_time_left_asks_nothing():
    class Session:
        closed = False

        def request(self, *args, **kwargs):
            raise AssertionError("no request once the time is up")

        def close(self):
            Session.closed = True

    ticks = iter([0.0, 11.0])
    tail = read_log_tail(
        "my-project", JOB_ID, session_factory=lambda: (Session(), "http://x"), clock=lambda: next(ticks)
    )
    assert "reading took longer than 10 s" in tail.note
    assert Session.closed
