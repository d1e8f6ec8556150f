"""Sharded checkpoints through torch.distributed.checkpoint, several processes on gloo (CPU):
saved on 2 ranks, restored on 1 and on 4 (DDP and FSDP2); a rank killed mid-save leaves nothing
that restore would pick; what cannot be resharded gets one clear error."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tests.unit.runtime.dist_jobs import build, full_state, run_job, train_step  # noqa: E402
from trainguard.runtime import TorchCheckpointer  # noqa: E402


def save_job(rank, world, tmp: Path, kind, steps=6, every=3, die_at=None, per_rank=False):
    model, optimizer = build(kind)
    ckpt = TorchCheckpointer(model, optimizer, directory=str(tmp / "ck"), save=every)
    assert ckpt.restore().step == 0 and ckpt.sharded
    for step in range(1, steps + 1):
        train_step(model, optimizer, step, rank)
        if step == die_at and rank == 1:
            ckpt.wait()  # the previous save is complete: the kill lands in this step's save
            _die_in_next_shard_write()
        ckpt.step(step, loss=0.0, extra={"step": step, **({"rank": rank} if per_rank else {})})
    ckpt.close()
    return full_state(model, optimizer)


def _die_in_next_shard_write():
    """SIGKILL this rank once its shard file is written, before it is synced (a VM that vanishes
    mid-save)."""
    real = os.fsync

    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".distcp"):
            os.kill(os.getpid(), signal.SIGKILL)
        real(fd)

    os.fsync = fsync


def load_job(rank, world, tmp: Path, kind):
    model, optimizer = build(kind, seed=7)  # other weights until restored
    ckpt = TorchCheckpointer(model, optimizer, directory=str(tmp / "ck"))
    start = ckpt.restore()
    out = full_state(model, optimizer)
    ckpt.close()
    return {**out, "start": (start.step, start.extra)}


def same(a: dict, b: dict) -> bool:
    return (
        a["model"].keys() == b["model"].keys()
        and all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
        and a["optim"].keys() == b["optim"].keys()
        and all(torch.equal(a["optim"][k][n], b["optim"][k][n]) for k in a["optim"] for n in a["optim"][k])
    )


@pytest.mark.parametrize("kind", ["ddp", "fsdp"])
def test_saved_on_two_ranks_restored_on_one_and_on_four(tmp_path, kind):
    codes, saved, errors = run_job(save_job, 2, tmp_path, kind)
    assert codes == [0, 0], errors
    shards = {p.name.split("_")[2] for p in (tmp_path / "ck").glob("step-000000006/*/__*.distcp")}
    assert shards == {"0", "1"}  # each rank wrote its own shard files (__<rank>_<n>.distcp)
    for world in (1, 4):
        codes, loaded, errors = run_job(load_job, world, tmp_path, kind)
        assert codes == [0] * world, errors
        assert loaded[0]["start"] == (6, {"step": 6})
        assert same(loaded[0], saved[0]), f"{kind} restored on {world} rank(s) differs"


def planned_saves_job(rank, world, tmp: Path):
    """Three saves under one plan-cache key: a layout, a changed one, the changed one again (the
    cached plan); each read back whole."""
    import torch.distributed.checkpoint as dcp

    from trainguard.runtime.storage import LocalStore
    from trainguard.runtime.torch_dcp import reader_for, save_planner, writer_for

    layouts = [  # replicated tensors (the same on every rank), as DCP takes plain tensors
        {"w": torch.full((4,), 1.0), "b": torch.ones(2)},
        {"w": torch.full((4,), 10.0), "b": torch.ones(3), "new": torch.arange(5.0)},
        {"w": torch.full((4,), 20.0), "b": torch.zeros(3), "new": torch.arange(5.0) - 1},
    ]
    for i, state in enumerate(layouts):
        where = str(tmp / f"save-{i}")
        dcp.save(state, storage_writer=writer_for(where, LocalStore()), planner=save_planner("test"))
        back = {k: torch.empty_like(v) for k, v in state.items()}
        dcp.load(back, storage_reader=reader_for(where, LocalStore()))
        assert back.keys() == state.keys() and all(torch.equal(back[k], state[k]) for k in state), i
    return True


def test_a_save_whose_layout_changed_is_planned_again_and_the_cached_plan_reused_whole(tmp_path):
    codes, results, errors = run_job(planned_saves_job, 2, tmp_path)
    assert codes == [0, 0], errors
    assert results == {0: True, 1: True}


def test_a_rank_killed_mid_save_leaves_no_checkpoint_restore_would_pick(tmp_path):
    codes, _, errors = run_job(save_job, 2, tmp_path, "fsdp", 6, 2, 4, kill_all_on_death=True, timeout=90)
    assert codes[1] == -signal.SIGKILL, errors
    # The chief's save failed with its peer gone: no COMMIT (and it removed the torn shards).
    assert not (tmp_path / "ck" / "step-000000004" / "COMMIT").exists()
    codes, loaded, errors = run_job(load_job, 1, tmp_path, "fsdp")
    assert codes == [0], errors
    assert loaded[0]["start"] == (2, {"step": 2})


def test_positions_that_differ_per_rank_cannot_move_to_another_world_size(tmp_path):
    codes, _, errors = run_job(save_job, 2, tmp_path, "ddp", 3, 3, None, True)
    assert codes == [0, 0], errors
    codes, _, errors = run_job(load_job, 1, tmp_path, "ddp")
    assert codes == [1]
    assert "each of its 2 ranks saved a different data position" in errors
    assert "resume on 2 ranks" in errors


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # DCP says so even with no_dist
def test_shard_files_are_written_out_early_synced_whole_named_durably_and_read_back(tmp_path, monkeypatch):
    import torch.distributed.checkpoint as dcp

    from trainguard.runtime import writeback
    from trainguard.runtime.storage import LocalStore
    from trainguard.runtime.torch_dcp import reader_for, writer_for

    asked: list[str] = []
    real = writeback.start_writeback

    def record(fd: int, offset: int, length: int) -> bool:
        asked.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        return real(fd, offset, length)

    synced: list[tuple[str, int, set[str]]] = []  # (what, bytes in it or its names, when fsynced)
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        names = set(os.listdir(path)) if os.path.isdir(path) else set()
        synced.append((os.path.basename(path), os.fstat(fd).st_size, names))
        real_fsync(fd)

    monkeypatch.setattr(writeback, "start_writeback", record)
    monkeypatch.setattr(os, "fsync", fsync)
    state = {f"w{i}": torch.randn(1024, 1024) for i in range(6)}  # 24 MiB
    where = tmp_path / "s"
    dcp.save(state, storage_writer=writer_for(str(where), LocalStore()), no_dist=True)
    back = {k: torch.zeros_like(v) for k, v in state.items()}
    dcp.load(back, storage_reader=reader_for(str(where), LocalStore()), no_dist=True)
    assert all(torch.equal(back[k], state[k]) for k in state)
    assert asked and all(name.endswith(".distcp") for name in asked)
    assert len(asked) >= 2  # every 8 MiB of the 24 MiB the shard files hold
    # Durable: every file held all its bytes when fsynced (DCP fsyncs .metadata before flushing
    # it), and the directory was fsynced once .metadata had its name.
    final = {p.name: p.stat().st_size for p in where.iterdir()}
    final[".metadata.tmp"] = final[".metadata"]
    files = [(name, size) for name, size, names in synced if not names]
    assert {name for name, _ in files} == set(final) - {".metadata"} | {".metadata.tmp"}
    assert all(size == final[name] for name, size in files), (files, final)
    assert any(name == "s" and set(final) - {".metadata.tmp"} <= names for name, _, names in synced)
