"""One Cloud Billing Catalog SKU as trainguard reads it, and what its price expression means.

The Catalog API (``GET /v1/services/{serviceId}/skus``) answers ``Sku`` objects: ``skuId``,
``description``, ``category {serviceDisplayName, resourceFamily, resourceGroup, usageType}``,
``serviceRegions``, ``geoTaxonomy {type, regions}`` and ``pricingInfo[]``, "a timeline of pricing
info for this SKU in chronological order" (google-cloud-billing's ``billing_v1`` types): the last
entry is the price in force. Its ``pricingExpression`` gives ``usageUnit`` (``h``, ``GiBy.h``,
``GiBy.mo``), ``baseUnit`` (``s``, ``By.s``), ``baseUnitConversionFactor`` ("unit_price /
base_unit_conversion_factor = price per base_unit") and ``tieredRates[]`` sorted by
``startUsageAmount`` (in usage units: "usage is priced at this rate only after this amount"), each
``unitPrice`` a ``google.type.Money`` (``currencyCode``, ``units`` — an int64, a JSON string —
and ``nanos``, billionths).

Everything here is in *quantity-hours*: vCPU-hours, GPU-hours, chip-hours (a count for an hour)
or GiB-hours, so a machine's parts add up per hour whatever unit each SKU is sold in (a disk is
priced per GiB-month: its base unit, byte-seconds, says how long Google's month is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

__all__ = ["Tier", "Rate", "Sku", "parse_sku", "money"]

_GIB = Decimal(2**30)
_HOUR_S = Decimal(3600)
#: Usage units whose meaning is fixed when a SKU names no base unit (the Catalog sends
#: ``baseUnit`` and ``baseUnitConversionFactor``; hail-is/hail's batch pricing asserts ``s`` and
#: 3600 for ``h``): (base unit, base units per usage unit).
_KNOWN_UNITS = {"h": ("s", _HOUR_S), "GiBy.h": ("By.s", _GIB * _HOUR_S)}
#: Base units per quantity-hour, by base unit: a count held for an hour, or a GiB for an hour.
_PER_QUANTITY_HOUR = {"s": _HOUR_S, "By.s": _GIB * _HOUR_S}


def money(value: Mapping[str, Any]) -> Decimal:
    """A ``google.type.Money`` as a Decimal: ``units`` (int64, sent as a string) + ``nanos``/1e9.

    Raises:
        ValueError: units or nanos that are not integers.
    """
    units = int(value.get("units") or 0)
    nanos = int(value.get("nanos") or 0)
    return Decimal(units) + Decimal(nanos) / Decimal(1_000_000_000)


@dataclass(frozen=True)
class Tier:
    """From ``start`` quantity-hours on, each quantity-hour costs ``price``."""

    start: Decimal
    price: Decimal


@dataclass(frozen=True)
class Rate:
    """A SKU's price in quantity-hours: its tiers, in order, the first starting at 0."""

    tiers: tuple[Tier, ...]
    currency: str

    @property
    def per_hour(self) -> Decimal:
        """The price of the first quantity-hour (the first tier's)."""
        return self.tiers[0].price

    @property
    def tiered(self) -> bool:
        return len({t.price for t in self.tiers}) > 1

    def cost(self, quantity_hours: Decimal) -> Decimal:
        """What ``quantity_hours`` cost, each tier applied to the part of them it covers.

        The tiers are applied to this usage alone: other usage in the same billing month (the
        tiers aggregate per account) may reach the later tiers sooner.
        """
        total = Decimal(0)
        for i, tier in enumerate(self.tiers):
            end = self.tiers[i + 1].start if i + 1 < len(self.tiers) else None
            if quantity_hours <= tier.start:
                break
            upto = quantity_hours if end is None else min(quantity_hours, end)
            total += (upto - tier.start) * tier.price
        return total


@dataclass(frozen=True)
class Sku:
    """The facts of one SKU that matching and pricing use.

    Attributes:
        service_id: the service whose catalog listed it (``6F81-5844-456A``).
        rate: the price in force, in quantity-hours; None when its expression cannot be read
            that way (``unreadable`` says why).
    """

    sku_id: str
    description: str
    service_id: str
    resource_family: str
    resource_group: str
    usage_type: str
    regions: tuple[str, ...]
    geo_type: str
    usage_unit: str
    rate: Rate | None
    unreadable: str = ""

    def offered_in(self, region: str) -> bool:
        """Whether the SKU applies in ``region``: listed there, or global (no regions)."""
        return region in self.regions or (self.geo_type == "GLOBAL" and not self.regions)

    @property
    def label(self) -> str:
        """``description (skuId)``, as the report names it."""
        return f"{self.description} ({self.sku_id})"


def _rate(expression: Mapping[str, Any], currency: str) -> tuple[Rate | None, str]:
    unit = str(expression.get("usageUnit", ""))
    base = str(expression.get("baseUnit", ""))
    factor_raw = expression.get("baseUnitConversionFactor")
    if base and factor_raw:
        factor = Decimal(str(factor_raw))
    elif unit in _KNOWN_UNITS:
        base, factor = _KNOWN_UNITS[unit]
    else:
        return None, f"usage unit {unit!r} comes with no base unit to convert it to hours"
    if base not in _PER_QUANTITY_HOUR or factor <= 0:
        return None, f"base unit {base!r} is not a time-based unit trainguard prices by the hour"
    # One usage unit holds `factor` base units; one quantity-hour holds _PER_QUANTITY_HOUR[base].
    per_qh = _PER_QUANTITY_HOUR[base] / factor  # usage units per quantity-hour
    tiers = []
    for tier in expression.get("tieredRates") or ():
        price = tier.get("unitPrice") or {}
        code = str(price.get("currencyCode", "") or currency)
        if currency and code != currency:
            return None, f"priced in {code}, not {currency}"
        start_units = Decimal(str(tier.get("startUsageAmount") or 0))
        tiers.append(Tier(start_units / per_qh, money(price) * per_qh))
    if not tiers:
        return None, "no tiered rates"
    tiers.sort(key=lambda t: t.start)
    if tiers[0].start != 0:
        # Usage below the first tier's start is free ("the first 20GB is free").
        tiers.insert(0, Tier(Decimal(0), Decimal(0)))
    return Rate(tuple(tiers), currency), ""


def parse_sku(data: Mapping[str, Any], service_id: str, currency: str = "USD") -> Sku:
    """A SKU from its JSON (camelCase, as the REST API and ``Sku.to_dict`` give it).

    Raises:
        KeyError / ValueError / TypeError: a SKU that is not in the documented shape.
    """
    category = data.get("category") or {}
    geo = data.get("geoTaxonomy") or {}
    infos: Sequence[Mapping[str, Any]] = data.get("pricingInfo") or ()
    expression = infos[-1].get("pricingExpression") or {} if infos else {}
    if infos:
        rate, why = _rate(expression, currency)
    else:
        rate, why = None, "no pricing info"
    geo_type = geo.get("type", "")
    return Sku(
        sku_id=str(data["skuId"]),
        description=str(data.get("description", "")),
        service_id=service_id,
        resource_family=str(category.get("resourceFamily", "")),
        resource_group=str(category.get("resourceGroup", "")),
        usage_type=str(category.get("usageType", "")),
        regions=tuple(data.get("serviceRegions") or ()),
        geo_type=geo_type if isinstance(geo_type, str) else str(geo_type),
        usage_unit=str(expression.get("usageUnit", "")),
        rate=rate,
        unreadable=why,
    )
