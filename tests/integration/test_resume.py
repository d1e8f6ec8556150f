"""Kill-and-resume with the reference trainer: a resumed run ends bit-identical to an
uninterrupted one, whether it was preempted (SIGTERM) or killed (SIGKILL) at random moments; for
one worker, and for the two-worker FSDP example whose checkpoints are sharded."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.once import built_once
from tests.requires import require
from tests.trainer_job import TRAINER, trainer_job
from trainguard.launch.local import LocalBackend
from trainguard.runtime.history import read_history_records
from trainguard.spec import JobSpec, load_spec, parse_spec

require("torch")
ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--epochs=4", "--dropout=0.2", "--checkpoint-every=7", "--step-sleep=0.02"]


def run(base: Path, preempt_on=(), hard=False, args=ARGS, replicas=1):
    # Preemptions are triggered by what the trainer prints, not by wall time: start-up time
    # varies a lot on a shared machine, so a timer could fire before training or after it.
    spec = trainer_job(args, base_output_dir=str(base), replica_count=replicas)
    result = LocalBackend(preempt_on=list(preempt_on), grace_s=10, hard_kill=hard).run(spec)
    assert result.succeeded, result.log_tail[-3000:]
    return result


def digest(base: Path) -> str:
    return hashlib.sha256((base / "model" / "model.pt").read_bytes()).hexdigest()


def history(base: Path):
    return [
        (r["step"], r["split"], r["metrics"]["loss"])
        for r in read_history_records((base / "history.jsonl").read_text())
    ]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    return built_once(tmp_path_factory, "resume-baseline", run)


# One preemption in the default suite; two and three (the same path, longer) in the long one.
@pytest.mark.parametrize(
    "preemptions", [1, pytest.param(2, marks=pytest.mark.long), pytest.param(3, marks=pytest.mark.long)]
)
@pytest.mark.slow
def test_preempted_runs_end_bit_identical(baseline, tmp_path, preemptions):
    # Mid-epoch 1, then mid-epoch 2, then mid-epoch 3 (each after a resume).
    triggers = [(f"epoch {e} step", 0.1) for e in range(preemptions)]
    result = run(tmp_path, preempt_on=triggers)
    assert result.restarts == preemptions
    assert "resumed from checkpoint" in result.log_tail
    assert digest(tmp_path) == digest(baseline)
    assert history(tmp_path) == history(baseline)  # no duplicated or lost records


def hard_kill_runs(baseline, tmp_path, count, seed):
    rng = random.Random(seed)
    for i in range(count):
        base = tmp_path / f"kill{i}"
        # SIGKILL anywhere in training (~2 s of steps), mid-save included, once or twice.
        kills = [("training on", round(rng.uniform(0.05, 1.8), 2)) for _ in range(rng.randint(1, 2))]
        run(base, preempt_on=kills, hard=True)
        assert digest(base) == digest(baseline), f"kill points {kills}"
        assert history(base) == history(baseline), f"kill points {kills}"


@pytest.mark.slow
def test_sigkill_at_random_moments_still_ends_bit_identical(baseline, tmp_path):
    hard_kill_runs(baseline, tmp_path, count=2, seed=7)


@pytest.mark.long
def test_sigkill_at_many_random_moments(baseline, tmp_path):
    hard_kill_runs(baseline, tmp_path, count=20, seed=11)


@pytest.mark.slow
def test_two_replicas_train_data_parallel_over_gloo(tmp_path):
    result = run(tmp_path, args=["--epochs=2", "--checkpoint-every=10"], replicas=2)
    assert "rank 1/2" in result.log_tail and "rank 0/2" in result.log_tail
    assert (tmp_path / "model" / "model.pt").exists()
    splits = {s for _, s, _ in history(tmp_path)}
    assert splits == {"train", "val"}


# --- the examples the local backend runs: byte-identical after preemptions and kills ------------


def example(name: str, base: Path, *extra_args: str) -> JobSpec:
    """An example spec with the trainer's path made absolute, outputs in ``base``."""
    data = load_spec(ROOT / "examples" / name, project="my-project", region="us-central1").to_dict()
    for pool in data["workerPoolSpecs"]:
        container = pool["containerSpec"]
        container["command"] = [str(TRAINER) if c.endswith("train.py") else c for c in container["command"]]
        container["args"] = [*container.get("args", []), *extra_args]
    data["baseOutputDirectory"] = {"outputUriPrefix": str(base)}
    return parse_spec(data, project="my-project", region="us-central1")


def run_example(spec: JobSpec, **backend):
    result = LocalBackend(grace_s=20, **backend).run(spec)
    assert result.succeeded, result.log_tail[-3000:]
    return result


FAST_FSDP = ("--epochs=4", "--step-sleep=0.02", "--checkpoint-every=10")


@pytest.mark.slow
def test_the_fsdp_example_resumes_bit_identical_after_a_preemption(tmp_path):
    run_example(example("local-fsdp.yaml", tmp_path / "base", *FAST_FSDP))
    result = run_example(
        example("local-fsdp.yaml", tmp_path / "pre", *FAST_FSDP), preempt_on=[("epoch 1 step", 0.05)]
    )
    assert result.restarts == 1 and "resumed from checkpoint" in result.log_tail
    assert "rank 1/2" in result.log_tail
    assert any((tmp_path / "pre" / "checkpoints").glob("step-*/a-*/__1_0.distcp"))  # sharded
    assert digest(tmp_path / "pre") == digest(tmp_path / "base")
    assert history(tmp_path / "pre") == history(tmp_path / "base")


def cli_train(spec: str, out: Path, *flags: str) -> dict:
    """``trainguard train SPEC --local …`` as a user types it (from the repository root)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainguard.cli",
            "train",
            f"examples/{spec}",
            "--local",
            "-p",
            "demo-project",
            "-r",
            "us-central1",
            "--output-dir",
            str(out),
            "--json",
            str(out) + ".json",
            *flags,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return json.loads(Path(str(out) + ".json").read_text())


@pytest.mark.long
@pytest.mark.parametrize("spec", ["local-healthy.yaml", "local-fsdp.yaml"])
def test_cli_preempt_after_ends_with_the_same_model(tmp_path, spec):
    cli_train(spec, tmp_path / "plain")
    result = cli_train(spec, tmp_path / "preempted", "--preempt-after", "4s,9s")
    assert result["restarts"] == 2
    assert digest(tmp_path / "preempted") == digest(tmp_path / "plain")


@pytest.mark.long
def test_the_fsdp_example_survives_random_sigkills(tmp_path):
    base = tmp_path / "base"
    run_example(example("local-fsdp.yaml", base, *FAST_FSDP))
    rng = random.Random(13)
    for i in range(4):
        kills = [("training on", round(rng.uniform(0.05, 2.0), 2)) for _ in range(rng.randint(1, 2))]
        out = tmp_path / f"kill{i}"
        run_example(example("local-fsdp.yaml", out, *FAST_FSDP), preempt_on=kills, hard_kill=True)
        assert digest(out) == digest(base), f"kill points {kills}"
        assert history(out) == history(base), f"kill points {kills}"


class Planted:
    def __reduce__(self):
        import os

        return (os.system, ("touch planted-ran",))


@pytest.mark.slow
def test_the_trainer_refuses_a_crafted_checkpoint_with_exit_2(tmp_path):
    import os
    import pickle

    from trainguard.runtime.checkpoint import CheckpointManager

    ckpts = tmp_path / "checkpoints"
    good = CheckpointManager(str(ckpts), async_save=False)
    good.save(5, {"state.pt": b"(an older checkpoint)"}, format="torch")
    crafted = pickle.dumps({"model": {}, "rng": Planted()})
    good.save(10, {"state.pt": crafted}, format="torch")
    env = {
        **os.environ,
        "AIP_CHECKPOINT_DIR": str(ckpts),
        "AIP_MODEL_DIR": str(tmp_path / "m"),
        "TRAINGUARD_HISTORY": str(tmp_path / "h.jsonl"),
    }
    proc = subprocess.run(
        [sys.executable, str(TRAINER), "--epochs=1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    path = good.checkpoint(10).path("state.pt")
    assert f"trainguard: {path}: not a checkpoint this runtime loads safely" in proc.stderr
    assert "To resume from step 5" in proc.stderr
    assert not (tmp_path / "planted-ran").exists()


@pytest.mark.slow
def test_trainguard_train_reports_a_crafted_checkpoint_as_bad_input_with_exit_2(tmp_path):
    import pickle

    from trainguard.runtime.checkpoint import CheckpointManager

    out = tmp_path / "out"
    good = CheckpointManager(str(out / "checkpoints"), async_save=False)
    good.save(5, {"state.pt": b"(an older checkpoint)"}, format="torch")
    good.save(10, {"state.pt": pickle.dumps({"model": {}, "rng": Planted()})}, format="torch")
    spec = trainer_job(["--epochs=1"], project="local-project")
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec.to_dict()))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainguard.cli",
            "train",
            str(spec_file),
            "--output-dir",
            str(out),
            "--resume",  # the checkpoints there are this run's to continue
            "--guard",
            "off",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-3000:]
    assert "bad input" in proc.stderr and "not a checkpoint this runtime loads safely" in proc.stderr
    assert "To resume from step 5" in proc.stderr
    assert not (tmp_path / "planted-ran").exists() and not (out / "planted-ran").exists()
