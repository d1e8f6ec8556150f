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
    assert set(finding) >= {"failure_class", "severity", "step_range", "evidence", "message",
                            "remedy"}
    assert finding["step_range"] == [15, 69]
    assert back["series"]["train"]["name"] == "train/loss"
    assert back["series"]["train"]["finite_points"] < back["series"]["train"]["points"]
    assert back["not_judged"] == {"overfit": "val/loss: 0 validation points (needs 5)"}


def test_summary_metrics_are_finite_numbers(nan_verdict: Verdict,
                                            overfit_verdict: Verdict) -> None:
    for verdict in (nan_verdict, overfit_verdict):
        metrics = verdict.summary_metrics()
        assert all(isinstance(v, float) and np.isfinite(v) for v in metrics.values())
    metrics = overfit_verdict.summary_metrics()
    assert {"best_step", "best_val_loss", "final_train_loss", "final_val_loss",
            "final_gap"} <= set(metrics)
    assert metrics["final_gap"] == pytest.approx(metrics["final_val_loss"]
                                                 - metrics["final_train_loss"])
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
    hostile = Finding(finding.failure_class, finding.severity, finding.step_range,
                      finding.evidence, "<script>alert(1)</script>", finding.remedy, "x")
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
    assert plateau.headline == "PASSED with warnings (plateau)"
    healthy = validate(FIXTURES / "healthy" / "metrics.csv")
    assert healthy.headline.startswith("PASSED: no divergence")


def test_remedies_come_from_the_failure_class_table() -> None:
    for scenario in ("nan", "explode", "oscillate", "plateau", "stall"):
        verdict = validate(FIXTURES / scenario / "history.jsonl")
        for finding in verdict.findings:
            assert finding.remedy == failure_class(finding.failure_class).remedy
