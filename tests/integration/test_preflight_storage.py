"""The output bucket against gcp-storage-emulator, with the real google-cloud-storage client."""

from __future__ import annotations

from tests.integration.conftest import BUCKET, PROJECT, context, make_spec
from tests.servers.googleapi import GoogleApiServer
from trainguard.preflight import storage as storage_mod
from trainguard.preflight.results import Status

IMAGE = "127.0.0.1:1/unused:1"


def run(spec, timeout: float = 5.0):
    return storage_mod.storage(context(spec, timeout))


class RefusingStorage(GoogleApiServer):
    """Answers the storage JSON API with injected faults only: the emulator cannot say 403."""

    domain = "storage.googleapis.com"

    def routes(self):
        return []


def test_regional_bucket_in_the_job_region_passes(loopback):
    [result] = run(make_spec(IMAGE))
    assert result.status is Status.PASS
    assert f"gs://{BUCKET} is regional in us-central1" in result.evidence


def test_multi_region_bucket_warns(loopback):
    loopback.emulator.create_bucket("tg-multi")  # the emulator's own default: US multi-region
    [result] = run(make_spec(IMAGE, output="gs://tg-multi/runs"))
    assert result.status is Status.WARN
    assert "multi-region US" in result.evidence and "not regional in us-central1" in result.evidence
    assert "gcloud storage buckets create gs://BUCKET --location=us-central1" in result.remedy


def test_bucket_in_another_region_warns(loopback):
    loopback.emulator.create_bucket("tg-eu", location="EUROPE-WEST4", location_type="region")
    [result] = run(make_spec(IMAGE, output="gs://tg-eu/runs"))
    assert result.status is Status.WARN
    assert "gs://tg-eu is in europe-west4, the job runs in us-central1" in result.evidence


def test_dual_region_including_the_job_region_still_warns(loopback):
    loopback.emulator.create_bucket(
        "tg-dual", location="US", location_type="dual-region", data_locations=["US-CENTRAL1", "US-EAST1"]
    )
    [result] = run(make_spec(IMAGE, output="gs://tg-dual/runs"))
    assert result.status is Status.WARN
    assert "dual-region US (us-central1, us-east1) which includes the job's region" in result.evidence


def test_missing_bucket_fails_with_the_create_command(loopback):
    [result] = run(make_spec(IMAGE, output="gs://tg-nowhere/runs/r1"))
    assert result.status is Status.FAIL
    assert "gs://tg-nowhere of baseOutputDirectory does not exist" in result.evidence
    assert result.remedy == (
        f"gcloud storage buckets create gs://tg-nowhere --project={PROJECT} "
        "--location=us-central1 --uniform-bucket-level-access"
    )


def test_no_output_directory_has_nothing_to_check(loopback):
    [result] = run(make_spec(IMAGE, output=None))
    assert result.status is Status.PASS


def test_forbidden_bucket_is_unknown_naming_the_permission(loopback, monkeypatch):
    with RefusingStorage() as server:
        server.fail(
            r"/storage/v1/b/",
            403,
            times=None,
            message="alice@example.com does not have storage.buckets.get access to the "
            "Google Cloud Storage bucket.",
            metadata={"permission": "storage.buckets.get"},
        )
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
        [result] = run(make_spec(IMAGE))
    assert result.status is Status.UNKNOWN
    assert "storage.buckets.get" in result.evidence and "roles/storage.bucketViewer" in result.evidence
    assert f"gcloud storage buckets describe gs://{BUCKET}" in result.remedy


def test_rate_limited_bucket_read_is_retried(loopback, monkeypatch):
    with RefusingStorage() as server:
        server.fail(r"/storage/v1/b/", 429, times=None)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
        [result] = run(make_spec(IMAGE), timeout=0.5)
        assert len(server.calls(r"/storage/v1/b/")) >= 2  # retried with backoff
    assert result.status is Status.UNKNOWN
    assert "429 after retries" in result.evidence


# --- the TensorBoard instance -------------------------------------------------------------------


def _with_board(loopback, board: str):
    from tests.integration.conftest import SA

    results = run(make_spec(IMAGE, tensorboard=board, service_account=SA))
    return {r.title: r for r in results}


def test_an_existing_tensorboard_passes(loopback):
    from tests.integration.conftest import REGION, TENSORBOARD, seed_resources

    seed_resources(loopback)
    r = _with_board(loopback, TENSORBOARD)[f"TensorBoard {TENSORBOARD}"]
    assert r.status is Status.PASS and f"exists in {REGION}" in r.evidence
    [call] = loopback.vertex.calls("tensorboards")
    assert call.path == f"/v1/{TENSORBOARD}"


def test_a_missing_tensorboard_fails_with_the_create_command(loopback):
    from tests.integration.conftest import REGION, TENSORBOARD

    r = _with_board(loopback, TENSORBOARD)[f"TensorBoard {TENSORBOARD}"]
    assert r.status is Status.FAIL and "does not exist" in r.evidence
    assert f"gcloud ai tensorboards create --display-name=NAME --region={REGION}" in r.remedy


def test_a_tensorboard_the_caller_may_not_read_is_unknown(loopback):
    from tests.integration.conftest import TENSORBOARD, seed_resources

    seed_resources(loopback)
    loopback.vertex.denied.add("aiplatform.tensorboards.get")
    r = _with_board(loopback, TENSORBOARD)[f"TensorBoard {TENSORBOARD}"]
    assert r.status is Status.UNKNOWN
    assert "aiplatform.tensorboards.get" in r.evidence and "roles/aiplatform.viewer" in r.remedy
