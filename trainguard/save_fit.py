"""What the job's checkpoint saves cost, what a preemption would lose, and whether its save fits.

Read from the save records the runtime writes into the history
(:mod:`trainguard.runtime.save_cost`): each save's bytes and seconds. From them:

* **save cost** — the median save's seconds and MB/s, and for saves the loop waited for, the share
  of the run's wall time they took;
* **work at risk** — the median interval between saves: what a preemption loses when its save
  cannot finish (it resumes from the checkpoint before);
* **fit** — whether the median save finishes inside the notice a preemption gives
  (:data:`~trainguard.runtime.save_cost.PREEMPTION_NOTICE_S` by scheduling strategy, or the job's
  ``TRAINGUARD_PREEMPTION_NOTICE``, which the runtime keeps in each save record:
  :func:`recorded_notice`); unknown when neither names one.

Shared by the guard (the train task's output) and validation (the verdict).

>>> fit = SaveFit.from_records([
...     {"step": 100, "time": 1000.0, "save": {"bytes": 6_000_000_000, "seconds": 31.0, "blocking": False}},
...     {"step": 200, "time": 1600.0, "save": {"bytes": 6_000_000_000, "seconds": 33.0, "blocking": False}},
... ], notice_s=30.0)
>>> fit.fits, fit.interval_s
(False, 600.0)
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from trainguard.runtime.save_cost import NOTICE_ENV, PREEMPTION_NOTICE_S, fits, misfit_sentence, parse_notice

if TYPE_CHECKING:
    from trainguard.spec import JobSpec

__all__ = ["SaveFit", "notice_for", "recorded_notice"]


def notice_for(spec: JobSpec) -> float | None:
    """The seconds of notice a preemption gives ``spec``'s job: the chief pool's
    ``TRAINGUARD_PREEMPTION_NOTICE`` when set (the ``preemption_notice`` setting), else the
    strategy's (Spot, Flex-start: 30 s), else None."""
    pools = spec.pools
    own = pools[0].env.get(NOTICE_ENV, "") if pools else ""
    if own:
        return parse_notice(own, f"workerPoolSpecs[0] env {NOTICE_ENV}")
    return PREEMPTION_NOTICE_S.get(spec.strategy)


def recorded_notice(records: Sequence[dict]) -> float | None:
    """The preemption notice the job was given, as its newest save record keeps it (None: the
    job had none, or its runtime did not record it)."""
    for record in reversed(records):
        measure = record.get("save")
        value = measure.get("notice_s") if isinstance(measure, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None


@dataclass(frozen=True)
class SaveFit:
    """The saves of one run, summed up.

    Attributes:
        saves: how many were measured.
        last_bytes: the newest save's size.
        median_seconds, median_mb_s: a typical save.
        max_seconds: the slowest save.
        interval_s: the median time between saves (None with one save).
        blocking_share: the share of the run's wall time the loop waited on saves (None: unknown).
        notice_s: the preemption notice (None: not known).
        fits: whether a typical save fits the notice (None: no notice known, or no save).
    """

    saves: int
    last_bytes: int
    median_seconds: float
    median_mb_s: float
    max_seconds: float
    interval_s: float | None
    blocking_share: float | None
    notice_s: float | None
    fits: bool | None

    @classmethod
    def from_records(cls, records: Sequence[dict], notice_s: float | None) -> SaveFit:
        """From the history's save records (oldest first)."""
        measures = [(r, r["save"]) for r in records if isinstance(r.get("save"), dict)]
        good = [
            (
                float(r.get("time") or 0.0),
                int(m.get("bytes") or 0),
                float(m.get("seconds") or 0.0),
                bool(m.get("blocking")),
            )
            for r, m in measures
            if isinstance(m.get("seconds"), int | float) and m.get("seconds", 0) > 0
        ]
        if not good:
            return cls(0, 0, 0.0, 0.0, 0.0, None, None, notice_s, None)
        seconds = [g[2] for g in good]
        speeds = [g[1] / 1e6 / g[2] for g in good]
        times = sorted(g[0] for g in good if g[0] > 0)
        gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b > a]
        span = times[-1] - times[0] if len(times) > 1 else 0.0
        blocked = sum(g[2] for g in good[1:] if g[3])
        median = statistics.median(seconds)
        return cls(
            saves=len(good),
            last_bytes=good[-1][1],
            median_seconds=round(median, 3),
            median_mb_s=round(statistics.median(speeds), 2),
            max_seconds=round(max(seconds), 3),
            interval_s=round(statistics.median(gaps), 3) if gaps else None,
            blocking_share=round(blocked / span, 4) if span > 0 else None,
            notice_s=notice_s,
            fits=None if notice_s is None else fits(median, notice_s),
        )

    def warning(self) -> str:
        """The warning when a preemption save does not fit ('' otherwise)."""
        if self.fits is not False or self.notice_s is None:
            return ""
        return misfit_sentence(self.median_seconds, self.notice_s, self.interval_s)

    def line(self) -> str:
        """One line for the train task's output: cost, work at risk, fit."""
        if not self.saves:
            return "checkpoint saves: none measured (the job saved no trainguard checkpoint)"
        cost = (
            f"checkpoint saves: {self.saves}, {self.last_bytes / 1e6:,.1f} MB each, "
            f"{self.median_seconds:.2f} s ({self.median_mb_s:,.1f} MB/s; slowest {self.max_seconds:.2f} s)"
        )
        if self.blocking_share is not None:
            cost += f", {self.blocking_share:.1%} of the run spent waiting on saves"
        every = f"every {self.interval_s:,.0f} s" if self.interval_s else "one save so far"
        if self.fits is None:
            fit = "no preemption notice known (set TRAINGUARD_PREEMPTION_NOTICE to size it)"
            risk = f"a preemption loses at most the work since the last save ({every})"
        elif self.fits:
            fit = f"a preemption save fits the {self.notice_s:g} s notice"
            risk = "a preemption loses the step in flight"
        else:
            fit = f"a preemption save does NOT fit the {self.notice_s:g} s notice"
            risk = f"a preemption loses the work since the last save ({every})"
        return f"{cost}; {fit}; {risk}"

    def to_dict(self) -> dict:
        return {**asdict(self), "warning": self.warning()}
