"""The model shipped: the kept checkpoint nearest the best validation step, or the last weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainguard.guard.model import best_validation, pick_model
from trainguard.runtime.checkpoint import CheckpointManager, RetentionPolicy
from trainguard.validation import validate

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "histories"


class Artifact:
    """What KFP hands a component: a path, a URI, metadata."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.uri = str(path)
        self.metadata: dict = {}


def run_dir(tmp_path: Path, steps, metrics=None, final: bool = True) -> Path:
    base = tmp_path / "run"
    manager = CheckpointManager(
        str(base / "checkpoints"), async_save=False, retention=RetentionPolicy(keep_last=100)
    )
    for step in steps:
        manager.save(step, {"state.pt": f"weights at {step}".encode()}, (metrics or {}).get(step))
    if final:
        (base / "model").mkdir(parents=True)
        (base / "model" / "model.pt").write_bytes(b"final weights")
    return base


@pytest.fixture(scope="module")
def overfit_best():
    # val/loss is best at step 81 of 180 in this real run.
    return best_validation(validate(FIXTURES / "overfit" / "history.jsonl"))


def test_the_best_validation_step_is_where_the_judged_validation_series_is_best(overfit_best):
    assert overfit_best.step == 81 and overfit_best.series == "val/loss"
    assert overfit_best.last_step == 180 and overfit_best.value == pytest.approx(0.6906, abs=1e-4)


def test_best_ships_the_kept_checkpoint_nearest_the_best_step(tmp_path, overfit_best):
    base = run_dir(tmp_path, [50, 100, 150])
    pick = pick_model(
        "best",
        model_dir=f"{base}/model/",
        checkpoint_dir=f"{base}/checkpoints/",
        best=overfit_best,
        last_step=180,
    )
    assert pick.source == "checkpoint" and pick.step == 100
    assert "/step-000000100/" in pick.uri + "/" and pick.files == ("state.pt",)  # its attempt dir
    meta = pick.metadata()
    assert meta["model_step"] == 100 and meta["best_step"] == 81
    assert meta["model_metric"] == "val/loss" and meta["model_metric_step"] == 99  # last eval <= 100
    assert "nearest the best validation step 81" in pick.describe()


def test_the_checkpoints_own_metric_is_preferred(tmp_path, overfit_best):
    base = run_dir(tmp_path, [80, 160], metrics={80: {"val_loss": 0.69}, 160: {"val_loss": 0.8}})
    pick = pick_model(
        "best",
        model_dir=f"{base}/model/",
        checkpoint_dir=f"{base}/checkpoints/",
        best=overfit_best,
        last_step=180,
    )
    assert pick.step == 80 and pick.value == pytest.approx(0.69) and pick.value_step == 80


def test_the_final_weights_ship_when_they_are_nearest(tmp_path, overfit_best):
    base = run_dir(tmp_path, [10])
    pick = pick_model(
        "best",
        model_dir=f"{base}/model/",
        checkpoint_dir=f"{base}/checkpoints/",
        best=overfit_best,
        last_step=120,
    )
    assert pick.source == "model_dir" and pick.step == 120


def test_last_ships_the_final_weights_or_the_newest_checkpoint_of_a_stopped_job(tmp_path, overfit_best):
    base = run_dir(tmp_path, [50, 100])
    pick = pick_model(
        "last",
        model_dir=f"{base}/model/",
        checkpoint_dir=f"{base}/checkpoints/",
        best=overfit_best,
        last_step=180,
    )
    assert pick.source == "model_dir"
    stopped = run_dir(tmp_path / "stopped", [50, 100], final=False)
    pick = pick_model(
        "last", model_dir=f"{stopped}/model/", checkpoint_dir=f"{stopped}/checkpoints/", best=overfit_best
    )
    assert pick.source == "checkpoint" and pick.step == 100


def test_no_weights_at_all_is_said(tmp_path):
    pick = pick_model(
        "best", model_dir=str(tmp_path / "model"), checkpoint_dir=str(tmp_path / "ckpt"), best=None
    )
    assert pick.source == "none" and "no weights" in pick.reason


def _nan_run(tmp_path: Path, nan_from: int | None, spike: int | None = None) -> Path:
    """train/loss every step, val/loss every 10; best val at 100; NaN from ``nan_from`` to the
    end, or a single NaN at ``spike`` the run recovers from (a skipped fp16 step)."""
    path = tmp_path / "h.jsonl"
    with path.open("w") as out:
        for s in range(1, 201):
            bad = (nan_from is not None and s >= nan_from) or s == spike
            train = float("nan") if bad else 1 / s**0.5
            out.write(json.dumps({"step": s, "split": "train", "metrics": {"loss": train}}) + "\n")
            if s % 10 == 0:
                val = 1.1 / min(s, 100) ** 0.3 + max(0, s - 100) * 1e-3
                val = float("nan") if nan_from is not None and s >= nan_from else val
                out.write(json.dumps({"step": s, "split": "val", "metrics": {"loss": val}}) + "\n")
    return path


def test_best_never_ships_weights_saved_after_the_run_went_nan(tmp_path):
    # Checkpoint 150 is nearer the best step (100) than 40, but the loss is NaN from 150 on:
    # those weights are NaN. It once shipped as "best", its metadata claiming val/loss 0.32.
    best = best_validation(validate(_nan_run(tmp_path, nan_from=150)))
    assert best.step == 100 and best.nonfinite_from == 150
    base = run_dir(tmp_path, [40, 150], final=True)
    pick = pick_model(
        "best", model_dir=f"{base}/model/", checkpoint_dir=f"{base}/checkpoints/", best=best, last_step=200
    )
    assert pick.step == 40 and pick.value_step == 40
    assert "before the run went NaN/Inf at step 150" in pick.reason


def test_a_nan_the_run_recovered_from_does_not_rule_out_later_weights(tmp_path):
    best = best_validation(validate(_nan_run(tmp_path, nan_from=None, spike=120), warn_on=["non_finite"]))
    assert best.nonfinite_from is None
    base = run_dir(tmp_path, [40, 130])
    pick = pick_model(
        "best", model_dir=f"{base}/model/", checkpoint_dir=f"{base}/checkpoints/", best=best, last_step=200
    )
    assert pick.step == 130


def test_when_every_saved_weight_is_after_the_nan_the_nearest_ships_with_a_warning(tmp_path):
    best = best_validation(validate(_nan_run(tmp_path, nan_from=150)))
    base = run_dir(tmp_path, [160, 190], final=False)
    pick = pick_model(
        "best", model_dir=f"{base}/model/", checkpoint_dir=f"{base}/checkpoints/", best=best, last_step=200
    )
    assert pick.step == 160 and "every saved weight comes after" in pick.reason
