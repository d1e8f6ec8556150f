"""guarded_training end to end in the KFP local runner, on the reference trainer."""

from __future__ import annotations

import json

import pytest

from tests.requires import require
from tests.trainer_job import trainer_job
from trainguard.pipelines.local_runner import run_local
from trainguard.spec import JobSpec

require("torch")


def spec(args, name):
    return trainer_job(args, project="demo-project", image_uri="trainguard/trainer:test", display_name=name)


@pytest.mark.slow
def test_a_healthy_run_passes_every_stage(tmp_path, capsys):
    events = []
    outcome = run_local(
        "guarded_training",
        spec(["--epochs=6", "--checkpoint-every=20"], "healthy"),
        pipeline_root=str(tmp_path),
        on_event=events.append,
    )
    assert outcome.succeeded, outcome.message
    # Quiet: nothing of the runner's output reached the terminal; it is in one log per task.
    assert "Executing task" not in capsys.readouterr().out
    assert [(e.task, e.status) for e in events] == [
        ("preflight", ""),
        ("preflight", "SUCCESS"),
        ("train", ""),
        ("train", "SUCCESS"),
        ("validate", ""),
        ("validate", "SUCCESS"),
    ]
    assert outcome.log_dir == outcome.run_dir / "logs"
    assert "training on cpu" in (outcome.log_dir / "train.log").read_text()
    assert "task logs:" in outcome.summary() and "train.log" in outcome.summary()
    verdict = outcome.read_json("validate", "verdict")
    assert verdict["passed"] is True and verdict["failure_class"] is None
    assert outcome.read_json("preflight", "report_json")["passed"] is True
    assert (outcome.run_dir / "train" / "model" / "model.pt").is_file()
    assert outcome.artifact("train", "history").read_text().count('"split":"val"') == 6
    assert outcome.artifact("validate", "curves").read_text().startswith("<")
    assert "SUCCEEDED" in outcome.summary()


@pytest.mark.slow
def test_a_diverging_run_fails_at_validate_with_class_and_remedy(tmp_path):
    args = ["--epochs=6", "--optimizer=sgd", "--activation=tanh", "--lr=3.0"]
    # guard off: this is validate's test (the in-flight guard's is tests/integration/test_guard_local.py)
    outcome = run_local("guarded_training", spec(args, "diverging"), pipeline_root=str(tmp_path), guard="off")
    assert not outcome.succeeded and outcome.failed_task == "validate"
    verdict = outcome.read_json("validate", "verdict")
    assert verdict["passed"] is False
    assert verdict["failure_class"] in ("divergence", "instability", "non_finite")
    detail = outcome.failure_detail()
    assert verdict["failure_class"] in detail and "learning rate" in detail.lower()


def test_a_spec_that_cannot_run_fails_at_preflight(tmp_path):
    bad = JobSpec.create(
        "demo-project",
        "us-central1",
        machine_type="n1-standard-4",
        image_uri="img",
        command=["no-such-trainer-binary"],
    )
    outcome = run_local("guarded_training", bad, pipeline_root=str(tmp_path))
    assert not outcome.succeeded and outcome.failed_task == "preflight"
    report = json.loads(outcome.artifact("preflight", "report_json").read_text())
    assert any(r["status"] == "FAIL" and "no-such-trainer-binary" in r["evidence"] for r in report["results"])
    assert "not an executable" in outcome.failure_detail()


@pytest.mark.slow
def test_the_train_task_falls_back_and_its_outputs_record_each_attempt(tmp_path):
    from tests.integration.test_fallback_local import WORKER

    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    job = JobSpec.create(
        "demo-project",
        "us-central1",
        machine_type="n1-standard-4",
        image_uri="trainguard/trainer:test",
        command=["python", str(worker)],
        display_name="fallback",
    )
    outcome = run_local(
        "guarded_training",
        job,
        pipeline_root=str(tmp_path / "root"),
        fallbacks="region=us-east4;region=europe-west4",
        inject="stockout@0,quota@1",
        retries="preemption=1",
    )
    assert outcome.succeeded, outcome.message[-3000:]
    recorded = json.loads(outcome.artifact("train", "attempts").read_text())
    assert [(a["region"], a["failure_class"]) for a in recorded["attempts"]] == [
        ("us-central1", "capacity"),
        ("us-east4", "quota"),
        ("europe-west4", ""),
    ]
    assert recorded["model_attempt"] == 2
    model = outcome.metadata("train", "model")
    assert (model["attempt"], model["attempt_region"], model["attempts"]) == (3, "europe-west4", 3)
