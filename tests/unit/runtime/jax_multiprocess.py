"""One process of a multi-process JAX job on the CPU (``jax.distributed`` over loopback, gloo), for
the multi-process JaxCheckpointer tests.

    python jax_multiprocess.py DIRECTORY RANK WORLD PORT DEVICES MODE

Each process has DEVICES fake CPU devices; the arrays are sharded over all of them (every process
holds only its shards and writes them). MODE ``save``: restore (fresh), then save steps 1..4 (the
position and each process's NumPy RNG draw differ per step). MODE ``restore``: restore the newest
checkpoint and print what came back. Prints ``RESULT <json>``.
"""

from __future__ import annotations

import json
import os
import sys

directory, rank, world, port, devices, mode = sys.argv[1:7]
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

if int(world) > 1:
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=int(world), process_id=int(rank))

from trainguard.runtime.jax_checkpointer import JaxCheckpointer  # noqa: E402

mesh = Mesh(np.array(jax.devices()), ("x",))


def state_of(value: int) -> dict:
    def array(shape, spec):
        full = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + value
        return jax.make_array_from_callback(shape, NamedSharding(mesh, spec), lambda i: full[i])

    return {"w": array((4, 16), P(None, "x")), "b": array((16,), P("x")), "c": array((), P())}


def local(state) -> dict:
    """This process's shards, by index (what it can see of the global arrays)."""
    return {
        k: {str(s.index): np.asarray(s.data).tolist() for s in v.addressable_shards} for k, v in state.items()
    }


def result(value: dict) -> None:
    """``RESULT <json>`` in one write: Gloo's C++ logging shares this stdout, and with
    PYTHONUNBUFFERED ``print`` writes the text and its newline separately (a log line once
    landed between them)."""
    sys.stdout.write(f"RESULT {json.dumps(value)}\n")
    sys.stdout.flush()


ckpt = JaxCheckpointer(directory=directory, save=2, handle_sigterm=False)
start = ckpt.restore(state_of(-100))
if mode == "save":
    np.random.seed(int(rank))
    for step in range(start.step + 1, start.step + 5):
        ckpt.step(step, state=state_of(step), extra={"step": step}, loss=float(step))
        draw = float(np.random.rand())
    ckpt.close()
    result({"rank": ckpt.rank, "world": ckpt.world_size, "draw": draw})
else:
    ckpt.close()
    result(
        {
            "rank": ckpt.rank,
            "step": start.step,
            "extra": start.extra,
            "next_draw": float(np.random.rand()),
            "shards": local(start.state),
            "expected": local(state_of(4)),
        }
    )
