"""An overfit the shipped model escaped is a warning; one it did not escape still fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainguard.choices import Severity
from trainguard.validation import validate

OVERFIT = Path(__file__).resolve().parents[2] / "fixtures" / "histories" / "overfit"


@pytest.fixture(scope="module")
def plain():
    verdict = validate(OVERFIT / "history.jsonl")
    assert not verdict.passed and verdict.failure_class == "overfit"
    return verdict


def test_the_best_checkpoint_shipped_makes_the_overfit_a_named_warning(plain):
    best = plain.findings[0].evidence["best_step"]
    verdict = validate(OVERFIT / "history.jsonl", shipped_step=best)
    assert verdict.passed and verdict.failure_class is None
    (finding,) = [f for f in verdict.findings if f.failure_class == "overfit"]
    assert finding.severity == Severity.WARN
    assert f"checkpoint at step {int(best)}" in finding.message and "mitigated" in finding.message
    assert finding.evidence["shipped_step"] == best


def test_a_checkpoint_after_the_rise_or_an_unknown_one_still_fails(plain):
    last = plain.findings[0].step_range[1]
    for shipped in (last, None, -1):
        verdict = validate(OVERFIT / "history.jsonl", shipped_step=shipped)
        assert not verdict.passed and verdict.failure_class == "overfit", shipped


def test_other_failures_are_never_mitigated():
    nan = OVERFIT.parent / "nan" / "history.jsonl"
    verdict = validate(nan, shipped_step=5)
    assert not verdict.passed and verdict.failure_class == "non_finite"


def test_validate_on_the_command_line_takes_the_shipped_step(plain):
    import subprocess
    import sys

    best = int(plain.findings[0].evidence["best_step"])
    argv = [sys.executable, "-m", "trainguard.cli", "validate", str(OVERFIT / "history.jsonl")]
    failed = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    shipped = subprocess.run(
        [*argv, "--shipped-step", str(best)], capture_output=True, text=True, timeout=120
    )
    assert failed.returncode == 1 and shipped.returncode == 0, shipped.stdout + shipped.stderr
    assert f"checkpoint at step {best}" in shipped.stdout
