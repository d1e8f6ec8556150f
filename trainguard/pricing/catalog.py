"""The SKUs of the services read, and finding the one SKU a rule means in a region."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from trainguard.pricing.rules import SERVICES, Rule
from trainguard.pricing.skus import Sku

__all__ = ["Catalog", "Found"]


@dataclass(frozen=True)
class Found:
    """What a rule found in a region: the SKU, or why none prices it (``reason``)."""

    sku: Sku | None
    reason: str = ""


class Catalog:
    """The SKUs of some services' catalogs, in one currency.

    Args:
        skus: the SKUs (each knows its service).
        services: the services whose whole catalog was read (a rule of another service finds
            nothing, and says the catalog was not read rather than that no SKU exists).
        currency: the ISO 4217 code every price is in.
    """

    def __init__(self, skus: Iterable[Sku], services: Iterable[str], currency: str = "USD") -> None:
        self.currency = currency
        self.services = frozenset(services)
        self._by_service: dict[str, list[Sku]] = {s: [] for s in self.services}
        for sku in skus:
            self._by_service.setdefault(sku.service_id, []).append(sku)

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_service.values())

    def skus(self, service: str) -> list[Sku]:
        return list(self._by_service.get(service, ()))

    def find(self, rule: Rule, region: str) -> Found:
        """The SKU ``rule`` means in ``region``.

        Several SKUs that match at one price are one price; at different prices the answer is
        ambiguous, and no price is picked.
        """
        name = SERVICES.get(rule.service, rule.service)
        if rule.service not in self.services:
            return Found(None, f"the {name} catalog was not read")
        shaped = [s for s in self._by_service.get(rule.service, ()) if _fits(rule, s)]
        here = [s for s in shaped if s.offered_in(region)]
        if not here:
            elsewhere = sorted({r for s in shaped for r in s.regions})
            where = f" (it is sold in {', '.join(elsewhere[:6])}{', …' if len(elsewhere) > 6 else ''})"
            return Found(
                None,
                f"no {name} SKU for {rule.what} in {region}: none matches "
                f"'{rule.pattern.pattern}'{where if elsewhere else ''}",
            )
        priced = [s for s in here if s.rate is not None]
        if not priced:
            return Found(None, f"{here[0].label} cannot be read as an hourly price: {here[0].unreadable}")
        prices = {s.rate.tiers for s in priced if s.rate is not None}
        if len(prices) > 1:
            labels = "; ".join(
                f"{s.label} at {s.rate.per_hour:.6f}"
                for s in sorted(priced, key=lambda s: s.sku_id)[:4]
                if s.rate
            )
            return Found(
                None, f"{len(priced)} {name} SKUs match {rule.what} in {region} at different prices: {labels}"
            )
        return Found(sorted(priced, key=lambda s: s.sku_id)[0])


def _fits(rule: Rule, sku: Sku) -> bool:
    return (
        (not rule.resource_family or sku.resource_family == rule.resource_family)
        and (not rule.resource_group or sku.resource_group == rule.resource_group)
        and (not rule.usage_types or sku.usage_type in rule.usage_types)
        and rule.pattern.search(sku.description) is not None
    )
