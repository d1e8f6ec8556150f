"""Run directories on gs://, against gcp-storage-emulator: the same rules as on a local disk."""

from __future__ import annotations

import pytest

from trainguard.launch.run_dir import claim
from trainguard.runtime.storage import GCSStore


@pytest.fixture
def bucket(emulator, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.url)
    emulator.create_bucket("runs-bucket")
    return "gs://runs-bucket/experiments/a100"


def test_on_gcs_a_second_run_goes_beside_the_first_and_resume_finds_the_newest(bucket):
    store = GCSStore(deadline_s=10)
    first = claim(bucket)
    assert first.base == bucket and store.exists(f"{bucket}/trainguard-run.json")
    store.write_bytes(f"{bucket}/checkpoints/step-000000010/COMMIT", b"{}")
    second = claim(bucket)
    assert second.base == f"{bucket}/runs/{second.run_id}"
    assert second.displaced_by.run_id == first.run_id
    store.write_bytes(f"{second.base}/history.jsonl", b'{"step": 1}\n')
    third = claim(bucket)
    store.write_bytes(f"{third.base}/model/model.pt", b"w")
    assert list(store.child_dirs(f"{bucket}/runs")) == sorted([second.run_id, third.run_id])
    resumed = claim(bucket, resume=True)
    assert resumed.run_id == third.run_id and resumed.base == third.base and resumed.resumed
    assert claim(bucket, run_id=second.run_id).base == second.base


def test_on_gcs_a_prefix_that_only_shares_the_name_is_not_a_run(bucket):
    store = GCSStore(deadline_s=10)
    # gs://…/a100-old/checkpoints/… shares the prefix "a100" but is another directory.
    store.write_bytes(bucket + "-old/checkpoints/step-1/COMMIT", b"{}")
    store.write_bytes(bucket + "/checkpointsX/file", b"x")
    assert claim(bucket).base == bucket
