"""Prices a spec's parts from Catalog SKUs: units and nanos, tiers, anchoring, regions, Spot and
Flex-start, TPUs by chip, UNKNOWN parts with their reasons (pure: no server)."""

from __future__ import annotations

import copy
from decimal import Decimal

import pytest

from tests.servers.billing import COMPUTE, SKUS, VERTEX, sku
from trainguard.errors import ConfigError
from trainguard.preflight.cost import parse_budget
from trainguard.pricing import Catalog, parse_sku, price_job
from trainguard.pricing.rules import Consumption, gpu_rule, host_rules, series_of
from trainguard.pricing.skus import money
from trainguard.spec import JobSpec, parse_spec

PROJECT = "tg-proj"


def catalog(skus: list[dict] = SKUS) -> Catalog:
    parsed = [parse_sku(s, s["name"].split("/")[1]) for s in skus]
    return Catalog(parsed, (COMPUTE, VERTEX))


def job(machine: str, accelerator: str | None = None, count: int = 0, *, region: str = "us-central1", **kw):
    return JobSpec.create(
        PROJECT,
        region,
        machine_type=machine,
        accelerator_type=accelerator,
        accelerator_count=count,
        image_uri="us-docker.pkg.dev/p/r/i:1",
        **kw,
    )


def with_boot_disk(disk_type: str, size_gb: int):
    """An n1-standard-4 job in us-central1 whose spec names its boot disk."""
    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": 1,
        "diskSpec": {"bootDiskType": disk_type, "bootDiskSizeGb": size_gb},
        "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/i:1"},
    }
    return parse_spec({"workerPoolSpecs": [pool]}, project=PROJECT, region="us-central1")


def infra(price) -> Decimal:
    """The Compute Engine part of a price: machine and accelerators (no disk, no fee)."""
    return sum(
        (
            p.per_hour
            for p in price.parts
            if p.per_hour is not None and "fee" not in p.what and "disk" not in p.what
        ),
        Decimal(0),
    )


def test_money_reads_int64_units_sent_as_strings_and_nanos():
    assert money({"currencyCode": "USD", "units": "9", "nanos": 796550569}) == Decimal("9.796550569")
    assert money({"nanos": 350000000}) == Decimal("0.35")


def test_tiers_apply_in_order_as_the_catalog_docs_example_says():
    # billing_v1 PricingExpression: "the first 20GB is free, the next 80GB is priced at $10 per GB
    # followed by $5 per GB for additional usage".
    [tiered] = [parse_sku(s, COMPUTE) for s in SKUS if s["skuId"] == "TIER-0001-0001"]
    assert tiered.rate is not None and tiered.rate.tiered
    assert tiered.rate.cost(Decimal(10)) == 0
    assert tiered.rate.cost(Decimal(150)) == 80 * 10 + 50 * 5


def test_a_monthly_disk_price_becomes_hourly_through_its_base_unit():
    [disk] = [parse_sku(s, COMPUTE) for s in SKUS if s["skuId"] == "B188-61DD-52E4"]
    # GiBy.mo with base unit By.s: the factor holds 31 days of GiB-seconds.
    assert disk.rate is not None
    assert disk.rate.per_hour == pytest.approx(Decimal("0.17") / (31 * 24), rel=Decimal("1e-12"))


def test_a100_on_demand_spot_and_flex_start_add_up_to_the_catalog_pulls_totals():
    cat = catalog()
    # The public pull of 2026-08-02 gives a2-highgpu-1g in us-central1 as $3.67363, $1.92768 and
    # $2.02038 an hour (12 vCPU + 85 GB + 1 A100) on demand, Spot and DWS flex-start.
    on_demand = price_job(job("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1), cat)
    spot = price_job(job("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1, spot=True), cat)
    flex = price_job(job("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1), cat, strategy="FLEX_START")
    assert infra(on_demand) == pytest.approx(Decimal("3.67363"), abs=Decimal("0.00001"))
    assert infra(spot) == pytest.approx(Decimal("1.92768"), abs=Decimal("0.00001"))
    assert infra(flex) == pytest.approx(Decimal("2.02038"), abs=Decimal("0.00001"))
    assert spot.consumption is Consumption.SPOT and flex.consumption is Consumption.FLEX_START
    assert all(p.known for p in on_demand.parts)
    # Spot discounts the infrastructure, not the management fee.
    fee = [p.per_hour for p in on_demand.parts if "fee" in p.what]
    assert fee == [p.per_hour for p in spot.parts if "fee" in p.what] and len(fee) == 3
    skus = {p.sku for p in spot.parts}
    assert (
        "Nvidia Tesla A100 GPU attached to Spot Preemptible VMs running in Americas (A100-0001-0002)" in skus
    )


def test_the_anchors_skip_commitment_reserved_80gb_and_regional_lookalikes():
    cat = catalog()
    price = price_job(job("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1), cat)
    chosen = " ".join(p.sku for p in price.parts)
    assert "Commitment" not in chosen and "Reserved" not in chosen and "80GB" not in chosen
    assert "Regional" not in chosen
    assert "SSD backed PD Capacity (B188-61DD-52E4)" in chosen


def test_other_shapes_match_public_per_unit_prices():
    cat = catalog()
    g2 = price_job(job("g2-standard-8", "NVIDIA_L4", 1), cat)
    assert infra(g2) == Decimal("0.853608")  # the public g2-standard-8 worked example, to the cent
    n1 = price_job(job("n1-standard-8", "NVIDIA_TESLA_T4", 1), cat)
    assert infra(n1) == 8 * Decimal("0.031611") + 30 * Decimal("0.004237") + Decimal("0.35")
    a3 = price_job(job("a3-highgpu-8g", "NVIDIA_H100_80GB", 8), cat)
    assert infra(a3) == 208 * Decimal("0.025498003") + 1872 * Decimal("0.00222034") + 8 * Decimal(
        "9.796550569"
    )


def test_singapore_n1_with_the_fee_is_the_published_vertex_price():
    price = price_job(job("n1-standard-4", region="asia-southeast1"), catalog())
    assert infra(price) == Decimal("0.234386")
    machine_and_fee = infra(price) + sum(p.per_hour for p in price.parts if "fee" in p.what and p.per_hour)
    assert machine_and_fee.quantize(Decimal("0.000001")) == Decimal("0.269544")  # Vertex's page, 2026-09-20
    assert price.complete


def test_us_central1_n1_with_the_fee_is_the_published_vertex_price():
    # The Vertex pricing page's n1-standard-4 in Iowa: $0.21849885/h (tests/servers/billing.py
    # [vertex-n1]); Compute Engine's part is the N1 SKUs' $0.189999.
    price = price_job(job("n1-standard-4"), catalog())
    assert infra(price) == Decimal("0.189999")
    fee = sum(p.per_hour for p in price.parts if "fee" in p.what and p.per_hour)
    assert infra(price) + fee == Decimal("0.21849885")
    assert all(not p.verified for p in price.parts if "fee" in p.what)  # the fee SKUs are ours


def test_boot_disks_are_priced_at_their_regions_catalog_price():
    # Cyclenerd pricing.yml (2026-07-30): pd-ssd $0.17 in us-central1, $0.187 in asia-southeast1;
    # pd-balanced $0.10 — per GiB-month, a 744-hour month in the catalog's base unit.
    here = [p for p in price_job(job("n1-standard-4"), catalog()).parts if "disk" in p.what]
    there = [
        p
        for p in price_job(job("n1-standard-4", region="asia-southeast1"), catalog()).parts
        if "disk" in p.what
    ]
    assert here[0].per_hour == pytest.approx(100 * Decimal("0.17") / 744, rel=Decimal("1e-12"))
    assert there[0].per_hour == pytest.approx(100 * Decimal("0.187") / 744, rel=Decimal("1e-12"))
    assert "SSD backed PD Capacity in Singapore" in there[0].sku
    spec = with_boot_disk("pd-balanced", 200)
    [balanced] = [p for p in price_job(spec, catalog()).parts if "disk" in p.what]
    assert "Balanced PD Capacity (6AE1-525F-8B80)" in balanced.sku and "Regional" not in balanced.sku
    assert balanced.per_hour == pytest.approx(200 * Decimal("0.1") / 744, rel=Decimal("1e-12"))


def test_tpu_v5e_is_priced_by_the_chip_in_its_region():
    spec = job("ct5lp-hightpu-4t", region="us-west4", tpu_topology="2x2")
    on_demand = price_job(spec, catalog())
    spot = price_job(spec, catalog(), strategy="SPOT")
    [chips] = [p for p in on_demand.parts if "chip" in p.what and "fee" not in p.what]
    assert chips.quantity == 4 and chips.per_hour == Decimal("4.8")
    assert "TpuV5e running in Las Vegas" in chips.sku  # not "Capacity Optimized TpuV5e …"
    [spot_chips] = [p for p in spot.parts if "chip" in p.what and "fee" not in p.what]
    assert spot_chips.per_hour == 4 * Decimal("0.494237")
    # The host VM is in the chip price: no vCPU or memory part.
    assert not [p for p in on_demand.parts if "vCPU" in p.what or "memory" in p.what]


def test_a_missing_sku_is_unknown_with_the_reason_never_a_number():
    without_l4 = [s for s in SKUS if s["description"] != "Nvidia L4 GPU running in Americas"]
    price = price_job(job("g2-standard-8", "NVIDIA_L4", 1), catalog(without_l4))
    [gpu] = [p for p in price.parts if p.what.startswith("1 × NVIDIA_L4") and "fee" not in p.what]
    assert gpu.per_hour is None and not price.complete
    assert "no Compute Engine SKU for NVIDIA_L4 in us-central1" in gpu.reason
    # The known parts still add up, as a lower bound.
    assert price.per_hour >= Decimal("0.2935")


def test_a_region_the_sku_is_not_sold_in_names_where_it_is():
    price = price_job(job("g2-standard-8", "NVIDIA_L4", 1, region="europe-west4"), catalog())
    [gpu] = [p for p in price.parts if p.what.startswith("1 × NVIDIA_L4") and "fee" not in p.what]
    assert "in europe-west4" in gpu.reason and "it is sold in us-central1" in gpu.reason


def test_skus_that_disagree_are_ambiguous_not_averaged():
    twin = copy.deepcopy([s for s in SKUS if s["skuId"] == "88B8-C3ED-03F0"][0])
    twin["skuId"] = "T4T4-0000-0002"
    twin["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]["nanos"] = 400000000
    price = price_job(job("n1-standard-8", "NVIDIA_TESLA_T4", 1), catalog([*SKUS, twin]))
    [gpu] = [p for p in price.parts if "T4" in p.what and "fee" not in p.what]
    assert gpu.per_hour is None and "at different prices" in gpu.reason


def test_machines_without_a_row_are_unknown_and_say_why():
    cat = catalog()
    mega = price_job(job("a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", 8), cat)
    reasons = " ".join(p.reason for p in mega.unknown)
    assert "machine-series table" in reasons  # A3 Mega's vCPU/memory SKUs are not known
    assert "NVIDIA_H100_MEGA_80GB in us-central1" in reasons  # not in this catalog
    a4 = price_job(job("a4-highgpu-8g", "NVIDIA_B200", 8), cat)
    assert not [p for p in a4.parts if "vCPU" in p.what]  # the GPU slice prices the machine


def test_the_management_fee_is_unknown_where_no_vertex_sku_names_it():
    price = price_job(job("g2-standard-8", "NVIDIA_L4", 1), catalog())
    fees = [p for p in price.parts if "fee" in p.what]
    assert fees and all(p.per_hour is None for p in fees) and not fees[0].verified
    assert "no Vertex AI SKU for management fee on" in fees[0].reason
    assert not price.complete


def test_replicas_and_pools_multiply():
    cat = catalog()
    one = price_job(job("n1-standard-8", "NVIDIA_TESLA_T4", 1), cat)
    three = price_job(job("n1-standard-8", "NVIDIA_TESLA_T4", 1, replica_count=3), cat)
    assert three.per_hour == 3 * one.per_hour
    assert [p.replicas for p in three.pools] == [1, 2]


def test_boot_disk_type_and_size_come_from_the_spec():
    spec = with_boot_disk("pd-standard", 500)
    [disk] = [p for p in price_job(spec, catalog()).parts if "disk" in p.what]
    assert disk.what.startswith("500 GiB pd-standard") and "Storage PD Capacity" in disk.sku
    assert disk.per_hour == pytest.approx(500 * Decimal("0.04") / 744, rel=Decimal("1e-9"))


def test_hours_for_inverts_the_cost():
    price = price_job(job("n1-standard-8", "NVIDIA_TESLA_T4", 1), catalog())
    hours = price.hours_for(100)
    assert hours is not None
    assert price.cost_for(hours) == pytest.approx(Decimal(100), abs=Decimal("0.000001"))


def test_rules_are_anchored_and_know_their_series():
    assert series_of("a3-highgpu-8g").name == "A3"
    assert series_of("a3-megagpu-8g") is None
    core, ram = host_rules(series_of("n1-standard-4"), Consumption.SPOT)
    assert core.pattern.match("Spot Preemptible N1 Predefined Instance Core running in Americas")
    assert not core.pattern.match("N1 Predefined Instance Core running in Americas")
    assert isinstance(host_rules(series_of("n1-standard-4"), Consumption.FLEX_START), str)
    rule = gpu_rule("NVIDIA_TESLA_A100", Consumption.ON_DEMAND)
    assert not rule.pattern.match("Nvidia Tesla A100 80GB GPU running in Americas")


@pytest.mark.parametrize("value", [-1, "nan", "inf", "ten"])
def test_a_budget_that_is_no_amount_is_bad_input(value):
    with pytest.raises(ConfigError, match="US dollars"):
        parse_budget(value)


def test_no_budget_is_none_and_dollars_parse():
    assert parse_budget(None) is None and parse_budget(0) is None and parse_budget("") is None
    assert parse_budget("$250.5") == Decimal("250.5")


def test_a_sku_in_another_currency_is_not_read_as_dollars():
    eur = sku(
        "EUR0-0001-0001", "Nvidia Tesla T4 GPU running in Americas", ["us-central1"], "0.3", group="GPU"
    )
    eur["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]["currencyCode"] = "EUR"
    parsed = parse_sku(eur, COMPUTE, "USD")
    assert parsed.rate is None and "EUR" in parsed.unreadable
