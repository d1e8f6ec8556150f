"""Prices from Google's Cloud Billing Catalog for what a Vertex AI custom-training job runs.

The entry point, pure and typed::

    from trainguard.pricing import fetch_catalog, price_job

    catalog = fetch_catalog()              # Compute Engine + Vertex AI SKUs, read once per process
    price = price_job(spec, catalog)       # JobPrice: per-hour price, part by part
    price.per_hour                         # Decimal: the known parts, per hour
    price.complete                         # False when a part is UNKNOWN (then per_hour is a lower bound)
    [p.reason for p in price.unknown]      # why each unknown part could not be priced
    price.cost_for(hours)                  # the known parts over `hours` (tiers applied)
    price.hours_for(budget)                # how long the known parts run for `budget`

``price_job(spec, catalog, region=..., strategy=...)`` prices the same spec in another region or
bought another way (what a fallback would run). Modules: ``skus`` (a SKU and its price expression),
``rules`` (which SKU prices which part: the one table, with its sources), ``shapes`` (vCPUs and
memory per machine type), ``catalog`` (finding a rule's SKU in a region), ``job`` (a spec's
price), ``client`` (reading the Catalog API, cached per run; the only module with I/O).
"""

from trainguard.pricing.catalog import Catalog, Found
from trainguard.pricing.client import JOB_SERVICES, clear_cache, fetch_catalog
from trainguard.pricing.job import DEFAULT_BOOT_DISK, JobPrice, PoolPrice, PricePart, price_job, usd
from trainguard.pricing.rules import COMPUTE_ENGINE, VERTEX_AI, Consumption
from trainguard.pricing.skus import Rate, Sku, Tier, parse_sku

__all__ = [
    "Catalog",
    "Found",
    "JOB_SERVICES",
    "clear_cache",
    "fetch_catalog",
    "DEFAULT_BOOT_DISK",
    "JobPrice",
    "PoolPrice",
    "PricePart",
    "price_job",
    "usd",
    "COMPUTE_ENGINE",
    "VERTEX_AI",
    "Consumption",
    "Rate",
    "Sku",
    "Tier",
    "parse_sku",
]
