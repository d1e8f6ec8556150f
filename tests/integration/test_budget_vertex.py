"""The budget on Vertex, end to end through the launcher: the CustomJob test server runs the job,
the loopback Cloud Billing Catalog prices it, the storage emulator holds its growing history, and
the backend's clock is fake (polls are instant; the time RUNNING is what the fake clock says)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests.fake_time import FakeTime, train_stage_on
from tests.servers import vertex_jobs
from tests.servers.billing import BillingServer
from tests.servers.vertex_jobs import Scenario
from trainguard import stages
from trainguard.errors import TrainingFailed
from trainguard.gcp import storage_client
from trainguard.pricing import clear_cache
from trainguard.spec import JobSpec

vertex_server = vertex_jobs.vertex_server

PROJECT, REGION, BUCKET = "my-project", "us-central1", "tg-budget"
ON_DEMAND = 4.2475  # a2-highgpu-1g in us-central1, every part, from the test Catalog
SPOT = 2.501574


class Sink:
    """A KFP Metrics artifact's ``log_metric``."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def log_metric(self, key: str, value: float) -> None:
        self.values[key] = value


def line(step, **metrics) -> bytes:
    return (json.dumps({"step": step, "split": "train", "metrics": metrics}) + "\n").encode()


def healthy(n: int) -> list[bytes]:
    return [line(10 * (i + 1), loss=2.3 * 0.97**i + 0.4) for i in range(n)]


def a100(**kw) -> JobSpec:
    return JobSpec.create(
        PROJECT,
        REGION,
        machine_type="a2-highgpu-1g",
        accelerator_type="NVIDIA_TESLA_A100",
        accelerator_count=1,
        image_uri="us-docker.pkg.dev/my-project/t/trainer:1",
        base_output_dir=f"gs://{BUCKET}/runs/r1",
        command=["python", "/app/train.py"],
        timeout_s=10 * 3600,
        display_name="budgeted",
        **kw,
    )


@pytest.fixture
def billing(vertex_server, monkeypatch):
    server = BillingServer(max_page_size=50).start()
    monkeypatch.setenv("TRAINGUARD_ENDPOINT_CLOUDBILLING", server.url)
    clear_cache()
    yield server
    clear_cache()
    server.stop()


@pytest.fixture
def job(vertex_server, billing, emulator, monkeypatch):
    """A job whose history grows by one chunk per RUNNING GET, on a fake clock."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.url)
    emulator.create_bucket(BUCKET)
    fake = FakeTime()
    train_stage_on(fake, monkeypatch, vertex_server)
    blob = storage_client().bucket(BUCKET).blob("runs/r1/history.jsonl")
    state: dict = {"chunks": [], "running_gets": 0}

    def grow(name: str, n: int) -> None:
        state["running_gets"] = n
        if n <= len(state["chunks"]):
            blob.upload_from_string(b"".join(state["chunks"][:n]))

    vertex_server.on_running = grow
    return state


def train(tmp_path, spec: JobSpec | None = None, **kw):
    out, sink = io.StringIO(), Sink()
    try:
        result = stages.train_stage(
            spec or a100(),
            project=PROJECT,
            region=REGION,
            backend="vertex",
            diagnosis_path=str(tmp_path / "diagnosis.md"),
            attempts_path=str(tmp_path / "attempts.json"),
            stream=out,
            metrics=sink,
            **kw,
        )
    except TrainingFailed as exc:
        return exc, out.getvalue(), sink
    return result, out.getvalue(), sink


def test_a_job_whose_spend_reaches_the_budget_is_cancelled_with_class_budget(job, vertex_server, tmp_path):
    job["chunks"] = healthy(400)  # healthy all along: only the money stops it
    vertex_server.script(Scenario.runs_forever())

    failed, said, sink = train(tmp_path, budget=2)

    assert isinstance(failed, TrainingFailed) and failed.exit_code == 1, said[-3000:]
    assert len(vertex_server.calls("cancel")) == 1
    stop = failed.result.stopped
    assert stop["failure_class"] == "budget" and failed.diagnosis.failure_class == "budget"
    details = stop["details"]
    # Stopped at the first poll at or past $2 (polls are at most 15 s apart while RUNNING).
    assert 2.0 <= details["spend_usd"] < 2.0 + ON_DEMAND * 15 / 3600
    assert details["usd_per_hour"] == pytest.approx(ON_DEMAND, abs=1e-4) and details["budget_usd"] == 2.0
    assert "of the $2.00 budget" in stop["evidence"] and "at $4.2475/h: us-central1" in stop["evidence"]
    assert "reached at " in stop["evidence"]
    # The bill: the time it was RUNNING (the cancellation included) at that price.
    cost = failed.result.cost
    running_h = failed.result.running_s / 3600
    assert cost["usd"] == pytest.approx(ON_DEMAND * running_h, rel=1e-3) and cost["usd"] >= 2.0
    assert sink.values["cost_usd"] == round(cost["usd"], 2) and sink.values["budget_usd"] == 2.0
    # What it saved: the rest of its 10 h timeout, in hours and in money.
    assert sink.values["saved_usd"] == pytest.approx(ON_DEMAND * details["hours_left"], rel=1e-3)
    assert "not spent at $4.2475/h" in str(failed)
    assert "[trainguard] cost: $2." in said and "of the $2.00 budget" in said
    assert "[trainguard] saved: " in said
    diagnosis = (tmp_path / "diagnosis.md").read_text()
    assert "`budget`" in diagnosis and "its spend reached the budget" in diagnosis
    assert "**Cost:** $2." in diagnosis
    recorded = json.loads((tmp_path / "attempts.json").read_text())
    assert recorded["cost"]["attempts"][0]["state"] == "CANCELLED"


def test_without_a_budget_the_job_runs_on_and_its_cost_is_reported(job, vertex_server, tmp_path):
    job["chunks"] = healthy(120)
    vertex_server.script(Scenario.succeeds(running=120))

    result, said, sink = train(tmp_path)

    assert result.succeeded and not result.stopped and vertex_server.calls("cancel") == []
    assert result.running_s * ON_DEMAND / 3600 > 2  # it ran past what a $2 budget buys
    assert result.cost["usd"] == pytest.approx(ON_DEMAND * result.running_s / 3600, rel=1e-3)
    assert sink.values["cost_usd"] == round(result.cost["usd"], 2) and "budget_usd" not in sink.values
    assert "saved_usd" not in sink.values and "saved:" not in said
    assert f"[trainguard] cost: ${result.cost['usd']:.2f}" in said
    assert "WARNING" not in said


def test_a_missing_sku_is_one_warning_and_the_job_runs_on(job, vertex_server, billing, tmp_path):
    billing.remove("Nvidia Tesla A100 GPU running in Americas")
    job["chunks"] = healthy(10)
    vertex_server.script(Scenario.succeeds(running=10))

    result, said, sink = train(tmp_path, budget=100)

    assert result.succeeded and vertex_server.calls("cancel") == []
    assert said.count("cannot fully enforce the $100.00 budget") == 1
    assert "no Compute Engine SKU for NVIDIA_TESLA_A100 in us-central1" in said
    assert "[trainguard] cost: at least $" in said and sink.values["cost_price_complete"] == 0.0


def test_a_disabled_catalog_means_no_budget_stop_said_once_and_no_price_made_up(
    job, vertex_server, billing, tmp_path
):
    billing.disable(consumer="123456789012")
    job["chunks"] = healthy(60)
    vertex_server.script(Scenario.succeeds(running=200))

    result, said, sink = train(tmp_path, budget=1)

    assert result.succeeded and vertex_server.calls("cancel") == []  # it ran past $1: not stopped
    assert said.count("WARNING: the guard cannot enforce the $1.00 budget") == 1
    assert "gcloud services enable cloudbilling.googleapis.com" in said
    assert "[trainguard] cost: unknown — no price:" in said
    assert "cost_usd" not in sink.values and result.cost["usd"] is None


def test_a_fallback_is_priced_as_what_ran_there(job, vertex_server, tmp_path):
    job["chunks"] = healthy(400)
    vertex_server.in_region("us-central1", Scenario.stockout("us-central1"))
    vertex_server.in_region("us-east4", Scenario.runs_forever())

    failed, said, _ = train(tmp_path, budget=1, fallbacks="region=us-east4,strategy=SPOT")

    assert isinstance(failed, TrainingFailed), said[-3000:]
    details = failed.result.stopped["details"]
    assert failed.result.stopped["failure_class"] == "budget"
    assert details["usd_per_hour"] == pytest.approx(SPOT, abs=1e-4)
    assert details["region"] == "us-east4" and details["consumption"] == "spot"
    assert [a["state"] for a in failed.result.cost["attempts"]] == ["FAILED", "CANCELLED"]
    assert failed.result.cost["attempts"][0]["usd"] == 0.0  # a stockout never ran


def test_a_divergence_stop_says_the_money_it_saved(job, vertex_server, tmp_path):
    exploding = [line(10 * (25 + i), loss=35.0 + (i % 4)) for i in range(30)]
    job["chunks"] = [b"".join(healthy(24)[i : i + 4]) for i in range(0, 24, 4)] + exploding
    vertex_server.script(Scenario.runs_forever())

    failed, said, sink = train(tmp_path)

    assert isinstance(failed, TrainingFailed)
    details = failed.result.stopped["details"]
    assert failed.result.stopped["failure_class"] == "divergence"
    assert details["usd_saved"] == pytest.approx(ON_DEMAND * details["hours_left"], rel=1e-3)
    assert "accelerator-hours saved" in details["saved"] and "not spent at $4.2475/h" in details["saved"]
    assert sink.values["saved_usd"] == round(details["usd_saved"], 2)
    assert Path(tmp_path / "diagnosis.md").read_text().count("not spent") == 1
