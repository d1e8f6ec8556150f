"""The budget meter, the run's ledger and the money a stop saved (pure: the Catalog is the test
server's SKUs, parsed; polls are RunningJob values with the elapsed time the backend gives)."""

from __future__ import annotations

import io
from decimal import Decimal

import pytest

from tests.servers.billing import COMPUTE, SKUS, VERTEX
from trainguard.guard import HistoryGuard, JobCost
from trainguard.guard.ledger import Ledger
from trainguard.guard.savings import estimate
from trainguard.guard.spend import Meter, describe_price
from trainguard.launch.base import RunningJob, TrainResult
from trainguard.pricing import Catalog, parse_sku, price_job
from trainguard.spec import JobSpec

ON_DEMAND = Decimal("4.2475")  # a2-highgpu-1g in us-central1, every part (tests/servers/billing.py)


def catalog(without: str = "") -> Catalog:
    parsed = [parse_sku(s, s["name"].split("/")[1]) for s in SKUS if s["description"] != without]
    return Catalog(parsed, (COMPUTE, VERTEX))


def a100(replicas: int = 1, **kw) -> JobSpec:
    spec = JobSpec.create(
        "tg-proj",
        "us-central1",
        machine_type="a2-highgpu-1g",
        accelerator_type="NVIDIA_TESLA_A100",
        accelerator_count=1,
        image_uri="us-docker.pkg.dev/p/r/i:1",
        timeout_s=10 * 3600,
        **kw,
    )
    if replicas == 1:
        return spec
    from trainguard.spec import parse_spec

    data = spec.to_dict()  # the chief, and its workers in a second pool
    data["workerPoolSpecs"].append({**data["workerPoolSpecs"][0], "replicaCount": replicas - 1})
    return parse_spec(data, project="tg-proj", region="us-central1")


def running(elapsed_s: float, history: str = "") -> RunningJob:
    return RunningJob("projects/1/locations/us-central1/customJobs/7", "RUNNING", "", history, "", elapsed_s)


def ended(state: str, running_s: float) -> TrainResult:
    return TrainResult(state, "j", "", "", "", "", running_s=running_s)


def test_the_spend_is_time_run_times_the_price_of_every_replica():
    one = Meter(price_job(a100(), catalog()))
    three = Meter(price_job(a100(replicas=3), catalog()))
    assert one.spend(3600) == pytest.approx(ON_DEMAND, abs=Decimal("0.0001"))
    assert three.spend(1800) == pytest.approx(3 * ON_DEMAND / 2, abs=Decimal("0.0001"))
    assert "us-central1, a2-highgpu-1g × 1 + a2-highgpu-1g × 2, on-demand" in describe_price(three.price)


def test_the_budget_is_reached_at_the_hour_it_buys_and_not_before():
    meter = Meter(price_job(a100(), catalog()), budget=Decimal(10), spent_before=Decimal(2))
    buys_s = float((Decimal(8) / meter.price.per_hour) * 3600)  # $2 were spent by earlier attempts
    assert not meter.reached(buys_s - 1) and meter.reached(buys_s + 1)
    assert not Meter(meter.price).reached(10**7)  # no budget: never


def test_the_guard_stops_at_the_budget_with_the_evidence_even_with_the_history_guard_off():
    out = io.StringIO()
    meter = Meter(price_job(a100(), catalog()), budget=Decimal(5), wall_clock=lambda: 1_790_000_000.0)
    guard = HistoryGuard("off", cost=JobCost(1, 1, 10 * 3600, True), stream=out, spend=meter)
    stops = [guard.poll(running(60.0 * n)) for n in range(1, 200)]
    first = next(i for i, s in enumerate(stops) if s is not None)
    stop = stops[first]
    assert stop is not None and stop.failure_class == "budget" and not stop.success
    # The first poll at or past the budget: the one before was under it.
    assert stop.details["spend_usd"] >= 5 > float(meter.spend(60.0 * first))
    assert stop.evidence.startswith("spent $5.")
    assert (
        "of the $5.00 budget: 1 h 11 min RUNNING at $4.2475/h: us-central1, a2-highgpu-1g × 1, on-demand"
        in (stop.evidence)
    )
    assert "reached at 2026-09-21T" in stop.evidence
    # What it saved: the rest of its 10 h timeout at the same price.
    left = stop.details["hours_left"]
    assert stop.details["usd_saved"] == pytest.approx(float(ON_DEMAND) * left, rel=1e-3)
    assert "not spent at $4.2475/h" in stop.details["saved"]
    assert "stopping the job: budget: spent $5." in out.getvalue()
    assert "--budget" in stop.remedy


def test_the_money_saved_is_the_rest_of_the_run_at_its_price_beside_the_hours():
    meter = Meter(price_job(a100(), catalog()))
    guard = HistoryGuard("fail", cost=JobCost(1, 1, 10 * 3600, True), spend=meter)
    assert guard.cost is not None
    saved = meter.saved(estimate(guard.cost, 3600))
    assert saved["usd_saved"] == pytest.approx(9 * float(ON_DEMAND), rel=1e-4)
    assert saved["saved"].startswith("≈ 9 accelerator-hours saved") and "≈ $38.23 not spent" in saved["saved"]


def test_a_local_run_costs_nothing_and_its_budget_is_said_to_never_stop_it():
    said: list[str] = []
    ledger = Ledger(local=True, budget=Decimal(3), say=said.append)
    assert ledger.begin(a100()) is None and ledger.begin(a100()) is None
    assert ledger.end(ended("SUCCEEDED", 120.0)) == ""
    cost = ledger.report()
    assert cost.headline() == "cost: $0 (local: it ran on this machine, nothing is billed)"
    assert cost.usd == 0 and cost.metrics()["cost_local"] == 1.0
    assert len(said) == 1 and "a local run costs nothing ($0, local)" in said[0]


def test_an_unreadable_catalog_is_one_warning_and_an_unknown_cost_never_a_number():
    def refused():
        raise PermissionError("no credentials here")

    said: list[str] = []
    ledger = Ledger(budget=Decimal(3), catalog=refused, say=said.append)
    assert ledger.begin(a100()) is None  # no meter: the job runs without a budget stop
    ledger.end(ended("CANCELLED", 600.0))
    assert ledger.begin(a100()) is None
    ledger.end(ended("SUCCEEDED", 600.0))
    assert len(said) == 1 and said[0].startswith("WARNING: the guard cannot enforce the $3.00 budget")
    cost = ledger.report()
    assert cost.usd is None and cost.headline().startswith("cost: unknown over 2 attempts — no price:")
    assert "cost_usd" not in cost.metrics() and cost.metrics()["cost_price_complete"] == 0.0


def test_a_missing_sku_warns_that_only_the_priced_parts_are_enforced():
    said: list[str] = []
    ledger = Ledger(
        budget=Decimal(3),
        catalog=lambda: catalog("Nvidia Tesla A100 GPU running in Americas"),
        say=said.append,
    )
    meter = ledger.begin(a100())
    assert meter is not None and not meter.price.complete
    assert len(said) == 1 and "cannot fully enforce the $3.00 budget" in said[0]
    assert "no Compute Engine SKU for NVIDIA_TESLA_A100" in said[0]
    ledger.end(ended("SUCCEEDED", 3600.0))
    assert ledger.report().headline().startswith("cost: at least $1.")


def test_each_attempt_is_billed_at_its_own_price_and_a_failed_one_is_not_billed():
    ledger = Ledger(catalog=catalog)
    ledger.begin(a100())
    ledger.end(ended("FAILED", 1800.0))  # Vertex bills no failed training (its pricing page)
    spot = ledger.begin(a100(spot=True))
    assert spot is not None and spot.spent_before == 0
    ledger.end(ended("SUCCEEDED", 3600.0))
    cost = ledger.report()
    assert cost.usd == spot.price.cost_for(Decimal(1))
    first, second = cost.lines()[1:3]
    assert "#1 FAILED: $0 — a training that fails for any reason other than a user-initiated" in first
    assert (
        "#2 SUCCEEDED: $2.50 (1 h 00 min RUNNING at $2.5016/h: us-central1, a2-highgpu-1g × 1, spot)"
        in second
    )


def test_a_spent_budget_ends_the_attempts_and_the_next_meter_counts_what_was_spent():
    ledger = Ledger(budget=Decimal(5), catalog=catalog)
    ledger.begin(a100())
    assert ledger.end(ended("CANCELLED", 1800.0)) == ""  # $2.12: a relaunch may follow
    meter = ledger.begin(a100())
    assert meter is not None and meter.spent_before == pytest.approx(ON_DEMAND / 2, abs=Decimal("0.0001"))
    why = ledger.end(ended("CANCELLED", 3600.0))
    assert why.startswith("the $5.00 budget is spent ($6.37 so far): no relaunch")
