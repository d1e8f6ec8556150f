"""The verdict on a training run: pass or fail, the findings behind it, and what was read.

A :class:`Verdict` is what the CLI prints and writes as JSON, what the KFP component turns into
Metrics, a Markdown and an HTML report (:mod:`~trainguard.validation.render`, which imports this
module and never the other way round), and the "blessing" a pipeline branches on. Everything
``to_dict`` returns is JSON-safe: non-finite numbers become None.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from trainguard.choices import Severity
from trainguard.save_fit import SaveFit

if TYPE_CHECKING:
    from trainguard.validation.history import History

__all__ = ["Finding", "Verdict", "json_safe"]


def json_safe(value: Any) -> Any:
    """``value`` with numpy scalars made Python numbers and NaN/Inf made None, recursively."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return int(value) if value.is_integer() and abs(value) < 2**53 else value
    return str(value)


@dataclass(frozen=True)
class Finding:
    """One problem seen in the curves.

    Attributes:
        failure_class: a class of ``trainguard.failure_classes`` (``overfit``, ``non_finite``...).
        severity: :class:`~trainguard.choices.Severity` (``fail`` or ``warn``).
        step_range: (first step, last step) where it shows.
        evidence: the numbers behind it.
        message: one line saying what happened.
        remedy: the first thing to try (for overfit, it names the best validation step).
        series: the name of the series it was seen in.
    """

    failure_class: str
    severity: Severity
    step_range: tuple[float, float]
    evidence: dict[str, float]
    message: str
    remedy: str
    series: str = ""

    def to_dict(self) -> dict:
        """JSON-safe form."""
        return json_safe(
            {
                "failure_class": self.failure_class,
                "severity": str(self.severity),
                "step_range": list(self.step_range),
                "evidence": self.evidence,
                "message": self.message,
                "remedy": self.remedy,
                "series": self.series,
            }
        )


@dataclass
class Verdict:
    """Whether a run is fit to ship, and why.

    Attributes:
        passed: False when any finding has severity ``fail``.
        failure_class: the first failing finding's class (in rule order), or None.
        findings: fails first, then warnings, each group in rule order.
        series: what was read: the training and validation series judged (name, points, steps),
            every series available, the format, the source, the mode, the x axis.
        not_judged: rule -> why it could not judge on the primary pair (too few points, no
            validation series); the other pairs' reasons are in ``series["pairs"]``.
        notes: what the reader skipped or repaired.
        thresholds: the thresholds used.
        severities: the severity of each class used.
        summary: finite numbers for KFP Metrics (see :meth:`summary_metrics`).
        gates: each quality gate judged (gate, series, value, step, passed), missed or not.
        undecided: when no rule could judge anything (a 1-point history), what was found and
            what to log; None when the verdict rests on something. The CLI and the component
            turn it into bad input (exit 2) rather than a silent pass.
        saves: the checkpoint saves the history recorded: their cost, the work a preemption
            would lose, whether a preemption save fits the notice (None: no save recorded).
    """

    passed: bool
    failure_class: str | None
    findings: list[Finding]
    series: dict[str, Any]
    not_judged: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    thresholds: dict[str, float | None] = field(default_factory=dict)
    severities: dict[str, Severity] = field(default_factory=dict)
    summary: dict[str, float] = field(default_factory=dict)
    gates: list[dict[str, Any]] = field(default_factory=list)
    undecided: str | None = None
    saves: SaveFit | None = None
    history: History | None = field(default=None, repr=False, compare=False)

    @property
    def failures(self) -> list[Finding]:
        """Findings with severity ``fail``."""
        return [f for f in self.findings if f.severity == Severity.FAIL]

    @property
    def warnings(self) -> list[Finding]:
        """Findings with severity ``warn``."""
        return [f for f in self.findings if f.severity == Severity.WARN]

    @property
    def judged(self) -> bool:
        """Whether any rule or gate could judge the history (see ``undecided``)."""
        return self.undecided is None

    @property
    def headline(self) -> str:
        """One line naming the worst finding: FAILED (class): message [and how many more]."""
        if not self.passed:
            first, rest = self.failures[0], self.failures[1:]
            more = ""
            if rest:
                named = ", ".join(dict.fromkeys(f"{f.failure_class} in {f.series}" for f in rest))
                more = f" [{len(rest)} more failing: {named}]"
            return f"FAILED ({first.failure_class}): {first.message}{more}"
        if self.undecided:
            return f"NOT JUDGED: {self.undecided}"
        if self.warnings:
            classes = ", ".join(dict.fromkeys(f.failure_class for f in self.warnings))
            return f"PASSED with warnings ({classes})"
        gates = f"; {len(self.gates)} gate(s) met" if self.gates else ""
        return f"PASSED: no divergence, instability or overfit found{gates}"

    def to_dict(self) -> dict:
        """The machine-readable verdict (what ``--json`` writes), JSON-safe."""
        return json_safe(
            {
                "passed": self.passed,
                "failure_class": self.failure_class,
                "headline": self.headline,
                "findings": [f.to_dict() for f in self.findings],
                "series": self.series,
                "not_judged": self.not_judged,
                "notes": self.notes,
                "thresholds": self.thresholds,
                "severities": {k: str(v) for k, v in self.severities.items()},
                "gates": self.gates,
                "undecided": self.undecided,
                "checkpoint_saves": self.saves.to_dict() if self.saves is not None else None,
                "summary_metrics": self.summary_metrics(),
            }
        )

    def summary_metrics(self) -> dict[str, float]:
        """Numbers for KFP Metrics, finite only.

        Keys (``<metric>`` is the base metric judged, ``loss`` by default): ``best_step`` (the
        best validation step), ``best_val_<metric>``, ``final_train_<metric>`` (the mean over the
        last validation interval, i.e. the last epoch, when there is validation; else the last
        value), ``final_val_<metric>``, ``final_gap`` (final validation minus final training),
        ``train_points``, ``val_points``, ``failed_findings``, ``warned_findings``, with gates
        ``gates_missed``, and with checkpoint saves recorded ``save_median_seconds``,
        ``save_max_seconds``, ``save_mb_s``, ``save_interval_seconds`` (with two saves or more),
        ``preemption_notice_seconds`` and ``preemption_save_fits`` (1 or 0; with a known notice).
        """
        out = {
            k: float(v)
            for k, v in self.summary.items()
            if isinstance(v, int | float | np.generic) and math.isfinite(float(v))
        }
        out["failed_findings"] = float(len(self.failures))
        out["warned_findings"] = float(len(self.warnings))
        if self.gates:
            out["gates_missed"] = float(sum(not g["passed"] for g in self.gates))
        fit = self.saves
        if fit is not None and fit.saves:
            out["save_median_seconds"] = fit.median_seconds
            out["save_max_seconds"] = fit.max_seconds
            out["save_mb_s"] = fit.median_mb_s
            if fit.interval_s is not None:
                out["save_interval_seconds"] = fit.interval_s
            if fit.notice_s is not None and fit.fits is not None:
                out["preemption_notice_seconds"] = fit.notice_s
                out["preemption_save_fits"] = float(fit.fits)
        return out
