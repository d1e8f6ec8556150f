"""A failed CustomJob's log tail, read from the Cloud Logging test server, feeds triage.

The CustomJob server (the real ``aiplatform_v1`` client talks to it) fails the job with Vertex's
short ``error.message``; the Logging server holds what the replica printed. Both run on loopback.
"""

from __future__ import annotations

import io
import re
import time

import pytest

from tests.fake_time import FakeTime
from tests.servers import logging_api, vertex_jobs
from tests.servers.logging_api import LIST_PATH, LoggingServer
from tests.servers.vertex_jobs import Scenario, VertexJobsServer
from trainguard.errors import TrainingFailed
from trainguard.launch.base import diagnose
from trainguard.launch.vertex import VertexBackend
from trainguard.spec import JobSpec
from trainguard.stages import train_stage

vertex_server = vertex_jobs.vertex_server  # fixtures: each server with its endpoint override set
logging_server = logging_api.logging_server

PROJECT, REGION = "my-project", "us-central1"
EXIT_1 = (
    "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: "
    "Error. To find out more about why your job exited please check the logs: "
    "https://console.cloud.google.com/logs/viewer?project=123456789012&resource=ml_job"
)
HOST_OOM = "The replica workerpool0-0 ran out-of-memory and exited with a non-zero status of 9(SIGKILL)."
CUDA_OOM = [
    "Traceback (most recent call last):",
    '  File "/app/train.py", line 88, in <module>',
    "    loss = model(batch).loss",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 39.39 GiB of which 1.12 GiB is free.",
]
MISSING_MODULE = [
    "Traceback (most recent call last):",
    '  File "/app/train.py", line 3, in <module>',
    "    import wandb",
    "ModuleNotFoundError: No module named 'wandb'",
]
BUCKET_403 = [
    "Traceback (most recent call last):",
    '  File "/app/train.py", line 40, in <module>',
    "google.api_core.exceptions.Forbidden: 403 GET https://storage.googleapis.com/storage/v1/b/"
    "tg-out/o/data.csv: trainer@my-project.iam.gserviceaccount.com does not have "
    "storage.objects.get access to the Google Cloud Storage object.",
]


def backend(**kw) -> VertexBackend:
    fake = FakeTime()
    kw.setdefault("stream", io.StringIO())
    return VertexBackend(clock=fake.clock, sleep=fake.sleep, handle_signals=False, **kw)


def a100_spec() -> JobSpec:
    return JobSpec.create(
        PROJECT,
        REGION,
        machine_type="a2-highgpu-1g",
        image_uri="us-docker.pkg.dev/my-project/t/trainer:1",
        accelerator_type="NVIDIA_TESLA_A100",
        accelerator_count=1,
        base_output_dir="gs://bucket/runs/r1",
        command=["python", "/app/train.py"],
        display_name="guarded",
    )


def only_job_id(server: VertexJobsServer) -> str:
    (job_id,) = server.jobs
    return job_id


def logs_once(logging: LoggingServer, vertex: VertexJobsServer, lines: list[str], **kw) -> None:
    """Writes the job's logs when they are first asked for (its ID is known only then)."""

    def write() -> None:
        logging.before_list = None
        job_id = only_job_id(vertex)
        logging.write_job_logs(job_id, ["epoch 0 step 10 loss 2.31"], severity="INFO", **kw)
        logging.write_job_logs(job_id, lines, **kw)
        # Another job's output in the same project must not be read.
        logging.write_job_logs("1111111111111111111", ["ModuleNotFoundError: No module named 'x'"])

    logging.before_list = write


# --- the log tail feeds triage ----------------------------------------------------------------


def test_failed_job_log_tail_holds_the_traceback_and_triage_names_device_oom(vertex_server, logging_server):
    vertex_server.script(Scenario.fails(EXIT_1))
    logs_once(logging_server, vertex_server, CUDA_OOM, payload="json")
    result = backend().run(a100_spec())

    assert result.state == "FAILED" and result.error == EXIT_1
    assert result.log_tail.splitlines() == ["[workerpool0-0] epoch 0 step 10 loss 2.31"] + [
        f"[workerpool0-0] {line}" for line in CUDA_OOM
    ]  # oldest first, this job only
    assert diagnose(result.error).failure_class == "unknown"  # what triage had before
    diagnosis = diagnose(result.error + "\n" + result.log_tail)
    assert diagnosis.failure_class == "device_oom"
    assert "CUDA out of memory" in diagnosis.evidence

    (call,) = logging_server.list_calls()
    job_id = only_job_id(vertex_server)
    assert call.body["resourceNames"] == [f"projects/{PROJECT}"]
    assert call.body["orderBy"] == "timestamp desc"
    assert call.body["pageSize"] == 400
    assert re.fullmatch(
        rf'resource\.type="ml_job" AND resource\.labels\.job_id="{job_id}" AND '
        r'timestamp>="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"',
        call.body["filter"],
    )


@pytest.mark.parametrize(
    ("lines", "failure_class"),
    [(CUDA_OOM, "device_oom"), (MISSING_MODULE, "container"), (BUCKET_403, "permission")],
)
def test_train_stage_raises_training_failed_with_the_class_from_the_logs(
    vertex_server, logging_server, tmp_path, lines, failure_class
):
    vertex_server.script(Scenario((), "FAILED", error_message=EXIT_1))  # fails at once
    logs_once(logging_server, vertex_server, lines)
    diagnosis_md = tmp_path / "diagnosis.md"
    with pytest.raises(TrainingFailed) as err:
        train_stage(
            a100_spec(),
            project=PROJECT,
            region=REGION,
            backend="vertex",
            diagnosis_path=str(diagnosis_md),
            stream=io.StringIO(),
        )
    assert err.value.diagnosis.failure_class == failure_class
    assert f"[{failure_class}]" in str(err.value)
    assert f"`{failure_class}`" in diagnosis_md.read_text()
    assert lines[-1][:40] in err.value.result.log_tail


# --- paging -----------------------------------------------------------------------------------


def test_pages_are_followed_until_the_tail_is_full(vertex_server, logging_server):
    vertex_server.script(Scenario.fails(EXIT_1))
    lines = [f"step {i}" for i in range(450)] + CUDA_OOM
    logs_once(logging_server, vertex_server, lines)
    logging_server.max_page_size = 150  # a page may hold fewer entries than asked for
    logging_server.unfinished_pages = 1  # and the first may be empty, with a token
    result = backend().run(a100_spec())

    tail = result.log_tail.splitlines()
    assert len(tail) == 400
    assert tail[-1] == f"[workerpool0-0] {CUDA_OOM[-1]}"
    assert tail[0] == f"[workerpool0-0] step {len(lines) - 400}"
    calls = logging_server.list_calls()
    assert len(calls) == 1 + 3  # the empty page, then 3 x 150 >= 400 lines
    assert "pageToken" not in calls[0].body
    assert all(c.body.get("pageToken") for c in calls[1:])
    assert len({c.body["pageToken"] for c in calls[1:]}) == 3
    assert diagnose(result.error + "\n" + result.log_tail).failure_class == "device_oom"


def test_a_short_log_is_read_to_its_last_page(vertex_server, logging_server):
    vertex_server.script(Scenario.fails(EXIT_1))
    logs_once(logging_server, vertex_server, MISSING_MODULE)
    logging_server.max_page_size = 2
    result = backend().run(a100_spec())
    assert len(result.log_tail.splitlines()) == 1 + len(MISSING_MODULE)
    assert len(logging_server.list_calls()) == 3  # 5 entries, 2 a page, the last without token


def test_a_page_that_fails_keeps_the_lines_already_read(vertex_server, logging_server):
    vertex_server.script(Scenario.fails(EXIT_1))
    logs_once(logging_server, vertex_server, CUDA_OOM)
    logging_server.max_page_size = 3
    first = logging_server.before_list

    def then_fail() -> None:
        first()
        logging_server.fail(re.escape(LIST_PATH), 503)  # the next page

    logging_server.before_list = then_fail
    result = backend().run(a100_spec())
    *lines, note = result.log_tail.splitlines()
    assert lines == [f"[workerpool0-0] {line}" for line in CUDA_OOM[-3:]]
    assert note.startswith("[trainguard] could not read all of the job's logs from Cloud Logging: HTTP 503")
    assert diagnose(result.error + "\n" + result.log_tail).failure_class == "device_oom"


# --- logs that cannot be read -----------------------------------------------------------------


def test_without_logging_viewer_the_failure_is_still_classified_from_the_error(vertex_server, logging_server):
    vertex_server.script(Scenario.fails(HOST_OOM))
    logging_server.readable.clear()  # the caller lacks roles/logging.viewer: 403
    out = io.StringIO()
    result = backend(stream=out).run(a100_spec())

    assert result.state == "FAILED" and result.error == HOST_OOM
    (note,) = result.log_tail.splitlines()
    assert note == (
        "[trainguard] could not read the job's logs from Cloud Logging: HTTP 403, the "
        f"caller may not list log entries in project {PROJECT}; reading them needs "
        f"roles/logging.viewer on project {PROJECT}"
    )
    assert "roles/logging.viewer" in out.getvalue()
    assert diagnose(result.error + "\n" + result.log_tail).failure_class == "host_oom"
    # Not mistaken for the job's own permission problem when the error names no class either.
    assert diagnose(EXIT_1 + "\n" + result.log_tail).failure_class == "unknown"


def test_logging_server_down_is_a_note_and_quick(vertex_server, monkeypatch):
    down = LoggingServer().start()
    url = down.url
    down.stop()  # nothing listens there any more: connection refused
    monkeypatch.setenv("TRAINGUARD_ENDPOINT_LOGGING", url)
    vertex_server.script(Scenario.fails(HOST_OOM))
    started = time.monotonic()
    result = backend().run(a100_spec())
    assert time.monotonic() - started < 3
    assert result.log_tail == (
        "[trainguard] could not read the job's logs from Cloud Logging: "
        "Cloud Logging could not be reached; reading them needs "
        f"roles/logging.viewer on project {PROJECT}"
    )
    assert diagnose(result.error + "\n" + result.log_tail).failure_class == "host_oom"


def test_a_logging_server_that_does_not_answer_is_given_up_on_in_time(vertex_server, logging_server):
    vertex_server.script(Scenario.fails(HOST_OOM))
    logging_server.slow(re.escape(LIST_PATH), 3.0)
    started = time.monotonic()
    result = backend(logs_timeout_s=0.3).run(a100_spec())
    assert time.monotonic() - started < 2
    assert "no answer within 0.3 s" in result.log_tail
    assert diagnose(result.error + "\n" + result.log_tail).failure_class == "host_oom"


def test_without_credentials_the_note_says_how_to_get_them(vertex_server, monkeypatch, tmp_path):
    monkeypatch.delenv("TRAINGUARD_ENDPOINT_LOGGING", raising=False)  # the real endpoint, ADC
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    vertex_server.script(Scenario.fails(EXIT_1))
    result = backend().run(a100_spec())
    assert result.state == "FAILED"
    assert "could not read the job's logs" in result.log_tail
    assert "no Application Default Credentials" in result.log_tail
    assert "missing.json" not in result.log_tail


# --- when logs are not read -------------------------------------------------------------------


def test_a_succeeded_job_does_not_read_logs(vertex_server, logging_server):
    vertex_server.script(Scenario.succeeds())
    result = backend().run(a100_spec())
    assert result.succeeded and result.log_tail == ""
    assert logging_server.list_calls() == []


def test_a_job_cancelled_for_queueing_too_long_does_not_read_logs(vertex_server, logging_server):
    vertex_server.script(Scenario.stuck_queued())
    result = backend(max_queued_s=10).run(a100_spec())
    assert result.state == "CANCELLED" and "stayed QUEUED" in result.error
    assert logging_server.list_calls() == []


def test_log_tail_lines_zero_reads_no_logs(vertex_server, logging_server):
    vertex_server.script(Scenario.fails(EXIT_1))
    result = backend(log_tail_lines=0).run(a100_spec())
    assert result.state == "FAILED" and result.log_tail == ""
    assert logging_server.list_calls() == []


def test_a_token_in_the_jobs_logs_is_redacted_and_the_tail_is_bounded(vertex_server, logging_server):
    secret = "ya29.a0AfH6SMB-log-secret-value"
    vertex_server.script(Scenario.fails(EXIT_1))
    logs_once(
        logging_server,
        vertex_server,
        [
            f"requests.exceptions.HTTPError: 401 for url: https://example.com/api?access_token={secret}",
            f"Authorization: Bearer {secret}",
            "y" * 300_000,
            *CUDA_OOM,
        ],
    )
    out = io.StringIO()
    result = backend(stream=out).run(a100_spec())
    assert secret not in result.log_tail and secret not in out.getvalue()
    assert "[REDACTED]" in result.log_tail
    assert len(result.log_tail) <= 32_000
    assert diagnose(result.error + "\n" + result.log_tail).failure_class == "device_oom"
