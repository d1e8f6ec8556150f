"""A loopback Cloud Billing Catalog v1 server: ``GET /v1/services/{serviceId}/skus``, paged.

Speaks what ``trainguard.pricing.client`` sends (REST through ``AuthorizedSession``, as
``google-cloud-billing``'s ``CloudCatalogClient`` REST transport would, which also adds
``$alt=json;enum-encoding=int``) — ``?pageSize&pageToken&currencyCode`` — and answers ``{"skus": [...],
"nextPageToken": "..."}`` in the real shape (google-cloud-billing's ``billing_v1`` types; the SKU
template of Cyclenerd/google-cloud-pricing-cost-calculator ``build/notes/api/v1/skus.json``):
``name``, ``skuId``, ``description``, ``category {serviceDisplayName, resourceFamily,
resourceGroup, usageType}``, ``serviceRegions``, ``pricingInfo[] {effectiveTime, summary,
pricingExpression {usageUnit, usageUnitDescription, baseUnit, baseUnitDescription,
baseUnitConversionFactor, displayQuantity, tieredRates[] {startUsageAmount, unitPrice
{currencyCode, units (int64: a string), nanos}}}, aggregationInfo, currencyConversionRate}``,
``serviceProviderName``, ``geoTaxonomy {type, regions}``; enums as numbers under
``enum-encoding=int``. Compute SKUs are ``h`` with base unit ``s`` and factor 3600, memory
``GiBy.h`` (hail-is/hail batch pricing asserts both), disks ``GiBy.mo``.

The SKUs (``SKUS``) are real where a public source gave them — each row says which — and
illustrative where none did (the Vertex AI management fees above all; ``ILLUSTRATIVE`` lists
them). A SKU's description names a place ("running in Americas") while ``serviceRegions`` lists
the regions it applies in, as the real catalog does.

Example::

    server = BillingServer(max_page_size=5).start()
    server.remove("Nvidia L4 GPU running in Americas")      # a SKU missing
    server.disable(consumer="123456789012")                  # 403 SERVICE_DISABLED
"""

from __future__ import annotations

import base64
import re
from decimal import Decimal

from tests.servers.googleapi import SERVICE_TITLES, ApiError, GoogleApiServer, Request

__all__ = ["BillingServer", "SKUS", "ILLUSTRATIVE", "COMPUTE", "VERTEX", "sku"]

COMPUTE = "6F81-5844-456A"
VERTEX = "C7E2-9256-1C43"
_DISPLAY = {COMPUTE: "Compute Engine", VERTEX: "Vertex AI"}
# The API Library's name for cloudbilling.googleapis.com, as its SERVICE_DISABLED message says it.
SERVICE_TITLES.setdefault("cloudbilling.googleapis.com", "Cloud Billing API")

# "Americas" SKUs apply in every US region (serviceRegions lists them; Cyclenerd's skus.json
# example lists us-central1, us-east1, us-west1 for one Americas SKU).
_AMERICAS = ["us-central1", "us-east1", "us-east4", "us-east5", "us-west1", "us-west4"]
_UNITS = {  # usage unit → (its description, base unit, base description, factor)
    "h": ("hour", "s", "second", 3600),
    "GiBy.h": ("gibibyte hour", "By.s", "byte-second", 3865470566400),
    # A month of GiB in byte-seconds: 2^30 × 31 days (illustrative: the factor of a real GiBy.mo
    # SKU was not found in the research; trainguard uses whatever factor the catalog sends).
    "GiBy.mo": ("gibibyte month", "By.s", "byte-second", 2875910101401600),
}
_GEO = {"GLOBAL": 1, "REGIONAL": 2, "MULTI_REGIONAL": 3}


def _money(price: str) -> dict:
    value = Decimal(price)
    units = int(value)
    return {"currencyCode": "USD", "units": str(units), "nanos": int((value - units) * 1_000_000_000)}


def sku(
    sku_id: str,
    description: str,
    regions: list[str],
    price: str,
    *,
    service: str = COMPUTE,
    family: str = "Compute",
    group: str = "",
    usage: str = "OnDemand",
    unit: str = "h",
    tiers: list[tuple[float, str]] | None = None,
) -> dict:
    """A SKU in the Catalog's JSON shape (``price`` per usage unit; ``tiers``: (start, price))."""
    unit_description, base, base_description, factor = _UNITS[unit]
    rates = [(0.0, price)] if tiers is None else tiers
    return {
        "name": f"services/{service}/skus/{sku_id}",
        "skuId": sku_id,
        "description": description,
        "category": {
            "serviceDisplayName": _DISPLAY[service],
            "resourceFamily": family,
            "resourceGroup": group,
            "usageType": usage,
        },
        "serviceRegions": list(regions),
        "pricingInfo": [
            {
                "effectiveTime": "2026-11-30T08:00:00.000Z",
                "summary": "",
                "pricingExpression": {
                    "usageUnit": unit,
                    "displayQuantity": 1,
                    "tieredRates": [
                        {"startUsageAmount": start, "unitPrice": _money(p)} for start, p in rates
                    ],
                    "usageUnitDescription": unit_description,
                    "baseUnit": base,
                    "baseUnitDescription": base_description,
                    "baseUnitConversionFactor": factor,
                },
                "aggregationInfo": {
                    "aggregationLevel": "ACCOUNT",
                    "aggregationInterval": "MONTHLY",
                    "aggregationCount": 1,
                },
                "currencyConversionRate": 1,
            }
        ],
        "serviceProviderName": "Google",
        "geoTaxonomy": {
            "type": "MULTI_REGIONAL" if len(regions) > 1 else "REGIONAL",
            "regions": list(regions),
        },
    }


# Sources of the numbers (read through the search index on 2026-12-01):
#   [pull-0802] a public GCP cost note, "Billing Catalog API 实价, 2026-08-02 拉取": a2-highgpu-1g in
#       us-central1 — A100 $2.93391 / Spot $1.53990 / DWS $1.61365; 12 vCPU $0.37932 / $0.19908 /
#       $0.20868; 85 GB $0.36040 / $0.18870 / $0.19805 (per unit: ÷12, ÷85); the SKU names
#       "DWS Defined Duration A2 Core|Ram", "Nvidia Tesla A100 GPU attached to DWS Defined Duration VMs".
#   [a3-note] a public confidential-GPU note, a3-highgpu-1g in us-central1: A3 vCPU $0.025498003 /
#       Spot $0.01263 / DWS $0.010934, RAM $0.00222034 / $0.00110 / $0.000952, H100 $9.796550569 /
#       $4.85340 / $4.200761.
#   [g2-note] a public serving-cost note: g2-standard-8 in us-central1, "G2 Instance Core running in
#       Americas $0.024988", "G2 Instance Ram … $0.002927", "Nvidia L4 GPU running in Americas
#       $0.560040".
#   [n1] N1 Predefined Instance Core/Ram running in Americas at nanos 31611000 / 4237000 and Tesla
#       T4 at 350000000, in several public Catalog fixtures (e.g. a Go pricing source's ParsePage
#       test); A100 80GB $3.928080 in a Python scraper's Catalog fixture test.
#   [sg-0920] a public cost model "verified on 2026-09-20 for asia-southeast1": N1 vCPU $0.038999,
#       RAM $0.005226; Spot $0.009420, $0.001263; Vertex n1-standard-4 $0.269544/h published.
#   [tpu-1007] a cached Catalog dump read 2026-10-07: "TpuV5e running in Americas" 1.2, "…Las
#       Vegas" 1.2, "…Spot…Las Vegas" 0.494237; a TPU rig's patterns verified 2026-08-07.
#   [disks] read 2026-12-02. Prices per GiB-month: Cyclenerd/google-cloud-pricing-cost-calculator
#       pricing.yml @ fd66b26ff84fee5cdd94f341ea89206e76c06b99 (generated from the Catalog API
#       2026-07-30), compute.storage: ssd (pd-ssd) us-central1 0.17, asia-southeast1 0.187;
#       hdd (pd-standard) us-central1 0.04; balanced (pd-balanced) us-central1 0.1;
#       ssd-replicated us-central1 0.34. Description stems and resourceGroups: the same repo's
#       build/mapping.csv ("SSD backed PD%" SSD, "Storage PD Capacity%" PDStandard, "Balanced PD%"
#       SSD, "Regional SSD backed PD%" SSD, all resourceFamily Storage). SKU IDs: D973-5D65-BAB2
#       "Storage PD Capacity" (project-koku/nise nise/generators/gcp/compute_engine_generator.py @
#       0798dcc648965302faeef6fd980dca40e1f6f83b, "gibibyte month"); B188-61DD-52E4 "SSD backed PD
#       Capacity" (us-central1) and 6AE1-525F-8B80 "Balanced PD Capacity" at nanos 170000000 /
#       100000000 in public Catalog fixtures found by the search index (repositories not named).
#       Outside the Americas the stem takes " in <place>" ("SSD backed PD Capacity in Mumbai",
#       "… in Los Angeles" 0589-AA00-68BD, "… in Paris" in public Catalog pulls).
#   [vertex-n1] the Vertex AI pricing page's custom-training table, n1-standard-4 in Iowa
#       (us-central1): $0.21849885/h (two public transcriptions, read 2026-09-08 and 2026-10-07;
#       api-evangelist/google-vertex-ai plans/google-vertex-ai-plans-pricing.yml @
#       342263c39279d72204c9e1bb3058dceba0d215e1). That is 1.15 × Compute Engine's 4 × 0.031611 +
#       15 × 0.004237 = $0.189999, as Singapore's $0.269544 is 1.15 × $0.234386 [sg-0920]. The
#       same transcription gives "Accelerator NVIDIA_H100_80GB (training)" $9.79655057/h, which is
#       Compute Engine's H100 price with no 15% on it.
#   [traps] descriptions public tools had to skip: "Commitment v1: …", "Reserved … in Calendar
#       Mode", "Capacity Optimized TpuV6e …", "Regional SSD backed PD Capacity".
SKUS: list[dict] = [
    # -- A2 (A100 40GB), us-central1 [pull-0802] --
    sku("A2C0-0001-0001", "A2 Instance Core running in Americas", _AMERICAS, "0.03161", group="CPU"),
    sku(
        "A2R0-0001-0001",
        "A2 Instance Ram running in Americas",
        _AMERICAS,
        "0.00424",
        group="RAM",
        unit="GiBy.h",
    ),
    sku(
        "A2C0-0001-0002",
        "Spot Preemptible A2 Instance Core running in Americas",
        _AMERICAS,
        "0.01659",
        group="CPU",
        usage="Preemptible",
    ),
    sku(
        "A2R0-0001-0002",
        "Spot Preemptible A2 Instance Ram running in Americas",
        _AMERICAS,
        "0.00222",
        group="RAM",
        usage="Preemptible",
        unit="GiBy.h",
    ),
    sku(
        "A2C0-0001-0003",
        "DWS Defined Duration A2 Core running in Americas",
        _AMERICAS,
        "0.01739",
        group="CPU",
    ),
    sku(
        "A2R0-0001-0003",
        "DWS Defined Duration A2 Ram running in Americas",
        _AMERICAS,
        "0.00233",
        group="RAM",
        unit="GiBy.h",
    ),
    sku("A100-0001-0001", "Nvidia Tesla A100 GPU running in Americas", _AMERICAS, "2.933908", group="GPU"),
    sku(
        "A100-0001-0002",
        "Nvidia Tesla A100 GPU attached to Spot Preemptible VMs running in Americas",
        _AMERICAS,
        "1.5399",
        group="GPU",
        usage="Preemptible",
    ),
    sku(
        "A100-0001-0003",
        "Nvidia Tesla A100 GPU attached to DWS Defined Duration VMs running in Americas",
        _AMERICAS,
        "1.61365",
        group="GPU",
    ),
    sku(
        "A180-0001-0001", "Nvidia Tesla A100 80GB GPU running in Americas", _AMERICAS, "3.92808", group="GPU"
    ),
    # -- A3 High (H100), us-central1 [a3-note]; the DWS Core/Ram spelling follows A2's --
    sku("A3C0-0001-0001", "A3 Instance Core running in Americas", _AMERICAS, "0.025498003", group="CPU"),
    sku(
        "A3R0-0001-0001",
        "A3 Instance Ram running in Americas",
        _AMERICAS,
        "0.00222034",
        group="RAM",
        unit="GiBy.h",
    ),
    sku(
        "A3C0-0001-0002",
        "Spot Preemptible A3 Instance Core running in Americas",
        _AMERICAS,
        "0.01263",
        group="CPU",
        usage="Preemptible",
    ),
    sku(
        "A3R0-0001-0002",
        "Spot Preemptible A3 Instance Ram running in Americas",
        _AMERICAS,
        "0.0011",
        group="RAM",
        usage="Preemptible",
        unit="GiBy.h",
    ),
    sku(
        "A3C0-0001-0003",
        "DWS Defined Duration A3 Core running in Americas",
        _AMERICAS,
        "0.010934",
        group="CPU",
    ),
    sku(
        "A3R0-0001-0003",
        "DWS Defined Duration A3 Ram running in Americas",
        _AMERICAS,
        "0.000952",
        group="RAM",
        unit="GiBy.h",
    ),
    sku("H100-0001-0001", "Nvidia H100 80GB GPU running in Americas", _AMERICAS, "9.796550569", group="GPU"),
    sku(
        "H100-0001-0002",
        "Nvidia H100 80GB GPU attached to Spot Preemptible VMs running in Americas",
        _AMERICAS,
        "4.8534",
        group="GPU",
        usage="Preemptible",
    ),
    sku(
        "H100-0001-0003",
        "Nvidia H100 80GB GPU attached to DWS Defined Duration VMs running in Americas",
        _AMERICAS,
        "4.200761",
        group="GPU",
    ),
    # -- G2 (L4), us-central1 [g2-note]; L4's real SKU ID is A88A-5A60-E821 (a public Rust test) --
    sku("G2C0-0001-0001", "G2 Instance Core running in Americas", _AMERICAS, "0.024988", group="CPU"),
    sku(
        "G2R0-0001-0001",
        "G2 Instance Ram running in Americas",
        _AMERICAS,
        "0.002927",
        group="RAM",
        unit="GiBy.h",
    ),
    sku("A88A-5A60-E821", "Nvidia L4 GPU running in Americas", _AMERICAS, "0.56004", group="GPU"),
    # -- N1 + T4, us-central1 [n1] --
    sku(
        "2E27-4F75-95CD",
        "N1 Predefined Instance Core running in Americas",
        _AMERICAS,
        "0.031611",
        group="N1Standard",
    ),
    sku(
        "N1R0-0001-0001",
        "N1 Predefined Instance Ram running in Americas",
        _AMERICAS,
        "0.004237",
        group="N1Standard",
        unit="GiBy.h",
    ),
    sku("88B8-C3ED-03F0", "Nvidia Tesla T4 GPU running in Americas", _AMERICAS, "0.35", group="GPU"),
    # -- N1, asia-southeast1 [sg-0920] --
    sku(
        "N1C0-0065-0001",
        "N1 Predefined Instance Core running in Singapore",
        ["asia-southeast1"],
        "0.038999",
        group="N1Standard",
    ),
    sku(
        "N1R0-0065-0001",
        "N1 Predefined Instance Ram running in Singapore",
        ["asia-southeast1"],
        "0.005226",
        group="N1Standard",
        unit="GiBy.h",
    ),
    sku(
        "N1C0-0065-0002",
        "Spot Preemptible N1 Predefined Instance Core running in Singapore",
        ["asia-southeast1"],
        "0.00942",
        group="N1Standard",
        usage="Preemptible",
    ),
    sku(
        "N1R0-0065-0002",
        "Spot Preemptible N1 Predefined Instance Ram running in Singapore",
        ["asia-southeast1"],
        "0.001263",
        group="N1Standard",
        usage="Preemptible",
        unit="GiBy.h",
    ),
    # -- TPU v5e, per chip-hour [tpu-1007] --
    sku(
        "TPU5-0001-0001", "TpuV5e running in Americas", ["us-central1"], "1.2", family="Compute", group="TPU"
    ),
    sku("TPU5-0004-0001", "TpuV5e running in Las Vegas", ["us-west4"], "1.2", family="Compute", group="TPU"),
    sku(
        "TPU5-0004-0002",
        "TpuV5e attached to Spot Preemptible VMs running in Las Vegas",
        ["us-west4"],
        "0.494237",
        family="Compute",
        group="TPU",
        usage="Preemptible",
    ),
    # -- boot disks [disks]: real descriptions, categories, units and prices. The un-suffixed SKUs
    #    price us-central1, us-east1, us-east5 and us-west1 alike; the catalog prices us-east4 and
    #    us-west4 apart ($0.187 / $0.044 / $0.11 per GiB-month, under their own SKUs), which this
    #    test catalog leaves to the Americas rows, as it does for the machines. --
    sku(
        "B188-61DD-52E4",
        "SSD backed PD Capacity",
        _AMERICAS,
        "0.17",
        family="Storage",
        group="SSD",
        unit="GiBy.mo",
    ),
    sku(
        "SSD0-0065-0001",
        "SSD backed PD Capacity in Singapore",
        ["asia-southeast1"],
        "0.187",
        family="Storage",
        group="SSD",
        unit="GiBy.mo",
    ),
    sku(
        "D973-5D65-BAB2",
        "Storage PD Capacity",
        _AMERICAS,
        "0.04",
        family="Storage",
        group="PDStandard",
        unit="GiBy.mo",
    ),
    sku(
        "6AE1-525F-8B80",
        "Balanced PD Capacity",
        _AMERICAS,
        "0.1",
        family="Storage",
        group="SSD",
        unit="GiBy.mo",
    ),
    # The replicated disk, which the pd-ssd anchor must skip: real, $0.34 in us-central1 [disks].
    sku(
        "RSSD-0001-0001",
        "Regional SSD backed PD Capacity",
        _AMERICAS,
        "0.34",
        family="Storage",
        group="SSD",
        unit="GiBy.mo",
    ),
    # -- traps [traps] (ILLUSTRATIVE prices) --
    sku(
        "TRAP-0001-0001",
        "Commitment v1: Nvidia Tesla A100 GPU in Americas for 1 Year",
        _AMERICAS,
        "1.848362",
        group="GPU",
        usage="Commit1Yr",
    ),
    sku(
        "TRAP-0001-0002",
        "Reserved Nvidia Tesla A100 GPU in Americas in Calendar Mode",
        _AMERICAS,
        "0",
        group="GPU",
    ),
    sku("TRAP-0004-0001", "Capacity Optimized TpuV5e running in Las Vegas", ["us-west4"], "1.2", group="TPU"),
    # -- a tiered SKU: the example of the Catalog's own docs (billing_v1 PricingExpression: "the first
    #    20GB is free, the next 80GB is priced at $10 per GB followed by $5 per GB") --
    sku(
        "TIER-0001-0001",
        "Network Inter Zone Egress",
        _AMERICAS,
        "0",
        family="Network",
        group="InterzoneEgress",
        unit="GiBy.h",
        tiers=[(20, "10"), (100, "5")],
    ),
    # -- Vertex AI management fees: ILLUSTRATIVE. No public copy of a fee SKU was found (its
    #    description, category, unit, or whether the catalog splits the fee by resource at all), so
    #    the descriptions are ours. The N1 prices are 15% of Compute Engine's, which reproduces the
    #    two published n1-standard-4 totals — $0.234386 + $0.035158 = $0.269544/h in Singapore
    #    [sg-0920], $0.189999 + $0.02849985 = $0.21849885/h in us-central1 [vertex-n1] — but the
    #    split between vCPU and memory is ours. The A2/A100 and T4 fees carry the same 15% with no
    #    published total behind them (the page's H100 row carries none [vertex-n1]). --
    sku(
        "FEE0-0065-0001",
        "Vertex AI Training Management Fee for N1 Predefined Instance Core running in Singapore",
        ["asia-southeast1"],
        "0.00584985",
        service=VERTEX,
        family="ApplicationServices",
        group="Training",
    ),
    sku(
        "FEE0-0065-0002",
        "Vertex AI Training Management Fee for N1 Predefined Instance Ram running in Singapore",
        ["asia-southeast1"],
        "0.0007839",
        service=VERTEX,
        family="ApplicationServices",
        group="Training",
        unit="GiBy.h",
    ),
    sku(
        "FEE0-0001-0001",
        "Vertex AI Training Management Fee for A2 Instance Core running in Americas",
        _AMERICAS,
        "0.0047415",
        service=VERTEX,
        family="ApplicationServices",
        group="Training",
    ),
    sku(
        "FEE0-0001-0002",
        "Vertex AI Training Management Fee for A2 Instance Ram running in Americas",
        _AMERICAS,
        "0.000636",
        service=VERTEX,
        family="ApplicationServices",
        group="Training",
        unit="GiBy.h",
    ),
    sku(
        "FEE0-0001-0003",
        "Vertex AI Training Management Fee for Nvidia Tesla A100 GPU running in Americas",
        _AMERICAS,
        "0.4400862",
        service=VERTEX,
        family="ApplicationServices",
        group="Training",
    ),
    sku(
        "FEE0-0001-0004",
        "Vertex AI Training Management Fee for N1 Predefined Instance Core running in Americas",
        _AMERICAS,
        "0.00474165",
        service=VERTEX,
        family="ApplicationServices",
        group="Training",
    ),
    sku(
        "FEE0-0001-0005",
        "Vertex AI Training Management Fee for N1 Predefined Instance Ram running in Americas",
        _AMERICAS,
        "0.00063555",
        service=VERTEX,
        family="ApplicationServices",
        group="Training",
        unit="GiBy.h",
    ),
    sku(
        "FEE0-0001-0006",
        "Vertex AI Training Management Fee for Nvidia Tesla T4 GPU running in Americas",
        _AMERICAS,
        "0.0525",
        service=VERTEX,
        family="ApplicationServices",
        group="Training",
    ),
    # (No fee SKUs for G2/L4, A3/H100 or TPUs: those fees are UNKNOWN, as a live catalog that
    # spells the fee otherwise would make every fee.)
    # Vertex SKUs that are not fees, so a fee rule must tell them apart (ILLUSTRATIVE).
    sku(
        "VTX0-0001-0001",
        "Vertex AI Pipelines Run",
        _AMERICAS,
        "0.03",
        service=VERTEX,
        family="ApplicationServices",
        group="Pipelines",
    ),
]
ILLUSTRATIVE = frozenset(s["skuId"] for s in SKUS if s["skuId"].startswith(("TRAP", "TIER", "FEE0", "VTX0")))


class BillingServer(GoogleApiServer):
    """The Catalog of Compute Engine and Vertex AI, paged ``max_page_size`` SKUs at a time.

    The real API pages at up to 5000 SKUs ("Requested page size. Defaults to 5000."); a small page
    here makes every test read several pages.
    """

    domain = "cloudbilling.googleapis.com"
    service = "cloudbilling.googleapis.com"

    def __init__(self, max_page_size: int = 7, skus: list[dict] | None = None) -> None:
        super().__init__()
        self.max_page_size = max_page_size
        self.catalog: dict[str, list[dict]] = {COMPUTE: [], VERTEX: []}
        for item in SKUS if skus is None else skus:
            service = item["name"].split("/")[1]
            self.catalog.setdefault(service, []).append(item)

    def remove(self, description: str) -> None:
        """Takes the SKUs with exactly this description out of the catalog (a SKU missing)."""
        for service, items in self.catalog.items():
            self.catalog[service] = [s for s in items if s["description"] != description]

    def set_price(self, description: str, price: str) -> None:
        """Changes the price (a single tier) of the SKUs with this description."""
        for items in self.catalog.values():
            for s in items:
                if s["description"] == description:
                    s["pricingInfo"][-1]["pricingExpression"]["tieredRates"] = [
                        {"startUsageAmount": 0, "unitPrice": _money(price)}
                    ]

    def routes(self):
        return [("GET", r"/v1/services/(?P<service>[^/]+)/skus", self._list)]

    def _list(self, request: Request, m: re.Match) -> dict:
        service = m["service"]
        if service not in self.catalog:
            # Illustrative: the answer to a service ID the Catalog does not know was not found.
            raise ApiError(404, f"Service services/{service} not found.", reason="NOT_FOUND")
        currency = request.param("currencyCode", "USD")
        if currency != "USD":
            raise ApiError(400, f"Currency {currency} is not served by this test server.")
        size = min(int(request.param("pageSize") or 0) or 5000, 5000, self.max_page_size)
        token = request.param("pageToken")
        try:
            start = int(base64.urlsafe_b64decode(token.encode()).decode()) if token else 0
        except ValueError:
            raise ApiError(400, "Invalid page token.", reason="INVALID_ARGUMENT") from None
        items = self.catalog[service]
        page = [self._shaped(request, s) for s in items[start : start + size]]
        out: dict = {"skus": page, "nextPageToken": ""}  # the real API sends "" on the last page
        if start + size < len(items):
            out["nextPageToken"] = base64.urlsafe_b64encode(str(start + size).encode()).decode()
        return out

    def _shaped(self, request: Request, item: dict) -> dict:
        if not request.int_enums:
            return item
        out = {**item, "geoTaxonomy": {**item["geoTaxonomy"], "type": _GEO[item["geoTaxonomy"]["type"]]}}
        info = dict(out["pricingInfo"][-1])
        info["aggregationInfo"] = {**info["aggregationInfo"], "aggregationLevel": 1, "aggregationInterval": 2}
        out["pricingInfo"] = [*out["pricingInfo"][:-1], info]
        return out
