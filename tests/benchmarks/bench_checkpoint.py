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
from trainguard.runtime.torch_state import STATE_FILE, Stager, serialize, snapshot, stream

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
    """(wall time, seconds the training thread was blocked by checkpointing) for ``steps`` steps
    saving every ``every`` steps in ``mode``."""
    mgr = None
    if mode != "none":
        mgr = CheckpointManager(str(root / mode), save=SavePolicy(every_steps=every),
                                async_save=mode == "async", retention=RetentionPolicy(keep_last=1))
    # A batch large enough that forward+backward outweighs the optimizer step, as in real training.
    x = torch.randn(256, 1024)
    blocked, pendings, stager = 0.0, [], Stager()
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        train_step(model, optimizer, x)
        if mgr is not None and step % every == 0:
            t1 = time.perf_counter()
            if mode == "async":  # the copy overlaps the next forward/backward
                mgr.wait()  # the kept buffers are free once the previous save is written
                pending = stager.begin(model, optimizer, None, {"step": step})
                pendings.append(pending)
                mgr.save(step, {STATE_FILE: stream(pending)})
            else:
                mgr.save(step, {STATE_FILE: stream(snapshot(model, optimizer, None))})
            blocked += time.perf_counter() - t1
    elapsed = time.perf_counter() - t0
    blocked += sum(p.blocked_s for p in pendings)  # waits in optimizer.step() for the copy
    if mgr is not None:
        mgr.wait()  # the last save completes at exit in both modes; not a mid-training stall
        shutil.rmtree(root / mode)
    return elapsed, blocked


def bench_stall(root: Path, model, optimizer) -> dict[str, tuple[float, float]]:
    """Per mode, the best of 3 interleaved runs: (wall time, training-thread blocked time)."""
    steps, every = 16, 4  # 4 saves, spaced more widely than one save takes
    runs: dict[str, list[tuple[float, float]]] = {"none": [], "sync": [], "async": []}
    for _ in range(3):
        for mode in runs:
            runs[mode].append(loop(mode, root, model, optimizer, steps, every))
    return {mode: (min(r[0] for r in rs), statistics.median(r[1] for r in rs))
            for mode, rs in runs.items()}


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
        for method in methods[i % 3:] + methods[: i % 3]:
            t0 = time.perf_counter()
            out = method(i)
            times[method.__name__].append(time.perf_counter() - t0)
            shutil.rmtree(out) if out.is_dir() else out.unlink()
    return tuple(statistics.median(times[m.__name__]) for m in methods)


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
        stall = bench_stall(root, model, optimizer)
        payload = os.urandom(200 * MB)
        raw, copy, save = bench_throughput(root, payload)
        restore = bench_restore(root, payload)
    print(f"checkpoint state: {state_mb:.0f} MB (model + Adam state)")
    (base, _), (sync_wall, sync_blocked), (async_wall, async_blocked) = (
        stall["none"], stall["sync"], stall["async"])
    print(f"(a) 16 training steps (batch 256) with 4 saves; the training thread is blocked "
          f"{sync_blocked:.3f} s "
          f"by synchronous saves, {async_blocked:.3f} s by async saves → ratio "
          f"{async_blocked / sync_blocked:.3f} (goal ≤ 0.05)")
    print(f"    wall: {base:.2f} s without saving, {sync_wall:.2f} s sync, {async_wall:.2f} s async "
          f"(the async saver shares {os.cpu_count()} cores with training: its share of memory "
          "bandwidth and CPU shows up here, not as a stall)")
    print(f"(b) 200 MB: raw write+fsync {200 / raw:.0f} MB/s, copy+fsync {200 / copy:.0f} MB/s, "
          f"CheckpointManager.save {200 / save:.0f} MB/s → {raw / save:.2f}× raw, "
          f"{copy / save:.2f}× copy (goal ≥ 0.8×)")
    print(f"(c) restore_latest + read 40 MB past a torn save: {restore * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
