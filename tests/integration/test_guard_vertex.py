"""The in-flight guard on Vertex: the CustomJob test server runs the job, the storage emulator
holds its history, and the history object grows while the job is RUNNING (one step per GET).

The guard reads the object with ranged GETs against gcp-storage-emulator (which serves
``Range: bytes=start-end``), so what it transfers stays about the object's size however often it
polls. The backend's clock and sleep are fake: polls are instant and deterministic.
"""

from __future__ import annotations

import io
import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.fake_time import FakeTime, train_stage_on
from tests.servers import vertex_jobs
from tests.servers.loopback import LoopbackServer
from tests.servers.vertex_jobs import Scenario
from trainguard import stages
from trainguard.errors import TrainingFailed
from trainguard.gcp import storage_client
from trainguard.guard.follow import ANCHOR_BYTES
from trainguard.spec import JobSpec

vertex_server = vertex_jobs.vertex_server

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "histories"
PROJECT, REGION, BUCKET = "my-project", "us-central1", "tg-guard"
BASE = f"gs://{BUCKET}/runs/r1"


class Artifact:
    def __init__(self, path: Path) -> None:
        self.path, self.uri, self.metadata = str(path), str(path), {}


def line(step, split="train", **metrics) -> bytes:
    return (
        json.dumps({"step": step, "split": split, "metrics": metrics}, allow_nan=True, separators=(",", ":"))
        + "\n"
    ).encode()


def spec() -> JobSpec:
    return JobSpec.create(
        PROJECT,
        REGION,
        machine_type="a2-highgpu-2g",
        image_uri="us-docker.pkg.dev/my-project/t/trainer:1",
        accelerator_type="NVIDIA_TESLA_A100",
        accelerator_count=2,
        base_output_dir=BASE,
        command=["python", "/app/train.py"],
        timeout_s=10 * 3600,
        display_name="guarded",
    )


@pytest.fixture
def job(vertex_server, emulator, monkeypatch):
    """A Vertex job whose ``history.jsonl`` grows by ``chunks[n - 1]`` at its n-th RUNNING GET."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.url)
    emulator.create_bucket(BUCKET)
    fake = FakeTime()
    train_stage_on(fake, monkeypatch)
    blob = storage_client().bucket(BUCKET).blob("runs/r1/history.jsonl")
    state = {"chunks": [], "running_gets": 0}

    def grow(name: str, n: int) -> None:
        state["running_gets"] = n
        if n <= len(state["chunks"]):
            # As HistoryWriter flushes on gs://: the whole object again, one piece longer.
            blob.upload_from_string(b"".join(state["chunks"][:n]))

    vertex_server.on_running = grow
    return state


def run(tmp_path, **kw):
    out = io.StringIO()
    history = Artifact(tmp_path / "history")
    try:
        result = stages.train_stage(
            spec(),
            project=PROJECT,
            region=REGION,
            backend="vertex",
            diagnosis_path=str(tmp_path / "diagnosis.md"),
            history=history,
            stream=out,
            **kw,
        )
    except TrainingFailed as exc:
        return exc, out.getvalue(), history
    return result, out.getvalue(), history


def pieces(lines: list[bytes], per_poll: int) -> list[bytes]:
    """``per_poll`` lines a poll, each piece ending 17 bytes into the next line (mid-write)."""
    data = b"".join(lines)
    ends = [sum(map(len, lines[:i])) + 17 for i in range(per_poll, len(lines), per_poll)]
    bounds = [0, *ends, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def test_a_running_job_whose_history_diverges_is_cancelled_within_two_polls(job, vertex_server, tmp_path):
    healthy = [line(10 * (i + 1), loss=2.3 * 0.95**i + 0.4) for i in range(24)]
    exploding = [line(10 * (25 + i), loss=35.0 + (i % 4)) for i in range(30)]
    job["chunks"] = pieces(healthy + exploding, per_poll=4)
    first_bad_poll = len(healthy) // 4 + 1  # the first RUNNING poll that sees exploded records
    vertex_server.script(Scenario.runs_forever())

    failed, said, history = run(tmp_path)

    assert isinstance(failed, TrainingFailed) and failed.exit_code == 1
    (job_id,) = vertex_server.jobs
    assert len(vertex_server.calls("cancel")) == 1
    assert vertex_server.states_seen(job_id)[-2:] == ["CANCELLING", "CANCELLED"]
    cancelled_at = job["running_gets"]
    assert first_bad_poll <= cancelled_at <= first_bad_poll + 1
    result = failed.result
    assert result.state == "CANCELLED" and result.stopped["failure_class"] == "divergence"
    assert failed.diagnosis.failure_class == "divergence"
    text = str(failed)
    assert "[divergence]" in text and "learning rate" in text
    # 2 A100 with a 10 h timeout, stopped a few fake minutes in.
    assert "accelerator-hours saved (2 accelerator(s)" in text
    assert 19 < result.stopped["details"]["accelerator_hours_saved"] <= 20
    diagnosis = (tmp_path / "diagnosis.md").read_text()
    assert "divergence" in diagnosis and "accelerator-hours saved" in diagnosis
    # Ranged reads: the object once, plus a small anchor per poll — not the object per poll.
    size = sum(map(len, job["chunks"][:cancelled_at]))
    assert result.guard["bytes_read"] <= size + cancelled_at * ANCHOR_BYTES
    # The history output holds what the job wrote, for validate.
    assert Path(history.path).read_bytes() == b"".join(job["chunks"][:cancelled_at])
    assert "stopping the job: divergence" in said


def test_a_healthy_growing_history_is_never_cancelled(job, vertex_server, tmp_path):
    data = (FIXTURES / "healthy" / "history.jsonl").read_bytes()
    job["chunks"] = [data[i : i + 300] for i in range(0, len(data), 300)]
    vertex_server.script(Scenario.succeeds(running=len(job["chunks"])))

    result, said, history = run(tmp_path)

    assert result.state == "SUCCEEDED" and not result.stopped
    assert vertex_server.calls("cancel") == []
    assert result.guard["polls"] >= len(job["chunks"]) - 1 and result.guard["stopped"] is None
    assert result.guard["judgements"] >= 10 and not result.guard["stopped_guarding"]
    assert result.guard["bytes_read"] <= len(data) + result.guard["polls"] * ANCHOR_BYTES
    assert Path(history.path).read_bytes() == data
    assert "STOPPED GUARDING" not in said


def test_a_nan_in_the_last_line_written_while_the_object_grows_stops_the_job(job, vertex_server, tmp_path):
    head = [line(10 * (i + 1), loss=2.0 - 0.04 * i) for i in range(12)]
    nan = line(130, loss=float("nan"))
    job["chunks"] = [b"".join(head[:6]), b"".join(head[6:]) + nan[:20], nan[20:]]
    vertex_server.script(Scenario.runs_forever())

    failed, said, _ = run(tmp_path)

    assert isinstance(failed, TrainingFailed)
    assert job["running_gets"] == 3  # the poll that saw the NaN line whole, not before
    assert failed.result.stopped["failure_class"] == "non_finite"
    assert "NaN at step 130" in failed.result.stopped["evidence"]
    assert "STOPPED GUARDING" not in said  # half a line is normal


def test_guard_off_never_reads_or_cancels(job, vertex_server, tmp_path):
    job["chunks"] = [line(10, loss=float("nan"))]
    vertex_server.script(Scenario.succeeds(running=3))
    result, said, _ = run(tmp_path, guard="off")
    assert result.state == "SUCCEEDED" and vertex_server.calls("cancel") == []
    assert "guard:" not in said


class _Forbidden(BaseHTTPRequestHandler):
    """Cloud Storage answering 403 to everything, with the JSON API's error body."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *_: object) -> None:
        return

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        body = json.dumps(
            {
                "error": {
                    "code": 403,
                    "message": "trainer@p.iam.gserviceaccount.com "
                    "does not have storage.objects.get access to the Google "
                    "Cloud Storage object.",
                    "errors": [{"message": "denied", "domain": "global", "reason": "forbidden"}],
                }
            }
        ).encode()
        self.send_response(403)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class ForbiddenStorage(LoopbackServer):
    handler_class = _Forbidden


def test_a_history_the_guard_may_not_read_is_said_at_once_and_the_job_runs_on(
    vertex_server, monkeypatch, tmp_path
):
    fake = FakeTime()
    train_stage_on(fake, monkeypatch)
    vertex_server.script(Scenario.succeeds(running=5))
    with ForbiddenStorage() as storage:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", storage.url)
        result, said, _ = run(tmp_path)
    assert result.state == "SUCCEEDED" and vertex_server.calls("cancel") == []
    assert said.count("STOPPED GUARDING") == 1
    assert "permission denied" in said and "roles/storage.objectViewer" in said
    assert result.guard["polls"] == 1  # given up at once: a 403 does not go away by polling
