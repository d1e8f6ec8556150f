"""Preflight family ``cost``: what the job costs per hour, what it can cost by its timeout, and
whether that fits the budget.

Prices come from Google's Cloud Billing Catalog (``trainguard.pricing``): each pool's machine,
accelerators, boot disk and the Vertex AI management fee, times its replicas, in the job's region,
bought as its ``scheduling.strategy`` says (on demand, Spot, Flex-start). The most the job can
cost is that price for ``scheduling.timeout`` — Vertex's default 7 days when the spec sets none,
said so. With a budget (``--budget USD``), a cost at the timeout above it FAILs, with how many hours
the budget buys and the ``scheduling.timeout`` that would fit; a price with UNKNOWN parts whose
known parts fit the budget is UNKNOWN (it cannot tell); no budget, no FAIL.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal

from trainguard.preflight.checks import PreflightContext, register
from trainguard.preflight.results import CheckResult, Status

__all__ = ["cost", "cost_metrics", "parse_budget", "VERTEX_PRICING"]

VERTEX_PRICING = "https://cloud.google.com/vertex-ai/pricing#custom-trained_models"
_TITLE = "price per hour"
_TIMEOUT_TITLE = "cost at scheduling.timeout"


def parse_budget(value: float | str | Decimal | None, flag: str = "--budget") -> Decimal | None:
    """A budget in USD; None for none (unset or 0).

    Raises:
        ConfigError: a value that is not a finite number of dollars at or above 0.
    """
    from trainguard.errors import ConfigError

    if value is None or value == "":
        return None
    try:
        amount = Decimal(str(value).strip().lstrip("$"))
    except ArithmeticError:
        amount = Decimal("NaN")
    if not amount.is_finite() or amount < 0:
        raise ConfigError(
            f"{flag} must be an amount of US dollars at or above 0 (0: no budget), not {value!r}"
        )
    return amount if amount > 0 else None


def _hours_text(hours: Decimal | float) -> str:
    total_min = int(math.floor(float(hours) * 60))
    h, m = divmod(total_min, 60)
    return f"{h} h {m:02d} min" if m else f"{h} h"


def _timeout(ctx: PreflightContext) -> tuple[Decimal, bool]:
    """(hours, whether Vertex's default applies) of the spec's ``scheduling.timeout``."""
    from trainguard.guard.savings import VERTEX_DEFAULT_TIMEOUT_S

    value = ctx.spec.job_spec.scheduling.timeout
    seconds = value.total_seconds() if value else 0.0
    if seconds > 0:
        return Decimal(str(seconds)) / 3600, False
    return Decimal(str(VERTEX_DEFAULT_TIMEOUT_S)) / 3600, True


@register("cost", online=True)
def cost(ctx: PreflightContext) -> list[CheckResult]:
    """Price per hour, cost at the timeout, budget (Cloud Billing Catalog)."""
    from trainguard.preflight.common import call_policy, endpoint_of, unknown_result
    from trainguard.pricing import fetch_catalog, price_job

    spec = ctx.spec
    budget = parse_budget(ctx.budget_usd) if ctx.budget_usd is not None else None
    try:
        catalog = fetch_catalog(timeout_s=ctx.call_timeout_s, retry=call_policy(ctx.call_timeout_s))
    except Exception as exc:  # reported as UNKNOWN, naming the API and what to do
        result = unknown_result(
            "cost",
            _TITLE,
            exc,
            api="Cloud Billing Catalog API",
            permission="",
            verify=f"the prices on {VERTEX_PRICING}",
            timeout_s=ctx.call_timeout_s,
            where=endpoint_of("CLOUDBILLING"),
            project=spec.project,
        )
        if budget is not None:
            result.details["budget_usd"] = float(budget)
        return [result]
    price = price_job(spec, catalog)
    hours, default = _timeout(ctx)
    return [_price_result(price), _timeout_result(price, hours, default, budget)]


def _price_result(price) -> CheckResult:
    from trainguard.pricing import usd

    where = f"{price.consumption} in {price.region}"
    pools = []
    for pool in price.pools:
        shown = ", ".join(
            f"{p.what.removesuffix(f' ({price.consumption})')} {usd(p.per_hour, 4)}"
            for p in pool.parts
            if p.per_hour is not None
        )
        pools.append(
            f"workerPoolSpecs[{pool.index}] {pool.machine_type} × {pool.replicas}: "
            f"{usd(pool.per_hour, 4)}/h ({shown})"
        )
    details = {
        "usd_per_hour": float(price.per_hour),
        "complete": price.complete,
        "price": price.to_dict(),
    }
    if price.complete:
        return CheckResult(
            "cost",
            _TITLE,
            Status.PASS,
            f"{usd(price.per_hour, 4)}/h {where}: " + "; ".join(pools),
            details=details,
        )
    missing = "; ".join(f"{p.what}: {p.reason}" for p in price.unknown[:4])
    more = f"; and {len(price.unknown) - 4} more" if len(price.unknown) > 4 else ""
    unverified = any(not p.verified for p in price.unknown)
    return CheckResult(
        "cost",
        _TITLE,
        Status.UNKNOWN,
        f"at least {usd(price.per_hour, 4)}/h {where}: "
        + "; ".join(pools)
        + f". Not priced: {missing}{more}",
        (
            f"the price is a lower bound: look the parts up on {VERTEX_PRICING}"
            + (
                "; a part trainguard's SKU table (trainguard/pricing/rules.py) cannot spell with "
                "certainty is among them: report the SKU's description if you find it"
                if unverified
                else ""
            )
        ),
        details=details,
    )


def _timeout_result(price, hours: Decimal, default: bool, budget: Decimal | None) -> CheckResult:
    from trainguard.pricing import usd

    at_timeout = price.cost_for(hours)
    bound = "" if price.complete else "at least "
    why = (
        "Vertex's default 7-day timeout (scheduling.timeout is unset)"
        if default
        else f"scheduling.timeout {_hours_text(hours)}"
    )
    evidence = f"{bound}{usd(at_timeout)} if it runs to {why}, at {bound}{usd(price.per_hour, 4)}/h"
    details: dict = {
        "timeout_hours": float(hours),
        "timeout_is_default": default,
        "cost_at_timeout_usd": float(at_timeout),
        "complete": price.complete,
        "budget_usd": None if budget is None else float(budget),
        "budget_hours": None,
    }
    if budget is None:
        return CheckResult(
            "cost",
            _TIMEOUT_TITLE,
            Status.PASS,
            evidence + "; no budget given (--budget USD)",
            details=details,
        )
    buys = price.hours_for(budget)
    details["budget_hours"] = None if buys is None else float(buys)
    buys_text = "any number of hours" if buys is None else _hours_text(buys)
    title = f"{_TIMEOUT_TITLE} within the {usd(budget)} budget"
    if at_timeout > budget:
        cheaper = "a smaller machine" if str(price.consumption) == "spot" else "Spot, a smaller machine"
        assert buys is not None  # a job that costs nothing cannot exceed a budget
        seconds = int(buys * 3600)
        default_note = " (the spec sets none, so Vertex's 7 days apply)" if default else ""
        return CheckResult(
            "cost",
            title,
            Status.FAIL,
            f"{evidence}: over the {usd(budget)} budget, which buys {bound and 'at most '}{buys_text} "
            "of this job",
            f"set scheduling.timeout to {seconds}s ({_hours_text(buys)}) or less in the job spec"
            f"{default_note} — `scheduling: {{timeout: {seconds}s}}` — so the job stops within the budget; "
            f"or raise --budget to {usd(at_timeout)}, or buy it cheaper ({cheaper})",
            details=details,
        )
    if not price.complete:
        return CheckResult(
            "cost",
            title,
            Status.UNKNOWN,
            f"{evidence}: the priced parts fit the {usd(budget)} budget (it buys at most {buys_text}), "
            "but some parts have no price",
            f"check the parts the price line names on {VERTEX_PRICING}, or set scheduling.timeout "
            f"well under {buys_text}",
            details=details,
        )
    return CheckResult(
        "cost",
        title,
        Status.PASS,
        f"{evidence}: within the {usd(budget)} budget, which buys {buys_text} of this job",
        details=details,
    )


def cost_metrics(results: Iterable[CheckResult]) -> dict[str, float]:
    """The cost family's numbers for a KFP Metrics artifact (none when it did not run)."""
    out: dict[str, float] = {}
    for r in results:
        if r.check != "cost":
            continue
        d = r.details
        if "usd_per_hour" in d:
            out["cost_usd_per_hour"] = round(float(d["usd_per_hour"]), 6)
            out["cost_price_complete"] = 1.0 if d.get("complete") else 0.0
        if "cost_at_timeout_usd" in d:
            out["cost_at_timeout_usd"] = round(float(d["cost_at_timeout_usd"]), 2)
            out["cost_timeout_hours"] = round(float(d["timeout_hours"]), 4)
        if d.get("budget_usd") is not None:
            out["budget_usd"] = float(d["budget_usd"])
        if d.get("budget_hours") is not None:
            out["budget_hours"] = round(float(d["budget_hours"]), 4)
    return out
