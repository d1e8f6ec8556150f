"""Fallbacks, retries and hangs on Vertex: the CustomJob test server refuses, stocks out or holds
a job QUEUED in one region and runs it in the next, through the real aiplatform_v1 client.

Polls and waits run on a fake clock (instant, deterministic); the time from a refusal or a
timeout to the next create is measured on the real clock, at the server: when it answered the
refusal (or the poll that showed the job ended) and when the next create arrived.
"""

from __future__ import annotations

import io
import json

import pytest

from tests.fake_time import FakeTime, train_stage_on
from tests.servers import vertex_jobs
from tests.servers.vertex_jobs import Scenario, VertexJobsServer
from trainguard import stages
from trainguard.errors import ConfigError, TrainingFailed
from trainguard.gcp import storage_client
from trainguard.guard import HistoryGuard
from trainguard.guard.hang import HangPolicy
from trainguard.launch.gcp_resources import read_gcp_resources, write_gcp_resources
from trainguard.launch.vertex import VertexBackend
from trainguard.spec import JobSpec

vertex_server = vertex_jobs.vertex_server

PROJECT, BUCKET = "my-project", "tg-fallback"
L4 = "aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus"


@pytest.fixture
def fake(vertex_server, emulator, monkeypatch) -> FakeTime:
    """Every Vertex backend the train stage makes runs on one fake clock; storage is the emulator."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.url)
    emulator.create_bucket(BUCKET)
    time = FakeTime()
    train_stage_on(time, monkeypatch, vertex_server)
    return time


def l4(strategy: str = "STANDARD") -> JobSpec:
    return JobSpec.create(
        PROJECT,
        "us-central1",
        machine_type="g2-standard-8",
        accelerator_type="NVIDIA_L4",
        accelerator_count=1,
        image_uri="us-docker.pkg.dev/my-project/t/trainer:1",
        command=["python", "/app/train.py"],
        base_output_dir=f"gs://{BUCKET}/runs/r1",
        spot=strategy == "SPOT",
        display_name="fallback",
    )


def train(tmp_path, spec: JobSpec | None = None, **kw):
    out = io.StringIO()
    kw.setdefault("guard", "off")
    try:
        result = stages.train_stage(
            spec or l4(),
            project=PROJECT,
            region="us-central1",
            backend="vertex",
            gcp_resources_path=str(tmp_path / "gcp_resources"),
            attempts_path=str(tmp_path / "attempts.json"),
            stream=out,
            **kw,
        )
    except TrainingFailed as exc:
        result = exc
    return result, out.getvalue(), json.loads((tmp_path / "attempts.json").read_text())


def creates(server: VertexJobsServer) -> list[str]:
    """The region of each create, in order."""
    return [r.path.split("/")[5] for r in server.calls("create")]


def gap_to_next_create(server: VertexJobsServer, job_region: str) -> float:
    """Real seconds from the last answer about the job in ``job_region`` (the refusal, or the
    poll that showed it ended) to the create that followed it."""
    ordered = server.requests
    next_create = next(r for r in ordered if r.verb == "create" and f"/locations/{job_region}/" not in r.path)
    before = [
        r
        for r in ordered
        if f"/locations/{job_region}/" in r.path and r.answered_at <= next_create.received_at
    ]
    return next_create.received_at - max(r.answered_at for r in before)


def test_a_regional_stockout_falls_back_to_the_next_region_and_gcp_resources_names_that_job(
    vertex_server, fake, tmp_path
):
    vertex_server.in_region("us-central1", Scenario.stockout("us-central1"))
    result, said, recorded = train(tmp_path, fallbacks="region=us-east4")

    assert result.succeeded, said[-3000:]
    assert creates(vertex_server) == ["us-central1", "us-east4"]
    first, second = recorded["attempts"]
    assert (first["state"], first["failure_class"], first["running_s"]) == ("FAILED", "capacity", 0)
    assert (second["region"], second["state"]) == ("us-east4", "SUCCEEDED")
    assert "/locations/us-east4/" in result.job_name
    assert read_gcp_resources(tmp_path / "gcp_resources") == result.job_name  # the job that ran last
    # the same run directory: the new region's job writes where the stocked-out one would have
    bodies = [c.body["jobSpec"]["baseOutputDirectory"] for c in vertex_server.calls("create")]
    assert bodies[0] == bodies[1]
    gap = gap_to_next_create(vertex_server, "us-central1")
    print(f"vertex: stockout (job FAILED) → next create {gap * 1000:.0f} ms")
    assert gap < 5.0


def test_a_quota_refusal_at_create_falls_back_at_once_without_retrying_it(vertex_server, fake, tmp_path):
    vertex_server.set_quota(L4, 0, "NVIDIA_L4", region="us-central1")
    vertex_server.set_quota(L4, 8, "NVIDIA_L4", region="us-east4")
    result, said, recorded = train(tmp_path, fallbacks="region=us-east4")

    assert result.succeeded, said[-3000:]
    assert creates(vertex_server) == ["us-central1", "us-east4"]  # the 429 over a limit, once
    assert [a["failure_class"] for a in recorded["attempts"]] == ["quota", ""]
    assert recorded["attempts"][0]["job_name"] == ""  # refused: no job was created
    assert "exceed quota limits: " + L4 in said
    gap = gap_to_next_create(vertex_server, "us-central1")
    print(f"vertex: quota refusal (429) → next create {gap * 1000:.0f} ms")
    assert gap < 5.0


def test_a_job_queued_past_its_limit_is_cancelled_and_run_in_the_next_region(vertex_server, fake, tmp_path):
    vertex_server.in_region("us-central1", Scenario.stuck_queued())
    result, said, recorded = train(tmp_path, fallbacks=["region=us-east4"], max_queued="20m")

    assert result.succeeded, said[-3000:]
    assert creates(vertex_server) == ["us-central1", "us-east4"]
    assert len(vertex_server.calls("cancel")) == 1
    first = recorded["attempts"][0]
    assert (first["state"], first["failure_class"]) == ("CANCELLED", "quota")
    gap = gap_to_next_create(vertex_server, "us-central1")
    print(f"vertex: QUEUED past --max-queued (cancelled) → next create {gap * 1000:.0f} ms")
    assert gap < 5.0


def test_a_spot_job_reclaimed_after_it_ran_is_relaunched_in_place_and_a_stockout_is_not(
    vertex_server, fake, tmp_path
):
    vertex_server.script_in("us-central1", Scenario.spot_reclaimed())
    result, said, recorded = train(tmp_path, spec=l4("SPOT"), fallbacks="region=us-east4")

    assert result.succeeded, said[-3000:]
    assert creates(vertex_server) == ["us-central1", "us-central1"]  # a reclaim does not move the job
    first = recorded["attempts"][0]
    assert (first["failure_class"], first["next"]) == ("preemption", "retry") and first["running_s"] > 0
    assert "preemption: retry 1 of 3" in said

    (tmp_path / "b").mkdir()
    vertex_server.script_in("us-central1", Scenario.stockout("us-central1"))
    failed, said, recorded = train(tmp_path / "b", spec=l4("SPOT"), run_id="second")
    assert isinstance(failed, TrainingFailed) and failed.diagnosis.failure_class == "capacity"
    assert len(recorded["attempts"]) == 1


def test_a_kfp_retry_after_a_fallback_resumes_the_job_in_the_fallbacks_region(vertex_server, fake, tmp_path):
    running = vertex_server.add_job(
        Scenario((("RUNNING", 2),), "SUCCEEDED"), location="us-east4", display_name="fallback"
    )
    write_gcp_resources(tmp_path / "gcp_resources", running)

    result, said, recorded = train(tmp_path, fallbacks="region=us-east4")
    assert result.succeeded and result.job_name == running
    assert vertex_server.calls("create") == []  # found, not launched again
    assert recorded["attempts"][0]["alternative"] == 1 and recorded["attempts"][0]["region"] == "us-east4"
    assert "continuing at alternative 2" in said

    with pytest.raises(ConfigError) as info:
        train(tmp_path)  # the same task without the fallback: the job is in no region it runs in
    assert "add --fallback region=us-east4" in str(info.value)


def test_a_running_job_whose_history_stops_is_cancelled_as_hung(vertex_server, emulator, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.url)
    emulator.create_bucket(BUCKET)
    time = FakeTime()
    blob = storage_client().bucket(BUCKET).blob("runs/r1/history.jsonl")
    grew_at: list[float] = []

    def grow(name: str, n: int) -> None:  # one record a poll for 8 polls, then nothing
        if n <= 8:
            lines = [
                json.dumps({"step": i, "split": "train", "metrics": {"loss": 1 / i}}) for i in range(1, n + 1)
            ]
            blob.upload_from_string("\n".join(lines) + "\n")
            grew_at.append(time.now)

    vertex_server.on_running = grow
    vertex_server.script(Scenario.runs_forever())
    limit = 600.0
    spec = l4()
    guard = HistoryGuard.for_spec(spec, "fail", hang=HangPolicy(after_s=limit), clock=time.clock)
    backend = VertexBackend(clock=time.clock, sleep=time.sleep, stream=io.StringIO())
    result = backend.run(spec, watcher=guard)

    assert (result.state, result.failure_class) == ("CANCELLED", "hang")
    assert len(vertex_server.calls("cancel")) == 1
    details = result.stopped["details"]
    silent = details["hang"]["silent_s"]
    cancelled_at = time.now
    print(
        f"vertex hang: last record → cancel {cancelled_at - grew_at[-1]:.0f} s of job time "
        f"(--hang-after {limit:g}s, RUNNING polls every {backend.watch_interval_s:g} s)"
    )
    assert limit <= silent < limit + backend.watch_interval_s + 1
    assert "up to" in details["saved"] and "left to Vertex's default 7-day timeout" in details["saved"]
    assert details["accelerator_hours_saved"] > 160  # 1 L4 × (7 days − about 12 minutes)
    assert vertex_server.state_of(result.job_name) == "CANCELLED"
