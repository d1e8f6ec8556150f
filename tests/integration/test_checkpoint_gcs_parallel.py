"""Checkpoints on gs:// through the parallel path (composite uploads in parts, concurrent ranged
reads) against gcp-storage-emulator: what is restored is what was saved, no temporary object
outlives a save, a save that fails midway creates nothing, and random SIGKILLs never lose the
newest complete checkpoint."""

from __future__ import annotations

import io
import os
import shutil
import tempfile

import pytest

from tests.unit.runtime.kill_loop import kill_loop
from trainguard.runtime.checkpoint import CheckpointManager, RetentionPolicy, Stream
from trainguard.runtime.storage import GCSStore
from trainguard.runtime.transfer import (
    COMPOSE_MAX_SOURCES,
    ENV_PART_BYTES,
    ENV_THRESHOLD_BYTES,
    ENV_WORKERS,
    TEMP_MARKERS,
    TransferConfig,
)

PART = 256 << 10
SMALL_PARTS = TransferConfig(workers=4, part_bytes=PART, threshold_bytes=2 * PART)


@pytest.fixture
def bucket(emulator, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.url)
    emulator.create_bucket("par-bucket")
    return "gs://par-bucket"


def temporaries(store: GCSStore, prefix: str) -> list[str]:
    return [n for n in store.list(prefix) if any(m in n for m in TEMP_MARKERS)]


@pytest.mark.slow
def test_a_checkpoint_saved_in_parts_restores_byte_for_byte_and_leaves_no_part(bucket):
    store = GCSStore(transfer=SMALL_PARTS)
    big = os.urandom(PART * (COMPOSE_MAX_SOURCES + 9) + 17)  # 42 parts: composed in a tree
    mgr = CheckpointManager(f"{bucket}/run/checkpoints", store=store, async_save=False)
    mgr.save(
        7,
        {
            "bytes": big,
            "later": lambda: big[::-1],
            "stream": Stream(lambda f: [f.write(big[i : i + 100_000]) for i in range(0, len(big), 100_000)]),
            "small": b"tiny",
        },
    )
    fresh = CheckpointManager(f"{bucket}/run/checkpoints", store=GCSStore(transfer=SMALL_PARTS))
    latest = fresh.restore_latest()
    assert latest.step == 7
    assert latest.read("bytes", fresh.store) == big
    assert latest.read("later", fresh.store) == big[::-1]
    with fresh.open_file(latest, "stream") as handle:
        assert handle.read() == big
    assert latest.read("small", fresh.store) == b"tiny"
    # What one stream reads back is the same object: the composite is an ordinary object.
    assert latest.read("stream", GCSStore(transfer=TransferConfig.single_stream())) == big
    assert temporaries(store, f"{bucket}/run") == []
    assert latest.sizes == {"bytes": len(big), "later": len(big), "stream": len(big), "small": 4}


def test_a_stream_that_fails_midway_creates_nothing_and_the_previous_checkpoint_stays(bucket):
    store = GCSStore(transfer=SMALL_PARTS)
    mgr = CheckpointManager(f"{bucket}/r/checkpoints", store=store, async_save=False)
    mgr.save(1, {"state": b"one" * 100_000})

    def dies(handle) -> None:
        handle.write(os.urandom(PART * 5))  # several parts already sent
        raise RuntimeError("the device copy failed")

    with pytest.raises(RuntimeError, match="device copy failed"):
        mgr.save(2, {"state": Stream(dies)})
    assert mgr.restore_latest().step == 1
    assert mgr.restore_latest().read("state", store) == b"one" * 100_000
    assert temporaries(store, f"{bucket}/r") == []
    assert not any("step-000000002" in n for n in store.list(f"{bucket}/r/checkpoints"))


def test_downloads_in_parts_match_the_object(bucket, tmp_path):
    store = GCSStore(transfer=SMALL_PARTS)
    data = os.urandom(PART * 6 + 5)
    local = tmp_path / "up.bin"
    local.write_bytes(data)
    store.upload_file(str(local), f"{bucket}/files/x.bin")
    store.download_file(f"{bucket}/files/x.bin", str(tmp_path / "down.bin"))
    assert (tmp_path / "down.bin").read_bytes() == data
    assert temporaries(store, f"{bucket}/files") == []


def test_a_large_object_is_read_through_a_temporary_file_never_held_whole_in_memory(
    bucket, tmp_path, monkeypatch
):
    store = GCSStore(transfer=SMALL_PARTS)
    data = os.urandom(PART * 5 + 3)
    store.write_bytes(f"{bucket}/files/big.bin", data)
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    with store.open_read(f"{bucket}/files/big.bin") as handle:
        # A seekable file on disk (a restore of a 6 GB shard must not cost 6 GB of memory).
        assert isinstance(handle, io.BufferedReader)
        assert [p.name for p in spool.iterdir()] != []
        handle.seek(PART * 4)
        assert handle.read(10) == data[PART * 4 : PART * 4 + 10]
        handle.seek(0)
        assert handle.read() == data
    assert list(spool.iterdir()) == []  # the temporary copy goes with the reader


def test_a_large_object_is_streamed_when_the_temporary_disk_lacks_room(bucket, monkeypatch):
    store = GCSStore(transfer=SMALL_PARTS)
    data = os.urandom(PART * 5 + 3)
    store.write_bytes(f"{bucket}/files/big.bin", data)
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=PART))
    with store.open_read(f"{bucket}/files/big.bin") as handle:
        assert not isinstance(handle, io.BufferedReader)
        assert handle.read() == data


@pytest.mark.parametrize("size", [100, PART * 5], ids=["one-request", "in-parts"])
@pytest.mark.parametrize("library", ["numpy.savez", "torch.save", "zipfile", "pickle"])
def test_the_writers_frameworks_use_write_through_the_parallel_path(bucket, library, size):
    # Keras' guard saves with np.savez, the torch adapters with torch.save: each must take the
    # parallel upload's file object as it takes google-cloud-storage's BlobWriter.
    import pickle
    import zipfile

    import numpy as np

    store = GCSStore(transfer=SMALL_PARTS)
    payload = np.frombuffer(os.urandom(size), dtype=np.uint8)
    uri = f"{bucket}/writers/{library}-{size}"
    with store.open_write(uri) as handle:
        if library == "numpy.savez":
            np.savez(handle, w=payload)
        elif library == "torch.save":
            torch = pytest.importorskip("torch")
            torch.save({"w": torch.from_numpy(payload.copy())}, handle)
        elif library == "zipfile":
            with zipfile.ZipFile(handle, "w") as archive:
                archive.writestr("w", payload.tobytes())
        else:
            pickle.dump(payload.tobytes(), handle)
    back = io.BytesIO(store.read_bytes(uri))
    if library == "numpy.savez":
        assert np.array_equal(np.load(back)["w"], payload)
    elif library == "torch.save":
        assert torch.load(back, weights_only=True)["w"].numpy().tobytes() == payload.tobytes()
    elif library == "zipfile":
        assert zipfile.ZipFile(back).read("w") == payload.tobytes()
    else:
        assert pickle.load(back) == payload.tobytes()
    assert temporaries(store, f"{bucket}/writers") == []


def test_the_transfer_settings_come_from_the_environment_and_bad_ones_are_refused(monkeypatch):
    from trainguard.errors import ConfigError

    env = {ENV_WORKERS: "16", ENV_PART_BYTES: "8MiB"}
    config = TransferConfig.from_env(env)
    assert (config.workers, config.part_bytes, config.threshold_bytes) == (16, 8 << 20, 64 << 20)
    assert TransferConfig.from_env({ENV_WORKERS: "1"}).parallel is False
    with pytest.raises(ConfigError, match="TRAINGUARD_GCS_PART_BYTES='lots'"):
        TransferConfig.from_env({ENV_PART_BYTES: "lots"})
    with pytest.raises(ConfigError, match="threshold_bytes"):
        TransferConfig.from_env({ENV_PART_BYTES: "8MiB", ENV_THRESHOLD_BYTES: "1MiB"})
    with pytest.raises(ConfigError, match="workers=0"):
        TransferConfig(workers=0)


@pytest.mark.slow
def test_random_sigkills_during_parallel_saves_never_lose_the_newest_complete_checkpoint(bucket, emulator):
    env = {
        "STORAGE_EMULATOR_HOST": emulator.url,
        ENV_WORKERS: "4",
        ENV_PART_BYTES: str(PART),
        ENV_THRESHOLD_BYTES: str(2 * PART),
    }
    directory = f"{bucket}/kill/checkpoints"
    runs = kill_loop(
        directory, kills=4, seed=11, async_save=True, keep_last=1, size=6 * PART, max_delay=2.0, env=env
    )
    assert any(r["done"] for r in runs), runs
    # The next save removes what the killed ones left (parts of attempts no COMMIT names).
    store = GCSStore(transfer=SMALL_PARTS)
    mgr = CheckpointManager(directory, store=store, async_save=False, retention=RetentionPolicy(keep_last=1))
    mgr.save(999, {"a": b"after"})
    assert temporaries(store, directory) == []


@pytest.mark.long
@pytest.mark.parametrize("async_save", [True, False])
def test_many_random_sigkills_during_parallel_saves(bucket, emulator, async_save):
    env = {
        "STORAGE_EMULATOR_HOST": emulator.url,
        ENV_WORKERS: "4",
        ENV_PART_BYTES: str(PART),
        ENV_THRESHOLD_BYTES: str(2 * PART),
    }
    kill_loop(
        f"{bucket}/kill/checkpoints",
        kills=10,
        seed=13,
        async_save=async_save,
        keep_last=1,
        size=6 * PART,
        max_delay=2.0,
        env=env,
    )
