"""Checkpoints and history on gs:// against gcp-storage-emulator (the real JSON API on loopback):
saves, the kill loop, sharded (DCP) saves from several ranks, a dead endpoint."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from tests.trainer_job import trainer_job
from tests.unit.runtime.kill_loop import kill_loop
from trainguard.errors import EndpointUnreachable
from trainguard.launch.local import LocalBackend
from trainguard.runtime.checkpoint import COMMIT_MARKER, CheckpointManager, RetentionPolicy
from trainguard.runtime.history import HistoryWriter, read_history_records
from trainguard.runtime.storage import GCSStore, store_for


@pytest.fixture
def bucket(emulator, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.url)
    emulator.create_bucket("ckpt-bucket")
    return "gs://ckpt-bucket"


def test_save_restore_and_retention_on_gcs(bucket):
    mgr = CheckpointManager(
        f"{bucket}/run1/checkpoints", async_save=True, retention=RetentionPolicy(keep_last=2)
    )
    for step in (10, 20, 30):
        mgr.save(step, {"state": f"s{step}".encode(), "extra": lambda: b"x" * 1000})
    mgr.wait()
    found = mgr.checkpoints()
    assert [c.step for c in found] == [20, 30]
    latest = CheckpointManager(f"{bucket}/run1/checkpoints").restore_latest()
    assert latest.step == 30 and latest.read("state") == b"s30"
    names = GCSStore().list(f"{bucket}/run1/checkpoints")
    assert not any("step-000000010" in n for n in names)


def test_an_object_set_without_its_marker_is_not_a_checkpoint(bucket):
    store = GCSStore()
    mgr = CheckpointManager(f"{bucket}/r/checkpoints", async_save=False)
    mgr.save(5, {"state": b"five"})
    store.write_bytes(f"{bucket}/r/checkpoints/step-000000007/state", b"torn")
    assert mgr.restore_latest().step == 5
    mgr.save(9, {"state": b"nine"})
    assert not store.exists(f"{bucket}/r/checkpoints/step-000000007/state")
    assert store.exists(f"{bucket}/r/checkpoints/step-000000009/{COMMIT_MARKER}")


def test_history_on_gcs_survives_a_resume(bucket):
    uri = f"{bucket}/r/history.jsonl"
    h = HistoryWriter(uri)
    for s in range(1, 6):
        h.log(s, loss=1.0 / s)
    h.flush()
    h = HistoryWriter(uri, resume_step=3)
    for s in range(4, 7):
        h.log(s, loss=1.0 / s)
    h.close()
    records = read_history_records(GCSStore().read_bytes(uri).decode())
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 6]


@pytest.mark.slow
def test_the_trainer_checkpoints_to_gcs_and_resumes_bit_identical(bucket, tmp_path):
    args = ["--epochs=2", "--checkpoint-every=5", "--step-sleep=0.03"]

    def run(base, preempt_on=()):
        spec = trainer_job(args, base_output_dir=base)
        result = LocalBackend(preempt_on=list(preempt_on), grace_s=10).run(spec)
        assert result.succeeded, result.log_tail[-2000:]
        return result

    run(str(tmp_path / "local"))
    result = run(f"{bucket}/job", preempt_on=[("epoch 0 step", 0.1)])
    assert result.restarts == 1 and "resumed from checkpoint" in result.log_tail
    remote = GCSStore().read_bytes(f"{bucket}/job/model/model.pt")
    local = (tmp_path / "local" / "model" / "model.pt").read_bytes()
    assert hashlib.sha256(remote).digest() == hashlib.sha256(local).digest()
    assert any("/job/checkpoints/step-" in n for n in GCSStore().list(f"{bucket}/job/checkpoints"))


def test_validate_reads_histories_from_gcs(bucket):
    import shutil
    import tempfile

    from trainguard.validation import validate

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "histories"
    store = GCSStore()
    store.write_bytes(
        f"{bucket}/runs/overfit/history.jsonl", (fixtures / "overfit" / "history.jsonl").read_bytes()
    )
    verdict = validate(f"{bucket}/runs/overfit/history.jsonl")
    assert not verdict.passed and verdict.failure_class == "overfit"
    # A TensorBoard log directory on gs:// (Keras' train/ and validation/ runs).
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(fixtures / "overfit" / "tb_keras", Path(tmp) / "tb")
        for path in (Path(tmp) / "tb").rglob("*"):
            if path.is_file():
                rel = path.relative_to(tmp).as_posix()
                store.upload_file(str(path), f"{bucket}/runs/overfit/{rel}")
    verdict = validate(f"{bucket}/runs/overfit/tb")
    assert verdict.failure_class == "overfit"
    assert verdict.series["format"] == "tensorboard"
    assert verdict.series["val"]["name"] == "validation/epoch_loss"


@pytest.mark.slow
def test_random_sigkills_on_gcs_never_lose_the_newest_complete_checkpoint(bucket, emulator):
    # Re-saves of the restored step, keep_last=1, async: what lost whole runs before.
    runs = kill_loop(
        f"{bucket}/kill/checkpoints",
        kills=4,
        seed=3,
        async_save=True,
        keep_last=1,
        size=128 << 10,
        max_delay=1.5,
        env={"STORAGE_EMULATOR_HOST": emulator.url},
    )
    assert any(r["done"] for r in runs), runs


@pytest.mark.long
@pytest.mark.parametrize("async_save", [True, False])
def test_many_random_sigkills_on_gcs(bucket, emulator, async_save):
    kill_loop(
        f"{bucket}/kill/checkpoints",
        kills=10,
        seed=5,
        async_save=async_save,
        keep_last=1,
        size=128 << 10,
        max_delay=1.5,
        env={"STORAGE_EMULATOR_HOST": emulator.url},
    )


@pytest.mark.slow
def test_sharded_checkpoints_from_two_ranks_on_gcs_restore_on_one(bucket, tmp_path):
    pytest.importorskip("torch")
    from tests.unit.runtime.dist_jobs import run_job

    directory = f"{bucket}/fsdp/checkpoints"
    codes, saved, errors = run_job(_save_fsdp, 2, tmp_path, directory)
    assert codes == [0, 0], errors
    names = GCSStore().list(directory)
    assert any(n.endswith("/__1_0.distcp") for n in names)
    assert any(n.endswith("step-000000004/COMMIT") for n in names)
    codes, loaded, errors = run_job(_load_fsdp, 1, tmp_path, directory)
    assert codes == [0], errors
    assert loaded[0]["start"] == 4
    assert all(torch_equal(saved[0]["model"][k], loaded[0]["model"][k]) for k in saved[0]["model"])


def torch_equal(a, b) -> bool:
    import torch

    return torch.equal(a, b)


def _save_fsdp(rank, world, tmp, directory):
    from tests.unit.runtime.dist_jobs import build, full_state, train_step
    from trainguard.runtime import TorchCheckpointer

    model, optimizer = build("fsdp")
    ckpt = TorchCheckpointer(model, optimizer, directory=directory, save=2)
    ckpt.restore()
    for step in range(1, 5):
        train_step(model, optimizer, step, rank)
        ckpt.step(step, loss=0.0)
    ckpt.close()
    return full_state(model, optimizer)


def _load_fsdp(rank, world, tmp, directory):
    from tests.unit.runtime.dist_jobs import build, full_state
    from trainguard.runtime import TorchCheckpointer

    model, optimizer = build("fsdp", seed=9)
    start = TorchCheckpointer(model, optimizer, directory=directory).restore()
    return {**full_state(model, optimizer), "start": start.step}


def test_a_dead_storage_endpoint_answers_within_the_deadline_naming_it(monkeypatch, dead_host):
    dead = f"http://{dead_host}"
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", dead)
    started = time.monotonic()
    with pytest.raises(EndpointUnreachable, match=f"no answer from {dead} within 2 s"):
        CheckpointManager("gs://nowhere/run/checkpoints", deadline_s=2).restore_latest()
    with pytest.raises(EndpointUnreachable, match="Cloud Storage read gs://nowhere/h.jsonl"):
        store_for("gs://nowhere/h.jsonl", deadline_s=1).read_bytes("gs://nowhere/h.jsonl")
    assert time.monotonic() - started < 30  # it was 113 s of retries
