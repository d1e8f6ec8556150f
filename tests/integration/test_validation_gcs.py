"""Histories on gs:// against gcp-storage-emulator (the real JSON API on loopback): streamed in
ranges, object names that try to leave the download directory, a dead endpoint within the retry
deadline."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from tests.fuzz.contract import assert_contract, run_cli
from trainguard.errors import EndpointUnreachable
from trainguard.runtime.storage import GCSStore
from trainguard.validation import collect, load_history, validate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "histories"


@pytest.fixture
def bucket(emulator, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.url)
    emulator.create_bucket("hist-bucket")
    return "gs://hist-bucket"


def _same(a, b) -> None:
    assert list(a.series) == list(b.series) and a.records == b.records and a.notes == b.notes
    for name, series in a.series.items():
        np.testing.assert_array_equal(series.steps, b.series[name].steps)
        np.testing.assert_array_equal(series.values, b.series[name].values)


@pytest.mark.parametrize("name", ["history.jsonl", "keras_log.csv", "metrics.csv"])
def test_an_object_is_read_in_ranges_as_the_local_file_is(bucket, monkeypatch, name):
    local = FIXTURES / "oscillate" / name
    GCSStore().write_bytes(f"{bucket}/run/{name}", local.read_bytes())
    monkeypatch.setattr(collect, "READ_BYTES", 1000)  # many ranged reads, lines across them
    monkeypatch.setattr(collect, "CHUNK_BYTES", 300)
    _same(load_history(f"{bucket}/run/{name}"), load_history(local))


def test_a_torn_object_is_read_like_a_torn_file(bucket, tmp_path):
    data = (FIXTURES / "overfit" / "history.jsonl").read_bytes()[:-20]
    GCSStore().write_bytes(f"{bucket}/torn.jsonl", data)
    (tmp_path / "torn.jsonl").write_bytes(data)
    remote = load_history(f"{bucket}/torn.jsonl")
    _same(remote, load_history(tmp_path / "torn.jsonl"))
    assert any("truncated last line" in note for note in remote.notes)


@pytest.fixture
def any_names(monkeypatch):
    """Lets the emulator store every object name real Cloud Storage accepts.

    Real GCS keeps ``a/../b`` and ``a//b`` as they are (object names are flat; only ``.`` and
    ``..`` as a whole name are refused); the emulator's in-memory store normalises them away or
    refuses them, for its own disk mode's sake. In memory, names are only dictionary keys.
    """
    from gcp_storage_emulator import storage as emulator_storage

    monkeypatch.setattr(
        emulator_storage._FileStore, "_norm", staticmethod(lambda path: path.replace("\\", "/").strip("/"))
    )


def test_object_names_cannot_write_outside_the_download_directory(bucket, tmp_path, monkeypatch, any_names):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the download directory goes
    store = GCSStore()
    for path in (FIXTURES / "explode" / "tb_keras").rglob("*"):
        if path.is_file():
            rel = path.relative_to(FIXTURES / "explode").as_posix()
            store.upload_file(str(path), f"{bucket}/runs/{rel}")
    planted = next((FIXTURES / "explode" / "tb_torch").iterdir()).read_bytes()
    # Each would land outside the temporary directory, or on top of another file, if joined as is.
    hostile = [
        "runs/tb_keras/../../../escaped.tfevents.1",
        "runs/tb_keras/train/../../../../escaped.tfevents.2",
        "runs/tb_keras//train/events.out.tfevents.3",
    ]
    for name in hostile:
        store.write_bytes(f"{bucket}/{name}", planted)
    assert {f"{bucket}/{n}" for n in hostile} <= set(store.list(f"{bucket}/runs"))

    verdict = validate(f"{bucket}/runs/tb_keras")
    assert verdict.failure_class == "divergence"  # the honest files were still read
    assert not list(tmp_path.rglob("escaped*")), "an object name wrote outside the download dir"
    assert list(scratch.iterdir()) == []  # and the download directory is gone
    note = next(n for n in verdict.notes if "skipped 3 object(s)" in n)
    assert "escaped.tfevents.1" in note


def test_only_hostile_names_is_a_history_error(bucket, any_names):
    planted = next((FIXTURES / "explode" / "tb_torch").iterdir()).read_bytes()
    GCSStore().write_bytes(f"{bucket}/logs/../x.tfevents.1", planted)
    outcome = run_cli("validate", f"{bucket}/logs")
    assert_contract(outcome, max_seconds=30)
    assert outcome.exit_code == 2 and "no event file with a usable name" in outcome.output


def test_a_dead_endpoint_is_named_within_the_retry_deadline(monkeypatch, dead_host):
    endpoint = f"http://{dead_host}"
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint)
    monkeypatch.setenv("TRAINGUARD_RETRY_DEADLINE", "2s")
    started = time.monotonic()
    with pytest.raises(EndpointUnreachable, match="127.0.0.1") as info:
        load_history("gs://hist-bucket/run/history.jsonl")
    # The storage library alone retried for ~2 minutes; the policy stops at its deadline.
    assert time.monotonic() - started < 60
    assert "TRAINGUARD_RETRY_DEADLINE" in str(info.value)


def test_a_dead_endpoint_through_the_cli_is_exit_2(monkeypatch, dead_host):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://{dead_host}")
    monkeypatch.setenv("TRAINGUARD_RETRY_DEADLINE", "1s")
    outcome = run_cli("validate", "gs://hist-bucket/logs")
    assert_contract(outcome, max_seconds=60)
    assert outcome.exit_code == 2 and "no answer at" in outcome.output


def test_a_missing_object_is_a_history_error(bucket):
    outcome = run_cli("validate", f"{bucket}/none.jsonl")
    assert_contract(outcome, max_seconds=30)
    assert outcome.exit_code == 2 and "cannot read" in outcome.output


def test_a_directory_with_a_lightning_log(bucket, tmp_path):
    run = tmp_path / "lightning_logs" / "version_0"
    run.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "overfit" / "metrics.csv", run / "metrics.csv")
    GCSStore().upload_file(str(run / "metrics.csv"), f"{bucket}/lt/lightning_logs/version_0/metrics.csv")
    verdict = validate(f"{bucket}/lt")
    assert verdict.series["format"] == "lightning_csv" and verdict.failure_class == "overfit"
