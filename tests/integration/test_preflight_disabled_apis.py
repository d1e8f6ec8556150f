"""A disabled API is "enable it", never "grant a role" (issue 28).

Every API preflight calls can be off in a project (Cloud Quotas and Policy Troubleshooter are off
in most). Google then answers 403 with ErrorInfo ``SERVICE_DISABLED`` (the test servers send the
real body: ``tests.servers.googleapi.disabled_body``); a 403 is otherwise a missing permission,
and before this the report said "preflight needs roles/…" for both.
"""

from __future__ import annotations

import pytest

from tests.integration.conftest import (
    IP_RANGE,
    KMS_KEY,
    NETWORK,
    PERSISTENT_RESOURCE,
    PROJECT,
    REGION,
    RESERVATION,
    SA,
    TENSORBOARD,
    seed_resources,
)
from tests.servers.storage_disabled import DisabledStorageServer
from trainguard.preflight import run_preflight
from trainguard.spec import parse_spec

CONSUMER = "123456789012"  # the project number the answers name as the consumer


def referencing_spec():
    """One A100 pool that references everything the online families look up."""
    pool = {
        "machineSpec": {
            "machineType": "a2-highgpu-1g",
            "acceleratorType": "NVIDIA_TESLA_A100",
            "acceleratorCount": 1,
            "reservationAffinity": {
                "reservationAffinityType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name",
                "values": [RESERVATION],
            },
        },
        "replicaCount": 1,
        "containerSpec": {"imageUri": "us-docker.pkg.dev/tg-proj/r/trainer:1"},
    }
    body = {
        "jobSpec": {
            "workerPoolSpecs": [pool],
            "serviceAccount": SA,
            "baseOutputDirectory": {"outputUriPrefix": "gs://tg-out/runs/r1"},
            "network": NETWORK,
            "reservedIpRanges": [IP_RANGE],
            "tensorboard": TENSORBOARD,
            "persistentResourceId": PERSISTENT_RESOURCE,
        },
        "encryptionSpec": {"kmsKeyName": KMS_KEY},
    }
    return parse_spec(body, project=PROJECT, region=REGION)


CASES = [
    ("cloudquotas.googleapis.com", "quotas", ["quota"]),
    ("monitoring.googleapis.com", "monitoring", ["quota"]),
    ("policytroubleshooter.googleapis.com", "troubleshooter", ["iam"]),
    ("iam.googleapis.com", "iam", ["iam"]),
    ("cloudresourcemanager.googleapis.com", "iam", ["iam"]),
    ("iamcredentials.googleapis.com", "iam", ["iam"]),
    ("compute.googleapis.com", "compute", ["network", "capacity"]),
    ("servicenetworking.googleapis.com", "servicenetworking", ["network"]),
    ("cloudkms.googleapis.com", "kms", ["iam"]),
    ("aiplatform.googleapis.com", "vertex", ["storage", "capacity"]),
]


@pytest.mark.parametrize("service, server, families", CASES, ids=[c[0].split(".")[0] for c in CASES])
def test_a_disabled_api_gets_the_enable_line_and_no_role(loopback, service, server, families):
    seed_resources(loopback)
    getattr(loopback, server).disable(service, consumer=CONSUMER)
    if service == "iamcredentials.googleapis.com":
        # impersonation is only tried when Policy Troubleshooter cannot decide
        loopback.troubleshooter.fail("iam:troubleshoot", 403, times=None)
    report = run_preflight(referencing_spec(), only=families, timeout_s=20, call_timeout_s=5)
    told = [r for r in report.results if f"gcloud services enable {service} --project={CONSUMER}" in r.remedy]
    assert told, [(r.title, r.status.value, r.evidence, r.remedy) for r in report.results]
    for result in told:
        assert "is not enabled" in result.evidence, result.evidence
        assert "preflight needs roles/" not in result.remedy, result.remedy
        assert not result.remedy.startswith("grant"), result.remedy
    # nothing else in the report blames IAM for it
    for result in report.results:
        if "SERVICE_DISABLED" in result.evidence:
            assert "gcloud services enable" in result.remedy, (result.title, result.remedy)


def test_cloud_storage_json_api_disabled_is_enable_it(loopback, monkeypatch):
    with DisabledStorageServer(consumer=CONSUMER) as storage:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", storage.url)
        report = run_preflight(referencing_spec(), only=["storage"], timeout_s=20, call_timeout_s=5)
    [bucket] = [r for r in report.results if "tg-out" in r.title]
    assert "Cloud Storage JSON API (storage-api.googleapis.com) is not enabled" in bucket.evidence
    assert f"gcloud services enable storage-api.googleapis.com --project={CONSUMER}" in bucket.remedy
    assert "roles/" not in bucket.remedy
