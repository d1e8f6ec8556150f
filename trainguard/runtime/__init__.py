"""The runtime imported inside training containers: checkpoints and the training history.

It depends on nothing of trainguard outside this package but ``trainguard.errors`` and
``trainguard.retry`` (plain Python), and on no kfp or aiplatform. ``google-cloud-storage`` is
imported only for ``gs://`` paths, torch only by the torch modules (``TorchCheckpointer`` is
imported on first use).

For a PyTorch loop::

    from trainguard.runtime import TorchCheckpointer
    ckpt = TorchCheckpointer.from_env(model, optimizer, scheduler)
    start = ckpt.restore()
    for step in range(start.step + 1, total + 1):
        ...
        ckpt.step(step, loss=loss.item(), extra={"epoch": epoch, "batch": batch})
    ckpt.close()
"""

from trainguard.runtime.checkpoint import (
    Checkpoint,
    CheckpointManager,
    RetentionPolicy,
    SavePolicy,
)
from trainguard.runtime.checkpointer import Checkpointer, Start
from trainguard.runtime.env import VertexEnv
from trainguard.runtime.history import HistoryWriter, read_history_records

__all__ = ["Checkpoint", "CheckpointManager", "Checkpointer", "HistoryWriter", "RetentionPolicy",
           "SavePolicy", "Start", "TorchCheckpointer", "VertexEnv", "read_history_records"]


def __getattr__(name: str):
    # torch is imported only by code that asks for the torch checkpointer.
    if name == "TorchCheckpointer":
        from trainguard.runtime.torch_checkpointer import TorchCheckpointer

        return TorchCheckpointer
    raise AttributeError(f"module 'trainguard.runtime' has no attribute {name!r}")
