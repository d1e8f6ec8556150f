"""Preflight ``cost`` against a loopback Cloud Billing Catalog, with google-cloud-billing's real
client: pages, the cache, the budget, a disabled API, the CLI, the JSON and the metrics."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.child_env import with_repo_on_path
from tests.servers.billing import BillingServer
from trainguard.preflight.checks import PreflightContext
from trainguard.preflight.cost import cost, cost_metrics
from trainguard.preflight.results import Status
from trainguard.pricing import clear_cache, fetch_catalog
from trainguard.spec import JobSpec

PROJECT = "tg-proj"


@pytest.fixture
def billing(monkeypatch):
    server = BillingServer(max_page_size=7).start()
    monkeypatch.setenv("TRAINGUARD_ENDPOINT_CLOUDBILLING", server.url)
    monkeypatch.setenv("TRAINGUARD_RETRY_DEADLINE", "2s")
    clear_cache()
    yield server
    clear_cache()
    server.stop()


def a100(*, spot: bool = False, timeout_s: int | None = None, region: str = "us-central1") -> JobSpec:
    return JobSpec.create(
        PROJECT,
        region,
        machine_type="a2-highgpu-1g",
        accelerator_type="NVIDIA_TESLA_A100",
        accelerator_count=1,
        image_uri="us-docker.pkg.dev/p/r/i:1",
        spot=spot,
        timeout_s=timeout_s,
    )


def run(spec: JobSpec, budget: float | None = None):
    return cost(PreflightContext(spec=spec, call_timeout_s=5.0, budget_usd=budget))


def test_every_page_of_both_services_is_read_once_per_run(billing):
    catalog = fetch_catalog()
    pages = billing.calls("/skus$")
    compute = [r for r in pages if "6F81-5844-456A" in r.path]
    vertex = [r for r in pages if "C7E2-9256-1C43" in r.path]
    assert len(compute) == -(-len(billing.catalog["6F81-5844-456A"]) // 7) > 1
    assert len(vertex) == -(-len(billing.catalog["C7E2-9256-1C43"]) // 7)
    assert compute[0].param("pageSize") == "5000" and compute[0].param("currencyCode") == "USD"
    assert compute[1].param("pageToken")  # the client followed nextPageToken
    assert len(catalog) == sum(len(v) for v in billing.catalog.values())
    fetch_catalog()
    assert len(billing.calls("/skus$")) == len(pages)  # cached: no second read


def test_price_and_the_default_seven_days_are_said(billing):
    price, at_timeout = run(a100())
    assert price.status is Status.PASS
    assert price.evidence.startswith("$4.2475/h on-demand in us-central1")
    assert "1 × NVIDIA_TESLA_A100 $2.9339" in price.evidence
    assert at_timeout.status is Status.PASS
    assert "Vertex's default 7-day timeout (scheduling.timeout is unset)" in at_timeout.evidence
    assert "$713.58" in at_timeout.evidence  # 168 h × $4.2475
    assert "no budget given" in at_timeout.evidence


def test_over_the_budget_fails_with_the_hours_it_buys_and_the_timeout_that_fits(billing):
    _, verdict = run(a100(spot=True, timeout_s=86400), budget=50)
    assert verdict.status is Status.FAIL
    assert "$60.04 if it runs to scheduling.timeout 24 h" in verdict.evidence
    assert "over the $50.00 budget, which buys 19 h 59 min of this job" in verdict.evidence
    assert "set scheduling.timeout to 71954s (19 h 59 min) or less" in verdict.remedy
    assert "raise --budget to $60.04" in verdict.remedy
    assert verdict.details["budget_hours"] == pytest.approx(50 / 2.501574, rel=1e-4)


def test_within_the_budget_passes_and_says_what_it_buys(billing):
    _, verdict = run(a100(spot=True, timeout_s=86400), budget=500)
    assert verdict.status is Status.PASS
    assert "within the $500.00 budget, which buys 199 h 52 min" in verdict.evidence


def test_an_unpriced_part_is_unknown_and_a_budget_it_might_exceed_is_unknown(billing):
    billing.remove("Nvidia Tesla A100 GPU running in Americas")
    price, verdict = run(a100(timeout_s=3600), budget=100)
    assert price.status is Status.UNKNOWN
    assert price.evidence.startswith("at least $")
    assert "no Compute Engine SKU for NVIDIA_TESLA_A100 in us-central1" in price.evidence
    assert verdict.status is Status.UNKNOWN and "some parts have no price" in verdict.evidence


def test_known_parts_over_the_budget_fail_even_when_others_are_unknown(billing):
    billing.remove("Vertex AI Training Management Fee for Nvidia Tesla A100 GPU running in Americas")
    _, verdict = run(a100(), budget=10)
    assert verdict.status is Status.FAIL and "at least $" in verdict.evidence


def test_a_disabled_billing_api_says_how_to_enable_it(billing):
    billing.disable(consumer="123456789012")
    [result] = run(a100(), budget=10)
    assert result.status is Status.UNKNOWN
    assert (
        "Cloud Billing API (cloudbilling.googleapis.com) is not enabled in project 123456789012"
        in result.evidence
    )
    assert "gcloud services enable cloudbilling.googleapis.com --project" in result.remedy
    assert result.details["budget_usd"] == 10


def test_metrics_carry_the_price_and_the_budget(billing):
    metrics = cost_metrics(run(a100(spot=True, timeout_s=86400), budget=50))
    assert metrics["cost_usd_per_hour"] == pytest.approx(2.501574, abs=1e-6)
    assert metrics["cost_at_timeout_usd"] == 60.04
    assert metrics["budget_usd"] == 50 and metrics["budget_hours"] == pytest.approx(19.9874, abs=1e-3)
    assert metrics["cost_price_complete"] == 1.0


def test_preflight_stage_logs_cost_metrics_to_the_component_sink(billing, tmp_path):
    from trainguard.errors import PreflightFailed
    from trainguard.stages import preflight_stage

    class Sink:
        def __init__(self):
            self.values = {}

        def log_metric(self, key, value):
            self.values[key] = value

    sink = Sink()
    with pytest.raises(PreflightFailed, match="cost"):
        preflight_stage(
            a100(spot=True, timeout_s=86400),
            project=PROJECT,
            region="us-central1",
            only="cost",
            budget=50,
            metrics=sink,
            json_path=str(tmp_path / "r.json"),
        )
    assert sink.values["cost_at_timeout_usd"] == 60.04 and sink.values["failed"] == 1.0
    report = json.loads((tmp_path / "r.json").read_text())
    [verdict] = [r for r in report["results"] if r["status"] == "FAIL"]
    assert verdict["details"]["budget_usd"] == 50.0


@pytest.mark.slow
def test_cli_budget_fails_with_exit_1_and_bad_budget_is_exit_2(billing, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "workerPoolSpecs:\n"
        "  - machineSpec: {machineType: a2-highgpu-1g, acceleratorType: NVIDIA_TESLA_A100,\n"
        "                  acceleratorCount: 1}\n"
        "    replicaCount: 1\n"
        "    containerSpec: {imageUri: us-docker.pkg.dev/p/r/i:1}\n"
        "scheduling: {strategy: SPOT, timeout: 86400s}\n"
    )
    env = with_repo_on_path()
    env["TRAINGUARD_ENDPOINT_CLOUDBILLING"] = billing.url
    entry = "from trainguard.entry import main; main()"
    base = [sys.executable, "-c", entry, "preflight", str(spec), "-p", PROJECT, "-r", "us-central1"]
    out = subprocess.run([*base, "--only", "cost", "--budget", "50"], capture_output=True, text=True, env=env)
    assert out.returncode == 1, out.stderr
    assert "over the $50.00 budget" in out.stdout and "scheduling: {timeout: 71954s}" in out.stdout
    bad = subprocess.run([*base, "--only", "cost", "--budget", "-5"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "--budget must be an amount of US dollars" in bad.stderr
    assert "Traceback" not in bad.stderr
