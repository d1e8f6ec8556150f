"""Post-training validation: read a run's history, judge its curves, and say what to do.

Typical use::

    from trainguard.validation import validate
    verdict = validate("gs://bucket/run/history.jsonl")
    if not verdict.passed:
        print(verdict.failure_class, verdict.findings[0].remedy)

Readers (``readers``) turn JSONL, Keras/Lightning CSV and TensorBoard logs into a
:class:`History`; rules (``rules``) are pure functions over arrays with their thresholds in
:class:`RuleConfig`; ``validate`` (``engine``) runs them into a :class:`Verdict`, which renders
itself as JSON, Markdown and HTML (``report``).
"""

from __future__ import annotations

from trainguard.validation.engine import resolve_severities, validate
from trainguard.validation.history import History, Series, select_series
from trainguard.validation.readers import FORMATS, detect_format, load_history
from trainguard.validation.report import plot_png, render_plot
from trainguard.validation.rules import DEFAULT_SEVERITY, RULE_ORDER, RuleConfig
from trainguard.validation.verdict import Finding, Verdict

__all__ = [
    "validate",
    "Verdict",
    "Finding",
    "RuleConfig",
    "load_history",
    "History",
    "Series",
    "render_plot",
    "plot_png",
    "select_series",
    "detect_format",
    "resolve_severities",
    "FORMATS",
    "DEFAULT_SEVERITY",
    "RULE_ORDER",
]
