"""Quota arithmetic: demand per metric, the limit for a region, the newest usage, the verdict."""

from __future__ import annotations

from google.cloud import cloudquotas_v1

from trainguard.preflight.quota import (
    Demand,
    Limit,
    assess,
    demands,
    latest_usage,
    limit_in,
    resolve,
)
from trainguard.preflight.results import Status
from trainguard.spec import parse_spec

A100 = "aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus"


def spec(pools, strategy=""):
    data = {
        "workerPoolSpecs": [
            {"machineSpec": m, "replicaCount": n, "containerSpec": {"imageUri": "x/y:1"}} for m, n in pools
        ]
    }
    if strategy:
        data["scheduling"] = {"strategy": strategy}
    return parse_spec(data, project="tg-proj", region="us-central1")


def info(entries):
    return cloudquotas_v1.QuotaInfo(
        quota_id="Q",
        metric=A100,
        dimensions_infos=[
            cloudquotas_v1.DimensionsInfo(dimensions=dims, details=cloudquotas_v1.QuotaDetails(value=v))
            for dims, v in entries
        ],
    )


def test_pools_of_one_accelerator_sum_count_times_replicas():
    a100 = {"machineType": "a2-highgpu-2g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 2}
    [d, cpu], unknown = demands(spec([(a100, 1), (a100, 3), ({"machineType": "n1-standard-8"}, 1)]))
    assert (d.metric, d.units, d.pools, unknown) == (A100, 8, (0, 1), [])
    assert (cpu.metric, cpu.units, cpu.pools) == (
        "aiplatform.googleapis.com/custom_model_training_cpus",
        8,
        (2,),
    )


def test_cpu_only_pools_count_vcpus_against_their_family_metric():
    pools = [
        ({"machineType": "n2-standard-16"}, 1),
        ({"machineType": "n2-highmem-8"}, 3),
        ({"machineType": "e2-standard-4"}, 1),
    ]
    n2, n1e2 = demands(spec(pools))[0]
    assert (n2.metric.rsplit("/", 1)[1], n2.units, n2.unit) == (
        "custom_model_training_n2_cpus",
        16 + 24,
        "vCPUs",
    )
    assert (n1e2.metric.rsplit("/", 1)[1], n1e2.units) == ("custom_model_training_cpus", 4)
    [spot], _ = demands(spec([({"machineType": "n1-standard-4"}, 1)], "SPOT"))
    assert spot.metric.endswith("custom_model_training_preemptible_cpus")


def test_a_cpu_machine_without_a_vcpu_count_in_its_name_is_unknown():
    wanted, unknown = demands(spec([({"machineType": "e2-medium"}, 1)]))
    assert wanted == [] and "cannot tell the vCPUs" in unknown[0]


def test_a_multi_host_v5e_slice_counts_all_its_chips():
    tpu = {
        "machineType": "ct5lp-hightpu-4t",
        "acceleratorType": "TPU_V5_LITEPOD",
        "acceleratorCount": 4,
        "tpuTopology": "4x8",
    }
    [d], _ = demands(spec([(tpu, 1)]))
    assert d.metric.endswith("custom_model_training_tpu_v5e") and d.units == 32


def test_a_v4_pod_metric_is_found_by_pattern_and_counted_in_cores():
    tpu = {
        "machineType": "ct4p-hightpu-4t",
        "acceleratorType": "TPU_V4_POD",
        "acceleratorCount": 4,
        "tpuTopology": "2x2x2",
    }
    [d], unknown = demands(spec([(tpu, 1)]))
    assert unknown == [] and d.pattern is not None and d.units == 8
    metric = "aiplatform.googleapis.com/custom_model_training_tpu_v4_pod_cores"
    listed = {
        metric: cloudquotas_v1.QuotaInfo(metric=metric, quota_id="V4", metric_display_name="TPU v4 pod cores")
    }
    resolved = resolve(d, listed)
    assert (resolved.metric, resolved.units, resolved.unit) == (metric, 16, "cores")
    assert resolve(d, {A100: cloudquotas_v1.QuotaInfo(metric=A100)}) is None
    [spot], _ = demands(spec([(tpu, 1)], "SPOT"))
    assert resolve(spot, listed) is None  # the on-demand metric is not the Spot one


def test_spot_and_flex_start_use_the_preemptible_metric():
    a100 = {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 1}
    for strategy in ("SPOT", "FLEX_START"):
        [d], _ = demands(spec([(a100, 1)], strategy))
        assert d.metric.endswith("custom_model_training_preemptible_nvidia_a100_gpus")


def test_tpu_demand_is_in_chips_of_the_machine_type():
    tpu = {
        "machineType": "ct5lp-hightpu-8t",
        "acceleratorType": "TPU_V5_LITEPOD",
        "acceleratorCount": 8,
        "tpuTopology": "2x4",
    }
    [d], _ = demands(spec([(tpu, 1), (tpu, 2)]))
    assert d.metric.endswith("tpu_v5e") and d.units == 24


def test_region_entry_wins_then_the_default():
    q = info([({"region": "us-central1"}, 8), ({"region": "us-east1"}, 16), ({}, 2)])
    assert limit_in(q, "us-central1") == Limit(8, "Q", "region")
    assert limit_in(q, "europe-west4") == Limit(2, "Q", "default")
    assert limit_in(info([({"region": "us-east1"}, 4)]), "us-central1") is None


def test_latest_usage_reads_the_newest_point_and_no_series_is_unknown_not_zero():
    payload = {
        "timeSeries": [
            {
                "points": [
                    {"interval": {"endTime": "2026-01-01T00:00:00Z"}, "value": {"int64Value": "7"}},
                    {"interval": {"endTime": "2026-01-02T00:00:00Z"}, "value": {"int64Value": "3"}},
                ]
            }
        ]
    }
    assert latest_usage(payload) == 3
    # Monitoring repeats an unchanged usage sample only "at least every 24 hours": no series in
    # the window is not proof that nothing is in use.
    assert latest_usage({}) is None
    assert latest_usage({"timeSeries": [{"points": []}]}) is None


def test_verdicts_carry_the_numbers():
    d = Demand(A100, "NVIDIA_TESLA_A100", 4, (0,))
    ok = assess(d, project="p", region="us-central1", limit=Limit(8, "Q", "region"), usage=4)
    assert ok.status is Status.PASS and "limit 8, in use 4, requested 4" in ok.evidence
    short = assess(d, project="p", region="us-central1", limit=Limit(8, "Q", "region"), usage=5)
    assert short.status is Status.FAIL and "--preferred-value=9" in short.remedy
    assert short.details["available"] == 3
    # within the limit, short of free quota: Vertex accepts the job and it waits QUEUED
    assert "within the limit, but 5 in use leave 3" in short.evidence
    assert "stays QUEUED" in short.evidence and not short.details["refused_at_create"]
    unknown_usage = assess(
        d, project="p", region="us-central1", limit=Limit(8, "Q", "region"), usage=None, usage_problem="403"
    )
    assert unknown_usage.status is Status.WARN
    no_entry = assess(d, project="p", region="us-central1", limit=None, usage=0)
    assert no_entry.status is Status.UNKNOWN


def test_a_request_over_the_limit_is_refused_at_create_not_queued():
    d = Demand(A100, "NVIDIA_TESLA_A100", 16, (0, 1))
    over = assess(d, project="p", region="us-central1", limit=Limit(8, "Q", "region"), usage=None)
    assert over.status is Status.FAIL and over.details["refused_at_create"]
    assert "limit 8, requested 16" in over.evidence  # usage does not matter over the limit
    assert "Vertex refuses to create the job (429 RESOURCE_EXHAUSTED" in over.evidence
    assert "QUEUED" not in over.evidence
    assert "--preferred-value=16" in over.remedy


def test_alternatives_with_quota_come_with_their_limits():
    d = Demand(A100, "NVIDIA_TESLA_A100", 4, (0,))
    q = info([({"region": "us-central1"}, 0), ({"region": "europe-west4"}, 8), ({}, 0)])
    r = assess(d, project="p", region="us-central1", limit=limit_in(q, "us-central1"), usage=0, info=q)
    assert r.remedy.endswith("or run in europe-west4 (limit 8)")
    q0 = info([({}, 0)])
    r0 = assess(d, project="p", region="us-central1", limit=limit_in(q0, "us-central1"), usage=0, info=q0)
    assert "NVIDIA_TESLA_A100 is also offered in us-east1" in r0.remedy
