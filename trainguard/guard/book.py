"""The series read so far, growing by appends, viewed as a :class:`History` for ``validate``.

Points go into :class:`~trainguard.validation.history.SeriesParts` buffers (amortised O(new
points) per append); :meth:`SeriesBook.history` hands ``validate`` views of them, no copy, unless
a series received steps out of order (then that series is sorted, keeping the last value logged
for a step, as the readers do).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from trainguard.validation.history import History, Series, SeriesParts

__all__ = ["SeriesBook", "Added"]


@dataclass
class _Entry:
    split: str
    metric: str
    granularity: str
    parts: SeriesParts
    last_step: float = -np.inf
    ordered: bool = True


@dataclass
class Added:
    """What one append brought: how many points, and whether any is NaN/Inf."""

    points: int = 0
    non_finite: bool = False
    last_step: float | None = None
    names: set[str] = field(default_factory=set)

    def merge(self, other: Added) -> None:
        self.points += other.points
        self.non_finite |= other.non_finite
        if other.last_step is not None:
            self.last_step = max(self.last_step or other.last_step, other.last_step)
        self.names |= other.names


class SeriesBook:
    """Named series that only grow, plus the facts a history reader reports."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self.records = 0
        self.notes: list[str] = []

    def clear(self) -> None:
        """Forgets everything (the file was rewritten)."""
        self._entries.clear()
        self.records = 0
        self.notes = []

    @property
    def points(self) -> int:
        return sum(e.parts.size for e in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def last_step(self) -> float | None:
        """The largest step seen in any series."""
        steps = [e.last_step for e in self._entries.values() if e.parts.size]
        return max(steps) if steps else None

    def add(
        self, name: str, split: str, metric: str, granularity: str, steps: np.ndarray, values: np.ndarray
    ) -> Added:
        """Appends points to series ``name`` (created with that naming on first sight)."""
        steps = np.asarray(steps, dtype=np.float64)
        values = np.asarray(values, dtype=np.float64)
        if steps.size == 0:
            return Added()
        entry = self._entries.get(name)
        if entry is None:
            entry = self._entries[name] = _Entry(split, metric, granularity, SeriesParts(metric, split))
        if entry.ordered and (steps[0] <= entry.last_step or np.any(np.diff(steps) <= 0)):
            entry.ordered = False
        entry.parts.add(steps, values)
        entry.last_step = max(entry.last_step, float(steps.max()))
        return Added(int(steps.size), not bool(np.isfinite(values).all()), entry.last_step, {name})

    def history(self, fmt: str, source: str, x_label: str = "step") -> History:
        """The series as a History (views of the buffers; valid until the next append)."""
        series = {}
        for name, entry in self._entries.items():
            steps, values = entry.parts.arrays()
            if not entry.ordered:
                steps, values = _sorted_last(steps, values)
            series[name] = Series(name, entry.split, entry.metric, entry.granularity, steps, values)
        return History(series, fmt, source, x_label, self.records, list(self.notes))


def _sorted_last(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted by step; a step logged twice keeps its later value (a restart re-logging it)."""
    order = np.argsort(steps, kind="stable")
    steps, values = steps[order], values[order]
    keep = np.ones(steps.size, dtype=bool)
    keep[:-1] = steps[1:] != steps[:-1]
    return steps[keep], values[keep]
