"""A checkpoint saved on gs:// leaves the training's own random streams alone: a run preempted and
resumed from Cloud Storage draws the same Python ``random`` numbers as an uninterrupted one."""

from __future__ import annotations

import signal

import pytest

from tests.unit.runtime.test_torch_checkpointer import train, weights

torch = pytest.importorskip("torch")


@pytest.fixture
def bucket(emulator, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.url)
    emulator.create_bucket("rng-bucket")
    return "gs://rng-bucket"


@pytest.mark.slow
@pytest.mark.parametrize("async_save", [True, False])
def test_a_run_resumed_from_gcs_ends_bit_identical_though_it_draws_from_random(bucket, tmp_path, async_save):
    # The trainer draws from Python's global `random` at every step (as data pipelines do).
    expected = weights(train(tmp_path / "a", history=str(tmp_path / "a.jsonl")))
    where = f"{bucket}/run-{async_save}/checkpoints"
    assert train(where, stop_at=7, async_save=async_save) is None
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    got = weights(train(where, async_save=async_save))
    assert all(torch.equal(a, b) for a, b in zip(expected, got, strict=True))
