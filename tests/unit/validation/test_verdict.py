"""What the verdict says and writes: JSON, Markdown, HTML, Metrics, the plot."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trainguard.failure_classes import get as failure_class
from trainguard.validation import (
    Finding,
    Verdict,
    load_history,
    plot_png,
    render_html,
    render_markdown,
    render_plot,
    validate,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "histories"
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def nan_verdict() -> Verdict:
    return validate(FIXTURES / "nan" / "history.jsonl")


@pytest.fixture(scope="module")
def overfit_verdict() -> Verdict:
    return validate(FIXTURES / "overfit" / "history.jsonl")


def test_json_is_strict_json_even_with_nan(nan_verdict: Verdict) -> None:
    data = nan_verdict.to_dict()
    text = json.dumps(data, allow_nan=False)  # raises on NaN/Inf
    back = json.loads(text)
    assert back["passed"] is False and back["failure_class"] == "non_finite"
    finding = back["findings"][0]
    assert set(finding) >= {"failure_class", "severity", "step_range", "evidence", "message", "remedy"}
    assert finding["step_range"] == [15, 69]
    assert back["series"]["train"]["name"] == "train/loss"
    assert back["series"]["train"]["finite_points"] < back["series"]["train"]["points"]
    assert back["not_judged"] == {"overfit": "val/loss: 0 validation points (needs 5)"}


def test_summary_metrics_are_finite_numbers(nan_verdict: Verdict, overfit_verdict: Verdict) -> None:
    for verdict in (nan_verdict, overfit_verdict):
        metrics = verdict.summary_metrics()
        assert all(isinstance(v, float) and np.isfinite(v) for v in metrics.values())
    metrics = overfit_verdict.summary_metrics()
    assert {"best_step", "best_val_loss", "final_train_loss", "final_val_loss", "final_gap"} <= set(metrics)
    assert metrics["final_gap"] == pytest.approx(metrics["final_val_loss"] - metrics["final_train_loss"])
    assert "best_val_loss" not in nan_verdict.summary_metrics()  # all validation points NaN


def test_markdown_gives_remedy_trap_and_what_was_read(overfit_verdict: Verdict) -> None:
    text = render_markdown(overfit_verdict)
    assert text.startswith("# Training validation: FAILED")
    assert "early stopping at the best validation step, 81" in text
    assert failure_class("overfit").trap in text
    assert "`val/loss`: 60 points" in text
    assert "| best_step | 81 |" in text


def test_html_is_self_contained_and_escaped(overfit_verdict: Verdict) -> None:
    finding = overfit_verdict.findings[0]
    hostile = Finding(
        finding.failure_class,
        finding.severity,
        finding.step_range,
        finding.evidence,
        "<script>alert(1)</script>",
        finding.remedy,
        "x",
    )
    verdict = Verdict(False, "overfit", [hostile], overfit_verdict.series)
    page = render_html(verdict, PNG + b"rest")
    assert "<script>alert" not in page and "&lt;script&gt;" in page
    assert "src='data:image/png;base64,iVBORw0KGgpyZXN0'" in page
    assert "http" not in page  # nothing fetched from elsewhere


def test_plot_of_a_verdict_and_of_a_history(tmp_path, overfit_verdict: Verdict) -> None:
    out = tmp_path / "curves.png"
    render_plot(overfit_verdict, out)
    assert out.read_bytes().startswith(PNG)
    assert plot_png(load_history(FIXTURES / "healthy" / "keras_log.csv")).startswith(PNG)


def test_plot_of_a_long_history_is_thinned(tmp_path) -> None:
    from trainguard.validation.render import _thin

    steps = np.arange(1_000_000, dtype=float)
    values = np.sin(steps / 1000)
    values[500_000] = 50.0  # a spike must survive thinning
    xs, ys = _thin(steps, values)
    assert xs.size <= 4000 and ys.max() == 50.0


def test_headlines(nan_verdict: Verdict) -> None:
    assert nan_verdict.headline.startswith("FAILED (non_finite): train/loss became NaN at step 15")
    plateau = validate(FIXTURES / "plateau" / "keras_log.csv")
    assert plateau.headline.startswith("FAILED (no_learning): val_loss stayed at chance")
    healthy = validate(FIXTURES / "healthy" / "metrics.csv")
    assert healthy.headline.startswith("PASSED: no divergence")


def test_remedies_come_from_the_failure_class_table() -> None:
    for scenario in ("nan", "explode", "oscillate", "plateau", "stall"):
        verdict = validate(FIXTURES / scenario / "history.jsonl")
        for finding in verdict.findings:
            assert finding.remedy == failure_class(finding.failure_class).remedy


def test_validation_modules_import_each_other_without_a_cycle() -> None:
    import ast

    import trainguard.validation as package

    folder = Path(package.__file__).parent
    graph: dict[str, set[str]] = {}
    for path in folder.glob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):  # function-level imports count too
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "trainguard.validation":
                    names |= {a.name for a in node.names}
                elif node.module.startswith("trainguard.validation."):
                    names.add(node.module.rsplit(".", 1)[1])
        graph[path.stem] = {n for n in names if (folder / f"{n}.py").exists()}
    assert "render" not in graph["verdict"] and "verdict" in graph["render"]
    assert not (folder / "report.py").exists()  # one report.py in the project: preflight's

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(
            n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in graph.get(start, ())
        )

    cycles = [m for m in graph if m != "__init__" and reaches(m, m, set())]
    assert cycles == []


def test_the_headline_names_the_worst_and_counts_the_rest() -> None:
    verdict = validate(FIXTURES / "explode" / "history.jsonl")
    assert [f.series for f in verdict.findings] == ["train/loss", "val/accuracy"]
    assert verdict.headline.startswith("FAILED (divergence): train/loss rose from its best")
    assert verdict.headline.endswith("[1 more failing: divergence in val/accuracy]")
    data = verdict.to_dict()
    assert data["findings"][0]["severity"] == "fail" and data["severities"]["plateau"] == "warn"


def test_every_pair_is_in_the_report() -> None:
    verdict = validate(FIXTURES / "keras_overfit" / "history.jsonl")
    text = render_markdown(verdict)
    assert "- Also judged: accuracy (max): `train/accuracy` / `val/accuracy`" in text
    assert [(f.failure_class, f.series) for f in verdict.findings] == [
        ("overfit", "val/loss"),
        ("overfit", "val/accuracy"),
    ]
    pairs = verdict.to_dict()["series"]["pairs"]
    assert [(p["metric"], p["mode"], p["primary"]) for p in pairs] == [
        ("loss", "min", True),
        ("accuracy", "max", False),
    ]


def test_a_one_point_history_is_bad_input_not_a_pass(tmp_path) -> None:
    from tests.fuzz.contract import assert_contract, run_cli

    path = tmp_path / "history.jsonl"
    path.write_text('{"step": 1, "split": "train", "metrics": {"loss": 2.3}}\n')
    verdict = validate(path)  # the library says so; the guard polls early histories like it
    assert verdict.passed and not verdict.judged
    assert verdict.to_dict()["undecided"] == verdict.undecided
    out = run_cli("validate", path, "--json", tmp_path / "v.json")
    assert_contract(out, max_seconds=120)
    assert out.exit_code == 2
    assert (
        "1 point of train/loss: nothing can be judged; log at least 4 finite points (8 for "
        "every rule, and 5 validation evaluations for overfit)"
    ) in out.output
    assert not (tmp_path / "v.json").exists()
    # once enough is logged, the same file is judged
    with path.open("a") as handle:
        for step in range(2, 10):
            handle.write(f'{{"step": {step}, "split": "train", "metrics": {{"loss": {2.3 / step}}}}}\n')
    assert run_cli("validate", path).exit_code == 0


def test_a_nan_in_a_short_history_is_still_judged() -> None:
    from trainguard.validation.history import History, SeriesParts

    part = SeriesParts("loss", "train")
    part.add([1.0, 2.0], [2.3, np.nan])
    verdict = validate(History.build({"train/loss": part}, "jsonl", "<two points>"))
    assert verdict.judged and verdict.failure_class == "non_finite"


def test_a_warm_up_past_the_end_of_the_history_says_so_not_zero_finite_points():
    from trainguard.errors import HistoryError
    from trainguard.stages import validate_stage

    healthy = Path(__file__).resolve().parents[2] / "fixtures" / "histories" / "healthy" / "history.jsonl"
    with pytest.raises(HistoryError) as info:
        validate_stage(str(healthy), thresholds="warmup_steps=100000")
    message = str(info.value)
    assert "every point is before step 100000" in message and "the history ends at step 460" in message
    assert "0 finite points" not in message and "lower warmup_steps" in message
