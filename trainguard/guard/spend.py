"""What a running attempt has spent, the budget stop, and what a stop saved in money.

    spend = spent_before + price.cost_for(elapsed_h)

``price`` is the :class:`~trainguard.pricing.JobPrice` of what this attempt runs — its region,
machine and strategy (a fallback's, not the spec's as written) and every replica of every pool —
from Google's Cloud Billing Catalog; ``elapsed_h`` the time the job has been RUNNING (Vertex's
``startTime``); ``spent_before`` what the earlier attempts of the same ``train`` were billed
(:mod:`trainguard.guard.ledger`). The guard asks :meth:`Meter.reached` at every poll and stops the
job, class ``budget``, once the spend reaches the budget. A price with UNKNOWN parts is a lower
bound: the job is stopped when its priced parts alone reach the budget (it may have spent more,
never less), and the ledger says so once before the job starts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from trainguard.launch.base import RunningJob, Stop

if TYPE_CHECKING:
    from trainguard.guard.savings import Savings
    from trainguard.pricing import JobPrice

__all__ = ["Meter", "describe_price", "hours_text"]


def hours_text(hours: Decimal | float) -> str:
    """``5 h 53 min``, ``12 min``, ``40 s``: a time run as a person reads it."""
    seconds = int(float(hours) * 3600)
    if seconds < 90:
        return f"{seconds} s"
    h, m = divmod(seconds // 60, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min"


def describe_price(price: JobPrice) -> str:
    """``$8.4950/h: us-central1, a2-highgpu-2g × 1, on-demand`` (every pool, its replicas)."""
    from trainguard.pricing import usd

    pools = " + ".join(f"{p.machine_type} × {p.replicas}" for p in price.pools)
    bound = "" if price.complete else "at least "
    return f"{bound}{usd(price.per_hour, 4)}/h: {price.region}, {pools}, {price.consumption}"


@dataclass(frozen=True)
class Meter:
    """The money one attempt spends while it runs.

    Attributes:
        price: what this attempt runs, per hour.
        budget: the most the whole ``train`` may spend (None: no budget, nothing is stopped).
        spent_before: what the earlier attempts of this ``train`` were billed.
        wall_clock: seconds since the epoch (tests).
    """

    price: JobPrice
    budget: Decimal | None = None
    spent_before: Decimal = Decimal(0)
    wall_clock: Callable[[], float] = time.time

    def spend(self, elapsed_s: float) -> Decimal:
        """What the ``train`` has spent once this attempt has run ``elapsed_s`` seconds."""
        hours = Decimal(str(max(0.0, float(elapsed_s)))) / 3600
        return self.spent_before + self.price.cost_for(hours)

    def reached(self, elapsed_s: float) -> bool:
        """True once the spend reaches the budget (never without one)."""
        return self.budget is not None and self.spend(elapsed_s) >= self.budget

    def stop(self, job: RunningJob, savings: Savings | None = None) -> Stop:
        """The ``budget`` Stop of ``job``, with the evidence: spend, price, budget, when."""
        from trainguard.failure_classes import get
        from trainguard.pricing import usd

        assert self.budget is not None
        spent = self.spend(job.elapsed_s)
        when = datetime.fromtimestamp(self.wall_clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        bound = "" if self.price.complete else "at least "
        before = f" + {usd(self.spent_before)} by earlier attempts" if self.spent_before else ""
        evidence = (
            f"spent {bound}{usd(spent)} of the {usd(self.budget)} budget: {hours_text(job.elapsed_s / 3600)} "
            f"RUNNING at {describe_price(self.price)}{before}; reached at {when}"
        )
        details: dict[str, Any] = {
            "spend_usd": float(spent),
            "budget_usd": float(self.budget),
            "usd_per_hour": float(self.price.per_hour),
            "spent_before_usd": float(self.spent_before),
            "price_complete": self.price.complete,
            "region": self.price.region,
            "consumption": str(self.price.consumption),
            "elapsed_s": round(job.elapsed_s, 3),
            "reached_at": when,
        }
        if savings is not None:
            details.update(self.saved(savings))
        return Stop("budget", evidence, get("budget").remedy, False, details)

    def saved(self, savings: Savings) -> dict[str, Any]:
        """``usd_saved`` and the sentence (``saved``) for a stop that saved ``savings``: the rest
        of this attempt's run at its price. Nothing when the time left is not sized."""
        from trainguard.pricing import usd

        if savings.basis == "unsized" or savings.hours_left <= 0:
            return {}
        ran = Decimal(str(savings.elapsed_s)) / 3600
        left = Decimal(str(savings.hours_left))
        money = self.price.cost_for(ran + left) - self.price.cost_for(ran)
        prefix = "up to " if savings.upper_bound else "≈ "
        partial = "" if self.price.complete else " (the priced parts only)"
        return {
            "usd_saved": float(money),
            "usd_saved_basis": savings.basis,
            "saved": f"{savings.sentence()}; {prefix}{usd(money)} not spent{partial} at "
            f"{describe_price(self.price)}",
        }
