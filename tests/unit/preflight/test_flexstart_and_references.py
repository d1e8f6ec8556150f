"""Offline compat rules: Flex-start (DWS) requirements and the resource names a spec references."""

from __future__ import annotations

import pytest

from trainguard.preflight import Status, run_preflight
from trainguard.preflight.references import parse_reservation
from trainguard.spec import parse_spec

P, R = "my-project", "us-central1"
A100 = {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 1}


def spec(*machines, strategy="", timeout="", **extra):
    data = {
        "workerPoolSpecs": [
            {"machineSpec": dict(m), "replicaCount": 1, "containerSpec": {"imageUri": "i"}} for m in machines
        ]
    }
    scheduling = {}
    if strategy:
        scheduling["strategy"] = strategy
    if timeout:
        scheduling["timeout"] = timeout
    if scheduling:
        data["scheduling"] = scheduling
    data["baseOutputDirectory"] = {"outputUriPrefix": "gs://b/run"}
    data.update(extra)
    return parse_spec(data, project=P, region=R)


def compat(job, title=""):
    report = run_preflight(job, only=["compat"])
    return [r for r in report.results if title in r.title]


# --- Flex-start ---------------------------------------------------------------------------------


def test_a_healthy_flex_start_job_passes_all_three_requirements():
    found = compat(
        spec(
            A100,
            A100,
            strategy="FLEX_START",
            timeout="86400s",
            scheduling={"strategy": "FLEX_START", "timeout": "86400s", "maxWaitDuration": "3600s"},
        ),
        "Flex-start",
    )
    assert {r.title: r.status for r in found} == {
        "Flex-start GPU types": Status.PASS,
        "Flex-start timeout": Status.PASS,
        "Flex-start machine configuration": Status.PASS,
    }


def test_a_14_day_flex_start_timeout_fails():
    (r,) = compat(spec(A100, strategy="FLEX_START", timeout=f"{14 * 86400}s"), "Flex-start timeout")
    assert r.status is Status.FAIL
    assert "14 days" in r.evidence and "at most 7 days" in r.evidence
    assert "scheduling.timeout: 604800s" in r.remedy
    assert r.details["source"].endswith("schedule-jobs-dws")


def test_exactly_seven_days_or_unset_passes():
    for timeout in (f"{7 * 86400}s", ""):
        (r,) = compat(spec(A100, strategy="FLEX_START", timeout=timeout), "Flex-start timeout")
        assert r.status is Status.PASS


@pytest.mark.parametrize(
    "machine",
    [
        {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1},
        {"machineType": "n1-standard-8"},
        {
            "machineType": "ct5lp-hightpu-4t",
            "acceleratorType": "TPU_V5_LITEPOD",
            "acceleratorCount": 4,
            "tpuTopology": "2x2",
        },
    ],
)
def test_flex_start_rejects_gpus_it_does_not_take(machine):
    (r,) = compat(spec(machine, strategy="FLEX_START"), "Flex-start GPU types")
    assert r.status is Status.FAIL
    assert "NVIDIA_L4" in r.evidence and "NVIDIA_B200" in r.evidence
    assert r.failure_class == "capacity"


@pytest.mark.parametrize(
    "accel,machine,count",
    [
        ("NVIDIA_L4", "g2-standard-8", 1),
        ("NVIDIA_A100_80GB", "a2-ultragpu-1g", 1),
        ("NVIDIA_H100_80GB", "a3-highgpu-8g", 8),
        ("NVIDIA_H200_141GB", "a3-ultragpu-8g", 8),
        ("NVIDIA_B200", "a4-highgpu-8g", 8),
        ("NVIDIA_H100_MEGA_80GB", "a3-megagpu-8g", 8),
    ],
)
def test_flex_start_takes_every_documented_gpu(accel, machine, count):
    (r,) = compat(
        spec(
            {"machineType": machine, "acceleratorType": accel, "acceleratorCount": count},
            strategy="FLEX_START",
        ),
        "Flex-start GPU types",
    )
    assert r.status is Status.PASS


def test_flex_start_needs_one_machine_configuration_for_all_pools():
    two = {**A100, "machineType": "a2-highgpu-2g", "acceleratorCount": 2}
    (r,) = compat(spec(A100, two, strategy="FLEX_START"), "machine configuration")
    assert r.status is Status.FAIL
    assert "workerPoolSpecs[0] a2-highgpu-1g + 1 × NVIDIA_TESLA_A100" in r.evidence
    assert "workerPoolSpecs[1] a2-highgpu-2g + 2 × NVIDIA_TESLA_A100" in r.evidence


def test_no_flex_start_rules_for_other_strategies():
    assert (
        compat(
            spec({"machineType": "n1-standard-4"}, strategy="SPOT", timeout=f"{14 * 86400}s"), "Flex-start"
        )
        == []
    )


# --- resource names -----------------------------------------------------------------------------


def test_network_must_name_the_project_number():
    (r,) = compat(spec(A100, network="projects/my-project/global/networks/vpc"), "network")
    assert r.status is Status.FAIL and "project *number*" in r.evidence
    assert "gcloud projects describe my-project" in r.remedy
    assert compat(spec(A100, network="projects/123456789012/global/networks/vpc"), "network") == []
    (r,) = compat(spec(A100, network="vpc"), "network")
    assert r.status is Status.FAIL


def test_reserved_ranges_without_a_network_fail():
    (r,) = compat(spec(A100, reservedIpRanges=["vertex-range"]), "reservedIpRanges")
    assert r.status is Status.FAIL and "network is not" in r.evidence


def test_vpc_peering_is_refused_for_h200():
    h200 = {"machineType": "a3-ultragpu-8g", "acceleratorType": "NVIDIA_H200_141GB", "acceleratorCount": 8}
    (r,) = compat(spec(h200, network="projects/123456789012/global/networks/vpc"), "network peering")
    assert r.status is Status.FAIL
    assert "pscInterfaceConfig.networkAttachment" in r.remedy


def test_network_attachment_must_be_in_the_job_region():
    name = "projects/my-project/regions/europe-west4/networkAttachments/att"
    (r,) = compat(spec(A100, pscInterfaceConfig={"networkAttachment": name}), "PSC")
    assert r.status is Status.FAIL and "europe-west4" in r.evidence
    assert "--region=us-central1" in r.remedy
    assert compat(spec(A100, pscInterfaceConfig={"networkAttachment": "att"}), "PSC") == []


def test_tensorboard_in_another_region_and_without_service_account_fails():
    board = "projects/my-project/locations/europe-west4/tensorboards/42"
    found = {r.title: r for r in compat(spec(A100, tensorboard=board), "tensorboard")}
    assert found["tensorboard"].status is Status.FAIL
    assert "europe-west4" in found["tensorboard"].evidence
    assert found["tensorboard needs serviceAccount"].status is Status.FAIL
    ok = spec(
        A100,
        tensorboard="projects/my-project/locations/us-central1/tensorboards/42",
        serviceAccount="t@my-project.iam.gserviceaccount.com",
    )
    assert compat(ok, "tensorboard") == []


def test_specific_reservation_needs_a_full_name_in_the_job_region():
    def affinity(values, key="compute.googleapis.com/reservation-name"):
        return {
            **A100,
            "reservationAffinity": {
                "reservationAffinityType": "SPECIFIC_RESERVATION",
                "key": key,
                "values": values,
            },
        }

    (r,) = compat(spec(affinity(["my-res"])), "reservationAffinity")
    assert r.status is Status.FAIL and "not the full name of a reservation" in r.evidence
    assert "reservationBlocks/BLOCK" in r.remedy
    (r,) = compat(spec(affinity(["projects/p/zones/europe-west4-a/reservations/r"])), "reservationAffinity")
    assert r.status is Status.FAIL and "outside the job's region" in r.evidence
    (r,) = compat(
        spec(affinity(["projects/p/zones/us-central1-a/reservations/r"], key="name")), "reservationAffinity"
    )
    assert r.status is Status.FAIL and "compute.googleapis.com/reservation-name" in r.remedy
    assert (
        compat(spec(affinity(["projects/p/zones/us-central1-a/reservations/r"])), "reservationAffinity") == []
    )


def test_reservation_blocks_and_sub_blocks_are_names_vertex_accepts():
    # aiplatform v1 ReservationAffinity.values: "the resource name of the reservation,
    # reservation block, or reservation sub-block" (how H200/B200 capacity is sold).
    def affinity(value):
        return {
            **A100,
            "reservationAffinity": {
                "reservationAffinityType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name",
                "values": [value],
            },
        }

    base = "projects/p/zones/us-central1-a/reservations/r"
    for value in (f"{base}/reservationBlocks/b1", f"{base}/reservationBlocks/b1/reservationSubBlocks/s1"):
        assert compat(spec(affinity(value)), "reservationAffinity") == [], value
    (r,) = compat(spec(affinity(f"{base}/reservationSubBlocks/s1")), "reservationAffinity")
    assert r.status is Status.FAIL  # a sub-block lives in a block
    far = "projects/p/zones/europe-west4-b/reservations/r/reservationBlocks/b1"
    (r,) = compat(spec(affinity(far)), "reservationAffinity")
    assert r.status is Status.FAIL and "outside the job's region" in r.evidence
    ref = parse_reservation(f"{base}/reservationBlocks/b1/reservationSubBlocks/s1")
    assert (ref.name, ref.block, ref.sub_block, ref.zone) == ("r", "b1", "s1", "us-central1-a")
    assert ref.describe_command() == (
        "gcloud compute reservations sub-blocks describe r --block-name=b1 --sub-block-name=s1 "
        "--zone=us-central1-a --project=p"
    )
