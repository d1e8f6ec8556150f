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
        ("n1-standard-96", "NVIDIA_TESLA_V100", 4, "not 4", "acceleratorCount: 8"),
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


@pytest.mark.parametrize("machine", ["c3-standard-8", "ct5p-hightpu-4t", "n2d-standard-8"])
def test_a_type_of_a_family_the_training_list_lacks_only_warns(machine):
    result = check_machine(job(machine, "NVIDIA_L4", 1).pools[0])
    assert result.status == Status.WARN
    assert "has the shape of the" in result.evidence and "does not list" in result.evidence


@pytest.mark.parametrize(
    "machine,closest",
    [
        ("n1-standard-2", "n1-standard-4"),
        ("a2-highgpu-3g", "a2-highgpu-4g"),
        ("g2-standard-6", "g2-standard-8"),
    ],
)
def test_a_type_training_does_not_take_fails_with_the_nearest_listed_one(machine, closest):
    """configure-compute lists every machine type training accepts: n1-standard-2 is not one."""
    result = check_machine(job(machine).pools[0])
    assert result.status == Status.FAIL
    assert "not one of the machine types Vertex AI training accepts" in result.evidence
    assert f"machineType: {closest}" in result.remedy


def test_tpu_topology_must_match_the_chips():
    ok = job("ct5lp-hightpu-4t", "TPU_V5_LITEPOD", 4, tpu_topology="2x2")
    assert check_machine(ok.pools[0]).status == Status.PASS
    wrong = job("ct5lp-hightpu-4t", "TPU_V5_LITEPOD", 4, tpu_topology="1x1")
    result = check_machine(wrong.pools[0])
    assert result.status == Status.FAIL and "tpuTopology: 2x2" in result.remedy


def test_a_tpu_v5e_without_topology_fails_and_a_v6e_one_only_warns():
    # google-cloud-aiplatform documents tpu_topology as "required for the TPU v5 versions"
    # (worker_spec_utils.py, training_jobs.py); it says no such thing of v6e
    v5e = check_machine(job("ct5lp-hightpu-8t", "TPU_V5_LITEPOD", 8).pools[0])
    assert v5e.status == Status.FAIL
    assert "requires for TPU v5" in v5e.evidence and "tpuTopology: 2x4" in v5e.remedy
    assert v5e.details["read"] == "2026-12-02"
    v6e = check_machine(JobSpec.create(P, R, machine_type="ct6e-standard-1t", image_uri="img").pools[0])
    assert v6e.status == Status.WARN and "tpuTopology: 1x1" in v6e.remedy


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
    assert "not offered for Vertex AI training in europe-west4" in result.evidence
    assert "us-central1" in result.remedy
    assert result.failure_class == "capacity"


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


def test_max_wait_duration_without_flex_start_fails_and_flex_start_waits_a_day_by_default():
    data = {
        "workerPoolSpecs": [
            {"machineSpec": {"machineType": "n1-standard-4"}, "containerSpec": {"imageUri": "i"}}
        ],
        "scheduling": {"strategy": "STANDARD", "maxWaitDuration": "3600s"},
    }
    (r,) = results(parse_spec(data, project=P, region=R), "maxWaitDuration")
    assert r.status == Status.FAIL and "only with FLEX_START" in r.evidence
    data["scheduling"] = {"strategy": "FLEX_START"}
    (r,) = results(parse_spec(data, project=P, region=R), "FLEX_START wait")
    assert r.status == Status.PASS and "1 day" in r.evidence
    data["scheduling"] = {"strategy": "FLEX_START", "maxWaitDuration": "0s"}
    (r,) = results(parse_spec(data, project=P, region=R), "FLEX_START wait")
    assert r.status == Status.WARN and "indefinitely" in r.evidence


def test_flex_start_without_checkpoints_does_not_claim_a_reclaim():
    """DWS capacity is not preemptible ("Your resources aren't preemptible")."""
    spec = job("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1)
    data = spec.to_dict() | {"scheduling": {"strategy": "FLEX_START"}}
    found = results(parse_spec(data, project=P, region=R))
    assert not any("reclaim" in r.evidence for r in found)


def tpu_spec(machine_spec, region=R, **pool):
    data = {"workerPoolSpecs": [{"machineSpec": machine_spec, "containerSpec": {"imageUri": "i"}, **pool}]}
    return parse_spec(data, project=P, region=region)


@pytest.mark.parametrize("accel", ["TPU_V2", "TPU_V3"])
def test_cloud_tpu_v2_v3_is_checked_not_crashed(accel):
    found = results(tpu_spec({"machineType": "cloud-tpu", "acceleratorType": accel, "acceleratorCount": 8}))
    assert all(r.status == Status.PASS for r in found), [(r.title, r.evidence) for r in found]
    (bad,) = results(
        tpu_spec({"machineType": "cloud-tpu", "acceleratorType": accel, "acceleratorCount": 12}),
        "machine/accelerator",
    )
    assert bad.status == Status.FAIL and "multiple of 32" in bad.evidence


def test_a_tpu_v3_pod_slice_fails_in_a_region_without_v3_pods():
    spec = tpu_spec({"machineType": "cloud-tpu", "acceleratorType": "TPU_V3", "acceleratorCount": 32})
    (r,) = results(spec, "TPU_V3 in us-central1")
    assert r.status == Status.FAIL and "Pod slices" in r.evidence and "europe-west4" in r.remedy
    eu = tpu_spec(
        {"machineType": "cloud-tpu", "acceleratorType": "TPU_V3", "acceleratorCount": 32},
        region="europe-west4",
    )
    assert all(r.status == Status.PASS for r in results(eu))


@pytest.mark.parametrize(
    "machine,topology",
    [("ct5lp-hightpu-4t", "4x4"), ("ct6e-standard-4t", "2x2"), ("tpu7x-standard-4t", "2x2x1")],
)
def test_tpu_given_as_machine_type_and_topology_only_is_googles_documented_form(machine, topology):
    found = results(tpu_spec({"machineType": machine, "tpuTopology": topology}))
    assert all(r.status == Status.PASS for r in found), [(r.title, r.evidence) for r in found]


def test_a_tpu_job_has_one_pool_with_one_replica():
    data = {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "2x2"},
                "containerSpec": {"imageUri": "i"},
            },
            {
                "machineSpec": {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "2x2"},
                "replicaCount": 3,
                "containerSpec": {"imageUri": "i"},
            },
        ]
    }
    spec = parse_spec(data, project=P, region=R)
    (r,) = results(spec, "TPU job layout")
    assert r.status == Status.FAIL and "one worker pool with replicaCount 1" in r.evidence


def test_h200_is_offered_in_europe_west4():
    (r,) = results(job("a3-ultragpu-8g", "NVIDIA_H200_141GB", 8, region="europe-west4"), "in europe-west4")
    assert r.status == Status.PASS


@pytest.mark.parametrize(
    "machine,accel,count,when",
    [
        ("n1-standard-4", "NVIDIA_TESLA_K80", 1, "May 1, 2024"),
        ("n1-standard-8", "NVIDIA_TESLA_P100", 2, "September 15, 2026"),
        ("n1-highmem-96", "NVIDIA_TESLA_K80", 8, "May 1, 2024"),
    ],
)
def test_an_accelerator_past_its_end_of_support_fails_with_the_date_and_a_replacement_that_works(
    machine, accel, count, when
):
    from trainguard import catalog

    found = results(job(machine, accel, count), "support")
    (r,) = found
    assert r.status == Status.FAIL and when in r.evidence and "NVIDIA_TESLA_T4" in r.remedy
    # the remedy's machine takes the replacement at the count it names
    named = [m for m in catalog.TRAINING_MACHINE_TYPES if m in r.remedy] or [machine]
    count_named = (
        int(r.remedy.rsplit("× ", 1)[-1].rstrip(")"))
        if "× " in r.remedy
        else int(r.remedy.rsplit(": ", 1)[-1])
    )
    rule = catalog.machine_rule(max(named, key=len))
    assert count_named in rule.accelerators["NVIDIA_TESLA_T4"]
    assert not any(
        x.status == Status.FAIL and "example n1-standard-8" in x.remedy
        for x in results(job(machine, accel, count))
    )


def test_boot_disks_outside_the_documented_types_and_sizes_fail():
    data = {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "diskSpec": {"bootDiskType": "pd-balanced", "bootDiskSizeGb": 50},
                "containerSpec": {"imageUri": "i"},
            }
        ]
    }
    found = {r.details["rule"]: r for r in results(parse_spec(data, project=P, region=R), "boot disk")}
    assert found["boot-disk-type"].status == Status.FAIL and "pd-balanced" in found["boot-disk-type"].evidence
    assert (
        found["boot-disk-size"].status == Status.FAIL
        and "bootDiskSizeGb: 100" in found["boot-disk-size"].remedy
    )


def test_a_psc_dns_peering_domain_without_its_trailing_dot_fails():
    data = {
        "workerPoolSpecs": [
            {"machineSpec": {"machineType": "n1-standard-4"}, "containerSpec": {"imageUri": "i"}}
        ],
        "pscInterfaceConfig": {
            "networkAttachment": "my-attachment",
            "dnsPeeringConfigs": [{"domain": "corp.example.com", "targetProject": "p", "targetNetwork": "n"}],
        },
    }
    (r,) = results(parse_spec(data, project=P, region=R), "dnsPeeringConfigs")
    assert r.status == Status.FAIL and "domain: corp.example.com." in r.remedy


@pytest.mark.parametrize(
    "extra",
    [{"scheduling": {"strategy": "FLEX_START"}}, {"persistentResourceId": "my-pr"}],
)
def test_a_reservation_in_a_job_whose_capacity_comes_from_elsewhere_is_named(extra):
    data = {
        "workerPoolSpecs": [
            {
                "machineSpec": {
                    "machineType": "a2-highgpu-1g",
                    "acceleratorType": "NVIDIA_TESLA_A100",
                    "acceleratorCount": 1,
                    "reservationAffinity": {"reservationAffinityType": "ANY_RESERVATION"},
                },
                "containerSpec": {"imageUri": "i"},
            }
        ],
        **extra,
    }
    found = [
        r
        for r in results(parse_spec(data, project=P, region=R))
        if r.details.get("rule") == "reservation-combination"
    ]
    assert len(found) == 1 and found[0].status == Status.WARN


def test_a_compat_sub_check_that_raises_is_an_internal_error_and_the_others_still_report(monkeypatch):
    from trainguard.preflight import compat

    def boom(pool):
        raise ValueError("too many values to unpack")

    monkeypatch.setattr(compat, "check_machine", boom)
    found = results(job("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1))
    errors = [r for r in found if r.status == Status.ERROR]
    assert len(errors) == 1 and "ValueError: too many values to unpack" in errors[0].evidence
    assert any(r.status == Status.PASS and "in us-central1" in r.title for r in found)
