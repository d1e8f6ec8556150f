"""The four online families through ``run_preflight``: a healthy multi-pool job, secrets, bad input."""

from __future__ import annotations

import pytest

from tests.integration.conftest import A100, CALLER, PROJECT, REGION, SA, make_spec
from trainguard.errors import SpecError
from trainguard.preflight import run_preflight
from trainguard.preflight.report import Status

ONLINE = ["quota", "iam", "image", "storage"]


def four_pools(registry) -> list[dict]:
    """Chief + 2 workers on A100, a CPU parameter server and a CPU evaluator, 4 images."""
    def pool(machine: str, image: str, replicas: int = 1, accel: int = 0) -> dict:
        spec = {"machineType": machine}
        if accel:
            spec.update(acceleratorType="NVIDIA_TESLA_A100", acceleratorCount=accel)
        return {"machineSpec": spec, "replicaCount": replicas,
                "containerSpec": {"imageUri": registry.uri(f"bench/{image}:1.0")}}

    return [pool("a2-highgpu-1g", "chief", 1, 1), pool("a2-highgpu-1g", "worker", 2, 1),
            pool("n1-standard-8", "ps"), pool("n1-standard-8", "eval")]


def test_healthy_four_pool_job_passes_every_check(loopback, insecure_registry, all_checks):
    spec = make_spec("unused", pools=four_pools(insecure_registry))
    report = run_preflight(spec, only=ONLINE + ["compat"], timeout_s=20, call_timeout_s=5)
    failing = [(r.check, r.title, r.status.value, r.evidence) for r in report.results
               if r.status is not Status.PASS]
    assert failing == []
    checks = {r.check for r in report.results}
    assert checks == {"compat", "quota", "iam", "image", "storage"}
    [quota] = [r for r in report.results if r.check == "quota"]
    assert "limit 8, in use 2, requested 3" in quota.evidence
    assert len([r for r in report.results if r.check == "image"]) == 4
    assert report.passed() and report.worst() is Status.PASS


def test_broken_job_fails_on_every_family_with_remedies(loopback, insecure_registry, all_checks):
    loopback.monitoring.set_usage(A100, REGION, 8)
    loopback.state.revoke(f"serviceAccount:{SA}")
    spec = make_spec(insecure_registry.uri("public/armonly:1.0"), output="gs://tg-missing/run")
    report = run_preflight(spec, only=ONLINE, timeout_s=20, call_timeout_s=5)
    worst = {}
    for r in report.results:
        worst[r.check] = max(worst.get(r.check, Status.PASS), r.status, key=lambda s: s.rank)
    assert worst == {"quota": Status.FAIL, "iam": Status.FAIL, "image": Status.FAIL,
                     "storage": Status.FAIL}
    assert all(r.remedy for r in report.results if r.status is Status.FAIL)
    assert {r.failure_class for r in report.results if r.status is Status.FAIL} == {
        "quota", "permission", "container"}
    assert not report.passed()


def test_no_credential_or_token_in_any_output(loopback, insecure_registry, all_checks):
    loopback.troubleshooter.allowed = False  # forces impersonation: tokens are minted
    loopback.grant(CALLER, "roles/iam.serviceAccountTokenCreator", loopback.state.sa_resource(SA))
    spec = make_spec(insecure_registry.uri("private/trainer:1.0"),
                     tensorboard=f"projects/{PROJECT}/locations/{REGION}/tensorboards/1")
    report = run_preflight(spec, only=ONLINE, timeout_s=20, call_timeout_s=5)
    assert loopback.state.tokens, "the IAM server minted a token for the service account"
    text = report.to_json() + report.to_markdown()
    for secret in list(loopback.state.tokens) + ["Bearer ", "ya29.", "eyJ"]:
        assert secret not in text


def test_every_api_down_gives_unknown_not_a_crash(monkeypatch, all_checks):
    dead = "http://127.0.0.1:9"  # discard port: connection refused
    for api in ("CLOUDQUOTAS", "MONITORING", "POLICYTROUBLESHOOTER", "CLOUDRESOURCEMANAGER", "IAM",
                "IAMCREDENTIALS"):
        monkeypatch.setenv(f"TRAINGUARD_ENDPOINT_{api}", dead)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", dead)
    monkeypatch.setenv("TRAINGUARD_INSECURE_REGISTRIES", "127.0.0.1:9")
    report = run_preflight(make_spec("127.0.0.1:9/public/trainer:1.0"), only=ONLINE,
                           timeout_s=20, call_timeout_s=2)
    assert {r.check for r in report.results} == set(ONLINE)
    assert {r.status for r in report.results} == {Status.UNKNOWN}
    assert all(r.remedy and "verify by hand" in r.remedy for r in report.results)
    assert all("could not run" not in r.title for r in report.results)  # none escaped to the runner


def test_bad_spec_is_rejected_before_any_call():
    with pytest.raises(SpecError, match=r"workerPoolSpecs\[0\]\.machineSpec\.acceleratorCount"):
        make_spec("unused", pools=[{"machineSpec": {"machineType": "a2-highgpu-1g",
                                                    "acceleratorType": "NVIDIA_TESLA_A100",
                                                    "acceleratorCount": "one"},
                                    "containerSpec": {"imageUri": "x/y:1"}}])
