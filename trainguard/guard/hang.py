"""Hangs: a RUNNING job whose history has stopped growing.

A job stuck in a collective (a rank died, NCCL waits for ever), a deadlocked data loader or a
storage read that never returns stays RUNNING with every accelerator held until its timeout —
Vertex's default is 7 days. Its history tells: records stop coming. The guard calls the job hung
when no record has come for

    max(k × the median interval between its records, floor)

(``k`` = :data:`DEFAULT_K`, ``floor`` = :data:`DEFAULT_FLOOR_S`), or for the time ``--hang-after``
gives (``0`` turns it off). Why these numbers: NVIDIA's resiliency extension, which detects hangs
from heartbeats, calculates its timeouts as a safety factor of 5 × the longest interval it saw and
by default waits 45 min between heartbeats (60 min for the first), noting that none come while a
checkpoint is saved or loaded (nvidia-resiliency-ext ``FaultToleranceConfig``: ``safety_factor=5.0``,
``rank_heartbeat_timeout=2700``, ``initial_rank_heartbeat_timeout=3600``; its heartbeats guide). A
median is not moved by one long evaluation or checkpoint, so ``k`` is twice their factor, and the
30 min floor covers a checkpoint save and a Vertex worker restart on another VM.

What is never called a hang: a job that has written no record yet (start-up — an image pull, a
dataset download — has no interval to compare with, and a job that writes no history at all is
not hung); with the automatic limit, a history of fewer than :data:`MIN_INTERVALS` intervals;
anything while the job is not RUNNING (the guard is not asked then).

The interval is measured where the guard sees it — between the polls that found new records,
divided among the records found — so it works alike for JSONL and TensorBoard, and a silence is
never shorter than it really was (the last record came at or before the poll that found it).
"""

from __future__ import annotations

import bisect
import collections
from dataclasses import dataclass

from trainguard.durations import format_duration, parse_duration
from trainguard.errors import ConfigError

__all__ = ["HangPolicy", "HangDetector", "HangFinding", "DEFAULT_K", "DEFAULT_FLOOR_S", "MIN_INTERVALS"]

DEFAULT_K = 10.0
DEFAULT_FLOOR_S = 30 * 60.0
MIN_INTERVALS = 3
_KEPT = 4096  # growth observations kept for the median: the recent pace is what matters


@dataclass(frozen=True)
class HangPolicy:
    """When a silent history is a hang.

    Attributes:
        after_s: a fixed limit in seconds (``--hang-after``); None: the automatic one; 0: off.
        k: the automatic limit's multiple of the median interval.
        floor_s: the automatic limit's least value.
    """

    after_s: float | None = None
    k: float = DEFAULT_K
    floor_s: float = DEFAULT_FLOOR_S

    def __post_init__(self) -> None:
        if self.after_s is not None and not self.after_s >= 0:
            raise ConfigError(f"--hang-after must be a duration ≥ 0 (0: off), got {self.after_s!r}")
        if not (self.k > 0 and self.floor_s >= 0):
            raise ConfigError("hang detection needs k > 0 and a floor ≥ 0 seconds")

    @classmethod
    def parse(cls, value: str | float | None, option: str = "--hang-after") -> HangPolicy:
        """``''``/None → automatic; ``0`` → off; ``20m``, ``90``, ``1.5h`` → that limit.

        Raises:
            ConfigError: not a duration.
        """
        if value is None or (isinstance(value, str) and not value.strip()):
            return cls()
        return cls(after_s=parse_duration(value, option))

    @property
    def off(self) -> bool:
        return self.after_s == 0

    def describe(self) -> str:
        """The rule in words, for the guard's first line."""
        if self.off:
            return "hang detection off (--hang-after 0)"
        if self.after_s is not None:
            return f"a job whose history is silent for {format_duration(self.after_s)} is hung (--hang-after)"
        return (
            f"a job whose history is silent for max({self.k:g} × its median interval, "
            f"{format_duration(self.floor_s)}) is hung"
        )


@dataclass(frozen=True)
class HangFinding:
    """A history silent past its limit.

    Attributes:
        silent_s: seconds since the poll that found the last record.
        limit_s: the limit it passed.
        basis: how the limit was set, in words.
        median_interval_s: the median interval between records (None when not measured).
        records: records seen.
    """

    silent_s: float
    limit_s: float
    basis: str
    median_interval_s: float | None
    records: int

    def evidence(self) -> str:
        return (
            f"the job is RUNNING but its history has had no new record for {_span(self.silent_s)} "
            f"(limit {_span(self.limit_s)}: {self.basis}; {self.records} records before it stopped)"
        )

    def to_dict(self) -> dict:
        return {
            "silent_s": round(self.silent_s, 3),
            "limit_s": round(self.limit_s, 3),
            "basis": self.basis,
            "median_interval_s": None if self.median_interval_s is None else round(self.median_interval_s, 4),
            "records": self.records,
        }


class HangDetector:
    """Follows when a job's history grows, and says when its silence is a hang.

    Args:
        policy: the limit (:class:`HangPolicy`).
    """

    def __init__(self, policy: HangPolicy | None = None) -> None:
        self.policy = policy or HangPolicy()
        self.records = 0
        self.last_growth: float | None = None  # when a poll last found new records
        # (interval per record, records it stands for), oldest first
        self._seen: collections.deque[tuple[float, int]] = collections.deque()
        self._weights = 0

    def observe(self, now: float, points: int) -> None:
        """A successful read at ``now`` found ``points`` new records (0: none)."""
        if points <= 0 or self.policy.off:
            return
        if self.last_growth is not None:
            self._seen.append((max(0.0, now - self.last_growth) / points, points))
            self._weights += points
            while len(self._seen) > _KEPT:
                self._weights -= self._seen.popleft()[1]
        self.last_growth = now
        self.records += points

    def median_interval(self) -> float | None:
        """The median interval between records (weighted by records), None before any."""
        if not self._seen:
            return None
        ordered = sorted(self._seen)
        cumulative = list(_running_sum(w for _, w in ordered))
        return ordered[bisect.bisect_left(cumulative, self._weights / 2)][0]

    def limit(self) -> tuple[float, str] | None:
        """(the silence that is a hang now, how it was set); None while nothing can be called one."""
        if self.policy.off or self.last_growth is None:
            return None
        if self.policy.after_s is not None:
            return self.policy.after_s, "--hang-after"
        if len(self._seen) < MIN_INTERVALS:
            return None
        median = self.median_interval() or 0.0
        scaled = self.policy.k * median
        if scaled >= self.policy.floor_s:
            return scaled, f"{self.policy.k:g} × the median interval {_span(median)}"
        return (
            self.policy.floor_s,
            f"the {format_duration(self.policy.floor_s)} floor (median interval {_span(median)})",
        )

    def check(self, now: float) -> HangFinding | None:
        """A finding when the history has been silent past its limit at ``now``."""
        if self.last_growth is None:
            return None
        silent = now - self.last_growth
        if silent <= 0 or (self.policy.after_s is None and silent < self.policy.floor_s):
            return None  # (the automatic limit is never below its floor: no median needed)
        found = self.limit()
        if found is None or silent < found[0]:
            return None
        median = self.median_interval() if self._seen else None
        return HangFinding(silent, found[0], found[1], median, self.records)


def _running_sum(values):
    total = 0
    for v in values:
        total += v
        yield total


def _span(seconds: float) -> str:
    """``0.4 s``, ``42 s``, ``12 min``, ``3.2 h``."""
    if seconds < 10:
        return f"{seconds:.2g} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.2g} h"
