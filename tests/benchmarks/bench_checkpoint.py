"""Checkpoint runtime benchmark (``make bench``): ratios measured side by side in one run.

(a) training-thread stall of an async save vs a synchronous save of the same ~200 MB PyTorch state
    (goal: async stall ≤ 5 % of the synchronous one);
(b) save throughput vs a raw write of the same bytes (open/write/fsync) and a file copy
    (goal ≥ 0.8×);
(c) restore time (find the newest complete checkpoint and read it back).
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

from trainguard.runtime.checkpoint import CheckpointManager, RetentionPolicy, SavePolicy
from trainguard.runtime.torch_state import STATE_FILE, Stager, serialize, snapshot

MB = 1 << 20


def make_state(total_mb: int = 200):
    # Each 1024×1024 layer: 4 MB of weights + 8 MB of Adam moments.
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(total_mb // 12)])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(2, 1024)).sum().backward()
    optimizer.step()
    return model, optimizer


def train_step(x: torch.Tensor) -> None:
    # A stand-in for a training step's compute, ~10-20 ms on a laptop core.
    for _ in range(8):
        x = torch.tanh(x @ x)


def loop(mgr: CheckpointManager | None, model, optimizer, steps: int, every: int) -> float:
    """Returns seconds the training thread spent inside checkpointing calls."""
    x = torch.randn(384, 384) / 20
    stalled = 0.0
    stager = Stager()
    for step in range(1, steps + 1):
        train_step(x)
        if mgr is not None and step % every == 0:
            t0 = time.perf_counter()
            mgr.wait()
            state = stager.snapshot(model, optimizer, None, {"step": step})
            mgr.save(step, {STATE_FILE: lambda s=state: serialize(s)})
            stalled += time.perf_counter() - t0
    if mgr is not None:
        mgr.wait()  # the last save completes at exit in both modes; not a mid-training stall
    return stalled


def bench_stall(root: Path, model, optimizer) -> tuple[float, float]:
    # Saves spaced like real ones: the interval is longer than a save takes.
    steps, every = 400, 100
    results = {}
    for mode in ("sync", "async"):
        d = root / mode
        mgr = CheckpointManager(str(d), save=SavePolicy(every_steps=every), async_save=(
            mode == "async"), retention=RetentionPolicy(keep_last=1))
        results[mode] = loop(mgr, model, optimizer, steps, every)
        shutil.rmtree(d)
    return results["sync"], results["async"]


def bench_handoff(root: Path, model, optimizer) -> tuple[float, float]:
    """Per-save time on the training thread: sync save vs async hand-off (median of 4)."""
    sync_t, async_t, fresh_t = [], [], []
    for mode, out in (("sync", sync_t), ("async", async_t), ("fresh", fresh_t)):
        stager = Stager()
        mgr = CheckpointManager(str(root / f"h-{mode}"), async_save=mode != "sync",
                                retention=RetentionPolicy(keep_last=1))
        for step in range(1, 5):
            mgr.wait()  # a previous save finished during "training"
            t0 = time.perf_counter()
            if mode == "fresh":  # no staging buffers: a fresh copy each time
                state = snapshot(model, optimizer, None, {"step": step})
            else:
                state = stager.snapshot(model, optimizer, None, {"step": step})
            mgr.save(step, {STATE_FILE: lambda s=state: serialize(s)})
            out.append(time.perf_counter() - t0)
        mgr.wait()
        shutil.rmtree(root / f"h-{mode}")
    return statistics.median(sync_t), statistics.median(async_t), statistics.median(fresh_t)


def bench_throughput(root: Path, payload: bytes) -> tuple[float, float, float]:
    src = root / "src.bin"
    src.write_bytes(payload)
    raw_t, copy_t, save_t = [], [], []
    for i in range(3):
        t0 = time.perf_counter()
        with open(root / f"raw{i}.bin", "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        raw_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        shutil.copyfile(src, root / f"copy{i}.bin")
        with open(root / f"copy{i}.bin", "rb+") as f:
            os.fsync(f.fileno())
        copy_t.append(time.perf_counter() - t0)
        mgr = CheckpointManager(str(root / f"ck{i}"), async_save=False)
        t0 = time.perf_counter()
        mgr.save(1, {"blob": payload})
        save_t.append(time.perf_counter() - t0)
        for p in (root / f"raw{i}.bin", root / f"copy{i}.bin"):
            p.unlink()
    return min(raw_t), min(copy_t), min(save_t)


def bench_restore(root: Path, payload: bytes) -> float:
    mgr = CheckpointManager(str(root / "restore"), async_save=False,
                            retention=RetentionPolicy(keep_last=5))
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


def main() -> int:
    torch.set_num_threads(1)  # leave the other core to the background saver, as on a busy host
    model, optimizer = make_state(200)
    state_mb = len(serialize(snapshot(model, optimizer))) / MB
    with tempfile.TemporaryDirectory(prefix="tg-bench-") as tmp:
        root = Path(tmp)
        sync_stall, async_stall = bench_stall(root, model, optimizer)
        sync_one, async_one, fresh_one = bench_handoff(root, model, optimizer)
        payload = os.urandom(200 * MB)
        raw, copy, save = bench_throughput(root, payload)
        restore = bench_restore(root, payload)
    print(f"checkpoint state: {state_mb:.0f} MB (model + Adam state)")
    print(f"(a) training-thread time in checkpointing over 4 saves in 400 steps: sync {sync_stall:.2f} s, "
          f"async {async_stall:.2f} s → ratio {async_stall / sync_stall:.3f} (goal ≤ 0.05)")
    print(f"    per save (median): sync {sync_one * 1000:.0f} ms, async hand-off "
          f"{async_one * 1000:.0f} ms → ratio {async_one / sync_one:.3f} (without staging "
          f"buffers: {fresh_one * 1000:.0f} ms, {fresh_one / sync_one:.3f})")
    print(f"(b) 200 MB: raw write+fsync {200 / raw:.0f} MB/s, copy+fsync {200 / copy:.0f} MB/s, "
          f"CheckpointManager.save {200 / save:.0f} MB/s → {raw / save:.2f}× raw, "
          f"{copy / save:.2f}× copy (goal ≥ 0.8×)")
    print(f"(c) restore_latest + read 40 MB past a torn save: {restore * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
