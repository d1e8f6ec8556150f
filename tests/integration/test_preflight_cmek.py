"""CMEK (part of the iam family) against loopback Cloud KMS (real ``google-cloud-kms`` client,
REST transport), Policy Troubleshooter and Resource Manager."""

from __future__ import annotations

from tests.integration.conftest import (
    KMS_KEY,
    PROJECT,
    REGION,
    VERTEX_AGENT,
    make_spec,
    seed_resources,
)
from trainguard.preflight import run_preflight
from trainguard.preflight.results import Status
from trainguard.spec import parse_spec

IMAGE = "127.0.0.1:1/unused:1"
KEY = f"CMEK key {KMS_KEY}"
AGENT = f"Vertex AI Service Agent {VERTEX_AGENT} on key {KMS_KEY}"


def run(key: str = KMS_KEY) -> dict:
    body = {"jobSpec": make_spec(IMAGE).to_dict(), "encryptionSpec": {"kmsKeyName": key}}
    spec = parse_spec(body, project=PROJECT, region=REGION)
    report = run_preflight(spec, only=["iam"], timeout_s=20, call_timeout_s=3)
    return {r.title: r for r in report.results if "key" in r.title.lower()}


def test_a_usable_key_passes_both_checks(loopback):
    seed_resources(loopback)
    found = run()
    assert found[KEY].status is Status.PASS and "ENCRYPT_DECRYPT" in found[KEY].evidence
    assert found[AGENT].status is Status.PASS
    assert "useToEncrypt" in found[AGENT].evidence and "Policy Troubleshooter" in found[AGENT].evidence
    # the GAPIC REST transport asked for integer enums and the server answered with them
    [get] = loopback.kms.calls(r"cryptoKeys/tg-key$")
    assert get.int_enums


def test_a_key_in_another_region_fails_before_any_call(loopback):
    other = KMS_KEY.replace(REGION, "europe-west4")
    [r] = run(other).values()
    assert r.status is Status.FAIL and "requires the key in the job's region" in r.evidence
    assert f"--location={REGION}" in r.remedy
    assert loopback.kms.calls() == []
    assert not [
        c for c in loopback.troubleshooter.calls() if "cloudkms" in c.body["accessTuple"]["fullResourceName"]
    ]


def test_a_missing_key_fails_with_the_create_command(loopback):
    [r] = run().values()
    assert r.status is Status.FAIL and "does not exist" in r.evidence
    assert (
        f"gcloud kms keys create tg-key --keyring=tg-ring --location={REGION} "
        f"--purpose=encryption --project={PROJECT}"
    ) == r.remedy


def test_a_key_without_an_enabled_primary_version_fails(loopback):
    seed_resources(loopback)
    loopback.kms.add_key(KMS_KEY, primary_state=2)  # DISABLED
    r = run()[KEY]
    assert r.status is Status.FAIL and "primary version is DISABLED" in r.evidence
    assert "gcloud kms keys versions create --key=tg-key" in r.remedy


def test_an_asymmetric_key_fails(loopback):
    seed_resources(loopback)
    loopback.kms.add_key(KMS_KEY, purpose=5)
    r = run()[KEY]
    assert r.status is Status.FAIL and "ASYMMETRIC_SIGN" in r.evidence


def test_the_service_agent_without_the_role_fails_with_the_binding(loopback):
    seed_resources(loopback)
    loopback.state.revoke(f"serviceAccount:{VERTEX_AGENT}")
    r = run()[AGENT]
    assert r.status is Status.FAIL and r.failure_class == "permission"
    assert "lacks cloudkms.cryptoKeyVersions.useToEncrypt" in r.evidence
    assert r.remedy == (
        f"gcloud kms keys add-iam-policy-binding tg-key --keyring=tg-ring "
        f"--location={REGION} --project={PROJECT} "
        f"--member=serviceAccount:{VERTEX_AGENT} "
        "--role=roles/cloudkms.cryptoKeyEncrypterDecrypter"
    )


def test_a_grant_on_the_project_counts(loopback):
    seed_resources(loopback)
    loopback.state.revoke(f"serviceAccount:{VERTEX_AGENT}")
    loopback.grant(
        f"serviceAccount:{VERTEX_AGENT}",
        "roles/cloudkms.cryptoKeyEncrypterDecrypter",
        loopback.state.project_resource(PROJECT),
    )
    assert run()[AGENT].status is Status.PASS


def test_troubleshooter_refused_falls_back_on_the_keys_own_policy(loopback):
    seed_resources(loopback)
    loopback.troubleshooter.allowed = False
    r = run()[AGENT]
    assert r.status is Status.PASS and "the key's IAM policy" in r.evidence
    assert loopback.kms.calls(":getIamPolicy")


def test_no_direct_grant_and_no_troubleshooter_is_unknown_not_a_fail(loopback):
    seed_resources(loopback)
    loopback.troubleshooter.allowed = False
    loopback.state.revoke(f"serviceAccount:{VERTEX_AGENT}")
    loopback.grant(
        f"serviceAccount:{VERTEX_AGENT}",
        "roles/cloudkms.cryptoKeyEncrypterDecrypter",
        loopback.state.project_resource(PROJECT),
    )  # invisible from the key's policy
    r = run()[AGENT]
    assert r.status is Status.UNKNOWN
    assert "refused the caller (403)" in r.evidence and "grant on the key ring or project" in r.evidence
    assert "roles/iam.securityReviewer" in r.remedy
    assert "gcloud policy-intelligence troubleshoot-policy iam //cloudkms.googleapis.com/" in r.remedy


def test_kms_refused_is_unknown_naming_the_viewer_role(loopback):
    seed_resources(loopback)
    loopback.kms.denied.add("cloudkms.cryptoKeys.get")
    r = run()[KEY]
    assert r.status is Status.UNKNOWN
    assert "cloudkms.cryptoKeys.get" in r.evidence and "roles/cloudkms.viewer" in r.remedy
    assert f"gcloud kms keys describe {KMS_KEY}" in r.remedy
