"""Which findings stop a running job: the verdict of :func:`trainguard.validation.validate` on the
history so far, read through the guard mode's table.

There is no second copy of any rule here: the guard asks ``validate`` — the very function that
judges a finished run — about the run so far, and acts on the classes its mode names.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainguard.choices import GuardMode
from trainguard.errors import ConfigError, HistoryError
from trainguard.validation import validate
from trainguard.validation.history import History
from trainguard.validation.verdict import Finding, Verdict

__all__ = ["STOP_CLASSES", "EARLY_STOP_CLASSES", "Judgement", "judge"]

# Findings that fail the job: the guard cancels it and the train task exits 1.
STOP_CLASSES: dict[GuardMode, tuple[str, ...]] = {
    GuardMode.OFF: (),
    GuardMode.NONFINITE: ("non_finite",),
    GuardMode.FAIL: ("non_finite", "divergence", "instability"),
}
# Findings that end the job as success-with-finding: the best model is already saved.
EARLY_STOP_CLASSES: dict[GuardMode, tuple[str, ...]] = {
    GuardMode.OFF: (),
    GuardMode.NONFINITE: (),
    GuardMode.FAIL: ("overfit",),
}


@dataclass(frozen=True)
class Judgement:
    """The guard's reading of one verdict.

    Attributes:
        finding: the finding that stops the job, or None.
        success: True when that stop is an early stop (overfit), not a failure.
        verdict: the verdict (None when the history could not be judged yet).
        not_judged: why it could not be judged yet ('' when it was).
    """

    finding: Finding | None
    success: bool = False
    verdict: Verdict | None = None
    not_judged: str = ""


def judge(
    history: History,
    mode: GuardMode,
    *,
    thresholds: dict | None = None,
    train_metric: str | None = None,
    val_metric: str | None = None,
    metric_mode: str = "min",
) -> Judgement:
    """Judges the history so far.

    A named metric the history lacks, or a history with no loss series yet, is "not judged
    yet", not an error: the run may log it later.
    """
    try:
        verdict = validate(
            history, train_metric=train_metric, val_metric=val_metric, mode=metric_mode, thresholds=thresholds
        )
    except HistoryError as exc:  # no loss series yet (only the learning rate logged so far…)
        return Judgement(None, not_judged=str(exc))
    except ConfigError as exc:
        # The options were checked before the job started (HistoryGuard.check), so this is a
        # named metric the run has not logged yet.
        return Judgement(None, not_judged=str(exc))
    by_class = {f.failure_class: f for f in reversed(verdict.findings)}
    for name in STOP_CLASSES[mode]:
        if name in by_class:
            return Judgement(by_class[name], False, verdict)
    for name in EARLY_STOP_CLASSES[mode]:
        if name in by_class:
            return Judgement(by_class[name], True, verdict)
    return Judgement(None, False, verdict)
