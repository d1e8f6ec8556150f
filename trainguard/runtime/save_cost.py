"""What one checkpoint save cost, and whether a preemption save fits the notice.

Each save is measured where it is written (bytes, seconds from the first byte to ``COMMIT``) and
lands in the history as a record without metrics, so readers that judge curves skip it::

    {"step": 120, "split": "checkpoint", "time": 1732981000.5,
     "save": {"bytes": 6000000000, "seconds": 31.2, "mb_s": 192.3, "blocking": false,
              "notice_s": 30}}

``notice_s`` is the preemption notice the job was given (absent when it was given none), so
that whoever reads the history later (``trainguard validate``) judges the fit against the notice
the run really had.

A preemption gives the job a notice before its machine goes (the table below), and the SIGTERM
save must finish inside it: a save slower than the notice never completes, and the run resumes
from the checkpoint before it, losing the work of one save interval. Which is said at the first
save, with the fixes, when the job knows its notice (``TRAINGUARD_PREEMPTION_NOTICE``: the
launchers set it from the scheduling strategy or the ``preemption_notice`` setting).

>>> m = SaveMeasure(step=10, bytes=6_000_000_000, seconds=31.2)
>>> round(m.mb_s, 1)
192.3
>>> fits(m.seconds, 30.0)
False
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

from trainguard.errors import ConfigError

__all__ = [
    "SaveMeasure",
    "PREEMPTION_NOTICE_S",
    "NOTICE_ENV",
    "SAVE_SPLIT",
    "SAVE_KEY",
    "FIXES",
    "fits",
    "notice_from_env",
    "parse_notice",
    "misfit_reason",
    "fixes_sentence",
    "misfit_sentence",
]

#: Seconds of notice a preemption gives, by Vertex scheduling strategy. Spot: Compute Engine's
#: Scheduling.skipGuestOsShutdown: "120 seconds between GCE ACPI G2 Soft Off and ACPI G3
#: Mechanical Off for Standard VMs and 30 seconds for Spot VMs" (best effort: "Compute Engine
#: might reclaim the resources by preempting Spot VMs at any time"). Flex-start: reclaimed as
#: Spot capacity is, taken at Spot's 30 s (trainguard issue 32). Other strategies have no
#: preemption notice to size; the ``preemption_notice`` setting names one.
PREEMPTION_NOTICE_S: Mapping[str, float] = {"SPOT": 30.0, "FLEX_START": 30.0}

NOTICE_ENV = "TRAINGUARD_PREEMPTION_NOTICE"
SAVE_SPLIT = "checkpoint"
SAVE_KEY = "save"

#: What makes a save fit the notice, most effective first.
FIXES = (
    "shard the state across ranks (TorchCheckpointer(..., sharded=True) / DCP, orbax: each rank "
    "writes its share in parallel)",
    "save a smaller state (bf16 weights, no optimizer state for frozen parts)",
    "save more often, so a preemption save that fails loses one short interval",
    "write to local SSD and upload in the background, where the platform keeps the disk",
)


@dataclass(frozen=True)
class SaveMeasure:
    """One save, as measured.

    Attributes:
        step: the checkpoint's step.
        bytes: payload bytes written (every rank's, for a sharded save).
        seconds: wall seconds from the save's start to its ``COMMIT``.
        blocking: the training loop waited for it (a SIGTERM save always does).
        started: when it started (epoch seconds).
    """

    step: int
    bytes: int
    seconds: float
    blocking: bool = False
    started: float = 0.0

    @property
    def mb_s(self) -> float:
        """Throughput in MB/s (10^6 bytes)."""
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def record(self, notice_s: float | None = None) -> dict:
        """The history record (no ``metrics``: curve readers skip it); ``notice_s``: the job's
        preemption notice, kept with the measure when known."""
        measure: dict[str, float | int | bool] = {
            "bytes": int(self.bytes),
            "seconds": round(self.seconds, 4),
            "mb_s": round(self.mb_s, 2),
            "blocking": bool(self.blocking),
        }
        if notice_s is not None:
            measure["notice_s"] = float(notice_s)
        return {
            "step": int(self.step),
            "split": SAVE_SPLIT,
            "time": round(self.started + self.seconds if self.started else time.time(), 3),
            SAVE_KEY: measure,
        }

    def describe(self) -> str:
        return f"{self.bytes / 1e6:,.1f} MB in {self.seconds:.2f} s ({self.mb_s:,.1f} MB/s)"


def fits(seconds: float, notice_s: float) -> bool:
    """Whether a save of ``seconds`` completes within ``notice_s`` of notice."""
    return seconds <= notice_s


def parse_notice(text: str, where: str = NOTICE_ENV) -> float:
    """``30``, ``30s``, ``2m`` → seconds (> 0).

    Raises:
        ConfigError: not a positive duration.
    """
    from trainguard.durations import parse_duration

    try:
        value = float(text)
    except ValueError:
        value = parse_duration(text, where)
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{where}={text!r}: pass the seconds of notice a preemption gives (> 0), e.g. 30s")
    return value


def notice_from_env(environ: Mapping[str, str] | None = None) -> float | None:
    """The job's preemption notice (``TRAINGUARD_PREEMPTION_NOTICE``), None when not set."""
    env = os.environ if environ is None else environ
    text = (env.get(NOTICE_ENV) or "").strip()
    return parse_notice(text) if text else None


def misfit_reason(seconds: float, notice_s: float, interval_s: float | None) -> str:
    """Why a save of ``seconds`` does not fit ``notice_s``, and what a preemption would lose."""
    lost = (
        f"; a preemption would lose the work since the previous checkpoint (~{interval_s:,.0f} s at "
        "this cadence)"
        if interval_s
        else "; a preemption would lose the work since the previous checkpoint"
    )
    return (
        f"a preemption save does not fit the notice: a save takes {seconds:.1f} s, the notice is "
        f"{notice_s:g} s{lost}"
    )


def fixes_sentence() -> str:
    """The fixes for a save that does not fit, as one sentence."""
    return "; or ".join(FIXES)


def misfit_sentence(seconds: float, notice_s: float, interval_s: float | None) -> str:
    """The warning for a save that does not fit the notice, with what it loses and the fixes."""
    return f"{misfit_reason(seconds, notice_s, interval_s)}. Fix: {fixes_sentence()}"
