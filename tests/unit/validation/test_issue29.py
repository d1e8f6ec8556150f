"""What real writers' histories need (issue 29): formats read with no flags, runs that learnt
nothing failing, series choice, direction and scale. Real files come from the corpus under
tests/fixtures/real_histories (their labels and sources are in its corpus.json); the synthetic
histories below isolate one behaviour each."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.fuzz.contract import assert_contract, run_cli
from trainguard.validation import History, load_history, validate
from trainguard.validation.history import SeriesParts
from trainguard.validation.pairs import infer_mode
from trainguard.validation.rules import decimal_quantum

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real_histories" / "files"


def real(path: str) -> Path:
    return REAL / path


def synthetic(**series: tuple[str, np.ndarray, np.ndarray]) -> History:
    """name -> (split, steps, values); each name as a writer would spell it."""
    parts = {}
    for name, (split, steps, values) in series.items():
        part = SeriesParts(name, split)
        part.add(steps, values)
        parts[name] = part
    return History.build(parts, "jsonl", "<synthetic>")


def found(verdict) -> list[tuple[str, str]]:
    return [(f.failure_class, str(f.severity)) for f in verdict.findings]


# --- formats, with no flags -------------------------------------------------------------------


def test_a_hugging_face_trainer_state_is_read_as_such() -> None:
    path = real("HenokB__amharic-to-geez/trainer_state.json")
    history = load_history(path)
    assert history.format == "hf_trainer_state"
    # The end-of-training summary (train_loss, the run's mean) is not a point of any curve.
    assert sorted(history.series) == ["loss"]
    assert history.series["loss"].steps.tolist() == [500, 1000, 1500, 2000, 2500]
    verdict = validate(real("Tanisha-anshu__OpenAi-Whisper-small-Braj/trainer_state.json"))
    assert (verdict.series["train"]["name"], verdict.series["val"]["name"]) == ("loss", "eval_loss")
    assert verdict.failure_class == "no_learning"


def test_a_json_document_that_is_not_a_history_is_named_as_such(tmp_path) -> None:
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"runs": [{"step": 1, "loss": 0.5}]}, indent=2))
    outcome = run_cli("validate", str(path))
    assert_contract(outcome)
    assert outcome.exit_code == 2
    assert "a JSON document (one value over many lines), not JSONL" in outcome.output
    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"global_step": 3}, indent=2))
    outcome = run_cli("validate", str(state))
    assert outcome.exit_code == 2 and "without a 'log_history' list" in outcome.output


def test_ultralytics_results_are_read_and_every_loss_judged() -> None:
    # 30 epochs: train/box_loss 1.69 -> 1.45 (14%) while cls_loss 2.60 -> 1.07 and mAP50 0.34 -> 0.88
    verdict = validate(real("27hrs__YOLOv8/runs/detect/train5/results.csv"))
    assert verdict.passed and verdict.findings == []
    assert verdict.series["train"]["name"] == "train/box_loss"
    assert "train/cls_loss improved" in verdict.not_judged["plateau"]
    pairs = {p["metric"]: p["mode"] for p in verdict.series["pairs"]}
    assert pairs["cls_loss"] == "min" and pairs["map50_95"] == "max" and pairs["precision"] == "max"
    assert not any(
        name.startswith("lr/") for p in verdict.series["pairs"] for name in (p["train"], p["val"]) if name
    )
    padded = load_history(real("3bdul1ah__License-Plates-Detector-Model/runs/detect/train/results.csv"))
    assert padded.series["val/cls_loss"].values.tolist() == [5.315, 3.8934, 3.1568]  # space-padded cells


def test_appended_keras_runs_are_split_and_the_last_judged() -> None:
    path = real("AkshatSharma5__Brain_Tumor_Image_Classification_using_CNN/training_log.csv")
    history = load_history(path)
    assert history.series["loss"].steps.tolist() == [0, 1, 2, 3, 4]
    assert history.series["loss"].values[0] == pytest.approx(1.245796799659729)  # the 4th run's
    assert history.notes[0].startswith("4 training runs appended to this file")
    verdict = validate(path)
    assert verdict.passed and verdict.notes == history.notes


def test_losses_named_like_anything_loss_are_found() -> None:
    pinn = validate(real("0729max0729__PINNforEM/lightning_logs/version_41/metrics.csv"))
    assert pinn.series["train"]["name"] == "mean_loss"  # the overall loss, not a component
    assert found(pinn) == [("plateau", "warn")]  # 43.17 -> 42.55 in 10 epochs
    batch = validate(real("Andreus00__WSDS/lightning_logs/version_5/metrics.csv"))
    assert batch.series["train"]["name"] == "train_loss_batch" and batch.failure_class == "stalled"
    # A plural names the loss too: a real MLflow run's avg_train_losses pairs with avg_val_loss.
    mlflow = validate(real("SiddhantDeshmukh__solarWind/scripts/mlruns/0/1a7d357a394349ae91f484d38ff84fe7"))
    assert (mlflow.series["train"]["name"], mlflow.series["val"]["name"]) == (
        "avg_train_losses",
        "avg_val_loss",
    )


def test_an_average_loss_is_the_run_s_loss_whatever_its_batch_extremes_do() -> None:
    # avg_loss 0.1335 -> 0.1259 over 98 epochs; min_loss / max_loss are the epoch's batch
    # extremes, scattering 0.010-0.035 with no trend: they are not parts of the loss that learnt.
    verdict = validate(real("Cata039__Background-Removal-in-video-conferences/training_log.csv"))
    assert verdict.series["train"]["name"] == "avg_loss"
    assert verdict.passed and found(verdict) == [("plateau", "warn")]
    steps = np.arange(1.0, 41.0)
    rng = np.random.default_rng(7)
    flat = synthetic(
        average_loss=("train", steps, 0.50 - 0.001 * steps),
        max_loss=("train", steps, 0.9 + 0.3 * rng.random(steps.size)),
    )
    assert found(validate(flat)) == [("plateau", "warn")]


def test_a_run_whose_losses_all_went_nan_fails_non_finite(tmp_path) -> None:
    path = tmp_path / "metrics.csv"
    rows = "".join(f"{step},0,nan,nan\n" for step in range(10))
    path.write_text("step,epoch,train_elbo_loss,val_elbo_loss\n" + rows)
    outcome = run_cli("validate", str(path))
    assert_contract(outcome)
    assert outcome.exit_code == 1 and "non_finite" in outcome.output


# --- runs that learnt nothing fail -----------------------------------------------------------


def test_a_validation_loss_at_chance_fails() -> None:
    # val_loss 1.097-1.111 = ln 3 with val_acc 0.31-0.38 for 10 epochs
    verdict = validate(real("Lucas-023__ratos/lightning_logs/version_0/metrics.csv"))
    assert verdict.failure_class == "no_learning"
    assert verdict.findings[0].evidence["classes"] == 3
    assert "labels" in verdict.findings[0].remedy or "one batch" in verdict.findings[0].remedy


def test_validation_never_better_than_its_first_with_flat_training_fails() -> None:
    verdict = validate(real("JohnBBB42__Hidden_Markov_Miracles/lightning_logs/version_18/metrics.csv"))
    assert found(verdict) == [("no_learning", "fail")]  # not also called a plateau


def test_a_model_that_learnt_in_its_first_epoch_and_held_is_not_no_learning() -> None:
    steps = np.arange(1, 101, dtype=float)
    train = 2.3 * np.exp(-steps / 5) + 0.3  # falls within the first of 10 epochs, then holds
    val_steps = steps[9::10]
    val = np.full(val_steps.size, 0.31) + 0.001 * np.sin(val_steps)
    verdict = validate(synthetic(train_loss=("train", steps, train), val_loss=("val", val_steps, val)))
    assert "no_learning" not in [f.failure_class for f in verdict.findings]


def test_a_single_validation_series_is_judged_on_its_own() -> None:
    steps = np.arange(55, dtype=float)
    verdict = validate(synthetic(val_loss=("val", steps, np.full(55, 0.6931))))
    assert verdict.failure_class == "stalled"


def test_a_lone_validation_metric_is_the_run_s_evaluation_when_no_validation_loss_is_logged() -> None:
    # A real DVCLive run: train/loss and val/dice only; Dice 0.0 at every evaluation.
    verdict = validate(real("MonashAIM__harmonic-dense-network/dvclive"))
    assert verdict.failure_class == "no_learning" and "val/dice was never better" in verdict.headline
    steps = np.arange(8.0)
    learnt = synthetic(
        loss=("train", steps, 1.0 / (steps + 1)), dice=("val", steps, np.linspace(0.1, 0.8, 8))
    )
    assert validate(learnt).passed
    # With a validation loss logged, the primary pair decides and a flat side metric is no verdict.
    flat_side = synthetic(
        loss=("train", steps, 1.0 / (steps + 1)),
        val_loss=("val", steps, 1.1 / (steps + 1)),
        dice=("val", steps, np.zeros(8)),
    )
    assert "no_learning" not in [f.failure_class for f in validate(flat_side).findings]


def test_learning_nothing_can_be_demoted_and_slow_learning_only_warns() -> None:
    path = real("Lucas-023__ratos/lightning_logs/version_0/metrics.csv")
    assert validate(path, warn_on=["no_learning"]).headline == "PASSED with warnings (no_learning)"
    slow = validate(real("Jimmy-Mendez__canine-model/trainer_state.json"))  # 4.63 -> 3.97, steadily
    assert slow.passed and found(slow) == [("plateau", "warn")]


def test_values_written_with_few_digits_repeating_are_not_a_stall() -> None:
    # HF's older Trainer rounded the loss to 4 decimals: 0.0014 five times in a row, converged
    path = real("MaximilianoPona__image_classification_irrigation_systems/trainer_state.json")
    verdict = validate(path)
    assert verdict.passed and verdict.findings == []
    assert decimal_quantum(load_history(path).series["loss"].values) == pytest.approx(1e-4)
    steps = np.arange(10, dtype=float)
    stuck = np.array([2.3, 2.1, 1.2366, 1.2366, 1.2366, 1.2366, 1.2366, 1.2366, 1.1, 1.0])
    assert validate(synthetic(loss=("train", steps, stuck))).failure_class == "stalled"


# --- series choice, direction, scale ------------------------------------------------------------


def test_the_validation_curve_per_epoch_is_paired_not_its_per_batch_logging() -> None:
    train_steps = np.arange(49, 1900, 50, dtype=float)
    val_batches = np.arange(0, 437, dtype=float)  # validation's own batch counter
    epochs = np.arange(99, 1900, 200, dtype=float)
    verdict = validate(
        synthetic(
            train_loss=("train", train_steps, np.linspace(1.0, 0.2, train_steps.size)),
            val_loss_step=("val", val_batches, np.random.default_rng(0).uniform(0.2, 0.9, val_batches.size)),
            val_loss_epoch=("val", epochs, np.linspace(0.9, 0.3, epochs.size)),
        )
    )
    assert verdict.series["val"]["name"] == "val_loss_epoch" and verdict.passed


@pytest.mark.parametrize(
    "name,mode",
    [
        ("acc_mean_pos", None),
        ("box_loss", "min"),
        ("cls_oo_loss", "min"),
        ("map50_95", "max"),
        ("error_rate", "min"),
    ],
)
def test_direction_comes_from_the_last_word_of_the_name(name: str, mode: str | None) -> None:
    assert infer_mode(name) == mode


def test_a_rank_named_with_acc_is_not_maximised() -> None:
    steps = np.arange(1, 41, dtype=float)
    verdict = validate(
        synthetic(
            train_loss_step=("train", steps, np.linspace(1.0, 0.3, 40)),
            train_acc_mean_pos_step=("train", steps, np.linspace(40, 5, 40)),  # a rank falling: good
        )
    )
    assert verdict.passed
    assert (
        "which way 'acc_mean_pos' improves is unknown" in verdict.series["skipped"]["train_acc_mean_pos_step"]
    )


def test_a_signed_log_likelihood_is_judged_on_its_own_scale() -> None:
    steps = np.arange(1, 41, dtype=float)
    nll = -2.62 - 0.35 * (1 - np.exp(-steps / 10))  # -2.62 -> -2.97: improving
    assert validate(synthetic(train_nll=("train", steps, nll))).findings == []
    flat = -2.62 + 0.01 * np.random.default_rng(1).standard_normal(40)
    assert found(validate(synthetic(train_nll=("train", steps, flat)))) == [("plateau", "warn")]


def test_one_lucky_batch_is_not_the_best_of_a_noisy_loss() -> None:
    # one epoch of per-batch train_loss, 0.29-0.76 around 0.5, no trend: no divergence
    verdict = validate(real("Cloudduoduo__SML_Project1/lightning_logs/version_0/metrics.csv"))
    assert verdict.passed and "divergence" not in [f.failure_class for f in verdict.findings]
    rng = np.random.default_rng(3)
    steps = np.arange(300, dtype=float)
    mae = 0.5 + 0.15 * rng.standard_normal(300)
    mae[40] = 0.05  # the lucky batch
    assert validate(synthetic(train_MAE_step=("train", steps, mae))).failure_class is None


def test_the_plateau_start_is_where_the_run_began() -> None:
    steps = np.arange(1, 101, dtype=float)
    loss = np.where(steps <= 5, 5.0 - 0.8 * steps, 1.0) + 0.002 * np.sin(steps)  # 5 -> 1, then flat
    verdict = validate(synthetic(loss=("train", steps, loss)))
    assert "plateau" not in [f.failure_class for f in verdict.findings]  # it fell 80%
