"""The capacity family: Compute Engine reservations and Vertex AI persistent resources, on loopback."""

from __future__ import annotations

from tests.integration.conftest import (
    KMS_KEY,
    NETWORK,
    PERSISTENT_RESOURCE,
    PROJECT,
    PROJECT_NUMBER,
    REGION,
    RESERVATION,
    make_spec,
    seed_resources,
)
from trainguard.preflight import run_preflight
from trainguard.preflight.results import Status

IMAGE = "127.0.0.1:1/unused:1"
ZONE = f"{REGION}-a"


def a100(
    replicas: int = 1, reservation: str | None = RESERVATION, machine: str = "a2-highgpu-1g", count: int = 1
) -> dict:
    spec = {"machineType": machine, "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": count}
    if reservation:
        spec["reservationAffinity"] = {
            "reservationAffinityType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [reservation],
        }
    return {"machineSpec": spec, "replicaCount": replicas, "containerSpec": {"imageUri": IMAGE}}


def run(pools=None, **fields):
    spec = make_spec(IMAGE, pools=pools or [a100()], **fields)
    report = run_preflight(spec, only=["capacity"], timeout_s=20, call_timeout_s=3)
    return {r.title: r for r in report.results}


RES = f"reservation tg-a100 ({ZONE})"


# --- reservations -------------------------------------------------------------------------------


def test_a_matching_reservation_with_room_passes(loopback):
    seed_resources(loopback)
    r = run([a100(1), a100(2)])[RES]
    assert r.status is Status.PASS, r.evidence
    assert "4 × a2-highgpu-1g (1 in use, 3 free for the 3 replicas)" in r.evidence
    [call] = loopback.compute.calls("reservations")
    assert call.path == f"/compute/v1/projects/{PROJECT}/zones/{ZONE}/reservations/tg-a100"


def test_no_specific_reservation_or_resource_means_nothing_to_look_up(loopback):
    [r] = run([a100(reservation=None)]).values()
    assert r.status is Status.PASS and "on demand" in r.evidence
    assert loopback.compute.calls() == [] and loopback.vertex.calls() == []


def test_a_missing_reservation_fails(loopback):
    r = run()[RES]
    assert r.status is Status.FAIL and "does not exist" in r.evidence
    assert f"gcloud compute reservations list --project={PROJECT}" in r.remedy


def test_a_reservation_without_free_vms_fails_as_capacity(loopback):
    loopback.network.add_reservation(
        PROJECT,
        ZONE,
        "tg-a100",
        machine_type="a2-highgpu-1g",
        accelerators={"nvidia-tesla-a100": 1},
        count=2,
        in_use=2,
    )
    r = run()[RES]
    assert r.status is Status.FAIL and r.failure_class == "capacity"
    assert "2 VMs, 2 in use, 0 free" in r.evidence
    assert "--vm-count=3" in r.remedy


def test_a_reservation_of_other_vms_fails(loopback):
    loopback.network.add_reservation(
        PROJECT, ZONE, "tg-a100", machine_type="a2-highgpu-2g", accelerators={"nvidia-tesla-a100": 2}
    )
    r = run()[RES]
    assert r.status is Status.FAIL
    assert "is a2-highgpu-1g, the reservation holds a2-highgpu-2g VMs" in r.evidence


def test_a_reservation_with_other_accelerators_fails(loopback):
    loopback.network.add_reservation(
        PROJECT, ZONE, "tg-a100", machine_type="n1-standard-8", accelerators={"nvidia-tesla-t4": 1}
    )
    pool = {
        "machineSpec": {
            "machineType": "n1-standard-8",
            "acceleratorType": "NVIDIA_TESLA_V100",
            "acceleratorCount": 1,
            "reservationAffinity": a100()["machineSpec"]["reservationAffinity"],
        },
        "replicaCount": 1,
        "containerSpec": {"imageUri": IMAGE},
    }
    r = run([pool])[RES]
    assert r.status is Status.FAIL and "1 × nvidia-tesla-v100" in r.evidence


def test_a_reservation_vertex_may_not_consume_fails_with_the_sharing_fix(loopback):
    loopback.network.add_reservation(
        PROJECT,
        ZONE,
        "tg-a100",
        machine_type="a2-highgpu-1g",
        accelerators={"nvidia-tesla-a100": 1},
        share_policy=None,
    )
    r = run()[RES]
    assert r.status is Status.FAIL and "not ALLOW_ALL" in r.evidence
    assert r.remedy == (
        f"gcloud compute reservations update tg-a100 --zone={ZONE} "
        f"--project={PROJECT} --reservation-sharing-policy=ALLOW_ALL"
    )


def test_another_projects_reservation_must_be_shared_with_the_job_project(loopback):
    other = f"projects/owner-proj/zones/{ZONE}/reservations/shared"
    loopback.network.add_reservation(
        "owner-proj", ZONE, "shared", machine_type="a2-highgpu-1g", accelerators={"nvidia-tesla-a100": 1}
    )
    r = run([a100(reservation=other)])[f"reservation shared ({ZONE})"]
    assert r.status is Status.FAIL and f"not shared with {PROJECT}" in r.evidence
    loopback.network.add_reservation(
        "owner-proj",
        ZONE,
        "shared",
        machine_type="a2-highgpu-1g",
        accelerators={"nvidia-tesla-a100": 1},
        shared_with=(PROJECT,),
    )
    assert run([a100(reservation=other)])[f"reservation shared ({ZONE})"].status is Status.PASS


def test_reservations_refused_is_unknown_naming_the_role(loopback):
    seed_resources(loopback)
    loopback.network.denied.add("compute.reservations.get")
    r = run()[RES]
    assert r.status is Status.UNKNOWN and "roles/compute.viewer" in r.remedy
    assert f"gcloud compute reservations describe tg-a100 --zone={ZONE}" in r.remedy


# --- persistent resources -----------------------------------------------------------------------

PR = f"persistent resource {PERSISTENT_RESOURCE}"


def on_resource(pools, **fields):
    return run(pools, persistentResourceId=PERSISTENT_RESOURCE, **fields)


def test_a_running_resource_with_matching_pools_passes(loopback):
    seed_resources(loopback)
    cpu = {
        "machineSpec": {"machineType": "n1-standard-8"},
        "replicaCount": 2,
        "containerSpec": {"imageUri": IMAGE},
    }
    r = on_resource([a100(1, reservation=None), a100(3, reservation=None), cpu])[PR]
    assert r.status is Status.PASS, r.evidence
    [call] = loopback.vertex.calls("persistentResources")
    assert call.path == (
        f"/v1/projects/{PROJECT}/locations/{REGION}/persistentResources/{PERSISTENT_RESOURCE}"
    )


def test_a_missing_resource_fails(loopback):
    r = on_resource([a100(reservation=None)])[PR]
    assert r.status is Status.FAIL and f"no persistent resource {PERSISTENT_RESOURCE}" in r.evidence
    assert f"gcloud ai persistent-resources list --region={REGION}" in r.remedy


def test_a_resource_that_is_not_running_fails(loopback):
    loopback.vertex.add_persistent_resource(
        PROJECT,
        REGION,
        PERSISTENT_RESOURCE,
        state=5,
        pools=[
            {
                "id": "a100",
                "machineSpec": {
                    "machineType": "a2-highgpu-1g",
                    "acceleratorType": "NVIDIA_TESLA_A100",
                    "acceleratorCount": 1,
                },
                "replicaCount": "1",
            }
        ],
    )
    r = on_resource([a100(reservation=None)])[PR]
    assert r.status is Status.FAIL and "it is ERROR, not RUNNING" in r.evidence


def test_a_pool_the_resource_does_not_have_or_cannot_hold_fails(loopback):
    seed_resources(loopback)
    h100 = {
        "machineSpec": {
            "machineType": "a3-highgpu-1g",
            "acceleratorType": "NVIDIA_H100_80GB",
            "acceleratorCount": 1,
        },
        "replicaCount": 1,
        "containerSpec": {"imageUri": IMAGE},
    }
    r = on_resource([a100(1, reservation=None), a100(4, reservation=None), h100])[PR]
    assert r.status is Status.FAIL
    assert (
        "workerPoolSpecs[1] (a2-highgpu-1g + 1 × NVIDIA_TESLA_A100) needs 4 replicas, "
        "resource pool a100 has 3" in r.evidence
    )
    assert "a3-highgpu-1g + 1 × NVIDIA_H100_80GB) matches no resource pool" in r.evidence


def test_network_and_cmek_must_equal_the_resources(loopback):
    seed_resources(loopback)
    r = on_resource([a100(reservation=None)], network=NETWORK)[PR]
    assert r.status is Status.FAIL and "its network (none) differs" in r.evidence
    loopback.vertex.add_persistent_resource(
        PROJECT,
        REGION,
        PERSISTENT_RESOURCE,
        network=NETWORK,
        kms_key=KMS_KEY,
        pools=[
            {
                "id": "a100",
                "machineSpec": {
                    "machineType": "a2-highgpu-1g",
                    "acceleratorType": "NVIDIA_TESLA_A100",
                    "acceleratorCount": 1,
                },
                "replicaCount": "1",
            }
        ],
    )
    r = on_resource([a100(reservation=None)], network=NETWORK)[PR]
    assert r.status is Status.FAIL and f"its CMEK key {KMS_KEY} differs" in r.evidence


def test_busy_resource_pools_warn(loopback):
    loopback.vertex.add_persistent_resource(
        PROJECT,
        REGION,
        PERSISTENT_RESOURCE,
        pools=[
            {
                "id": "a100",
                "machineSpec": {
                    "machineType": "a2-highgpu-1g",
                    "acceleratorType": "NVIDIA_TESLA_A100",
                    "acceleratorCount": 1,
                },
                "replicaCount": "2",
                "usedReplicaCount": "2",
            }
        ],
    )
    r = on_resource([a100(reservation=None)])[PR]
    assert r.status is Status.WARN and "2 of 2 replicas busy" in r.evidence


def test_persistent_resources_refused_is_unknown_naming_the_role(loopback):
    seed_resources(loopback)
    loopback.vertex.denied.add("aiplatform.persistentResources.get")
    r = on_resource([a100(reservation=None)])[PR]
    assert r.status is Status.UNKNOWN
    assert "aiplatform.persistentResources.get" in r.evidence
    assert "roles/aiplatform.viewer" in r.remedy
    assert PROJECT_NUMBER not in r.remedy  # the command names the project as the user does


# --- reservation blocks and sub-blocks (issue 28) --------------------------------------------------

H200 = f"projects/{PROJECT}/zones/{ZONE}/reservations/tg-h200"


def h200(replicas: int = 2, value: str = H200) -> dict:
    spec = {
        "machineType": "a3-ultragpu-8g",
        "acceleratorType": "NVIDIA_H200_141GB",
        "acceleratorCount": 8,
        "reservationAffinity": {
            "reservationAffinityType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [value],
        },
    }
    return {"machineSpec": spec, "replicaCount": replicas, "containerSpec": {"imageUri": IMAGE}}


def h200_job(replicas: int, value: str) -> list[dict]:
    """A chief and ``replicas - 1`` workers, every pool claiming ``value``."""
    return [h200(1, value)] + ([h200(replicas - 1, value)] if replicas > 1 else [])


def dense_h200(loopback, *, block_free: int = 4, sub_block_free: int = 2, degraded: int = 0) -> None:
    """A dense H200 reservation: 16 VMs in two blocks; block b1 has sub-block s1 of 4 hosts."""
    net = loopback.network
    net.add_reservation(
        PROJECT, ZONE, "tg-h200", machine_type="a3-ultragpu-8g", count=16, in_use=16 - block_free - 8
    )
    net.add_block(PROJECT, ZONE, "tg-h200", "b1", count=8, in_use=8 - block_free)
    net.add_block(PROJECT, ZONE, "tg-h200", "b2", count=8, in_use=8)
    net.add_sub_block(
        PROJECT, ZONE, "tg-h200", "b1", "s1", count=4, in_use=4 - sub_block_free, degraded_hosts=degraded
    )


def test_a_reservation_block_is_looked_up_and_its_room_counted(loopback):
    dense_h200(loopback, block_free=4)
    results = run(h200_job(2, f"{H200}/reservationBlocks/b1"))
    r = results[f"reservation tg-h200 block b1 ({ZONE})"]
    assert r.status is Status.PASS, r.evidence
    assert "(4 in use, 4 free for the 2 replicas)" in r.evidence
    paths = [c.path for c in loopback.compute.calls("reservations")]
    assert paths == [
        f"/compute/v1/projects/{PROJECT}/zones/{ZONE}/reservations/tg-h200",
        f"/compute/v1/projects/{PROJECT}/zones/{ZONE}/reservations/tg-h200/reservationBlocks/b1",
    ]


def test_a_full_block_fails_though_the_reservation_has_room_elsewhere(loopback):
    dense_h200(loopback)
    r = run(h200_job(2, f"{H200}/reservationBlocks/b2"))[f"reservation tg-h200 block b2 ({ZONE})"]
    assert r.status is Status.FAIL and r.failure_class == "capacity"
    assert "8 VMs in the block, 8 in use, 0 free" in r.evidence
    assert f"gcloud compute reservations blocks list tg-h200 --zone={ZONE}" in r.remedy


def test_a_sub_block_is_looked_up_under_its_block(loopback):
    dense_h200(loopback, sub_block_free=2)
    value = f"{H200}/reservationBlocks/b1/reservationSubBlocks/s1"
    r = run(h200_job(2, value))[f"reservation tg-h200 block b1 sub-block s1 ({ZONE})"]
    assert r.status is Status.PASS, r.evidence
    assert loopback.compute.calls("reservationSubBlocks")[0].path.endswith(
        "/reservations/tg-h200/reservationBlocks/b1/reservationSubBlocks/s1"
    )
    r = run(h200_job(3, value))[f"reservation tg-h200 block b1 sub-block s1 ({ZONE})"]
    assert r.status is Status.FAIL and "4 hosts, 2 in use, 2 free" in r.evidence


def test_a_degraded_sub_block_is_a_warning(loopback):
    dense_h200(loopback, sub_block_free=4, degraded=1)
    value = f"{H200}/reservationBlocks/b1/reservationSubBlocks/s1"
    r = run(h200_job(2, value))[f"reservation tg-h200 block b1 sub-block s1 ({ZONE})"]
    assert r.status is Status.WARN and "DEGRADED (1 degraded hosts)" in r.evidence


def test_a_block_the_reservation_does_not_have_fails_naming_the_listing(loopback):
    dense_h200(loopback)
    r = run(h200_job(1, f"{H200}/reservationBlocks/b9"))[f"reservation tg-h200 block b9 ({ZONE})"]
    assert r.status is Status.FAIL and "has no block b9" in r.evidence
    assert f"gcloud compute reservations blocks list tg-h200 --zone={ZONE} --project={PROJECT}" in r.remedy
    r = run(h200_job(1, f"{H200}/reservationBlocks/b1/reservationSubBlocks/s9"))[
        f"reservation tg-h200 block b1 sub-block s9 ({ZONE})"
    ]
    assert r.status is Status.FAIL and "has no sub-block s9 of block b1" in r.evidence
    assert "gcloud compute reservations sub-blocks list tg-h200 --block-name=b1" in r.remedy


def test_a_block_of_another_machine_shape_fails_on_the_reservation_s_vms(loopback):
    dense_h200(loopback)
    pool = h200(1, f"{H200}/reservationBlocks/b1")
    pool["machineSpec"].update(machineType="a3-highgpu-8g", acceleratorType="NVIDIA_H100_80GB")
    r = run([pool])[f"reservation tg-h200 block b1 ({ZONE})"]
    assert r.status is Status.FAIL and "the reservation holds a3-ultragpu-8g VMs" in r.evidence
