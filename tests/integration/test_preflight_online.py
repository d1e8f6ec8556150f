"""Every online family through ``run_preflight``: a healthy multi-pool job that references every
kind of resource, a broken one, secrets, dead endpoints, bad input."""

from __future__ import annotations

import pytest

from tests.integration.conftest import (
    A100,
    CALLER,
    IP_RANGE,
    KMS_KEY,
    NETWORK,
    PROJECT,
    REGION,
    RESERVATION,
    SA,
    TENSORBOARD,
    make_spec,
    seed_resources,
)
from trainguard.errors import SpecError
from trainguard.preflight import run_preflight
from trainguard.preflight.results import Status

ONLINE = ["quota", "iam", "image", "storage", "network", "capacity"]


def four_pools(registry) -> list[dict]:
    """Chief + 2 workers on A100, a CPU parameter server and a CPU evaluator, 4 images."""

    def pool(machine: str, image: str, replicas: int = 1, accel: int = 0) -> dict:
        spec = {"machineType": machine}
        if accel:
            spec.update(acceleratorType="NVIDIA_TESLA_A100", acceleratorCount=accel)
        return {
            "machineSpec": spec,
            "replicaCount": replicas,
            "containerSpec": {"imageUri": registry.uri(f"bench/{image}:1.0")},
        }

    return [
        pool("a2-highgpu-1g", "chief", 1, 1),
        pool("a2-highgpu-1g", "worker", 2, 1),
        pool("n1-standard-8", "ps"),
        pool("n1-standard-8", "eval"),
    ]


def _referencing(spec_pools, **extra):
    """A job that references a VPC, a range, a reservation, a CMEK key and a TensorBoard."""
    pools = [dict(p) for p in spec_pools]
    pools[0] = {
        **pools[0],
        "machineSpec": {
            **pools[0]["machineSpec"],
            "reservationAffinity": {
                "reservationAffinityType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name",
                "values": [RESERVATION],
            },
        },
    }
    body = {
        "jobSpec": {
            "workerPoolSpecs": pools,
            "serviceAccount": SA,
            "baseOutputDirectory": {"outputUriPrefix": "gs://tg-out/runs/r1"},
            "network": NETWORK,
            "reservedIpRanges": [IP_RANGE],
            "tensorboard": TENSORBOARD,
            **extra,
        },
        "encryptionSpec": {"kmsKeyName": KMS_KEY},
    }
    from trainguard.spec import parse_spec

    return parse_spec(body, project=PROJECT, region=REGION)


def test_healthy_four_pool_job_passes_every_check(loopback, insecure_registry, all_checks):
    seed_resources(loopback)
    spec = _referencing(four_pools(insecure_registry))
    report = run_preflight(spec, only=ONLINE + ["compat"], timeout_s=20, call_timeout_s=5)
    failing = [
        (r.check, r.title, r.status.value, r.evidence) for r in report.results if r.status is not Status.PASS
    ]
    assert failing == []
    checks = {r.check for r in report.results}
    assert checks == {"compat", "quota", "iam", "image", "storage", "network", "capacity"}
    quota = {r.title.split(" in ")[0]: r for r in report.results if r.check == "quota"}
    assert "limit 8, in use 2, requested 3" in quota["custom_model_training_nvidia_a100_gpus"].evidence
    assert "requested 16 vCPUs" in quota["custom_model_training_cpus"].evidence  # ps + eval
    assert len([r for r in report.results if r.check == "image"]) == 4
    titles = {r.title for r in report.results}
    assert {
        f"CMEK key {KMS_KEY}",
        f"TensorBoard {TENSORBOARD}",
        "VPC network tg-vpc",
        f"reserved range {IP_RANGE}",
        f"reservation tg-a100 ({REGION}-a)",
    } <= titles
    assert report.passed() and report.worst() is Status.PASS


def test_broken_references_fail_in_the_family_that_owns_them(loopback, insecure_registry):
    seed_resources(loopback)
    loopback.network.connections.clear()  # the range is no longer given to the connection
    loopback.network.reservations.clear()
    loopback.kms.keys.clear()
    loopback.vertex.tensorboards.clear()
    spec = _referencing(four_pools(insecure_registry))
    report = run_preflight(spec, only=ONLINE, timeout_s=20, call_timeout_s=5)
    failed = {(r.check, r.title) for r in report.results if r.status is Status.FAIL}
    assert failed == {
        ("network", f"reserved range {IP_RANGE}"),
        ("capacity", f"reservation tg-a100 ({REGION}-a)"),
        ("iam", f"CMEK key {KMS_KEY}"),
        ("storage", f"TensorBoard {TENSORBOARD}"),
    }
    assert all(
        r.remedy.startswith("gcloud") or "gcloud" in r.remedy
        for r in report.results
        if r.status is Status.FAIL
    )


def test_broken_job_fails_on_every_family_with_remedies(loopback, insecure_registry, all_checks):
    loopback.monitoring.set_usage(A100, REGION, 8)
    loopback.state.revoke(f"serviceAccount:{SA}")
    spec = make_spec(insecure_registry.uri("public/armonly:1.0"), output="gs://tg-missing/run")
    report = run_preflight(spec, only=["quota", "iam", "image", "storage"], timeout_s=20, call_timeout_s=5)
    worst = {}
    for r in report.results:
        worst[r.check] = max(worst.get(r.check, Status.PASS), r.status, key=lambda s: s.rank)
    assert worst == {"quota": Status.FAIL, "iam": Status.FAIL, "image": Status.FAIL, "storage": Status.FAIL}
    assert all(r.remedy for r in report.results if r.status is Status.FAIL)
    assert {r.failure_class for r in report.results if r.status is Status.FAIL} == {
        "quota",
        "permission",
        "container",
    }
    assert not report.passed()


def test_no_credential_or_token_in_any_output(loopback, insecure_registry, all_checks):
    loopback.troubleshooter.allowed = False  # forces impersonation: tokens are minted
    loopback.grant(CALLER, "roles/iam.serviceAccountTokenCreator", loopback.state.sa_resource(SA))
    spec = make_spec(
        insecure_registry.uri("private/trainer:1.0"),
        tensorboard=f"projects/{PROJECT}/locations/{REGION}/tensorboards/1",
    )
    report = run_preflight(spec, only=ONLINE, timeout_s=20, call_timeout_s=5)
    assert loopback.state.tokens, "the IAM server minted a token for the service account"
    text = report.to_json() + report.to_markdown()
    for secret in list(loopback.state.tokens) + ["Bearer ", "ya29.", "eyJ"]:
        assert secret not in text


def test_every_api_down_gives_unknown_naming_the_endpoint(monkeypatch, all_checks):
    import time

    from trainguard.gcp import ENDPOINT_APIS

    dead = "http://127.0.0.1:9"  # discard port: connection refused
    for api in ENDPOINT_APIS:
        monkeypatch.setenv(f"TRAINGUARD_ENDPOINT_{api}", dead)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", dead)
    monkeypatch.setenv("TRAINGUARD_INSECURE_REGISTRIES", "127.0.0.1:9")
    body = {
        "jobSpec": {
            **make_spec("127.0.0.1:9/public/trainer:1.0").to_dict(),
            "network": NETWORK,
            "reservedIpRanges": [IP_RANGE],
        },
        "encryptionSpec": {"kmsKeyName": KMS_KEY},
    }
    from trainguard.spec import parse_spec

    started = time.monotonic()
    report = run_preflight(
        parse_spec(body, project=PROJECT, region=REGION), only=ONLINE, timeout_s=20, call_timeout_s=2
    )
    assert time.monotonic() - started < 12  # a dead endpoint answers within ~10 s
    assert {r.check for r in report.results} == set(ONLINE)
    unknown = [r for r in report.results if r.status is Status.UNKNOWN]
    # capacity has nothing to look up here; everything else could not be decided
    assert {r.check for r in unknown} == set(ONLINE) - {"capacity"}
    assert all(r.status is Status.PASS for r in report.results if r.check == "capacity")
    assert all(r.remedy and "verify by hand" in r.remedy for r in unknown)
    assert all("could not run" not in r.title for r in report.results)  # none escaped to the runner
    for r in unknown:
        if r.check in ("quota", "network") or "CMEK" in r.title:
            assert "127.0.0.1:9" in r.evidence, r.evidence


def test_bad_spec_is_rejected_before_any_call():
    with pytest.raises(SpecError, match=r"workerPoolSpecs\[0\]\.machineSpec\.acceleratorCount"):
        make_spec(
            "unused",
            pools=[
                {
                    "machineSpec": {
                        "machineType": "a2-highgpu-1g",
                        "acceleratorType": "NVIDIA_TESLA_A100",
                        "acceleratorCount": "one",
                    },
                    "containerSpec": {"imageUri": "x/y:1"},
                }
            ],
        )
