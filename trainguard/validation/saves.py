"""What the run's checkpoint saves cost, in the verdict; a preemption save that does not fit
the notice is a warning.

The runtime records each save (bytes, seconds, the preemption notice the job was given) in the
history (:mod:`~trainguard.runtime.save_cost`); :func:`account_for_saves` sums them up
(:class:`~trainguard.save_fit.SaveFit`: the median and slowest save, MB/s, the interval between
saves — the work a preemption loses when its save cannot finish — and whether a typical save fits
the notice). A save that does not fit is a ``preemption`` warning with the fixes, never a failure:
the run itself went well, its next preemption is what would cost. A history with no save records
(another format, a run that saved nothing through trainguard) gets nothing said.
"""

from __future__ import annotations

import dataclasses

from trainguard.choices import Severity
from trainguard.runtime.save_cost import SAVE_SPLIT, fixes_sentence, misfit_reason
from trainguard.save_fit import SaveFit, recorded_notice
from trainguard.validation.verdict import Finding, Verdict

__all__ = ["account_for_saves", "PREEMPTION_CLASS"]

PREEMPTION_CLASS = "preemption"  # the failure class a save that cannot finish in time leads to


def account_for_saves(verdict: Verdict) -> Verdict:
    """``verdict`` with its history's checkpoint saves summed up, and a ``preemption`` warning
    when a typical save does not fit the notice the job was given."""
    records = verdict.history.saves if verdict.history is not None else []
    if not records:
        return verdict
    fit = SaveFit.from_records(records, recorded_notice(records))
    if not fit.saves:
        return dataclasses.replace(verdict, saves=None)
    findings = list(verdict.findings)
    if fit.fits is False and fit.notice_s is not None:
        findings.append(_misfit(fit, records))
    return dataclasses.replace(verdict, saves=fit, findings=findings)


def _misfit(fit: SaveFit, records: list[dict]) -> Finding:
    steps = [float(r["step"]) for r in records if isinstance(r.get("step"), int | float)]
    assert fit.notice_s is not None  # checked by the caller
    message = misfit_reason(fit.median_seconds, fit.notice_s, fit.interval_s) + (
        f" (slowest save {fit.max_seconds:.1f} s, {fit.median_mb_s:,.1f} MB/s, "
        f"{fit.last_bytes / 1e6:,.1f} MB)"
    )
    evidence: dict[str, float] = {
        "saves": float(fit.saves),
        "median_seconds": fit.median_seconds,
        "max_seconds": fit.max_seconds,
        "mb_s": fit.median_mb_s,
        "bytes": float(fit.last_bytes),
        "notice_s": fit.notice_s,
    }
    if fit.interval_s is not None:
        evidence["interval_s"] = fit.interval_s
    return Finding(
        PREEMPTION_CLASS,
        Severity.WARN,
        (min(steps, default=0.0), max(steps, default=0.0)),
        evidence,
        message,
        fixes_sentence(),
        SAVE_SPLIT,
    )
