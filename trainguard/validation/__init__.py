"""Post-training validation: read a run's history, judge its curves, and say what to do.

Typical use::

    from trainguard.validation import render_markdown, validate
    verdict = validate("gs://bucket/run/history.jsonl", gates=["val_accuracy>=0.9"])
    if not verdict.passed:
        print(verdict.failure_class, verdict.findings[0].remedy)
    print(render_markdown(verdict))

Readers (``readers``) turn JSONL, Keras/Lightning CSV and TensorBoard logs into a
:class:`History`; ``pairs`` pairs each metric's training and validation series; rules (``rules``)
are pure functions over arrays with their thresholds in :class:`RuleConfig` (``thresholds``, the
one table) and their statistics in ``stats``; ``gates`` holds quality gates; ``validate``
(``engine``) runs them into a :class:`Verdict`, which ``render`` turns into Markdown, HTML and a
plot.
"""

from __future__ import annotations

from trainguard.validation.engine import resolve_severities, validate
from trainguard.validation.gates import Gate, parse_gates
from trainguard.validation.history import History, Series, select_series
from trainguard.validation.pairs import Pair, find_pairs, infer_mode
from trainguard.validation.readers import FORMATS, detect_format, load_history
from trainguard.validation.render import plot_png, render_html, render_markdown, render_plot
from trainguard.validation.rules import DEFAULT_SEVERITY, RULE_ORDER
from trainguard.validation.thresholds import RuleConfig, parse_assignments
from trainguard.validation.verdict import Finding, Verdict

__all__ = [
    "validate",
    "Verdict",
    "Finding",
    "RuleConfig",
    "Gate",
    "Pair",
    "load_history",
    "History",
    "Series",
    "render_markdown",
    "render_html",
    "render_plot",
    "plot_png",
    "select_series",
    "find_pairs",
    "infer_mode",
    "parse_gates",
    "parse_assignments",
    "detect_format",
    "resolve_severities",
    "FORMATS",
    "DEFAULT_SEVERITY",
    "RULE_ORDER",
]
