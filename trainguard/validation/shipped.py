"""An overfit the shipped model did not suffer is a warning, not a failure.

When the train task ships the checkpoint nearest the best validation step (``--model best``, and
the guard's early stop on a confirmed overfit), the validation curve rising after that step no
longer describes the model that ships: early stopping, the first remedy for overfitting, has
already been applied. :func:`account_for_shipped_model` keeps the finding — the verdict still
says ``overfit`` — but as a warning, naming the shipped step, when the validation value at that
step is within ``overfit_min_rise`` of the best.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from trainguard.choices import Severity
from trainguard.validation.verdict import Finding, Verdict

__all__ = ["account_for_shipped_model"]


def account_for_shipped_model(verdict: Verdict, shipped_step: float | None, min_rise: float) -> Verdict:
    """``verdict`` with each failing overfit the shipped checkpoint escaped made a warning.

    Args:
        verdict: the verdict on the whole history.
        shipped_step: the step of the checkpoint the train task shipped (None or < 0: unknown,
            nothing changes).
        min_rise: the overfit threshold (``overfit_min_rise``): the shipped step's validation
            value may sit this much (relative) off the best and still count as the best.
    """
    if shipped_step is None or shipped_step < 0 or verdict.history is None:
        return verdict
    changed = [_mitigated(f, shipped_step, min_rise, verdict) for f in verdict.findings]
    if changed == verdict.findings:
        return verdict
    findings = sorted(changed, key=lambda f: f.severity != Severity.FAIL)
    failing = [f for f in findings if f.severity == Severity.FAIL]
    return dataclasses.replace(
        verdict,
        findings=findings,
        passed=not failing,
        failure_class=failing[0].failure_class if failing else None,
    )


def _mitigated(finding: Finding, shipped_step: float, min_rise: float, verdict: Verdict) -> Finding:
    if finding.failure_class != "overfit" or finding.severity != Severity.FAIL:
        return finding
    series = verdict.history.series.get(finding.series) if verdict.history else None
    best = finding.evidence.get("best_value")
    if series is None or best is None or not np.isfinite(best):
        return finding
    ok = np.isfinite(series.values) & (series.steps <= shipped_step)
    if not ok.any():
        return finding
    value = float(series.values[ok][-1])  # the last evaluation at or before the shipped step
    off = abs(value - best) / max(abs(best), 1e-12)
    if off > min_rise:
        return finding
    step = int(shipped_step) if float(shipped_step).is_integer() else shipped_step
    note = (
        f" — mitigated: the model shipped is the checkpoint at step {step} ({finding.series} "
        f"{value:.4g}, {off:.0%} off its best), so early stopping already applies"
    )
    evidence = {**finding.evidence, "shipped_step": float(shipped_step), "shipped_value": value}
    return dataclasses.replace(
        finding, severity=Severity.WARN, message=finding.message + note, evidence=evidence
    )
