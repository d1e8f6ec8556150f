"""What a job spec costs per hour, from a catalog: ``price_job(spec, catalog) -> JobPrice``.

Pure: no I/O. Each worker pool is its machine (vCPUs and memory, or the accelerator SKU that
prices the whole machine: A4's GPU slice, a TPU chip with its host), its accelerators, its boot
disk and the Vertex AI management fee on each compute part, times its replicas. A part no SKU
prices is UNKNOWN with the reason; the known parts still add up, and ``JobPrice.complete`` says
whether the sum is the whole price or a lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING

from trainguard.pricing.catalog import Catalog
from trainguard.pricing.rules import (
    HOST_IN_ACCELERATOR,
    SOURCES,
    Consumption,
    Rule,
    disk_rule,
    fee_rule,
    gpu_rule,
    host_rules,
    series_of,
    tpu_rule,
)
from trainguard.pricing.shapes import shape
from trainguard.pricing.skus import Rate

if TYPE_CHECKING:
    from trainguard.spec import JobSpec, Pool

__all__ = ["PricePart", "PoolPrice", "JobPrice", "price_job", "DEFAULT_BOOT_DISK", "usd"]

#: Vertex's boot disk when ``diskSpec`` is unset: "pd-ssd", 100 GB (DiskSpec in aiplatform_v1).
DEFAULT_BOOT_DISK = ("pd-ssd", 100)


def usd(value: Decimal | float, places: int = 2) -> str:
    """``$1,234.57``: money as the report shows it."""
    q = Decimal(value).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return f"${q:,.{places}f}"


@dataclass(frozen=True)
class PricePart:
    """One priced thing of one pool: ``quantity`` (per replica: vCPUs, GiB, GPUs, chips) at
    ``rate``, times ``replicas``; ``rate`` None means UNKNOWN, ``reason`` says why."""

    pool: int
    what: str
    quantity: Decimal
    replicas: int
    rate: Rate | None
    sku: str = ""
    reason: str = ""
    verified: bool = True

    @property
    def known(self) -> bool:
        return self.rate is not None

    @property
    def quantity_total(self) -> Decimal:
        return self.quantity * self.replicas

    @property
    def per_hour(self) -> Decimal | None:
        """What the first hour of this part costs (None when UNKNOWN)."""
        return None if self.rate is None else self.rate.cost(self.quantity_total)

    def cost_for(self, hours: Decimal) -> Decimal | None:
        return None if self.rate is None else self.rate.cost(self.quantity_total * hours)

    def to_dict(self) -> dict:
        return {
            "pool": self.pool,
            "what": self.what,
            "quantity": float(self.quantity),
            "replicas": self.replicas,
            "usd_per_hour": None if self.per_hour is None else float(self.per_hour),
            "sku": self.sku,
            "unknown_reason": self.reason,
            "tiered": bool(self.rate and self.rate.tiered),
        }


@dataclass(frozen=True)
class PoolPrice:
    """The parts of one worker pool."""

    index: int
    machine_type: str
    replicas: int
    parts: tuple[PricePart, ...]

    @property
    def per_hour(self) -> Decimal:
        """The known parts' price per hour (a lower bound when some part is UNKNOWN)."""
        return sum((p.per_hour for p in self.parts if p.per_hour is not None), Decimal(0))

    @property
    def unknown(self) -> tuple[PricePart, ...]:
        return tuple(p for p in self.parts if not p.known)


@dataclass(frozen=True)
class JobPrice:
    """The price of what a spec runs, per hour, in one region, bought one way.

    Attributes:
        currency: what every amount is in (``USD``).
        pools: each pool's parts.
    """

    region: str
    consumption: Consumption
    currency: str
    pools: tuple[PoolPrice, ...]
    sources: tuple[str, ...] = field(default=())

    @property
    def parts(self) -> tuple[PricePart, ...]:
        return tuple(p for pool in self.pools for p in pool.parts)

    @property
    def unknown(self) -> tuple[PricePart, ...]:
        return tuple(p for p in self.parts if not p.known)

    @property
    def complete(self) -> bool:
        """True when every part is priced: ``per_hour`` is the price, not a lower bound."""
        return not self.unknown

    @property
    def per_hour(self) -> Decimal:
        """The known parts' price of the first hour."""
        return sum((p.per_hour for p in self.parts if p.per_hour is not None), Decimal(0))

    def cost_for(self, hours: Decimal | float) -> Decimal:
        """What the known parts cost over ``hours`` (tiers applied to this job's usage)."""
        h = Decimal(str(hours))
        return sum((c for p in self.parts if (c := p.cost_for(h)) is not None), Decimal(0))

    def hours_for(self, amount: Decimal | float) -> Decimal | None:
        """How many hours the known parts run for ``amount`` (None: they cost nothing).

        Exact for flat rates; with tiers, found by bisection to a second.
        """
        money = Decimal(str(amount))
        if self.per_hour <= 0:
            return None
        if not any(p.rate and p.rate.tiered for p in self.parts):
            return money / self.per_hour
        low, high = Decimal(0), Decimal(1)
        while self.cost_for(high) < money:
            low, high = high, high * 2
            if high > Decimal(10) ** 7:  # a thousand years: the parts are almost free
                return high
        while high - low > Decimal(1) / 3600:
            mid = (low + high) / 2
            low, high = (mid, high) if self.cost_for(mid) <= money else (low, mid)
        return low

    def to_dict(self) -> dict:
        return {
            "region": self.region,
            "consumption": str(self.consumption),
            "currency": self.currency,
            "complete": self.complete,
            "usd_per_hour": float(self.per_hour),
            "pools": [
                {
                    "pool": pool.index,
                    "machine_type": pool.machine_type,
                    "replicas": pool.replicas,
                    "usd_per_hour": float(pool.per_hour),
                    "parts": [p.to_dict() for p in pool.parts],
                }
                for pool in self.pools
            ],
        }


def price_job(spec: JobSpec, catalog: Catalog, *, region: str = "", strategy: str = "") -> JobPrice:
    """The per-hour price of what ``spec`` runs, part by part, from ``catalog``.

    Args:
        spec: the job.
        catalog: Compute Engine's and Vertex AI's SKUs (``trainguard.pricing.fetch_catalog``).
        region: price it here instead of ``spec.region`` (a fallback region).
        strategy: ``STANDARD``, ``SPOT`` or ``FLEX_START`` instead of the spec's.

    Returns:
        A JobPrice; parts no SKU prices are UNKNOWN with the reason, never a guessed number.
    """
    where = region or spec.region
    consumption = Consumption.of(strategy or spec.strategy)
    pools = tuple(_price_pool(spec, pool, catalog, where, consumption) for pool in spec.pools)
    used = sorted({SOURCES[k] for k in ("vertex-pricing", "ce-series", "ce-gpus", "ce-tpus", "ce-disks")})
    return JobPrice(where, consumption, catalog.currency, pools, tuple(used))


def _part(
    pool: Pool, what_rule: Rule, quantity: Decimal, catalog: Catalog, region: str, label: str
) -> PricePart:
    found = catalog.find(what_rule, region)
    sku = found.sku
    return PricePart(
        pool.index,
        label,
        quantity,
        pool.replica_count,
        sku.rate if sku is not None else None,
        sku.label if sku is not None else "",
        found.reason,
        what_rule.verified,
    )


def _unknown(pool: Pool, what: str, quantity: Decimal, reason: str) -> PricePart:
    return PricePart(pool.index, what, quantity, pool.replica_count, None, "", reason)


def _price_pool(spec: JobSpec, pool: Pool, catalog: Catalog, region: str, how: Consumption) -> PoolPrice:
    from trainguard import catalog as facts

    parts: list[PricePart] = []
    machine = pool.machine_type
    tpu = facts.tpu_machine_accelerator(machine) or (
        pool.accelerator_type if (pool.accelerator_type or "").startswith("TPU_") else None
    )
    compute: list[tuple[Rule, Rule | None, Decimal, str]] = []  # (rule, on-demand rule, qty, label)
    if tpu:
        chips = Decimal(facts.tpu_chips(machine, pool.accelerator_count, pool.tpu_topology))
        rule = tpu_rule(tpu, how)
        if rule is None:
            parts.append(
                _unknown(
                    pool, f"{tpu} chips", chips, f"no row of trainguard's TPU table prices {tpu} ({machine})"
                )
            )
        else:
            compute.append((rule, tpu_rule(tpu, Consumption.ON_DEMAND), chips, f"{int(chips)} × {tpu} chip"))
    else:
        family = machine.split("-", 1)[0]
        series = series_of(machine)
        dims = shape(machine)
        if family in HOST_IN_ACCELERATOR:
            pass  # the accelerator SKU below prices the whole machine
        elif series is None or dims is None:
            why = (
                f"no row of trainguard's machine-series table names {machine}'s vCPU and memory SKUs"
                if series is None
                else f"the vCPUs and memory of {machine} are not in trainguard's shape table"
            )
            parts.append(_unknown(pool, f"{machine} vCPUs and memory", Decimal(1), why))
        else:
            rules = host_rules(series, how)
            if isinstance(rules, str):
                parts.append(_unknown(pool, f"{machine} vCPUs and memory", Decimal(1), rules))
            else:
                od = host_rules(series, Consumption.ON_DEMAND)
                assert not isinstance(od, str)
                vcpus, gib = dims
                compute.append((rules[0], od[0], Decimal(vcpus), f"{vcpus} {series.name} vCPU"))
                compute.append((rules[1], od[1], gib, f"{gib.normalize():f} GiB {series.name} memory"))
        if pool.accelerator_type and pool.accelerator_count:
            count = Decimal(pool.accelerator_count)
            rule = gpu_rule(pool.accelerator_type, how)
            label = f"{pool.accelerator_count} × {pool.accelerator_type}"
            if rule is None:
                parts.append(
                    _unknown(
                        pool, label, count, f"no row of trainguard's GPU table prices {pool.accelerator_type}"
                    )
                )
            else:
                compute.append((rule, gpu_rule(pool.accelerator_type, Consumption.ON_DEMAND), count, label))
    for rule, _, quantity, label in compute:
        parts.append(_part(pool, rule, quantity, catalog, region, f"{label} ({how})"))
    parts.append(_boot_disk(spec, pool, catalog, region))
    for _, on_demand, quantity, label in compute:
        if on_demand is not None:
            fee = fee_rule(on_demand)
            parts.append(_part(pool, fee, quantity, catalog, region, f"management fee on {label}"))
    return PoolPrice(pool.index, machine, pool.replica_count, tuple(parts))


def _boot_disk(spec: JobSpec, pool: Pool, catalog: Catalog, region: str) -> PricePart:
    disk = spec.job_spec.worker_pool_specs[pool.index].disk_spec
    disk_type = disk.boot_disk_type or DEFAULT_BOOT_DISK[0]
    size = Decimal(int(disk.boot_disk_size_gb) or DEFAULT_BOOT_DISK[1])
    label = f"{size} GiB {disk_type} boot disk"
    rule = disk_rule(disk_type)
    if rule is None:
        return _unknown(pool, label, size, f"no row of trainguard's disk table prices {disk_type}")
    return _part(pool, rule, size, catalog, region, label)
