"""Offline compatibility checks: what a user would otherwise learn after provisioning."""

from __future__ import annotations

import pytest

from trainguard.preflight import Status, run_preflight
from trainguard.preflight.compat import check_machine
from trainguard.spec import JobSpec, parse_spec

P, R = "my-project", "us-central1"


def results(spec, name=None):
    report = run_preflight(spec, only=["compat"])
    return [r for r in report.results if name is None or name in r.title]


def job(machine, accel=None, count=0, region=R, **kw):
    return JobSpec.create(
        P,
        region,
        machine_type=machine,
        image_uri="img",
        accelerator_type=accel,
        accelerator_count=count,
        **kw,
    )


@pytest.mark.parametrize(
    "machine,accel,count",
    [
        ("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1),
        ("a2-highgpu-8g", "NVIDIA_TESLA_A100", 8),
        ("a2-megagpu-16g", "NVIDIA_TESLA_A100", 16),
        ("a2-ultragpu-2g", "NVIDIA_A100_80GB", 2),
        ("g2-standard-8", "NVIDIA_L4", 1),
        ("g2-standard-48", "NVIDIA_L4", 4),
        ("a3-highgpu-8g", "NVIDIA_H100_80GB", 8),
        ("a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", 8),
        ("a3-ultragpu-8g", "NVIDIA_H200_141GB", 8),
        ("a4-highgpu-8g", "NVIDIA_B200", 8),
        ("n1-standard-8", "NVIDIA_TESLA_T4", 1),
        ("n1-standard-96", "NVIDIA_TESLA_V100", 8),
        ("n1-highmem-16", "NVIDIA_TESLA_P100", 1),
        ("n1-standard-4", None, 0),
    ],
)
def test_valid_pairings_pass(machine, accel, count):
    assert check_machine(job(machine, accel, count).pools[0]).status == Status.PASS


@pytest.mark.parametrize(
    "machine,accel,count,evidence,remedy",
    [
        ("a2-highgpu-1g", "NVIDIA_TESLA_A100", 2, "NVIDIA_TESLA_A100 × 1, not 2", "acceleratorCount: 1"),
        ("a2-highgpu-1g", "NVIDIA_L4", 1, "takes NVIDIA_TESLA_A100", "g2-standard-8"),
        ("g2-standard-24", "NVIDIA_L4", 1, "× 2, not 1", "acceleratorCount: 2"),
        ("n2-standard-8", "NVIDIA_TESLA_T4", 1, "takes no accelerators", "n1-standard-8"),
        (
            "n1-standard-32",
            "NVIDIA_TESLA_V100",
            1,
            "NVIDIA_TESLA_V100 × 4 or 8, not 1",
            "acceleratorCount: 4",
        ),
        ("n1-standard-96", "NVIDIA_TESLA_P100", 2, "not 2", "acceleratorCount: 4"),
        ("a2-highgpu-1g", None, 0, "comes with 1 × NVIDIA_TESLA_A100", "acceleratorType: NVIDIA_TESLA_A100"),
    ],
)
def test_invalid_pairings_fail_with_the_fix(machine, accel, count, evidence, remedy):
    result = check_machine(job(machine, accel, count).pools[0])
    assert result.status == Status.FAIL
    assert evidence in result.evidence
    assert remedy in result.remedy


@pytest.mark.parametrize(
    "machine,suggestion",
    [
        ("z9-future-1g", None),
        ("n1-standrd-8", "n1-standard-8"),
        ("a2-highgpu1g", "a2-highgpu-1g"),
        ("A2-HIGHGPU-1G", "a2-highgpu-1g"),
    ],
)
def test_a_machine_type_of_no_known_family_fails_with_did_you_mean(machine, suggestion):
    result = check_machine(job(machine, "NVIDIA_L4", 1).pools[0])
    assert result.status == Status.FAIL
    assert "follows no known family's naming" in result.evidence
    if suggestion:
        assert f"did you mean {suggestion}?" in result.evidence
        assert f"machineType: {suggestion}" in result.remedy


@pytest.mark.parametrize("machine", ["a2-highgpu-3g", "a3-edgegpu-8g", "g2-standard-6", "ct6e-standard-4t"])
def test_a_new_type_of_a_known_family_only_warns(machine):
    result = check_machine(job(machine, "NVIDIA_L4", 1).pools[0])
    assert result.status == Status.WARN
    assert "has the shape of the" in result.evidence and "not in trainguard's table" in result.evidence


def test_tpu_topology_must_match_the_chips():
    ok = job("ct5lp-hightpu-4t", "TPU_V5_LITEPOD", 4, tpu_topology="2x2")
    assert check_machine(ok.pools[0]).status == Status.PASS
    wrong = job("ct5lp-hightpu-4t", "TPU_V5_LITEPOD", 4, tpu_topology="2x4")
    result = check_machine(wrong.pools[0])
    assert result.status == Status.FAIL and "tpuTopology: 2x2" in result.remedy
    missing = job("ct5lp-hightpu-8t", "TPU_V5_LITEPOD", 8)
    assert check_machine(missing.pools[0]).status == Status.WARN


@pytest.mark.parametrize("topology,chips,hosts", [("4x4", 16, 4), ("8x8", 64, 16), ("16x16", 256, 64)])
def test_a_v5e_multi_host_slice_passes_and_names_its_size(topology, chips, hosts):
    result = check_machine(job("ct5lp-hightpu-4t", "TPU_V5_LITEPOD", 4, tpu_topology=topology).pools[0])
    assert result.status == Status.PASS, result.evidence
    assert f"{topology} slice: {chips} TPU_V5_LITEPOD chips on {hosts} hosts" in result.evidence


def test_a_multi_host_slice_on_a_single_host_machine_type_fails():
    result = check_machine(job("ct5lp-hightpu-8t", "TPU_V5_LITEPOD", 8, tpu_topology="4x4").pools[0])
    assert result.status == Status.FAIL
    assert "forms the slices 2x4, not 4x4" in result.evidence


def test_a_v4_pod_slice_passes():
    result = check_machine(job("ct4p-hightpu-4t", "TPU_V4_POD", 4, tpu_topology="2x2x2").pools[0])
    assert result.status == Status.PASS and "8 TPU_V4_POD chips on 2 hosts" in result.evidence


def test_accelerator_missing_from_region_warns_with_regions_that_have_it():
    spec = job("ct5lp-hightpu-1t", "TPU_V5_LITEPOD", 1, region="europe-west4", tpu_topology="1x1")
    (result,) = results(spec, "TPU_V5_LITEPOD in europe-west4")
    assert result.status == Status.WARN
    assert "QUEUED" in result.evidence
    assert "us-central1" in result.remedy
    assert result.failure_class == "quota"


def test_spot_without_checkpoints_names_the_trap():
    (result,) = results(job("g2-standard-8", "NVIDIA_L4", 1, spot=True), "without checkpoints")
    assert result.status == Status.WARN
    assert "AIP_CHECKPOINT_DIR" in result.evidence
    assert result.failure_class == "preemption"
    ok = results(job("g2-standard-8", "NVIDIA_L4", 1, spot=True, base_output_dir="gs://bkt/r"))
    assert all(r.status == Status.PASS for r in ok)
    assert any("under gs://bkt/r/checkpoints/" in r.evidence for r in ok)


def test_mixing_tpu_and_gpu_pools_fails():
    data = {
        "workerPoolSpecs": [
            {
                "machineSpec": {
                    "machineType": "g2-standard-8",
                    "acceleratorType": "NVIDIA_L4",
                    "acceleratorCount": 1,
                },
                "containerSpec": {"imageUri": "i"},
            },
            {
                "machineSpec": {
                    "machineType": "ct5lp-hightpu-4t",
                    "acceleratorType": "TPU_V5_LITEPOD",
                    "acceleratorCount": 4,
                    "tpuTopology": "2x2",
                },
                "replicaCount": 1,
                "containerSpec": {"imageUri": "i"},
            },
        ]
    }
    (result,) = results(parse_spec(data, project=P, region=R), "mix")
    assert result.status == Status.FAIL


def test_max_wait_duration_without_flex_start_warns_and_flex_start_without_it_warns():
    data = {
        "workerPoolSpecs": [
            {"machineSpec": {"machineType": "n1-standard-4"}, "containerSpec": {"imageUri": "i"}}
        ],
        "scheduling": {"strategy": "STANDARD", "maxWaitDuration": "3600s"},
    }
    (r,) = results(parse_spec(data, project=P, region=R), "maxWaitDuration")
    assert r.status == Status.WARN and "FLEX_START" in r.evidence
    data["scheduling"] = {"strategy": "FLEX_START"}
    data["baseOutputDirectory"] = {"outputUriPrefix": "gs://b/x"}
    (r,) = results(parse_spec(data, project=P, region=R), "FLEX_START wait")
    assert r.status == Status.WARN


def test_non_gcs_output_and_malformed_service_account_fail_on_vertex():
    spec = job("n1-standard-4", base_output_dir="/tmp/out", service_account="trainer")
    found = {r.title: r for r in results(spec)}
    assert found["baseOutputDirectory"].status == Status.FAIL
    assert found["serviceAccount"].status == Status.FAIL


def test_too_short_timeout_warns():
    (r,) = results(job("n1-standard-4", timeout_s=60), "timeout")
    assert r.status == Status.WARN


def test_a_healthy_a100_spot_spec_has_no_false_alarm():
    from pathlib import Path

    from trainguard.spec import load_spec

    spec = load_spec(Path(__file__).resolve().parents[3] / "examples" / "a100-spot.yaml", project=P, region=R)
    report = run_preflight(spec, only=["compat"])
    assert report.results and all(r.status == Status.PASS for r in report.results)
    assert report.passed()


@pytest.mark.parametrize(
    "uri",
    [
        "gs://",
        "gs:///runs",
        "gs://My_Bucket/x",
        "gs://ab/x",
        "gs://bucket!/x",
        "gs://-bucket/x",
        "gs://" + "b" * 64 + "/x",
    ],
)
def test_an_output_uri_that_names_no_valid_bucket_fails_offline(uri):
    # "gs://" and "gs://Bad_Bucket!/x" once passed compat and reached Vertex.
    (found,) = results(job("n1-standard-4", base_output_dir=uri), "baseOutputDirectory")
    assert found.status == Status.FAIL and "names no valid bucket" in found.evidence


@pytest.mark.parametrize(
    "uri", ["gs://my-bucket", "gs://tg_out/runs/r1", "gs://a.b.example.com/x", "gs://" + "b" * 63]
)
def test_valid_bucket_names_pass(uri):
    assert not results(job("n1-standard-4", base_output_dir=uri), "baseOutputDirectory")
