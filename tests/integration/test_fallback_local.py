"""Fallbacks, retry budgets and hangs end to end on the local backend, with injected faults.

The worker is a small trainer: it resumes from the step saved under ``AIP_CHECKPOINT_DIR``, logs
one history record every ``STEP_S`` seconds, saves on SIGTERM (as trainguard's runtime does) and
writes its model at the end, so what each attempt left is what the next one starts from.
"""

from __future__ import annotations

import io
import json
import os
import textwrap
import time
from pathlib import Path

import pytest

from tests.fuzz.contract import assert_contract, run_cli
from trainguard.errors import TrainingFailed
from trainguard.spec import JobSpec
from trainguard.stages import train_stage

STEPS, STEP_S = 30, 0.1
WORKER = textwrap.dedent(
    f"""
    import json, os, signal, sys, time
    ckpt = os.path.join(os.environ["AIP_CHECKPOINT_DIR"], "step")
    history = os.environ["TRAINGUARD_HISTORY"]
    step = int(open(ckpt).read()) if os.path.exists(ckpt) else 0
    print("resuming from step", step, "in", os.environ.get("CLOUD_ML_JOB_ID"), flush=True)
    def save(*_):
        open(ckpt, "w").write(str(step)); print("saved step", step, flush=True); sys.exit(143)
    signal.signal(signal.SIGTERM, save)
    with open(history, "a") as out:
        while step < {STEPS}:
            step += 1
            out.write(json.dumps({{"step": step, "split": "train", "time": time.time(),
                                   "metrics": {{"loss": 1.0 / (1 + step)}}}}) + "\\n")
            out.flush()
            time.sleep({STEP_S})
    open(os.path.join(os.environ["AIP_MODEL_DIR"], "weights"), "w").write(str(step))
    print("done at step", step, flush=True)
    """
)


class Artifact:
    def __init__(self, path: Path) -> None:
        self.path, self.uri, self.metadata = str(path), str(path), {}


def job(tmp_path: Path, **kw) -> JobSpec:
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    return JobSpec.create(
        "my-project",
        "us-central1",
        machine_type="g2-standard-8",
        accelerator_type="NVIDIA_L4",
        accelerator_count=1,
        image_uri="us-central1-docker.pkg.dev/my-project/r/trainer:1",
        command=["python", str(worker)],
        base_output_dir=str(tmp_path / "out"),
        **kw,
    )


def train(tmp_path: Path, spec: JobSpec, **kw):
    out = io.StringIO()
    model = Artifact(tmp_path / "task" / "model")
    attempts = tmp_path / "task" / "attempts.json"
    kw.setdefault("guard", "fail")
    try:
        result = train_stage(
            spec,
            project="my-project",
            region="us-central1",
            model=model,
            attempts_path=str(attempts),
            diagnosis_path=str(tmp_path / "task" / "diagnosis.md"),
            stream=out,
            **kw,
        )
    except TrainingFailed as exc:
        result = exc
    recorded = json.loads(attempts.read_text()) if attempts.exists() else {}
    return result, out.getvalue(), recorded, model


def history_steps(tmp_path: Path) -> list[int]:
    lines = (tmp_path / "out" / "history.jsonl").read_text().splitlines()
    return [json.loads(line)["step"] for line in lines if line.strip()]


def test_a_stockout_falls_back_to_the_next_region_at_once_and_the_model_says_which_ran(tmp_path):
    result, log, recorded, model = train(
        tmp_path, job(tmp_path), fallbacks="region=us-east4", inject="stockout@0"
    )
    assert result.succeeded, log[-3000:]
    first, second = recorded["attempts"]
    assert (first["region"], first["state"], first["failure_class"], first["next"]) == (
        "us-central1",
        "FAILED",
        "capacity",
        "fallback",
    )
    assert first["running_s"] == 0  # it never ran
    assert (second["region"], second["state"], second["failure_class"]) == ("us-east4", "SUCCEEDED", "")
    assert recorded["model_attempt"] == 1
    assert model.metadata["attempt"] == 2 and model.metadata["attempt_region"] == "us-east4"
    assert model.metadata["attempts"] == 2
    assert "Resources are insufficient in region: us-central1" in log
    assert "falling back to alternative 2 (region=us-east4)" in log
    assert "#2 us-east4 g2-standard-8 1×NVIDIA_L4 STANDARD: SUCCEEDED" in log and "<- the model" in log
    [gap] = recorded["relaunch_gaps_s"]
    print(f"local: stockout → next launch {gap * 1000:.0f} ms")
    assert gap < 2.0  # a fallback waits for nothing
    assert [a["region"] for a in result.attempts] == ["us-central1", "us-east4"]


def test_a_quota_refusal_then_a_stockout_reach_the_third_alternative(tmp_path):
    result, log, recorded, _ = train(
        tmp_path,
        job(tmp_path),
        fallbacks=["region=us-east4", "machine=a3-highgpu-1g,strategy=FLEX_START"],
        inject="quota@0,stockout@1",
    )
    assert result.succeeded, log[-3000:]
    got = [(a["label"], a["failure_class"], a["job_name"] != "") for a in recorded["attempts"]]
    assert got == [
        ("as specified", "quota", False),  # refused at create: no job
        ("region=us-east4", "capacity", True),
        ("machine=a3-highgpu-1g,strategy=FLEX_START", "", True),
    ]
    last = recorded["attempts"][-1]
    assert (last["machine"], last["accelerator"], last["strategy"]) == (
        "a3-highgpu-1g",
        "NVIDIA_H100_80GB",
        "FLEX_START",
    )
    assert "custom_model_training_nvidia_l4_gpus" in log  # the metric the refusal named


def test_without_a_fallback_a_stockout_fails_and_a_capacity_budget_retries_it(tmp_path):
    failed, log, recorded, _ = train(tmp_path, job(tmp_path), inject="stockout@0")
    assert isinstance(failed, TrainingFailed) and failed.diagnosis.failure_class == "capacity"
    assert len(recorded["attempts"]) == 1  # capacity is not retried unless asked

    again = tmp_path / "again"
    again.mkdir()
    result, log, recorded, _ = train(again, job(again), inject="stockout@0", retries="capacity=1")
    assert result.succeeded, log[-3000:]
    assert [a["next"] for a in recorded["attempts"]] == ["retry", ""]
    assert "capacity: retry 1 of 1" in log


@pytest.mark.slow
def test_a_reclaim_is_relaunched_from_its_checkpoint_while_the_budget_lasts(tmp_path):
    result, log, recorded, _ = train(tmp_path, job(tmp_path, spot=True), inject="reclaim@1.5s")
    assert result.succeeded, log[-3000:]
    first, second = recorded["attempts"]
    assert (first["failure_class"], first["next"], second["state"]) == ("preemption", "retry", "SUCCEEDED")
    steps = history_steps(tmp_path)
    resumed_at = int(log.split("saved step ")[1].split()[0])
    assert 0 < resumed_at < STEPS and f"resuming from step {resumed_at}" in log
    # the second attempt went on from the checkpoint: no step was trained twice, and all were
    assert steps == list(range(1, STEPS + 1))

    none = tmp_path / "none"
    none.mkdir()
    failed, log, recorded, _ = train(none, job(none, spot=True), inject="reclaim@1.5s", retries="none")
    assert isinstance(failed, TrainingFailed) and failed.diagnosis.failure_class == "preemption"
    assert len(recorded["attempts"]) == 1


@pytest.mark.slow
def test_a_hung_job_is_stopped_soon_after_its_last_record_and_relaunched(tmp_path):
    limit = 2.0
    result, log, recorded, _ = train(tmp_path, job(tmp_path), inject="hang@1s", hang_after=f"{limit}s")
    assert result.succeeded, log[-3000:]
    first, second = recorded["attempts"]
    assert (first["state"], first["failure_class"], first["next"]) == ("CANCELLED", "hang", "retry")
    assert "stopping the job: hang: the job is RUNNING but its history has had no new record" in log
    assert "hang: retry 1 of 1" in log and second["state"] == "SUCCEEDED"
    assert history_steps(tmp_path)[-1] == STEPS


@pytest.mark.slow
def test_the_time_from_the_last_record_to_the_stop_of_a_hung_job(tmp_path):
    limit = 2.0
    failed, log, _, _ = train(
        tmp_path, job(tmp_path), inject="hang@1s", hang_after=f"{limit}s", retries="none"
    )
    assert isinstance(failed, TrainingFailed) and failed.diagnosis.failure_class == "hang"
    stop = failed.result.stopped
    lines = (tmp_path / "out" / "history.jsonl").read_text().splitlines()
    last_record = json.loads(lines[-1])["time"]
    stopped_at = os.path.getmtime(tmp_path / "out" / "checkpoints" / "step")  # saved on SIGTERM
    print(
        f"local hang: last history record → stop {stopped_at - last_record:.2f} s "
        f"(--hang-after {limit:g}s; the guard polls every 1 s)"
    )
    assert limit <= stopped_at - last_record < limit + 2.5
    assert stop["details"]["hang"]["limit_s"] == limit


def test_a_failure_that_is_the_users_own_never_moves_or_relaunches(tmp_path):
    spec = job(tmp_path)
    (tmp_path / "worker.py").write_text("import numpy_that_is_not_there\n")
    failed, log, recorded, _ = train(
        tmp_path, spec, fallbacks="region=us-east4", retries="preemption=3,unknown=2,capacity=2"
    )
    assert isinstance(failed, TrainingFailed) and failed.diagnosis.failure_class == "container"
    assert len(recorded["attempts"]) == 1 and recorded["attempts"][0]["next"] == ""
    assert "falling back" not in log and "retry" not in log


def test_the_cli_takes_repeatable_flags_and_refuses_bad_ones_with_exit_2(tmp_path):
    spec = job(tmp_path)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec.to_dict()))
    started = time.monotonic()
    outcome = run_cli(
        "train",
        spec_file,
        "--fallback",
        "region=us-east4",
        "--fallback",
        "region=europe-west4",
        "--inject",
        "stockout@0",
        "--inject",
        "quota@1",
        "--retries",
        "preemption=1",
        "--json",
        tmp_path / "r.json",
    )
    assert_contract(outcome, max_seconds=120, allowed=(0,))
    data = json.loads((tmp_path / "r.json").read_text())
    assert [a["region"] for a in data["attempts"]] == ["us-central1", "us-east4", "europe-west4"]
    assert time.monotonic() - started < 60
    for flags, needle in (
        (("--fallback", "regoin=us-east4"), "unknown key 'regoin'"),
        (("--retries", "container=1"), "container is the job's own to fix"),
        (("--inject", "hang@later"), "is not a duration"),
        (("--hang-after", "soon"), "--hang-after: 'soon' is not a duration"),
        (("--vertex", "-p", "my-project", "-r", "us-central1", "--inject", "stockout@0"), "local runs only"),
    ):
        bad = run_cli("train", spec_file, *flags)
        assert_contract(bad, max_seconds=60, allowed=(2,))
        assert needle in bad.output, (flags, bad.output[-1500:])
