"""Quality gates: parsed strictly, read at the best step or the last, missed gates named with where."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.fuzz.contract import assert_contract, run_cli
from trainguard.errors import ConfigError
from trainguard.validation import load_history, parse_gates, render_markdown, validate

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "histories"
OVERFIT = FIXTURES / "overfit" / "history.jsonl"


def records(scenario: str, split: str) -> list[dict]:
    text = (FIXTURES / scenario / "history.jsonl").read_text()
    return [r for r in map(json.loads, text.splitlines()) if r["split"] == split]


@pytest.mark.parametrize(
    "text,metric,op,bound,at",
    [
        ("val_accuracy>=0.9", "val_accuracy", ">=", 0.9, "best"),
        (" val/loss <= 0.3 @last", "val/loss", "<=", 0.3, "last"),
        ("accuracy>0.5@BEST", "accuracy", ">", 0.5, "best"),
        ("loss<1e-2", "loss", "<", 0.01, "best"),
    ],
)
def test_gate_forms(text: str, metric: str, op: str, bound: float, at: str) -> None:
    (gate,) = parse_gates([text])
    assert (gate.metric, gate.op, gate.bound, str(gate.at)) == (metric, op, bound, at)


def test_the_default_place_and_several_gates_in_one_string() -> None:
    gates = parse_gates("val_accuracy>=0.9, val_loss<=0.3@best", default_at="last")
    assert [str(g.at) for g in gates] == ["last", "best"]


@pytest.mark.parametrize(
    "text,needle",
    [
        ("val_accuracy=>0.9", "use METRIC>=VALUE"),
        ("val_accuracy>=", "use METRIC>=VALUE"),
        (">=0.9", "use METRIC>=VALUE"),
        ("val_accuracy == 0.9", "use METRIC>=VALUE"),
        ("val_accuracy>=high", "'high' is not a finite number"),
        ("val_accuracy>=nan", "'nan' is not a finite number"),
        ("val_accuracy>=0.9@middle", "'middle' is not one of: best, last"),
    ],
)
def test_malformed_gates_say_the_form(text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        parse_gates([text])


def test_a_gate_at_the_best_step_reads_the_checkpoint_that_ships() -> None:
    val = records("overfit", "val")
    best = min(val, key=lambda r: r["metrics"]["loss"])
    verdict = validate(OVERFIT, gates=["val_accuracy>=0.99"], warn_on=["overfit"])
    assert not verdict.passed and verdict.failure_class == "gate"
    (gate,) = verdict.gates
    assert gate["step"] == best["step"] and gate["series"] == "val/accuracy"
    assert gate["value"] == pytest.approx(best["metrics"]["accuracy"])
    finding = verdict.findings[0]
    assert finding.failure_class == "gate" and finding.step_range == (best["step"], best["step"])
    assert finding.message == (
        f"gate val_accuracy >= 0.99 missed: val/accuracy was {best['metrics']['accuracy']:.4g} "
        f"at step {best['step']} (the best validation step)"
    )
    assert "train longer or tune" in finding.remedy


def test_a_gate_at_the_last_value() -> None:
    last = records("overfit", "val")[-1]
    verdict = validate(OVERFIT, gates=["val_loss<=0.5@last"], warn_on=["overfit"])
    (gate,) = verdict.gates
    assert (gate["step"], gate["passed"]) == (last["step"], False)
    assert gate["value"] == pytest.approx(last["metrics"]["loss"])
    assert "(the last value)" in verdict.findings[0].message


def test_gates_met_pass_and_are_reported() -> None:
    verdict = validate(
        FIXTURES / "healthy" / "history.jsonl", gates=["val_accuracy>=0.9", "val_loss<=0.3@last"]
    )
    assert verdict.passed and [g["passed"] for g in verdict.gates] == [True, True]
    assert verdict.headline.endswith("; 2 gate(s) met")
    text = render_markdown(verdict)
    assert "## Quality gates" in text and "val_accuracy >= 0.9 @best: met" in text
    assert verdict.summary_metrics()["gates_missed"] == 0


def test_an_overfit_is_named_before_the_gate_it_made_the_run_miss() -> None:
    verdict = validate(OVERFIT, gates=["val_loss<=0.5@last"])
    assert verdict.failure_class == "overfit"
    assert verdict.headline.endswith("[1 more failing: gate in val/loss]")


@pytest.mark.parametrize(
    "name,gate,series",
    [
        ("keras_log.csv", "val_accuracy>=0.5", "val_accuracy"),
        ("keras_log.csv", "loss<=9", "loss"),  # Keras' own column: the training loss
        ("tb_keras", "val_accuracy>=0.5", "validation/epoch_accuracy"),
        ("metrics.csv", "val_acc>=0.5", "val_acc"),
        ("history.jsonl", "accuracy>=0.5", "val/accuracy"),  # the only accuracy there is
    ],
)
def test_the_metric_is_found_whatever_the_format_calls_it(name: str, gate: str, series: str) -> None:
    verdict = validate(FIXTURES / "healthy" / name, gates=[gate])
    assert verdict.gates[0]["series"] == series


def test_a_nan_never_clears_a_gate() -> None:
    verdict = validate(FIXTURES / "nan" / "history.jsonl", gates=["val_loss<=1e9@last"])
    assert verdict.gates[0]["passed"] is False and np.isnan(verdict.gates[0]["value"])
    assert json.loads(json.dumps(verdict.to_dict(), allow_nan=False))["gates"][0]["value"] is None


def test_a_gate_on_a_metric_the_history_lacks_names_those_it_has() -> None:
    with pytest.raises(
        ConfigError,
        match="gate metric 'val_f1' is not in .*; the history has: "
        "train/loss, train/lr, val/accuracy, val/loss",
    ):
        validate(FIXTURES / "healthy" / "history.jsonl", gates=["val_f1>=0.8"])


def test_gates_judge_even_a_history_too_short_for_the_rules(tmp_path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"step": 1, "split": "val", "metrics": {"accuracy": 0.7}}\n')
    verdict = validate(path, val_metric="accuracy", gates=["val_accuracy>=0.9"])
    assert verdict.judged and verdict.failure_class == "gate"


# --- the CLI -------------------------------------------------------------------------------------


def test_cli_gate_missed_exits_1_and_says_where(tmp_path) -> None:
    out = run_cli(
        "validate",
        FIXTURES / "healthy" / "history.jsonl",
        "--gate",
        "val_accuracy>=0.99",
        "--gate",
        "val_loss<=0.3@last",
        "--json",
        tmp_path / "v.json",
    )
    assert_contract(out, max_seconds=120)
    assert out.exit_code == 1
    assert "FAILED (gate): gate val_accuracy >= 0.99 missed: val/accuracy was" in out.stdout
    data = json.loads((tmp_path / "v.json").read_text())
    assert [g["passed"] for g in data["gates"]] == [False, True]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--gate", "val_accuracy=>0.9"], "use METRIC>=VALUE"),
        (["--gate", "val_f1>=0.9"], "the history has: train/loss, train/lr, val/accuracy, val/loss"),
        (["--gate-at", "middle"], "--gate-at 'middle' is not one of: best, last"),
        (
            ["--threshold", "patience=5"],
            "unknown threshold(s) patience (did you mean overfit_patience?); valid names: warmup_steps, ",
        ),
        (["--threshold", "overfit_patience"], "use NAME=VALUE; valid names: warmup_steps,"),
        (["--threshold", "overfit_patience=soon"], "overfit_patience must be a number"),
        (["--direction", "accuracy=up"], "is not one of: min, max"),
    ],
)
def test_cli_bad_gates_and_thresholds_exit_2_with_the_valid_names(args, needle) -> None:
    out = run_cli("validate", FIXTURES / "healthy" / "history.jsonl", *args)
    assert_contract(out, max_seconds=120)
    assert out.exit_code == 2 and needle in out.output, out.output


def test_cli_thresholds_change_the_verdict() -> None:
    path = FIXTURES / "overfit" / "history.jsonl"
    assert run_cli("validate", path).exit_code == 1
    out = run_cli(
        "validate", path, "--threshold", "overfit_min_rise=0.5", "--threshold", "overfit_patience=40"
    )
    assert out.exit_code == 0, out.output
    assert "PASSED" in out.stdout


def test_a_history_already_read_takes_gates_too() -> None:
    history = load_history(OVERFIT)  # the in-flight guard passes the growing history itself
    verdict = validate(history, gates=["val_loss<=0.3"], warn_on=["overfit"])
    assert verdict.history is history and verdict.failure_class == "gate"


def test_gates_that_are_not_text_are_bad_input_not_a_type_error():
    with pytest.raises(ConfigError, match="--gate '1'"):
        parse_gates([1, 2])
