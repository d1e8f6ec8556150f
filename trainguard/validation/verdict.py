"""The verdict on a training run: pass or fail, the findings behind it, and what was read.

A :class:`Verdict` is what the CLI prints and writes as JSON, what the KFP component turns into
Metrics, a Markdown and an HTML report, and the "blessing" a pipeline branches on. Everything
``to_dict`` returns is JSON-safe: non-finite numbers become None.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

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
        severity: ``fail`` or ``warn``.
        step_range: (first step, last step) where it shows.
        evidence: the numbers behind it.
        message: one line saying what happened.
        remedy: the first thing to try (for overfit, it names the best validation step).
        series: the name of the series it was seen in.
    """

    failure_class: str
    severity: str
    step_range: tuple[float, float]
    evidence: dict[str, float]
    message: str
    remedy: str
    series: str = ""

    def to_dict(self) -> dict:
        """JSON-safe form."""
        return json_safe({
            "failure_class": self.failure_class, "severity": self.severity,
            "step_range": list(self.step_range), "evidence": self.evidence,
            "message": self.message, "remedy": self.remedy, "series": self.series,
        })


@dataclass
class Verdict:
    """Whether a run is fit to ship, and why.

    Attributes:
        passed: False when any finding has severity ``fail``.
        failure_class: the first failing finding's class (in rule order), or None.
        findings: fails first, then warnings, each group in rule order.
        series: what was read: the training and validation series judged (name, points, steps),
            every series available, the format, the source, the mode, the x axis.
        not_judged: rule -> why it could not judge (too few points, no validation series).
        notes: what the reader skipped or repaired.
        thresholds: the thresholds used.
        severities: the severity of each class used.
        summary: finite numbers for KFP Metrics (see :meth:`summary_metrics`).
    """

    passed: bool
    failure_class: str | None
    findings: list[Finding]
    series: dict[str, Any]
    not_judged: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    thresholds: dict[str, float | None] = field(default_factory=dict)
    severities: dict[str, str] = field(default_factory=dict)
    summary: dict[str, float] = field(default_factory=dict)
    history: History | None = field(default=None, repr=False, compare=False)

    @property
    def failures(self) -> list[Finding]:
        """Findings with severity ``fail``."""
        return [f for f in self.findings if f.severity == "fail"]

    @property
    def warnings(self) -> list[Finding]:
        """Findings with severity ``warn``."""
        return [f for f in self.findings if f.severity == "warn"]

    @property
    def headline(self) -> str:
        """One line: PASSED / PASSED with warnings / FAILED (class): message."""
        if not self.passed:
            first = self.failures[0]
            return f"FAILED ({first.failure_class}): {first.message}"
        if self.warnings:
            classes = ", ".join(dict.fromkeys(f.failure_class for f in self.warnings))
            return f"PASSED with warnings ({classes})"
        return "PASSED: no divergence, instability or overfit found"

    def to_dict(self) -> dict:
        """The machine-readable verdict (what ``--json`` writes), JSON-safe."""
        return json_safe({
            "passed": self.passed,
            "failure_class": self.failure_class,
            "headline": self.headline,
            "findings": [f.to_dict() for f in self.findings],
            "series": self.series,
            "not_judged": self.not_judged,
            "notes": self.notes,
            "thresholds": self.thresholds,
            "severities": self.severities,
            "summary_metrics": self.summary_metrics(),
        })

    def summary_metrics(self) -> dict[str, float]:
        """Numbers for KFP Metrics, finite only.

        Keys (``<metric>`` is the base metric judged, ``loss`` by default): ``best_step`` (the
        best validation step), ``best_val_<metric>``, ``final_train_<metric>`` (the mean over the
        last validation interval, i.e. the last epoch, when there is validation; else the last
        value), ``final_val_<metric>``, ``final_gap`` (final validation minus final training),
        ``train_points``, ``val_points``, ``failed_findings``, ``warned_findings``.
        """
        out = {k: float(v) for k, v in self.summary.items()
               if isinstance(v, int | float | np.generic) and math.isfinite(float(v))}
        out["failed_findings"] = float(len(self.failures))
        out["warned_findings"] = float(len(self.warnings))
        return out

    def to_markdown(self) -> str:
        """A Markdown report: verdict, findings with remedy and trap, series read, not judged."""
        from trainguard.validation.report import render_markdown

        return render_markdown(self)

    def to_html(self, plot_png: bytes | None = None) -> str:
        """A self-contained HTML report; ``plot_png`` is embedded as a base64 data URI."""
        from trainguard.validation.report import render_html

        return render_html(self, plot_png)
