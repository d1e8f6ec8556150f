"""Images against Debian's docker-registry (token auth) with images pushed by the fixture."""

from __future__ import annotations

import pytest

from tests.integration.conftest import ENTRYPOINT, PRIVATE_TOKEN, context, make_spec
from trainguard.preflight import image as image_mod
from trainguard.preflight.oci_client import AccessDenied, ImageRef, RegistryClient
from trainguard.preflight.results import Status


def run(spec, timeout: float = 5.0):
    return image_mod.image(context(spec, timeout))


def _pool(image: str, command: list[str] | None = None, args: list[str] | None = None) -> dict:
    container: dict = {"imageUri": image}
    if command:
        container["command"] = command
    if args:
        container["args"] = args
    return {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1, "containerSpec": container}


def test_image_with_entrypoint_passes_with_digest(insecure_registry):
    uri = insecure_registry.uri("public/trainer:1.0")
    [result] = run(make_spec(uri))
    assert result.status is Status.PASS
    assert insecure_registry.digests["public/trainer:1.0"][:19] in result.evidence
    assert f"Entrypoint {ENTRYPOINT}" in result.evidence


def test_multi_platform_index_resolves_linux_amd64_and_skips_the_attestation(insecure_registry):
    [result] = run(make_spec(insecure_registry.uri("public/multi:2.0")))
    assert result.status is Status.PASS
    assert "linux/amd64 of 2 platforms" in result.evidence
    assert result.details["platforms"] == ["linux/amd64", "linux/arm64/v8"]
    assert "Cmd ['python', 'train.py']" in result.evidence


def test_image_by_digest(insecure_registry):
    digest = insecure_registry.digests["public/multi:2.0"]
    [result] = run(make_spec(insecure_registry.uri(f"public/multi@{digest}")))
    assert result.status is Status.PASS


def test_image_without_entrypoint_or_command_fails(insecure_registry):
    uri = insecure_registry.uri("public/noentry:1.0")
    [result] = run(make_spec(uri, pools=[_pool(uri, args=["--epochs", "3"])]))
    assert result.status is Status.FAIL and result.failure_class == "container"
    assert "has no Entrypoint or Cmd and the spec gives no command" in result.evidence
    assert "args ['--epochs', '3'] alone would be run as the command" in result.evidence
    assert "set workerPoolSpecs[0].containerSpec.command" in result.remedy


def test_image_without_entrypoint_passes_when_the_spec_gives_command(insecure_registry):
    uri = insecure_registry.uri("public/noentry:1.0")
    [result] = run(make_spec(uri, pools=[_pool(uri, command=["python", "train.py"])]))
    assert result.status is Status.PASS
    assert "the spec's command ['python', 'train.py']" in result.evidence


def test_arm64_only_index_fails_naming_its_platforms(insecure_registry):
    uri = insecure_registry.uri("public/armonly:1.0")
    [result] = run(make_spec(uri))
    assert result.status is Status.FAIL
    assert "has no linux/amd64 image (it has linux/arm64/v8, linux/arm/v7)" in result.evidence
    assert result.remedy == f"docker buildx build --platform linux/amd64 -t {uri} --push ."


def test_arm64_single_image_fails(insecure_registry):
    [result] = run(make_spec(insecure_registry.uri("public/armimage:1.0")))
    assert result.status is Status.FAIL
    assert "linux/arm64" in result.evidence


def test_missing_tag_fails(insecure_registry):
    uri = insecure_registry.uri("public/trainer:nope")
    [result] = run(make_spec(uri))
    assert result.status is Status.FAIL
    assert f"{uri} does not exist" in result.evidence and "MANIFEST_UNKNOWN" in result.evidence
    assert f"docker push {uri}" in result.remedy


def test_missing_repository_fails(insecure_registry):
    uri = insecure_registry.uri("public/ghost:1.0")
    [result] = run(make_spec(uri))
    # distribution 2.8 answers MANIFEST_UNKNOWN (not NAME_UNKNOWN) for a repository never pushed
    assert result.status is Status.FAIL and f"{uri} does not exist" in result.evidence


def test_private_repository_without_credentials_is_unknown(insecure_registry):
    [result] = run(make_spec(insecure_registry.uri("private/trainer:1.0")))
    assert result.status is Status.UNKNOWN
    assert "refused a pull token" in result.evidence and "anonymous access" in result.evidence
    assert "docker manifest inspect" in result.remedy


def test_private_repository_with_oauth2accesstoken_resolves(insecure_registry):
    ref = ImageRef.parse(insecure_registry.uri("private/trainer:1.0"))
    with RegistryClient(
        ref.host, insecure=True, credential=lambda: ("oauth2accesstoken", PRIVATE_TOKEN)
    ) as client:
        info = client.resolve(ref)
    assert info.entrypoint == ENTRYPOINT
    with (
        RegistryClient(ref.host, insecure=True, credential=lambda: ("oauth2accesstoken", "wrong")) as client,
        pytest.raises(AccessDenied, match="the given credential"),
    ):
        client.resolve(ref)


def test_token_service_rate_limit_is_retried(insecure_registry):
    insecure_registry.tokens.fail_next = [429, 503]
    [result] = run(make_spec(insecure_registry.uri("public/trainer:1.0")))
    assert result.status is Status.PASS


def test_pools_sharing_an_image_resolve_it_once(insecure_registry):
    uri = insecure_registry.uri("public/trainer:1.0")
    before = len(insecure_registry.tokens.requests)
    results = run(make_spec(uri, pools=[_pool(uri), _pool(uri), _pool(uri)]))
    assert [r.status for r in results] == [Status.PASS] * 3
    assert len(insecure_registry.tokens.requests) - before == 1


def test_unreachable_registry_is_unknown(monkeypatch, dead_host):
    monkeypatch.setenv("TRAINGUARD_INSECURE_REGISTRIES", dead_host)
    [result] = run(make_spec(f"{dead_host}/public/trainer:1.0"))
    assert result.status is Status.UNKNOWN
    assert f"cannot reach {dead_host}" in result.evidence


def test_malformed_image_uri_fails():
    [result] = run(make_spec("Trainer Image:latest"))
    assert result.status is Status.FAIL
    assert "not an image reference" in result.evidence


def test_a_registry_that_keeps_answering_503_gives_up_at_the_retry_deadline(insecure_registry):
    from trainguard.preflight.oci_client import RegistryError
    from trainguard.retry import RetryPolicy

    insecure_registry.tokens.fail_next = [503] * 100
    ref = ImageRef.parse(insecure_registry.uri("public/trainer:1.0"))
    policy = RetryPolicy(initial_s=0.05, max_delay_s=0.1, deadline_s=0.4)
    before = len(insecure_registry.tokens.requests)
    try:
        with (
            RegistryClient(ref.host, insecure=True, retry=policy) as client,
            pytest.raises(RegistryError, match="503"),
        ):
            client.resolve(ref)
    finally:
        insecure_registry.tokens.fail_next = []  # the registry is shared by the session
    asked = len(insecure_registry.tokens.requests) - before
    assert 2 <= asked < 100  # retried, then stopped by the deadline rather than the count
