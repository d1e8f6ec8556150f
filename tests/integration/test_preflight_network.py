"""The network family against loopback Compute Engine and Service Networking (REST)."""

from __future__ import annotations

from tests.integration.conftest import (
    ATTACHMENT,
    IP_RANGE,
    NETWORK,
    PROJECT,
    PROJECT_NUMBER,
    REGION,
    make_spec,
    seed_resources,
)
from trainguard.preflight import run_preflight
from trainguard.preflight.results import Status

IMAGE = "127.0.0.1:1/unused:1"


def run(**fields):
    spec = make_spec(IMAGE, **fields)
    report = run_preflight(spec, only=["network"], timeout_s=20, call_timeout_s=3)
    return {r.title: r for r in report.results}


def peered(**extra):
    return run(network=NETWORK, reservedIpRanges=[IP_RANGE], **extra)


def test_a_peered_network_and_a_given_range_pass(loopback):
    seed_resources(loopback)
    found = peered()
    assert found["VPC network tg-vpc"].status is Status.PASS
    assert "servicenetworking-googleapis-com, ACTIVE" in found["VPC network tg-vpc"].evidence
    r = found[f"reserved range {IP_RANGE}"]
    assert r.status is Status.PASS and "10.8.0.0/16" in r.evidence
    # Service Networking was asked about the network by project number, as it requires.
    [call] = loopback.servicenetworking.calls("connections")
    assert call.param("network") == f"projects/{PROJECT_NUMBER}/global/networks/tg-vpc"


def test_a_job_without_private_networking_has_nothing_to_look_up(loopback):
    [r] = run().values()
    assert r.status is Status.PASS and loopback.compute.calls() == []


def test_a_missing_network_fails_with_the_fix(loopback):
    found = peered()
    r = found["VPC network tg-vpc"]
    assert r.status is Status.FAIL and "does not exist" in r.evidence
    assert "gcloud services vpc-peerings connect --service=servicenetworking.googleapis.com" in r.remedy


def test_a_network_without_private_services_access_fails(loopback):
    loopback.network.add_network(PROJECT, "tg-vpc")
    r = run(network=NETWORK)["VPC network tg-vpc"]
    assert r.status is Status.FAIL and "not peered with servicenetworking" in r.evidence
    assert "--purpose=VPC_PEERING" in r.remedy and "vpc-peerings connect" in r.remedy


def test_an_inactive_peering_fails(loopback):
    loopback.network.add_network(PROJECT, "tg-vpc")
    loopback.network.connect(PROJECT, "tg-vpc", [], state="INACTIVE")
    r = run(network=NETWORK)["VPC network tg-vpc"]
    assert r.status is Status.FAIL and "INACTIVE" in r.evidence
    assert "Peer network deleted" in r.evidence


def test_a_range_that_does_not_exist_fails(loopback):
    seed_resources(loopback)
    r = run(network=NETWORK, reservedIpRanges=["nope"])["reserved range nope"]
    assert r.status is Status.FAIL and "no allocated range nope" in r.evidence
    assert "gcloud compute addresses create nope --global --purpose=VPC_PEERING" in r.remedy


def test_a_range_of_the_wrong_purpose_or_network_fails(loopback):
    seed_resources(loopback)
    loopback.network.add_range(PROJECT, "plain", "tg-vpc", purpose="")
    loopback.network.add_network(PROJECT, "other")
    loopback.network.add_range(PROJECT, "elsewhere", "other")
    found = run(network=NETWORK, reservedIpRanges=["plain", "elsewhere"])
    assert "not VPC_PEERING" in found["reserved range plain"].evidence
    assert "not to tg-vpc" in found["reserved range elsewhere"].evidence
    assert {found["reserved range plain"].status, found["reserved range elsewhere"].status} == {Status.FAIL}


def test_a_range_not_given_to_the_connection_fails_with_the_update(loopback):
    seed_resources(loopback)
    loopback.network.add_range(PROJECT, "extra", "tg-vpc", address="10.9.0.0")
    r = run(network=NETWORK, reservedIpRanges=["extra"])["reserved range extra"]
    assert r.status is Status.FAIL and "not given to the private connection" in r.evidence
    assert f"--ranges={IP_RANGE},extra" in r.remedy


def test_service_networking_refused_leaves_the_range_a_warning_not_a_pass(loopback):
    seed_resources(loopback)
    loopback.servicenetworking.allowed = False
    r = peered()[f"reserved range {IP_RANGE}"]
    assert r.status is Status.WARN
    assert "servicenetworking.services.get" in r.evidence
    assert "gcloud services vpc-peerings list" in r.remedy


def test_compute_refused_is_unknown_naming_the_read_only_role(loopback):
    seed_resources(loopback)
    loopback.network.denied.add("compute.networks.get")
    r = peered()["VPC network tg-vpc"]
    assert r.status is Status.UNKNOWN
    assert "refused the caller (403)" in r.evidence
    assert "roles/compute.networkViewer" in r.remedy
    assert "gcloud compute networks peerings list --network=tg-vpc" in r.remedy


def test_a_psc_attachment_is_looked_up_in_the_job_region(loopback):
    seed_resources(loopback)
    r = run(pscInterfaceConfig={"networkAttachment": ATTACHMENT})[f"PSC network attachment {ATTACHMENT}"]
    assert r.status is Status.PASS and "psc-subnet" in r.evidence
    missing = run(pscInterfaceConfig={"networkAttachment": "nope"})["PSC network attachment nope"]
    assert missing.status is Status.FAIL
    assert f"gcloud compute network-attachments create nope --region={REGION}" in missing.remedy
    [call] = loopback.compute.calls("networkAttachments/nope")
    assert call.path == f"/compute/v1/projects/{PROJECT}/regions/{REGION}/networkAttachments/nope"


def test_a_rate_limited_compute_call_is_retried(loopback):
    seed_resources(loopback)
    loopback.compute.fail("networks/tg-vpc", 503, times=1)
    assert peered()["VPC network tg-vpc"].status is Status.PASS
    assert len(loopback.compute.calls("networks/tg-vpc")) == 2
