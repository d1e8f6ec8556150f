"""Accelerator quota against loopback Cloud Quotas + Monitoring, with the real clients."""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.integration.conftest import A100, A100_SPOT, PROJECT, REGION, context, make_spec
from trainguard.preflight import quota as quota_mod
from trainguard.preflight.results import Status

IMAGE = "127.0.0.1:1/unused:1"


def _pool(machine: str, accel: str, count: int, replicas: int) -> dict:
    return {
        "machineSpec": {"machineType": machine, "acceleratorType": accel, "acceleratorCount": count},
        "replicaCount": replicas,
        "containerSpec": {"imageUri": IMAGE},
    }


def run(spec, timeout: float = 5.0):
    return quota_mod.quota(context(spec, timeout))


def test_room_in_region_passes_with_the_numbers(loopback):
    loopback.quotas.max_page_size = 2  # 5 QuotaInfos: the A100 one is on the second page
    [result] = run(make_spec(IMAGE))
    assert result.status is Status.PASS
    assert "limit 8, in use 2, requested 1" in result.evidence
    assert "6 available" in result.evidence
    assert len(loopback.quotas.calls("quotaInfos$")) == 3  # every page was read


def test_multi_pool_job_beyond_the_limit_fails_with_increase_command_and_regions(loopback):
    loopback.monitoring.set_usage(A100, REGION, 3)
    pools = [
        _pool("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1, 1),
        _pool("a2-highgpu-2g", "NVIDIA_TESLA_A100", 2, 3),
    ]
    [result] = run(make_spec(IMAGE, pools=pools))
    assert result.status is Status.FAIL
    assert result.failure_class == "quota"
    assert f"{A100} in {REGION}: limit 8, in use 3, requested 7" in result.evidence
    assert "workerPoolSpecs[0], workerPoolSpecs[1]" in result.evidence
    assert "within the limit" in result.evidence and "stays QUEUED" in result.evidence
    assert "gcloud quotas preferences create --service=aiplatform.googleapis.com" in result.remedy
    assert f"--project={PROJECT}" in result.remedy
    assert "--preferred-value=10 --dimensions=region=us-central1" in result.remedy
    assert "--quota-id=CustomModelTrainingNvidiaA100GpusPerProjectPerRegion" in result.remedy
    assert "https://console.cloud.google.com/iam-admin/quotas?project=tg-proj" in result.remedy
    # us-east1 has an explicit limit of 16 that fits: it is offered first, with its number
    assert "or run in us-east1 (limit 16)" in result.remedy


def test_spot_uses_the_preemptible_metric(loopback):
    loopback.monitoring.set_usage(A100_SPOT, REGION, 30)
    [result] = run(make_spec(IMAGE, strategy="SPOT"))
    assert result.status is Status.PASS
    assert A100_SPOT in result.evidence and "limit 32, in use 30, requested 1" in result.evidence
    [call] = loopback.monitoring.calls("timeSeries")
    assert f'metric.label.quota_metric="{A100_SPOT}"' in call.param("filter")
    assert 'resource.label.location="us-central1"' in call.param("filter")


def test_region_without_its_own_entry_uses_the_default_limit(loopback):
    [result] = run(make_spec(IMAGE, region="europe-west4"))
    assert result.status is Status.FAIL
    assert "limit 0" in result.evidence
    assert "NVIDIA_TESLA_A100 has no quota in europe-west4" in result.evidence
    assert "us-central1 (limit 8)" in result.remedy


def test_tpu_quota_counts_chips(loopback):
    metric = "aiplatform.googleapis.com/custom_model_training_tpu_v5e"
    loopback.quotas.set_limit(metric, 4, region=REGION)
    pools = [
        {
            **_pool("ct5lp-hightpu-4t", "TPU_V5_LITEPOD", 4, 1),
            "machineSpec": {
                "machineType": "ct5lp-hightpu-4t",
                "acceleratorType": "TPU_V5_LITEPOD",
                "acceleratorCount": 4,
                "tpuTopology": "2x2",
            },
        },
        {
            **_pool("ct5lp-hightpu-4t", "TPU_V5_LITEPOD", 4, 1),
            "machineSpec": {
                "machineType": "ct5lp-hightpu-4t",
                "acceleratorType": "TPU_V5_LITEPOD",
                "acceleratorCount": 4,
                "tpuTopology": "2x2",
            },
        },
    ]
    [result] = run(make_spec(IMAGE, pools=pools))
    assert result.status is Status.FAIL
    assert "limit 4, requested 8" in result.evidence and "Vertex refuses to create" in result.evidence


def test_unlimited_quota_passes(loopback):
    loopback.quotas.set_limit(A100, -1, region=REGION)
    [result] = run(make_spec(IMAGE))
    assert result.status is Status.PASS and "unlimited" in result.evidence


def test_monitoring_newest_point_is_the_usage(loopback):
    loopback.monitoring.set_usage(A100, REGION, 2, previous=8)
    [result] = run(make_spec(IMAGE))
    assert "in use 2" in result.evidence


def test_usage_unreadable_compares_the_limit_alone_and_warns(loopback):
    loopback.monitoring.fail(
        "timeSeries",
        403,
        times=None,
        metadata={"permission": "monitoring.timeSeries.list", "resource": f"projects/{PROJECT}"},
    )
    [result] = run(make_spec(IMAGE))
    assert result.status is Status.WARN
    assert "limit 8 covers the 1 requested" in result.evidence
    assert "usage is unknown" in result.evidence
    assert "monitoring.timeSeries.list" in result.evidence
    assert "roles/monitoring.viewer" in result.remedy


def test_usage_unreadable_and_limit_too_small_still_fails(loopback):
    loopback.monitoring.fail("timeSeries", 403, times=None)
    pools = [
        _pool("a2-highgpu-8g", "NVIDIA_TESLA_A100", 8, 1),
        _pool("a2-highgpu-8g", "NVIDIA_TESLA_A100", 8, 1),
    ]
    [result] = run(make_spec(IMAGE, pools=pools))
    assert result.status is Status.FAIL
    assert "limit 8, requested 16" in result.evidence and "Vertex refuses to create" in result.evidence


def test_quotas_forbidden_is_unknown_naming_the_permission_and_the_gcloud_check(loopback):
    loopback.quotas.fail(
        "quotaInfos",
        403,
        times=None,
        metadata={"permission": "cloudquotas.quotas.get", "resource": f"projects/{PROJECT}"},
    )
    [result] = run(make_spec(IMAGE))
    assert result.status is Status.UNKNOWN
    assert "cloudquotas.quotas.get" in result.evidence
    assert "roles/cloudquotas.viewer" in result.evidence
    assert (
        f"gcloud quotas info list --service=aiplatform.googleapis.com --project={PROJECT} "
        f"--filter=metric={A100}"
    ) in result.remedy


def test_rate_limited_then_answers_is_retried(loopback):
    loopback.quotas.fail("quotaInfos", 429, times=1)
    loopback.monitoring.fail("timeSeries", 503, times=1)
    [result] = run(make_spec(IMAGE))
    assert result.status is Status.PASS
    assert len(loopback.quotas.calls("quotaInfos")) == 3  # 429, then both pages
    assert len(loopback.monitoring.calls("timeSeries")) == 2


def test_slow_quota_api_is_unknown_after_the_call_timeout(loopback):
    loopback.quotas.slow("quotaInfos", 1.5)
    [result] = run(make_spec(IMAGE), timeout=0.4)
    assert result.status is Status.UNKNOWN
    assert "did not answer within 0.4 s" in result.evidence


CPUS = "aiplatform.googleapis.com/custom_model_training_cpus"
N2_CPUS = "aiplatform.googleapis.com/custom_model_training_n2_cpus"


def _cpu_pool(machine: str, replicas: int) -> dict:
    return {
        "machineSpec": {"machineType": machine},
        "replicaCount": replicas,
        "containerSpec": {"imageUri": IMAGE},
    }


def test_cpu_only_job_passes_on_its_cpu_quota_with_the_numbers(loopback):
    loopback.monitoring.set_usage(CPUS, REGION, 4)
    [result] = run(make_spec(IMAGE, pools=[_cpu_pool("n1-standard-8", 1)]))
    assert result.status is Status.PASS
    assert f"{CPUS} in {REGION}: limit 24, in use 4, requested 8 vCPUs" in result.evidence


def test_cpu_only_job_beyond_its_family_quota_fails_with_the_increase(loopback):
    loopback.quotas.set_limit(N2_CPUS, 32, region=REGION)
    loopback.monitoring.set_usage(N2_CPUS, REGION, 16)
    pools = [_cpu_pool("n2-standard-16", 1), _cpu_pool("n2-standard-16", 1)]
    [result] = run(make_spec(IMAGE, pools=pools))
    assert result.status is Status.FAIL
    assert "limit 32, in use 16, requested 32 vCPUs" in result.evidence
    assert "--preferred-value=48" in result.remedy and "CustomModelTrainingN2Cpus" in result.remedy


def test_cpu_family_metric_the_project_does_not_list_is_unknown(loopback):
    [result] = run(make_spec(IMAGE, pools=[_cpu_pool("c3-standard-8", 1)]))
    assert result.status is Status.UNKNOWN
    assert "custom_model_training_c3_cpus" in result.evidence
    assert "gcloud quotas info list" in result.remedy


def test_a_v5e_multi_host_slice_is_charged_its_chips(loopback):
    metric = "aiplatform.googleapis.com/custom_model_training_tpu_v5e"
    loopback.quotas.set_limit(metric, 16, region=REGION)
    pools = [
        {
            "machineSpec": {
                "machineType": "ct5lp-hightpu-4t",
                "acceleratorType": "TPU_V5_LITEPOD",
                "acceleratorCount": 4,
                "tpuTopology": "4x8",
            },
            "replicaCount": 1,
            "containerSpec": {"imageUri": IMAGE},
        }
    ]
    [result] = run(make_spec(IMAGE, pools=pools))
    assert result.status is Status.FAIL
    assert "limit 16, requested 32 chips" in result.evidence


def test_a_v4_pod_gets_a_real_verdict_when_the_project_lists_its_metric(loopback):
    metric = "aiplatform.googleapis.com/custom_model_training_tpu_v4_pod_cores"
    loopback.quotas.set_limit(metric, 64, region=REGION)
    pools = [
        {
            "machineSpec": {
                "machineType": "ct4p-hightpu-4t",
                "acceleratorType": "TPU_V4_POD",
                "acceleratorCount": 4,
                "tpuTopology": "2x2x4",
            },
            "replicaCount": 1,
            "containerSpec": {"imageUri": IMAGE},
        }
    ]
    loopback.monitoring.set_usage(metric, REGION, 0)  # allocated before, nothing now
    [result] = run(make_spec(IMAGE, pools=pools))
    assert result.status is Status.PASS, result.evidence
    assert f"{metric} in {REGION}: limit 64, in use 0, requested 32 cores" in result.evidence
    loopback.monitoring.set_usage(metric, REGION, 40)
    [result] = run(make_spec(IMAGE, pools=pools))
    assert result.status is Status.FAIL


def test_a_v4_pod_whose_metric_is_not_listed_is_unknown_not_a_guess(loopback):
    pools = [
        {
            "machineSpec": {
                "machineType": "ct4p-hightpu-4t",
                "acceleratorType": "TPU_V4_POD",
                "acceleratorCount": 4,
                "tpuTopology": "2x2x1",
            },
            "replicaCount": 1,
            "containerSpec": {"imageUri": IMAGE},
        }
    ]
    [result] = run(make_spec(IMAGE, pools=pools))
    assert result.status is Status.UNKNOWN
    assert "lists no metric matching" in result.evidence and "TPU_V4_POD" in result.evidence


@pytest.mark.long
def test_many_rate_limits_give_up_as_unknown(loopback):
    loopback.quotas.fail("quotaInfos", 429, times=None)
    [result] = run(make_spec(IMAGE), timeout=1.0)
    assert result.status is Status.UNKNOWN


# --- what Monitoring's sampling allows (issue 28) -------------------------------------------------


def test_a_usage_sample_repeated_almost_a_day_ago_is_still_read(loopback):
    # Unchanged usage is repeated "at least every 24 hours": a 24 h window could miss a sample
    # 24.5 h old and call the metric unused.
    loopback.monitoring.set_usage(A100, REGION, 7, age_s=24.5 * 3600)
    [result] = run(make_spec(IMAGE, pools=[_pool("a2-highgpu-2g", "NVIDIA_TESLA_A100", 2, 1)]))
    assert result.status is Status.FAIL
    assert "limit 8, in use 7, requested 2" in result.evidence and "stays QUEUED" in result.evidence
    [call] = loopback.monitoring.calls("timeSeries")
    start, end = call.param("interval.startTime"), call.param("interval.endTime")
    span = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    assert span.total_seconds() > 24 * 3600


def test_no_usage_sample_is_unknown_usage_not_zero(loopback):
    loopback.monitoring.usage.clear()
    [result] = run(make_spec(IMAGE))
    assert result.status is Status.WARN
    assert "limit 8 covers the 1 requested" in result.evidence
    assert "holds no quota-usage sample" in result.evidence and "not counted as 0" in result.evidence
    assert result.details["usage"] is None


def test_monitoring_disabled_is_enable_the_api_not_a_role(loopback):
    loopback.monitoring.disable(consumer="123456789012")
    [result] = run(make_spec(IMAGE))
    assert result.status is Status.WARN
    assert "Cloud Monitoring API (monitoring.googleapis.com) is not enabled" in result.evidence
    assert result.remedy.startswith(
        "enable the API: gcloud services enable monitoring.googleapis.com --project=123456789012"
    )
    assert "roles/" not in result.remedy


def test_cloud_quotas_disabled_is_unknown_with_the_enable_line(loopback):
    loopback.quotas.disable(consumer="123456789012")
    [result] = run(make_spec(IMAGE))
    assert result.status is Status.UNKNOWN
    assert "Cloud Quotas API (cloudquotas.googleapis.com) is not enabled in project 123456789012" in (
        result.evidence
    )
    assert "gcloud services enable cloudquotas.googleapis.com --project=123456789012" in result.remedy
    assert "roles/cloudquotas.viewer" not in result.remedy
    assert result.details["lacking_permission"] == ""
