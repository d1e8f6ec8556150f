"""The runtime imported inside training containers: checkpoints and the training history.

It depends on nothing of trainguard outside this package but ``trainguard.errors``,
``trainguard.choices`` and ``trainguard.retry`` (plain Python), and on no kfp or aiplatform.
``google-cloud-storage`` is imported only for ``gs://`` paths, torch only by the torch modules and
jax/orbax only by the JAX one (``TorchCheckpointer`` and ``JaxCheckpointer`` are imported on first
use).

Every checkpointer and framework guard is built on one :class:`CheckpointCore` (``core.py``:
save decisions, SIGTERM, the history, closing) over a :class:`CheckpointManager` (``checkpoint.py``:
the atomic layout on storage), configured by the policies of ``policies/`` (:class:`SavePolicy`,
:class:`RetentionPolicy`).

For a PyTorch loop::

    from trainguard.runtime import TorchCheckpointer
    ckpt = TorchCheckpointer.from_env(model, optimizer, scheduler)
    start = ckpt.restore()
    for step in range(start.step + 1, total + 1):
        ...
        ckpt.step(step, loss=loss.item(), extra={"epoch": epoch, "batch": batch})
    ckpt.close()

For a JAX loop (the state is a pytree; ``step`` takes the new one each step)::

    from trainguard.runtime import JaxCheckpointer
    ckpt = JaxCheckpointer.from_env(save=100)
    start = ckpt.restore(state)
    state = start.state
    for step in range(start.step + 1, total + 1):
        state, loss = train_step(state, batch)
        ckpt.step(step, state=state, loss=loss, extra={"epoch": epoch, "batch": batch_index})
    ckpt.close()
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainguard.runtime.checkpoint import Checkpoint, CheckpointManager
    from trainguard.runtime.checkpointer import Checkpointer, Engine, Start
    from trainguard.runtime.core import CheckpointCore
    from trainguard.runtime.env import VertexEnv
    from trainguard.runtime.history import HistoryWriter, read_history_records
    from trainguard.runtime.jax_checkpointer import JaxCheckpointer
    from trainguard.runtime.policies import RetentionPolicy, SavePolicy
    from trainguard.runtime.torch_checkpointer import TorchCheckpointer

#: Where each public name lives. Imported on first use, so that ``import trainguard.runtime.env``
#: (the CLI reads the environment contract's names) loads env.py alone, and torch (JAX) is imported
#: only by code that asks for the torch (JAX) checkpointer.
_HOME = {
    "Checkpoint": "checkpoint",
    "CheckpointManager": "checkpoint",
    "Checkpointer": "checkpointer",
    "Engine": "checkpointer",
    "Start": "checkpointer",
    "CheckpointCore": "core",
    "VertexEnv": "env",
    "HistoryWriter": "history",
    "read_history_records": "history",
    "JaxCheckpointer": "jax_checkpointer",
    "RetentionPolicy": "policies",
    "SavePolicy": "policies",
    "TorchCheckpointer": "torch_checkpointer",
}

__all__ = [
    "Checkpoint",
    "CheckpointCore",
    "CheckpointManager",
    "Checkpointer",
    "Engine",
    "HistoryWriter",
    "JaxCheckpointer",
    "RetentionPolicy",
    "SavePolicy",
    "Start",
    "TorchCheckpointer",
    "VertexEnv",
    "read_history_records",
]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'trainguard.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"trainguard.runtime.{home}"), name)
    globals()[name] = value  # the next lookup is a plain one
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
