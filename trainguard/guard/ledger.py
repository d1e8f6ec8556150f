"""What one ``train`` cost, attempt by attempt, and the meter each attempt's guard reads.

The train stage opens a :class:`Ledger` for the run. Before each attempt, :meth:`Ledger.begin`
prices what that attempt runs (its region, machine, strategy, every replica of every pool) from
the Cloud Billing Catalog, read once per process (:func:`trainguard.pricing.fetch_catalog`), and
hands the guard a :class:`~trainguard.guard.spend.Meter` that counts the earlier attempts' bill
too; after it, :meth:`Ledger.end` adds its bill (the time it was RUNNING × that price) and says
when the budget is spent, so no relaunch follows. :meth:`Ledger.report` is the :class:`RunCost`
the task prints, logs as metrics and records.

A job that cannot be priced — the Catalog not readable, a part no SKU prices — is never given a
made-up price: its cost is UNKNOWN with the reason, and with a budget the ledger says once, as a
warning, that the guard cannot enforce it (or, when only some parts are unpriced, that it stops
the job when the priced parts alone reach it). A local run costs nothing: ``$0 (local)``.

Billing facts (:data:`NOT_BILLED`, one table with its source): Vertex AI does not bill the time of
a training that *fails* other than by a user's cancellation; a cancelled job (the guard's stop is
a cancellation) is billed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from trainguard.guard.spend import Meter, describe_price, hours_text

if TYPE_CHECKING:
    from trainguard.launch.base import TrainResult
    from trainguard.pricing import Catalog, JobPrice
    from trainguard.spec import JobSpec

__all__ = ["AttemptCost", "Ledger", "RunCost", "NOT_BILLED", "BILLING_SOURCE", "read_catalog"]

#: The end states whose running time Vertex AI does not bill, and why.
NOT_BILLED = {
    "FAILED": "a training that fails for any reason other than a user-initiated cancellation is not billed",
}
BILLING_SOURCE = (
    "https://cloud.google.com/vertex-ai/pricing — 'You pay only for compute hours used; if training "
    "fails for any reason other than a user-initiated cancellation, you are not billed for the "
    "time. You are charged for training time if you cancel the operation.'"
)
_CATALOG_TIMEOUT_S = 10.0


def read_catalog() -> Catalog:
    """The Catalog for a train task: Compute Engine's and Vertex AI's SKUs, one deadline."""
    from trainguard.preflight.common import call_policy
    from trainguard.pricing import fetch_catalog

    return fetch_catalog(timeout_s=_CATALOG_TIMEOUT_S, retry=call_policy(_CATALOG_TIMEOUT_S))


def _why_unreadable(exc: BaseException, project: str) -> str:
    """The Catalog's failure as preflight's ``cost`` family says it: what and what to do."""
    from trainguard.preflight.common import endpoint_of, unknown_result
    from trainguard.preflight.cost import VERTEX_PRICING

    result = unknown_result(
        "cost",
        "price per hour",
        exc,
        api="Cloud Billing Catalog API",
        permission="",
        verify=f"the prices on {VERTEX_PRICING}",
        timeout_s=_CATALOG_TIMEOUT_S,
        where=endpoint_of("CLOUDBILLING"),
        project=project,
    )
    return f"{result.evidence} ({result.remedy})"


@dataclass(frozen=True)
class AttemptCost:
    """One attempt's bill.

    Attributes:
        number: the attempt, from 0.
        state: how it ended.
        running_s: how long it was RUNNING.
        price: what it ran, per hour (None: local, or not priced: ``reason``).
        reason: why it has no price ('' when it has one, or is local).
    """

    number: int
    state: str
    running_s: float
    price: JobPrice | None = None
    reason: str = ""
    local: bool = False

    @property
    def billed(self) -> bool:
        """False when Vertex does not bill its time (:data:`NOT_BILLED`) or it ran here."""
        return not self.local and self.state not in NOT_BILLED

    @property
    def usd(self) -> Decimal | None:
        """What it was billed (None: unknown)."""
        if self.local or not self.billed or self.running_s <= 0:
            return Decimal(0)
        if self.price is None:
            return None
        return self.price.cost_for(Decimal(str(self.running_s)) / 3600)

    def line(self) -> str:
        from trainguard.pricing import usd

        ran = hours_text(self.running_s / 3600)
        if self.local:
            return f"#{self.number + 1} {self.state}: $0 (local: {ran} on this machine, nothing is billed)"
        if self.price is None:
            return f"#{self.number + 1} {self.state}: unknown ({ran} RUNNING; {self.reason})"
        rate = describe_price(self.price)
        if not self.billed and self.running_s > 0:
            return (
                f"#{self.number + 1} {self.state}: $0 — {NOT_BILLED[self.state]} (Vertex AI pricing); "
                f"{ran} RUNNING at {rate}"
            )
        amount = self.usd or Decimal(0)
        bound = "" if self.price.complete else "at least "
        return f"#{self.number + 1} {self.state}: {bound}{usd(amount)} ({ran} RUNNING at {rate})"

    def to_dict(self) -> dict[str, Any]:
        usd = self.usd
        return {
            "attempt": self.number + 1,
            "state": self.state,
            "running_s": self.running_s,
            "billed": self.billed,
            "usd": None if usd is None else float(usd),
            "usd_per_hour": None if self.price is None else float(self.price.per_hour),
            "price_complete": self.price.complete if self.price is not None else self.local,
            "region": self.price.region if self.price is not None else "",
            "consumption": str(self.price.consumption) if self.price is not None else "",
            "unknown_reason": self.reason,
            "local": self.local,
        }


@dataclass(frozen=True)
class RunCost:
    """What a ``train`` cost, and what the guard's stop saved.

    Attributes:
        attempts: each attempt's bill.
        budget: the budget (None: none).
        saved_usd: the money the guard's stop saved (None: no stop, or not priced).
        saved: the sentence that says it ('' when none).
    """

    attempts: tuple[AttemptCost, ...]
    local: bool = False
    budget: Decimal | None = None
    saved_usd: Decimal | None = None
    saved: str = ""

    @property
    def usd(self) -> Decimal | None:
        """The total (None when an attempt that ran has no price)."""
        amounts = [a.usd for a in self.attempts]
        if any(a is None for a in amounts):
            return None
        return sum((a for a in amounts if a is not None), Decimal(0))

    @property
    def complete(self) -> bool:
        """True when the total is the bill, not a lower bound or unknown."""
        return all(
            a.local or not a.billed or (a.price is not None and a.price.complete) for a in self.attempts
        )

    def headline(self) -> str:
        """``cost: $3.21 (2 attempts)``, ``cost: $0 (local run …)``, ``cost: unknown — why``."""
        from trainguard.pricing import usd

        if self.local:
            return "cost: $0 (local: it ran on this machine, nothing is billed)"
        total = self.usd
        many = f" over {len(self.attempts)} attempts" if len(self.attempts) > 1 else ""
        budget = f", of the {usd(self.budget)} budget" if self.budget is not None else ""
        if total is None:
            reasons = "; ".join(dict.fromkeys(a.reason for a in self.attempts if a.usd is None))
            return f"cost: unknown{many} — no price: {reasons}"
        bound = "" if self.complete else "at least "
        return f"cost: {bound}{usd(total)}{many}{budget}"

    def lines(self) -> list[str]:
        """What the task prints: the headline, each attempt, and the money the stop saved."""
        out = [self.headline()]
        if not self.local and (len(self.attempts) > 1 or self.attempts and self.usd is not None):
            out += [f"  {a.line()}" for a in self.attempts]
        if self.saved:
            out.append(f"saved: {self.saved}")
        return out

    def metrics(self) -> dict[str, float]:
        """The numbers for the task's Metrics artifact (``cost_usd`` only when it is known)."""
        out: dict[str, float] = {
            "cost_local": 1.0 if self.local else 0.0,
            "cost_price_complete": 1.0 if self.complete and self.usd is not None else 0.0,
            "cost_hours_run": round(sum(a.running_s for a in self.attempts) / 3600, 4),
        }
        total = self.usd
        if total is not None:
            out["cost_usd"] = round(float(total), 2)
        last = self.attempts[-1] if self.attempts else None
        if last is not None and last.price is not None:
            out["cost_usd_per_hour"] = round(float(last.price.per_hour), 6)
        if self.budget is not None:
            out["budget_usd"] = float(self.budget)
        if self.saved_usd is not None:
            out["saved_usd"] = round(float(self.saved_usd), 2)
        return out

    def to_dict(self) -> dict[str, Any]:
        total = self.usd
        return {
            "usd": None if total is None else float(total),
            "complete": self.complete,
            "local": self.local,
            "budget_usd": None if self.budget is None else float(self.budget),
            "saved_usd": None if self.saved_usd is None else float(self.saved_usd),
            "saved": self.saved,
            "headline": self.headline(),
            "attempts": [a.to_dict() for a in self.attempts],
            "billing_source": BILLING_SOURCE,
        }


@dataclass
class Ledger:
    """The bill of one ``train``, attempt by attempt.

    Args:
        local: the attempts run on this machine (nothing is billed, nothing is priced).
        budget: the most the ``train`` may spend (None: none).
        catalog: reads the Catalog (:func:`read_catalog`; tests pass their own).
        say: where the warnings go (one line each, said once).
    """

    local: bool = False
    budget: Decimal | None = None
    catalog: Callable[[], Catalog] = read_catalog
    say: Callable[[str], None] = lambda line: None
    attempts: list[AttemptCost] = field(default_factory=list, init=False)
    _read: Catalog | None = field(default=None, init=False)
    _unreadable: str = field(default="", init=False)
    _said: set[str] = field(default_factory=set, init=False)
    _current: tuple[JobPrice | None, str] = field(default=(None, ""), init=False)

    @property
    def spent(self) -> Decimal:
        """What the attempts so far were billed (their priced parts)."""
        return sum((a.usd or Decimal(0) for a in self.attempts), Decimal(0))

    def begin(self, spec: JobSpec) -> Meter | None:
        """Prices the attempt about to run ``spec``: the guard's meter (None: nothing to count)."""
        from trainguard.pricing import usd

        if self.local:
            self._current = (None, "")
            if self.budget is not None:
                self._warn(
                    f"budget {usd(self.budget)}: a local run costs nothing ($0, local), so the budget "
                    "never stops it; it applies when the job runs on Vertex AI (--vertex)"
                )
            return None
        price, reason = self._price(spec)
        self._current = (price, reason)
        if price is None:
            if self.budget is not None:
                self._warn(
                    f"WARNING: the guard cannot enforce the {usd(self.budget)} budget: {reason}. "
                    "The job runs without a budget stop; its scheduling.timeout still bounds it"
                )
            return None
        if not price.complete and self.budget is not None:
            missing = "; ".join(f"{p.what}: {p.reason}" for p in price.unknown[:3])
            self._warn(
                f"WARNING: the guard cannot fully enforce the {usd(self.budget)} budget: some parts of "
                f"the job have no price ({missing}). It stops the job when the priced parts alone "
                f"({describe_price(price)}) reach the budget: the job may spend more"
            )
        return Meter(price, self.budget, self.spent)

    def end(self, result: TrainResult) -> str:
        """Adds the attempt that ended; a reason not to relaunch when the budget is spent, else ''."""
        from trainguard.pricing import usd

        price, reason = self._current
        self.attempts.append(
            AttemptCost(len(self.attempts), result.state, result.running_s, price, reason, self.local)
        )
        self._current = (None, "")
        if self.budget is not None and not self.local and self.spent >= self.budget:
            return f"the {usd(self.budget)} budget is spent ({usd(self.spent)} so far): no relaunch"
        return ""

    def report(self, result: TrainResult | None = None) -> RunCost:
        """The run's cost; with ``result``, the money its guard stop saved."""
        details = (result.stopped or {}).get("details", {}) if result is not None else {}
        saved = details.get("usd_saved")
        return RunCost(
            tuple(self.attempts),
            self.local,
            self.budget,
            None if saved is None else Decimal(str(saved)),
            str(details.get("saved", "")) if saved is not None else "",
        )

    def _price(self, spec: JobSpec) -> tuple[JobPrice | None, str]:
        from trainguard.pricing import price_job

        if self._read is None and not self._unreadable:
            try:
                self._read = self.catalog()
            except Exception as exc:  # the price is unknown, the job still runs: said, never guessed
                self._unreadable = _why_unreadable(exc, spec.project)
        if self._read is None:
            return None, f"the Cloud Billing Catalog could not be read: {self._unreadable}"
        price = price_job(spec, self._read)
        if price.per_hour <= 0 and not price.complete:
            why = "; ".join(f"{p.what}: {p.reason}" for p in price.unknown[:3])
            return None, f"no part of {spec.region}'s job could be priced ({why})"
        return price, ""

    def _warn(self, line: str) -> None:
        if line not in self._said:
            self._said.add(line)
            self.say(line)
