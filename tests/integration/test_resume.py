"""Kill-and-resume with the reference trainer: a resumed run ends bit-identical to an
uninterrupted one, whether it was preempted (SIGTERM) or killed (SIGKILL) at random moments."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest

from trainguard.launch.local import LocalBackend
from trainguard.runtime.history import read_history_records
from trainguard.spec import JobSpec

pytest.importorskip("torch")
TRAINER = Path(__file__).resolve().parents[2] / "containers" / "trainer" / "train.py"
ARGS = ["--epochs=4", "--dropout=0.2", "--checkpoint-every=7", "--step-sleep=0.02"]


def run(base: Path, preempt_on=(), hard=False, args=ARGS, replicas=1):
    # Preemptions are triggered by what the trainer prints, not by wall time: start-up time
    # varies a lot on a shared machine, so a timer could fire before training or after it.
    spec = JobSpec.create("my-project", "us-central1", machine_type="n1-standard-4",
                          image_uri="img", command=["python", str(TRAINER)], args=args,
                          base_output_dir=str(base), replica_count=replicas)
    result = LocalBackend(preempt_on=list(preempt_on), grace_s=10, hard_kill=hard).run(spec)
    assert result.succeeded, result.log_tail[-3000:]
    return result


def digest(base: Path) -> str:
    return hashlib.sha256((base / "model" / "model.pt").read_bytes()).hexdigest()


def history(base: Path):
    return [(r["step"], r["split"], r["metrics"]["loss"])
            for r in read_history_records((base / "history.jsonl").read_text())]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    base = tmp_path_factory.mktemp("baseline")
    run(base)
    return base


@pytest.mark.parametrize("preemptions", [1, 2, 3])
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
        kills = [("training on", round(rng.uniform(0.05, 1.8), 2))
                 for _ in range(rng.randint(1, 2))]
        run(base, preempt_on=kills, hard=True)
        assert digest(base) == digest(baseline), f"kill points {kills}"
        assert history(base) == history(baseline), f"kill points {kills}"


def test_sigkill_at_random_moments_still_ends_bit_identical(baseline, tmp_path):
    hard_kill_runs(baseline, tmp_path, count=2, seed=7)


@pytest.mark.long
def test_sigkill_at_many_random_moments(baseline, tmp_path):
    hard_kill_runs(baseline, tmp_path, count=20, seed=11)


def test_two_replicas_train_data_parallel_over_gloo(tmp_path):
    result = run(tmp_path, args=["--epochs=2", "--checkpoint-every=10"], replicas=2)
    assert "rank 1/2" in result.log_tail and "rank 0/2" in result.log_tail
    assert (tmp_path / "model" / "model.pt").exists()
    splits = {s for _, s, _ in history(tmp_path)}
    assert splits == {"train", "val"}
