"""JAX checkpoint benchmark (``make bench``): ratios measured side by side in one run, on 8 fake CPU
devices (``XLA_FLAGS=--xla_force_host_platform_device_count=8``; a TPU host copies to host memory
over PCIe instead, the rest is alike).

(a) training-loop stall of JaxCheckpointer's async saves vs synchronous saves of the same ~190 MB
    sharded state (params + Adam moments), and the loop's wall time with each ÷ without saving;
(b) save throughput: JaxCheckpointer.save (blocking) vs orbax's CheckpointManager alone and a raw
    write of the same bytes (open/write/fsync);
(c) restore: find the newest complete checkpoint and restore it onto the target's shardings.
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()

import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from trainguard.runtime import RetentionPolicy  # noqa: E402
from trainguard.runtime.jax_checkpointer import JaxCheckpointer  # noqa: E402

MB = 1 << 20
WIDTH, LAYERS = 2048, 4  # 4 × 2048² float32 = 64 MB of weights, 192 MB with Adam's moments


def make_state(mesh: Mesh):
    optimizer = optax.adam(1e-3)
    keys = jax.random.split(jax.random.PRNGKey(0), LAYERS)
    params = {f"w{i}": jax.random.normal(k, (WIDTH, WIDTH)) * 0.02 for i, k in enumerate(keys)}
    state = {"params": params, "opt_state": optimizer.init(params)}
    spec = lambda a: P(None, "x") if a.ndim == 2 else P()  # noqa: E731
    shardings = jax.tree.map(lambda a: NamedSharding(mesh, spec(a)), state)
    state = jax.device_put(state, shardings)

    def step(state, x):
        def loss_fn(p):
            h = x
            for i in range(LAYERS):
                h = jnp.tanh(h @ p[f"w{i}"])
            return jnp.mean(h**2)

        grads = jax.grad(loss_fn)(state["params"])
        updates, opt_state = optimizer.update(grads, state["opt_state"], state["params"])
        return {"params": optax.apply_updates(state["params"], updates), "opt_state": opt_state}

    batch = NamedSharding(mesh, P("x", None))
    train = jax.jit(step, in_shardings=(shardings, batch), out_shardings=shardings, donate_argnums=0)
    return state, train, jax.device_put(jnp.ones((256, WIDTH)), batch)


def state_bytes(state) -> int:
    return sum(leaf.nbytes for leaf in jax.tree.leaves(state))


def loop(mode: str, root: Path, state, train, x, steps: int, every: int):
    """(wall time, seconds the training thread spent in the checkpointer, state) for ``steps``
    steps saving every ``every`` steps in ``mode``."""
    ckpt = None
    if mode != "none":
        ckpt = JaxCheckpointer(
            directory=str(root / mode),
            save=every,
            async_save=mode == "async",
            retention=RetentionPolicy(keep_last=1),
            handle_sigterm=False,
        )
    blocked = 0.0
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        state = train(state, x)
        # The step's compute is finished first in every mode: what remains is the save's own cost.
        jax.block_until_ready(state)
        if ckpt is not None:
            t1 = time.perf_counter()
            ckpt.step(step, state=state, extra={"step": step})
            blocked += time.perf_counter() - t1
    elapsed = time.perf_counter() - t0
    if ckpt is not None:
        ckpt.close()  # the last save completes at exit in both modes; not a mid-training stall
        shutil.rmtree(root / mode)
    return elapsed, blocked, state


def bench_stall(root: Path, state, train, x) -> tuple[dict, object]:
    """Per mode, over 3 interleaved runs: (least wall time, median blocked time)."""
    steps, every = 16, 4  # 4 saves, spaced more widely than one save takes
    runs: dict[str, list[tuple[float, float]]] = {"none": [], "sync": [], "async": []}
    state = train(state, x)  # compile outside the timed runs
    for _ in range(3):
        for mode in runs:
            wall, blocked, state = loop(mode, root, state, train, x, steps, every)
            runs[mode].append((wall, blocked))
    return {m: (min(r[0] for r in rs), statistics.median(r[1] for r in rs)) for m, rs in runs.items()}, state


def bench_throughput(root: Path, state) -> tuple[float, float, float]:
    """Median seconds to make the state durable: raw write of its bytes, orbax alone,
    JaxCheckpointer.save; interleaved in a rotating order, each output deleted before the next."""
    host = [np.asarray(leaf) for leaf in jax.tree.leaves(state)]

    def raw(i: int) -> Path:
        path = root / f"raw{i}.bin"
        with open(path, "wb") as f:
            for array in host:
                f.write(memoryview(array).cast("B"))
            f.flush()
            os.fsync(f.fileno())
        return path

    def orbax(i: int) -> Path:
        path = root / f"orbax{i}"
        with ocp.CheckpointManager(
            path, options=ocp.CheckpointManagerOptions(save_root_metadata=False)
        ) as manager:
            manager.save(1, args=ocp.args.Composite(state=ocp.args.PyTreeSave(state)))
            manager.wait_until_finished()
        return path

    def ours(i: int) -> Path:
        path = root / f"ours{i}"
        ckpt = JaxCheckpointer(directory=str(path), handle_sigterm=False)
        ckpt.save(1, state=state, blocking=True)
        ckpt.close()
        return path

    methods = [raw, orbax, ours]
    times: dict[str, list[float]] = {m.__name__: [] for m in methods}
    for i in range(6):
        for method in methods[i % 3 :] + methods[: i % 3]:
            t0 = time.perf_counter()
            out = method(i)
            times[method.__name__].append(time.perf_counter() - t0)
            shutil.rmtree(out) if out.is_dir() else out.unlink()
    return tuple(statistics.median(times[m.__name__]) for m in methods)


def bench_restore(root: Path, state) -> float:
    ckpt = JaxCheckpointer(
        directory=str(root / "restore"), handle_sigterm=False, retention=RetentionPolicy(keep_last=5)
    )
    for step in (100, 200):
        ckpt.save(step, state=state, blocking=True)
    ckpt.close()
    t0 = time.perf_counter()
    start = JaxCheckpointer(directory=str(root / "restore"), handle_sigterm=False).restore(state)
    jax.block_until_ready(start.state)
    elapsed = time.perf_counter() - t0
    assert start.step == 200
    return elapsed


def main() -> int:
    mesh = Mesh(np.array(jax.devices()[:8]), ("x",))
    state, train, x = make_state(mesh)
    size = state_bytes(state) / MB
    with tempfile.TemporaryDirectory(prefix="tg-bench-jax-") as tmp:
        root = Path(tmp)
        stall, state = bench_stall(root, state, train, x)
        raw, orbax, ours = bench_throughput(root, state)
        restore = bench_restore(root, state)
    (base, _), (sync_wall, sync_blocked), (async_wall, async_blocked) = (
        stall["none"],
        stall["sync"],
        stall["async"],
    )
    print(
        f"JAX checkpoint state: {size:.0f} MB (params + Adam moments), sharded over "
        f"{mesh.devices.size} {jax.default_backend()} devices; jax {jax.__version__}, orbax "
        f"{ocp.__version__}"
    )
    print(
        f"(a) 16 training steps with 4 saves; the training thread is blocked {sync_blocked:.3f} s "
        f"by synchronous saves, {async_blocked:.3f} s by async saves → ratio "
        f"{async_blocked / sync_blocked:.3f}"
    )
    print(
        f"    wall ÷ without saving: sync {sync_wall / base:.2f}×, async {async_wall / base:.2f}× "
        f"({base:.2f} s without; the async writer shares {os.cpu_count()} cores with training)"
    )
    print(
        f"(b) {size:.0f} MB: raw write+fsync {size / raw:.0f} MB/s, orbax CheckpointManager alone "
        f"{size / orbax:.0f} MB/s, JaxCheckpointer.save {size / ours:.0f} MB/s → {raw / ours:.2f}× "
        f"raw, {orbax / ours:.2f}× orbax alone"
    )
    print(f"(c) restore the newest of 2 checkpoints onto the target's shardings: {restore:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
