"""Reading the Cloud Billing Catalog: every SKU of a service, paged, kept for the run.

``google-cloud-billing``'s ``CloudCatalogClient`` (REST transport, made in ``trainguard.gcp``)
sends ``GET /v1/services/{serviceId}/skus?pageSize=5000&currencyCode=USD`` and follows
``nextPageToken`` (5000 is the documented default and the page size public Catalog readers use;
Compute Engine has some 32,000 SKUs: about seven pages). A service's SKUs are kept per endpoint
and currency for the life of the process — one preflight run, one pipeline task — so a run asks
once whatever number of checks price a job; ``clear_cache()`` forgets them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from trainguard.pricing.catalog import Catalog
from trainguard.pricing.rules import COMPUTE_ENGINE, VERTEX_AI
from trainguard.pricing.skus import Sku, parse_sku

__all__ = ["fetch_catalog", "clear_cache", "JOB_SERVICES", "PAGE_SIZE"]

#: The services a custom-training job is billed under (``trainguard.pricing.rules``).
JOB_SERVICES = (COMPUTE_ENGINE, VERTEX_AI)
PAGE_SIZE = 5000

_CACHE: dict[tuple[str, str, str], tuple[Sku, ...]] = {}
_LOCK = threading.Lock()


def clear_cache() -> None:
    """Forgets every service's SKUs read so far (a later call reads them again)."""
    with _LOCK:
        _CACHE.clear()


def fetch_catalog(
    services: Iterable[str] = JOB_SERVICES,
    *,
    currency: str = "USD",
    timeout_s: float = 10.0,
    retry=None,
) -> Catalog:
    """The SKUs of ``services``, read once per process.

    Args:
        services: Catalog service IDs.
        currency: the ISO 4217 code to price in.
        timeout_s: the time limit of each page's request.
        retry: a ``google.api_core.retry.Retry`` for each page (429/5xx), or None.

    Raises:
        google.api_core.exceptions.GoogleAPICallError: the API refused (403 SERVICE_DISABLED, …).
        google.auth.exceptions.DefaultCredentialsError: no credentials on this machine.
        ValueError / KeyError: a SKU not in the documented shape.
    """
    from trainguard import gcp

    wanted = tuple(dict.fromkeys(services))
    endpoint = gcp.endpoint("CLOUDBILLING").base_url
    found: list[Sku] = []
    client = None
    for service in wanted:
        key = (endpoint, service, currency)
        with _LOCK:
            cached = _CACHE.get(key)
        if cached is None:
            client = client or gcp.billing_catalog_client()
            cached = _read(client, service, currency, timeout_s, retry)
            with _LOCK:
                _CACHE[key] = cached
        found.extend(cached)
    return Catalog(found, wanted, currency)


def _read(client, service: str, currency: str, timeout_s: float, retry) -> tuple[Sku, ...]:
    from google.api_core import gapic_v1
    from google.cloud.billing_v1.types import Sku as SkuMessage

    request = {"parent": f"services/{service}", "page_size": PAGE_SIZE, "currency_code": currency}
    pager = client.list_skus(
        request=request, timeout=timeout_s, retry=retry if retry is not None else gapic_v1.method.DEFAULT
    )
    out = []
    for message in pager:  # the pager follows nextPageToken with the same timeout and retry
        data = SkuMessage.to_dict(message, use_integers_for_enums=False, preserving_proto_field_name=False)
        out.append(parse_sku(data, service, currency))
    return tuple(out)
