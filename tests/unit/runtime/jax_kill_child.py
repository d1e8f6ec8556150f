"""A JAX loop saving sharded state through JaxCheckpointer forever, to be SIGKILLed at random moments.

    python jax_kill_child.py DIRECTORY ASYNC

Runs on 8 fake CPU devices. It restores the newest complete checkpoint, checks that every array
of it holds the value of its step, then saves step after step (keep_last=1, so each save also
deletes the previous one), each state ~4 MB with every element equal to the step. It prints
``ready STEP`` after the restore and ``done STEP`` once a save is committed.
"""

from __future__ import annotations

import os
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from trainguard.runtime import RetentionPolicy  # noqa: E402
from trainguard.runtime.jax_checkpointer import JaxCheckpointer  # noqa: E402


def state_of(step: int, mesh: Mesh) -> dict:
    sharded = NamedSharding(mesh, P(None, "x"))
    return {
        "w": jax.device_put(jnp.full((512, 1024), step, jnp.float32), sharded),
        "b": jax.device_put(jnp.full((1024,), step, jnp.float32), NamedSharding(mesh, P("x"))),
        "count": jnp.int32(step),
    }


def main(directory: str, async_save: str) -> None:
    mesh = Mesh(np.array(jax.devices()), ("x",))
    ckpt = JaxCheckpointer(
        directory=directory,
        save=1,
        async_save=async_save == "1",
        retention=RetentionPolicy(keep_last=1),
        handle_sigterm=False,
    )
    start = ckpt.restore(state_of(-1, mesh))
    step = start.step
    if start.resumed:
        values = {k: np.unique(np.asarray(v)) for k, v in start.state.items()}
        assert all(list(v) == [step] for v in values.values()), f"step {step} holds {values}"
        assert start.extra == {"step": step}, start.extra
    print(f"ready {step}", flush=True)
    while True:
        step += 1
        ckpt.step(step, state=state_of(step, mesh), extra={"step": step})
        ckpt.wait()
        print(f"done {step}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
