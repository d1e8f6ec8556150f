"""What stopping a job early saves, in accelerator-hours.

    accelerator_hours_saved = accelerators × hours_left

``accelerators`` is Σ over worker pools of acceleratorCount × replicaCount (GPUs or TPU chips).
``hours_left`` is, in order of preference:

1. ``planned_steps`` — the history declared the run's total steps (see
   :data:`trainguard.guard.jsonl.PLANNED_STEPS_KEY`): the steps still to go at the pace so far,
   ``elapsed × (planned − last_step) / last_step``, capped by the time left to the timeout;
2. ``timeout`` — the spec's ``scheduling.timeout`` minus the time already run;
3. ``default_timeout`` — Vertex's default timeout, 7 days, minus the time run: an upper bound,
   reported as such ("up to").

A job on this machine (the local backend) has no timeout at all: only ``planned_steps`` sizes
what its stop saved (``unsized`` otherwise, said as such rather than as 168 hours).

A job without accelerators saves machine-hours only (replicas × hours_left), reported as well.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainguard.spec import JobSpec

__all__ = ["JobCost", "Savings", "estimate", "VERTEX_DEFAULT_TIMEOUT_S", "BASES"]

VERTEX_DEFAULT_TIMEOUT_S = 7 * 24 * 3600.0  # Scheduling.timeout: "The default is 7 days."
BASES = ("planned_steps", "timeout", "default_timeout", "unsized")


@dataclass(frozen=True)
class JobCost:
    """What a job holds while it runs.

    Attributes:
        accelerators: GPUs/TPU chips over every pool and replica.
        replicas: machines over every pool.
        timeout_s: the job's ``scheduling.timeout`` (Vertex's default when unset).
        timeout_set: whether the spec set it.
        local: the job runs on this machine (the local backend): no timeout bounds it.
    """

    accelerators: int
    replicas: int
    timeout_s: float = VERTEX_DEFAULT_TIMEOUT_S
    timeout_set: bool = False
    local: bool = False

    @classmethod
    def from_spec(cls, spec: JobSpec, *, local: bool = False) -> JobCost:
        """The cost facts of a job spec (``local``: run by the local backend)."""
        pools = spec.pools
        scheduling = spec.job_spec.scheduling
        timeout = scheduling.timeout.total_seconds() if "timeout" in scheduling else 0.0
        return cls(
            accelerators=sum(p.accelerators_requested for p in pools),
            replicas=sum(p.replica_count for p in pools),
            timeout_s=timeout if timeout > 0 else VERTEX_DEFAULT_TIMEOUT_S,
            timeout_set=timeout > 0,
            local=local,
        )


@dataclass(frozen=True)
class Savings:
    """The time a stop saved, and what it was worth."""

    accelerators: int
    replicas: int
    elapsed_s: float
    hours_left: float
    basis: str
    accelerator_hours: float
    machine_hours: float
    last_step: float | None = None
    planned_steps: int | None = None

    @property
    def upper_bound(self) -> bool:
        """True when only Vertex's default timeout bounded the run."""
        return self.basis == "default_timeout"

    def sentence(self) -> str:
        """One line a person reads: "≈ 6.0 accelerator-hours saved (4 accelerators × 1.5 h …)"."""
        if self.basis == "unsized":
            return (
                "the rest of the run was not spent (a local run has no timeout to size it by; "
                'log {"planned_steps": N} in the history for an estimate)'
            )
        prefix = "up to " if self.upper_bound else "≈ "
        why = {
            "planned_steps": f"left to step {self.planned_steps} at the pace so far",
            "timeout": "left to the job's timeout",
            "default_timeout": "left to Vertex's default 7-day timeout",
        }[self.basis]
        left = _duration(self.hours_left)
        if self.accelerators:
            return (
                f"{prefix}{self.accelerator_hours:.3g} accelerator-hours saved "
                f"({self.accelerators} accelerator(s) × {left} {why})"
            )
        return (
            f"{prefix}{self.machine_hours:.3g} machine-hours saved ({self.replicas} "
            f"machine(s), no accelerators, × {left} {why})"
        )

    def to_dict(self) -> dict:
        return asdict(self)


def _duration(hours: float) -> str:
    """``24 s``, ``12 min``, ``3.2 h``: a time left as a person reads it."""
    seconds = hours * 3600.0
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{hours:.3g} h"


def estimate(
    cost: JobCost, elapsed_s: float, last_step: float | None = None, planned_steps: int | None = None
) -> Savings:
    """The savings of stopping now (see the module docstring for the formula)."""
    elapsed_s = max(0.0, float(elapsed_s))
    to_timeout = max(0.0, cost.timeout_s - elapsed_s)
    if planned_steps and last_step and 0 < last_step < planned_steps and elapsed_s > 0:
        left_s = elapsed_s * (planned_steps - last_step) / last_step
        left_s = left_s if cost.local else min(left_s, to_timeout)
        basis = "planned_steps"
    elif cost.local:
        left_s, basis = 0.0, "unsized"
    else:
        left_s = to_timeout
        basis = "timeout" if cost.timeout_set else "default_timeout"
    hours = left_s / 3600.0
    return Savings(
        accelerators=cost.accelerators,
        replicas=cost.replicas,
        elapsed_s=elapsed_s,
        hours_left=hours,
        basis=basis,
        accelerator_hours=cost.accelerators * hours,
        machine_hours=cost.replicas * hours,
        last_step=last_step,
        planned_steps=planned_steps,
    )
