"""Reading the Cloud Billing Catalog: every SKU of a service, paged, kept for the run.

``GET /v1/services/{serviceId}/skus?pageSize=5000&currencyCode=USD``, following
``nextPageToken`` (5000 is the documented default page size and the one public Catalog readers
use; Compute Engine has some 32,000 SKUs: about seven pages). REST by hand through google-auth's
``AuthorizedSession`` rather than ``google-cloud-billing``'s ``CloudCatalogClient``: its REST
transport decodes each page with protobuf's pure-Python ``json_format``: 32,016 SKUs from the
loopback server took 16 s through it and 3.5 s this way on this machine, against a preflight's
30 s deadline (the same reason ``trainguard.gcp`` reads Compute Engine over REST). The answer's
shape is the same (``google/cloud/billing/v1/cloud_catalog.proto``). A service's SKUs are kept
per endpoint and currency for the life of the process — one preflight run, one pipeline task —
so a run asks once whatever number of checks price a job; ``clear_cache()`` forgets them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from trainguard.pricing.catalog import Catalog
from trainguard.pricing.rules import COMPUTE_ENGINE, VERTEX_AI
from trainguard.pricing.skus import Sku, parse_sku

__all__ = ["fetch_catalog", "clear_cache", "JOB_SERVICES", "PAGE_SIZE"]

#: The services a custom-training job is billed under (``trainguard.pricing.rules``).
JOB_SERVICES = (COMPUTE_ENGINE, VERTEX_AI)
PAGE_SIZE = 5000
_MAX_PAGES = 200  # a million SKUs: a server whose tokens never end is not read forever
_LOG = logging.getLogger(__name__)

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
        retry: a ``trainguard.retry.RetryPolicy`` for each page (429/5xx), or None.

    Raises:
        google.api_core.exceptions.GoogleAPICallError: the API refused (403 SERVICE_DISABLED, …).
        google.auth.exceptions.DefaultCredentialsError: no credentials on this machine.
        requests.exceptions.RequestException: no answer.
    """
    from trainguard import gcp

    wanted = tuple(dict.fromkeys(services))
    endpoint = gcp.endpoint("CLOUDBILLING").base_url
    with _LOCK:
        cached = {s: _CACHE.get((endpoint, s, currency)) for s in wanted}
    missing = [s for s, skus in cached.items() if skus is None]
    if missing:
        # The services' pages are read side by side (a session each: requests' sessions are not
        # made to be shared by threads): Compute Engine's seven pages are most of the wait, and
        # Vertex AI's need not queue behind them.
        with ThreadPoolExecutor(max_workers=len(missing), thread_name_prefix="catalog") as pool:
            reads = {s: pool.submit(_read, endpoint, s, currency, timeout_s, retry) for s in missing}
            for service, future in reads.items():
                read = future.result()  # the first failure raises, as one read would
                cached[service] = read
                with _LOCK:
                    _CACHE[(endpoint, service, currency)] = read
    return Catalog([sku for s in wanted for sku in cached[s] or ()], wanted, currency)


def _read(base: str, service: str, currency: str, timeout_s: float, retry) -> tuple[Sku, ...]:
    from trainguard import gcp

    session = gcp.authorized_session("CLOUDBILLING")[0]
    url = f"{base}/v1/services/{service}/skus"
    out: list[Sku] = []
    token = ""
    for _ in range(_MAX_PAGES):
        params = {"pageSize": PAGE_SIZE, "currencyCode": currency, **({"pageToken": token} if token else {})}
        page = gcp.rest_json(session, "GET", url, timeout=timeout_s, retry=retry, params=params)
        for item in page.get("skus") or ():
            try:
                out.append(parse_sku(item, service, currency))
            except (KeyError, ValueError, TypeError, ArithmeticError):
                # A SKU not in the documented shape prices nothing; the rest still do. A part
                # it would have priced is UNKNOWN ("no SKU matches"), never a guess.
                _LOG.debug("skipping a SKU of %s not in the documented shape: %.200r", service, item)
        token = page.get("nextPageToken") or ""
        if not token:
            return tuple(out)
    raise RuntimeError(f"the Catalog of {service} did not end after {_MAX_PAGES} pages")
