"""Verdicts on real runs of the reference trainer, recorded in every supported format.

The fixtures under tests/fixtures/histories/ come from ``record.py`` there (real PyTorch runs on
digits, then converted to Keras CSV, Lightning CSV and two TensorBoard layouts). Each test asserts
what a user would notice: pass or fail, the class named, where it happened, the step to stop at.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from trainguard.validation import detect_format, load_history, render_markdown, validate

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "histories"

FORMATS = {
    "history.jsonl": "jsonl",
    "keras_log.csv": "keras_csv",
    "metrics.csv": "lightning_csv",
    "tb_keras": "tensorboard",
    "tb_torch": "tensorboard",
}
PER_EPOCH = {"keras_log.csv", "tb_keras"}

# scenario -> (passes, the classes found, in order, with their severity)
EXPECTED = {
    "healthy": (True, []),
    "dropout": (True, []),
    "nan": (False, [("non_finite", "fail")]),
    "explode": (False, [("divergence", "fail")]),
    "oscillate": (False, [("instability", "fail")]),
    "overfit": (False, [("overfit", "fail")]),
    # SGD at lr 1e-5: val_loss 2.3038 -> 2.3037 (ln 10) with val_accuracy 0.097 at every
    # evaluation, chance on 10 digits: a run that learnt nothing fails (issue 29), and is not
    # also called a plateau.
    "plateau": (False, [("no_learning", "fail")]),
    # The same batch at lr 0: identical losses, a pipeline bug, fail by default (issue 29).
    "stall": (False, [("stalled", "fail")]),
}


def records(scenario: str) -> list[dict]:
    text = (FIXTURES / scenario / "history.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def cases():
    for scenario in EXPECTED:
        for name in FORMATS:
            yield pytest.param(scenario, name, id=f"{scenario}-{name}")


@pytest.mark.parametrize("scenario,name", list(cases()))
def test_verdict_matches_what_the_run_did(scenario: str, name: str) -> None:
    passed, classes = EXPECTED[scenario]
    verdict = validate(FIXTURES / scenario / name)
    found = list(dict.fromkeys((f.failure_class, f.severity) for f in verdict.findings))
    assert found == classes, render_markdown(verdict)
    assert verdict.passed is passed
    assert verdict.failure_class == (None if passed else classes[0][0])
    assert verdict.series["format"] == FORMATS[name]
    assert verdict.series["train"] is not None and verdict.series["val"] is not None


@pytest.mark.parametrize("name", list(FORMATS))
def test_format_is_detected(name: str) -> None:
    path = FIXTURES / "healthy" / name
    history = load_history(path)
    assert history.format == FORMATS[name]
    if path.is_file():
        assert detect_format(str(path), path.read_bytes()[:4096]) == FORMATS[name]


@pytest.mark.parametrize("name", ["history.jsonl", "metrics.csv", "tb_torch"])
def test_non_finite_points_at_the_first_nan_step(name: str) -> None:
    first_nan = next(
        r["step"] for r in records("nan") if r["split"] == "train" and math.isnan(r["metrics"]["loss"])
    )
    verdict = validate(FIXTURES / "nan" / name)
    train_finding = next(f for f in verdict.findings if f.series == verdict.series["train"]["name"])
    assert train_finding.step_range[0] == first_nan
    assert f"step {first_nan}" in train_finding.message
    assert "clip gradients by global norm" in train_finding.remedy
    # The explosion before the NaN is evidence, not a second class.
    assert train_finding.evidence["largest_finite_value_before"] > 1e20


@pytest.mark.parametrize("name", list(FORMATS))
def test_overfit_names_the_best_validation_step(name: str) -> None:
    val = [r for r in records("overfit") if r["split"] == "val"]
    best = min(val, key=lambda r: r["metrics"]["loss"])
    best_step = best["epoch"] if name in PER_EPOCH else best["step"]
    verdict = validate(FIXTURES / "overfit" / name)
    finding = verdict.findings[0]
    assert finding.evidence["best_step"] == best_step
    assert f"best validation step, {best_step} " in finding.remedy
    assert finding.step_range == (best_step, verdict.series["val"]["last_step"])
    assert verdict.summary_metrics()["best_step"] == best_step
    assert verdict.summary_metrics()["best_val_loss"] == pytest.approx(best["metrics"]["loss"], rel=1e-6)


def test_divergence_starts_after_the_best_and_runs_to_the_end() -> None:
    verdict = validate(FIXTURES / "explode" / "history.jsonl")
    finding = verdict.findings[0]
    train = [r for r in records("explode") if r["split"] == "train"]
    best = min(train, key=lambda r: r["metrics"]["loss"])
    assert finding.evidence["best_step"] == best["step"]
    assert finding.step_range[0] > best["step"]
    assert finding.step_range[1] == train[-1]["step"]
    assert finding.evidence["tail_median"] > 5 * finding.evidence["best"]


def test_healthy_and_dropout_runs_raise_nothing_and_report_their_numbers() -> None:
    for scenario in ("healthy", "dropout"):
        verdict = validate(FIXTURES / scenario / "history.jsonl")
        assert verdict.findings == [] and verdict.not_judged == {}
        metrics = verdict.summary_metrics()
        assert metrics["best_step"] == verdict.series["val"]["last_step"]  # still improving
    dropout = validate(FIXTURES / "dropout" / "history.jsonl").summary_metrics()
    assert dropout["final_gap"] < 0  # validation below training: expected with dropout


def test_stall_is_not_also_called_a_plateau() -> None:
    verdict = validate(FIXTURES / "stall" / "history.jsonl")
    assert [f.failure_class for f in verdict.findings] == ["stalled"]
    finding = verdict.findings[0]
    assert finding.evidence["repeats"] == verdict.series["train"]["points"]
    assert "shuffling" in finding.remedy


REAL = FIXTURES.parent / "real_histories" / "files"


def test_promoting_a_warning_fails_the_run() -> None:
    # A real run that barely improves: per-batch train_loss 0.0415 -> 0.035-0.044 in 20 epochs.
    slow = REAL / "HoseinNasiriShahraki__DeepLearning" / "lightning_logs" / "version_0" / "metrics.csv"
    assert validate(slow).headline == "PASSED with warnings (plateau)"
    verdict = validate(slow, fail_on=["plateau"])
    assert not verdict.passed and verdict.failure_class == "plateau"
    assert "raise the learning rate" in verdict.findings[0].remedy


def test_demoting_no_learning_and_stalled_passes_with_warnings() -> None:
    for scenario, name in (("plateau", "no_learning"), ("stall", "stalled")):
        verdict = validate(FIXTURES / scenario / "history.jsonl", warn_on=[name])
        assert verdict.passed and verdict.headline == f"PASSED with warnings ({name})"


def test_demoting_overfit_passes_with_a_warning() -> None:
    verdict = validate(FIXTURES / "overfit" / "history.jsonl", warn_on=["overfit"])
    assert verdict.passed and verdict.failure_class is None
    assert verdict.headline.startswith("PASSED with warnings (overfit)")


def test_mode_max_without_a_training_accuracy_says_overfit_was_not_judged() -> None:
    verdict = validate(FIXTURES / "overfit" / "history.jsonl", val_metric="accuracy", mode="max")
    assert verdict.series["val"]["name"] == "val/accuracy"
    assert verdict.series["train"] is None  # the trainer logs no training accuracy
    assert verdict.not_judged["overfit"] == "no training series to compare with"
    assert verdict.summary_metrics()["best_val_accuracy"] == max(
        r["metrics"]["accuracy"] for r in records("overfit") if r["split"] == "val"
    )
