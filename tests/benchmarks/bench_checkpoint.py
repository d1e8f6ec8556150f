"""Checkpoint runtime benchmark (``make bench``): ratios measured side by side in one run.

(a) training-thread stall of an async save vs a synchronous save of the same ~200 MB PyTorch state
    (goal: async stall ≤ 5 % of the synchronous one);
(b) save throughput vs a raw write of the same bytes (open/write/fsync) and a file copy
    (goal ≥ 0.8×; checkpoint files are written out while written, see ``runtime/writeback.py``,
    so a save can beat a plain write-then-fsync);
(c) restore time (find the newest complete checkpoint and read it back);
(d) sharded save (FSDP2 on 2 ranks, torch.distributed.checkpoint through TorchCheckpointer) vs a raw
    write of the same bytes by the same 2 processes (open/write/fsync, in parallel) (goal ≥ 0.8×).

The stall of (a) is measured through ``TorchCheckpointer`` (what a training loop uses): the time the
training thread is held in ``step()`` and in ``optimizer.step()`` waiting for the snapshot copy.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from trainguard.runtime import TorchCheckpointer
from trainguard.runtime.checkpoint import CheckpointManager, RetentionPolicy
from trainguard.runtime.torch_state import serialize, snapshot

MB = 1 << 20


def make_state(total_mb: int = 200):
    # Each 1024×1024 layer: 4 MB of weights + 8 MB of Adam moments.
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(total_mb // 12)])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(2, 1024)).sum().backward()
    optimizer.step()
    return model, optimizer


def train_step(model, optimizer, x: torch.Tensor) -> None:
    loss = model(x).square().mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def loop(mode: str, root: Path, model, optimizer, steps: int, every: int) -> tuple[float, float]:
    """(wall time, seconds the training thread was held by checkpointing) for ``steps`` steps
    saving every ``every`` steps in ``mode`` (none, sync, async)."""
    ckpt = None
    if mode != "none":
        ckpt = TorchCheckpointer(
            model,
            optimizer,
            directory=str(root / mode),
            save=every,
            async_save=mode == "async",
            handle_sigterm=False,
            retention=RetentionPolicy(keep_last=1),
        )
    # A batch large enough that forward+backward outweighs the optimizer step, as in real training.
    x = torch.randn(256, 1024)
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        train_step(model, optimizer, x)
        if ckpt is not None:
            ckpt.step(step)
    elapsed = time.perf_counter() - t0
    held = 0.0
    if ckpt is not None:
        held = ckpt.stall_s
        ckpt.close()  # the last save completes at exit in both modes; not a mid-training stall
        shutil.rmtree(root / mode)
    return elapsed, held


def bench_stall(root: Path, model, optimizer) -> dict[str, tuple[float, float]]:
    """Per mode, the best of 3 interleaved runs: (wall time, training-thread blocked time)."""
    steps, every = 16, 4  # 4 saves, spaced more widely than one save takes
    runs: dict[str, list[tuple[float, float]]] = {"none": [], "sync": [], "async": []}
    for _ in range(3):
        for mode in runs:
            runs[mode].append(loop(mode, root, model, optimizer, steps, every))
    return {mode: (min(r[0] for r in rs), statistics.median(r[1] for r in rs)) for mode, rs in runs.items()}


def bench_throughput(root: Path, payload: bytes) -> tuple[float, float, float]:
    """Median seconds to make 200 MB durable: raw write, file copy, CheckpointManager.save.

    The three run interleaved, in a rotating order, each output deleted before the next: the
    disk's write-back state then weighs on all three alike.
    """
    src = root / "src.bin"
    src.write_bytes(payload)

    def raw(i: int) -> Path:
        with open(root / f"raw{i}.bin", "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        return root / f"raw{i}.bin"

    def copy(i: int) -> Path:
        shutil.copyfile(src, root / f"copy{i}.bin")
        with open(root / f"copy{i}.bin", "rb+") as f:
            os.fsync(f.fileno())
        return root / f"copy{i}.bin"

    def save(i: int) -> Path:
        CheckpointManager(str(root / f"ck{i}"), async_save=False).save(1, {"blob": payload})
        return root / f"ck{i}"

    methods = [raw, copy, save]
    times: dict[str, list[float]] = {m.__name__: [] for m in methods}
    for i in range(6):
        for method in methods[i % 3 :] + methods[: i % 3]:
            t0 = time.perf_counter()
            out = method(i)
            times[method.__name__].append(time.perf_counter() - t0)
            shutil.rmtree(out) if out.is_dir() else out.unlink()
    return tuple(statistics.median(times[m.__name__]) for m in methods)


def bench_restore(root: Path, payload: bytes) -> float:
    mgr = CheckpointManager(str(root / "restore"), async_save=False, retention=RetentionPolicy(keep_last=5))
    for step in range(1, 6):
        mgr.save(step * 100, {"blob": payload[: len(payload) // 5]})
    # A torn newer save must be skipped.
    torn = root / "restore" / "step-000000900"
    torn.mkdir()
    (torn / "blob").write_bytes(b"partial")
    t0 = time.perf_counter()
    latest = CheckpointManager(str(root / "restore")).restore_latest()
    data = latest.read("blob")
    elapsed = time.perf_counter() - t0
    assert latest.step == 500 and len(data) == len(payload) // 5
    return elapsed


def _sharded_rank(rank: int, world: int, root: str, total_mb: int, results) -> None:
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict
    from torch.distributed.fsdp import fully_shard

    from trainguard.runtime.storage import LocalStore
    from trainguard.runtime.torch_dcp import writer_for

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{root}/rdv", rank=rank, world_size=world)
    group = dist.new_group(backend="gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(total_mb // 12)])
    for layer in model:
        fully_shard(layer)
    fully_shard(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)  # on the shards
    model(torch.randn(2, 1024)).sum().backward()
    optimizer.step()
    # Every save kept: deleting the previous one is not writing (the raw write deletes nothing).
    ckpt = TorchCheckpointer(
        model,
        optimizer,
        directory=f"{root}/sharded",
        handle_sigterm=False,
        retention=RetentionPolicy(keep_last=100),
    )
    ckpt.save(1, blocking=True)  # warm-up; and the size of this rank's shard files
    dist.barrier()  # the chief writes COMMIT after the other ranks' part of the save returned
    size = sum(v for k, v in ckpt.manager.checkpoint(1).sizes.items() if k.startswith(f"__{rank}_"))
    sizes = [0] * world
    dist.all_gather_object(sizes, size)
    payload = os.urandom(size)

    def ours(i: int) -> None:
        ckpt.save(i, blocking=True)

    def engine(i: int) -> None:  # DCP alone, same writer, no staging, no COMMIT
        model_sd, optim_sd = get_state_dict(model, optimizer)
        dcp.save(
            {"model": model_sd, "optim": optim_sd},
            process_group=group,
            storage_writer=writer_for(f"{root}/dcp-{i}", LocalStore()),
        )

    def raw(i: int) -> None:
        with open(f"{root}/raw{rank}-{i}.bin", "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())

    times: dict[str, list[float]] = {"ours": [], "engine": [], "raw": []}
    methods = [("ours", ours), ("engine", engine), ("raw", raw)]
    for i in range(2, 8):  # each method in each position twice: the disk's state weighs alike
        for name, fn in methods[i % 3 :] + methods[: i % 3]:
            dist.barrier()
            t0 = time.perf_counter()
            fn(i)
            dist.barrier()
            times[name].append(time.perf_counter() - t0)
            if rank == 0:  # untimed: free the disk (older saves, DCP's copy, the raw files)
                for old in Path(root, "sharded").glob("step-*"):
                    if old.name != f"step-{i:09d}":
                        shutil.rmtree(old)
                shutil.rmtree(f"{root}/dcp-{i}", ignore_errors=True)
            Path(f"{root}/raw{rank}-{i}.bin").unlink(missing_ok=True)
            dist.barrier()
    ckpt.close()
    if rank == 0:
        results.put((times, sum(sizes)))
    dist.destroy_process_group()


def bench_sharded(root: Path, total_mb: int = 400) -> tuple[dict[str, list[float]], int]:
    """Seconds of each sharded save through TorchCheckpointer, of DCP's own save, and of a raw
    parallel write of the same bytes (2 ranks, interleaved); and the bytes."""
    import multiprocessing
    import queue

    # Fresh interpreters: forking this process after its threaded training loops can hang.
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_sharded_rank, args=(r, 2, str(root), total_mb, results)) for r in range(2)]
    for p in procs:
        p.start()
    try:
        for _ in range(900):
            try:
                return results.get(timeout=1)
            except queue.Empty:
                if any(p.exitcode not in (None, 0) for p in procs):
                    raise RuntimeError("a rank of the sharded benchmark failed") from None
        raise RuntimeError("the sharded benchmark did not finish in 15 min")
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()


def main() -> int:
    torch.set_num_threads(1)  # leave the other core to the background saver, as on a busy host
    model, optimizer = make_state(200)
    state_mb = len(serialize(snapshot(model, optimizer))) / MB
    with tempfile.TemporaryDirectory(prefix="tg-bench-") as tmp:
        root = Path(tmp)
        stall = bench_stall(root, model, optimizer)
        payload = os.urandom(200 * MB)
        raw, copy, save = bench_throughput(root, payload)
        restore = bench_restore(root, payload)
        sharded, sharded_bytes = bench_sharded(root)
    print(f"checkpoint state: {state_mb:.0f} MB (model + Adam state)")
    (base, _), (sync_wall, sync_blocked), (async_wall, async_blocked) = (
        stall["none"],
        stall["sync"],
        stall["async"],
    )
    print(
        f"(a) 16 training steps (batch 256) with 4 saves; the training thread is blocked "
        f"{sync_blocked:.3f} s "
        f"by synchronous saves, {async_blocked:.3f} s by async saves → ratio "
        f"{async_blocked / sync_blocked:.3f} (goal ≤ 0.05)"
    )
    print(
        f"    wall: {base:.2f} s without saving, {sync_wall:.2f} s sync, {async_wall:.2f} s async "
        f"(the async saver shares {os.cpu_count()} cores with training: its share of memory "
        "bandwidth and CPU shows up here, not as a stall)"
    )
    print(
        f"(b) 200 MB: raw write+fsync {200 / raw:.0f} MB/s, copy+fsync {200 / copy:.0f} MB/s, "
        f"CheckpointManager.save {200 / save:.0f} MB/s → {raw / save:.2f}× raw, "
        f"{copy / save:.2f}× copy (goal ≥ 0.8×)"
    )
    print(
        f"(a) wall ratio: async saves {async_wall / base:.3f}× and sync saves {sync_wall / base:.3f}× "
        "the wall time without saving"
    )
    print(f"(c) restore_latest + read 40 MB past a torn save: {restore * 1000:.0f} ms")
    mb = sharded_bytes / MB
    med = {k: statistics.median(v) for k, v in sharded.items()}

    def spread(name: str) -> str:  # this disk's own noise: the slowest and fastest of 6 saves
        return f"{mb / max(sharded[name]):.0f}–{mb / min(sharded[name]):.0f}"

    print(
        f"(d) sharded save (FSDP2, 2 ranks) of {mb:.0f} MB, medians (and ranges) in MB/s: "
        f"TorchCheckpointer {mb / med['ours']:.0f} ({spread('ours')}), DCP's own save "
        f"{mb / med['engine']:.0f} ({spread('engine')}), raw parallel write+fsync of the same bytes "
        f"{mb / med['raw']:.0f} ({spread('raw')}) → {med['raw'] / med['ours']:.2f}× raw (goal ≥ 0.8×), "
        f"{med['engine'] / med['ours']:.2f}× DCP alone"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
