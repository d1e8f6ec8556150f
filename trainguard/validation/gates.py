"""Quality gates: absolute bars a metric must clear (``val_accuracy>=0.9``), at the best step or the last.

A gate is ``METRIC OP VALUE[@best|@last]`` with OP one of ``>= <= > <``. ``best`` reads the metric
at the best validation step (the checkpoint that ``--model best`` ships: the last point logged at
or before it); ``last`` reads its last logged value. A missed gate is a finding of class ``gate``
naming the gate, the value reached and where. The metric is found by its name as the history
writes it (``val/accuracy``), by the last part of that name (``accuracy``), or by split and base
metric (``val_accuracy`` finds ``validation/epoch_accuracy``); a gate on a metric that is not there
is bad input.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from trainguard.choices import GateAt, parse
from trainguard.errors import ConfigError
from trainguard.validation.history import History, Series, describe_name

__all__ = ["Gate", "GateResult", "OPERATORS", "parse_gates", "find_metric", "judge_gate"]

OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}

_GATE = re.compile(
    r"^\s*(?P<metric>[^<>=@]+?)\s*(?P<op>>=|<=|>|<)\s*(?P<bound>[^@]+?)\s*"
    r"(?:@\s*(?P<at>\S+))?\s*$"
)
_FORM = "METRIC>=VALUE, METRIC<=VALUE, METRIC>VALUE or METRIC<VALUE, optionally @best or @last"
_SPLIT_WORDS = frozenset(
    ("train", "training", "val", "valid", "validation", "eval", "evaluation", "dev", "test", "testing")
)


@dataclass(frozen=True)
class Gate:
    """One bar: ``metric op bound``, read at ``at``."""

    metric: str
    op: str
    bound: float
    at: GateAt
    text: str

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.bound:g} @{self.at}"

    def holds(self, value: float) -> bool:
        """Whether ``value`` clears the bar (NaN never does)."""
        return math.isfinite(value) and OPERATORS[self.op](value, self.bound)


@dataclass(frozen=True)
class GateResult:
    """A gate judged: the series read, the value, the step it was read at, pass or not."""

    gate: Gate
    series: str
    value: float
    step: float
    passed: bool

    def to_dict(self) -> dict:
        """JSON-ready (NaN stays a float here; the verdict makes it None)."""
        return {
            "gate": str(self.gate),
            "metric": self.gate.metric,
            "op": self.gate.op,
            "bound": self.gate.bound,
            "at": str(self.gate.at),
            "series": self.series,
            "value": self.value,
            "step": self.step,
            "passed": self.passed,
        }


def _one(text: str, default_at: GateAt) -> Gate:
    match = _GATE.match(text)
    if match is None:
        raise ConfigError(f"--gate {text[:80]!r}: use {_FORM}, e.g. 'val_accuracy>=0.9@best'")
    try:
        bound = float(match["bound"])
    except ValueError:
        bound = math.nan
    if not math.isfinite(bound):
        raise ConfigError(
            f"--gate {text[:80]!r}: {match['bound'][:40]!r} is not a finite number; use {_FORM}"
        )
    at = parse(GateAt, match["at"], f"--gate {text[:80]!r}: @") if match["at"] else default_at
    return Gate(match["metric"].strip(), match["op"], bound, at, text.strip())


def parse_gates(items: str | Iterable[str] | None, default_at: str = GateAt.BEST) -> list[Gate]:
    """Gates from ``--gate`` values (each one gate; a single string may hold several, separated
    by commas, semicolons or newlines).

    Args:
        items: the gate texts.
        default_at: where gates without ``@best``/``@last`` read (``--gate-at``).

    Raises:
        ConfigError: a malformed gate (the message gives the form) or an unknown ``@`` place.
    """
    at = parse(GateAt, default_at or GateAt.BEST, "--gate-at")
    if items is None:
        return []
    if isinstance(items, str):
        items = [items]
    texts = [part for item in items for part in re.split(r"[,;\n]", str(item)) if part.strip()]
    return [_one(text, at) for text in texts]


def _split_named(text: str) -> bool:
    words = re.split(r"[/_\-.\s:]+", text.lower())
    return bool(_SPLIT_WORDS.intersection(words))


def find_metric(history: History, metric: str) -> Series:
    """The series a gate's metric names.

    Raises:
        ConfigError: no series matches; the message lists those the history has.
    """
    key = metric.strip().lower()
    every = list(history.series.values())
    found = [s for s in every if s.name.lower() == key]
    if not found:
        found = [s for s in every if s.name.lower().rsplit("/", 1)[-1] == key]
    if not found:
        split, base, _ = describe_name(metric)
        found = [
            s for s in every if s.metric == base and base and (s.split == split or not _split_named(metric))
        ]
    if not found:
        names = ", ".join(sorted(history.series)) or "(none)"
        raise ConfigError(f"gate metric {metric[:60]!r} is not in {history.source}; the history has: {names}")
    return max(found, key=lambda s: (s.split == "val", s.finite_count, len(s)))


def judge_gate(gate: Gate, series: Series, best_step: float | None) -> GateResult:
    """Reads ``series`` where the gate says and compares.

    Args:
        gate: the gate.
        series: its metric's series (see :func:`find_metric`).
        best_step: the verdict's best step (None: there is none, the last point is read).
    """
    steps, vals = series.steps, series.values
    if gate.at == GateAt.BEST and best_step is not None and math.isfinite(best_step):
        index = int(np.searchsorted(steps, best_step, side="right")) - 1
        index = max(index, 0)
    else:
        index = steps.size - 1
    value, step = float(vals[index]), float(steps[index])
    return GateResult(gate, series.name, value, step, gate.holds(value))
