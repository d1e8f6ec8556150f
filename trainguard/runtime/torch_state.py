"""PyTorch adapter: capture and restore everything a bit-identical resume needs.

Captured: model, optimizer and LR-scheduler state, the RNG states of ``random``, NumPy and torch
(CUDA too when present), and a caller-supplied ``extra`` dict (the data position: epoch, batch).
``snapshot`` copies tensors on the training thread (the only stall of an async save); ``serialize``
runs ``torch.save`` and can run on the checkpoint manager's background thread. A ``Stager`` keeps
the CPU copies between saves and copies into them again, which is about three times faster than
allocating fresh memory (no page faults) — as PyTorch DCP's async staging does.
"""

from __future__ import annotations

import copy
import io
import random

import torch

__all__ = ["snapshot", "serialize", "restore", "Stager", "STATE_FILE"]

STATE_FILE = "state.pt"


def _fresh_copy(path: tuple, tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to("cpu", copy=True)


def _detach(obj, copy_tensor=_fresh_copy, path: tuple = ()):
    if isinstance(obj, torch.Tensor):
        return copy_tensor(path, obj)
    if isinstance(obj, dict):
        return {k: _detach(v, copy_tensor, (*path, k)) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_detach(v, copy_tensor, (*path, i)) for i, v in enumerate(obj))
    return copy.deepcopy(obj)


class Stager:
    """Reusable CPU buffers for snapshots (pinned when the source is on CUDA).

    A staged snapshot shares its buffers with the next one: take the next snapshot only once the
    previous save is done (``CheckpointManager.wait()``; ``save`` waits for it anyway).
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple, torch.Tensor] = {}

    def _copy(self, path: tuple, tensor: torch.Tensor) -> torch.Tensor:
        buf = self._buffers.get(path)
        if buf is None or buf.shape != tensor.shape or buf.dtype != tensor.dtype:
            pin = tensor.is_cuda and torch.cuda.is_available()
            buf = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu", pin_memory=pin)
            self._buffers[path] = buf
        buf.copy_(tensor.detach())
        return buf

    def snapshot(self, model, optimizer=None, scheduler=None, extra: dict | None = None) -> dict:
        """Like ``snapshot``, copying into the reused buffers."""
        return snapshot(model, optimizer, scheduler, extra, _copy=self._copy)


def snapshot(model, optimizer=None, scheduler=None, extra: dict | None = None,
             _copy=_fresh_copy) -> dict:
    """A detached CPU copy of the training state, safe to serialise on another thread."""
    try:
        import numpy as np

        np_state = np.random.get_state()
    except ImportError:  # numpy is optional inside user images
        np_state = None
    module = getattr(model, "module", model)  # unwrap DistributedDataParallel
    state = {
        "model": _detach(module.state_dict(), _copy, ("model",)),
        "optimizer": (_detach(optimizer.state_dict(), _copy, ("optimizer",))
                      if optimizer is not None else None),
        "scheduler": copy.deepcopy(scheduler.state_dict()) if scheduler is not None else None,
        "rng": {
            "python": random.getstate(),
            "numpy": np_state,
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        },
        "extra": copy.deepcopy(extra or {}),
    }
    return state


def serialize(state: dict) -> bytes:
    """``torch.save`` of a snapshot, as bytes."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def restore(data: bytes, model, optimizer=None, scheduler=None, map_location="cpu") -> dict:
    """Loads a serialised snapshot into the objects, restores RNG states; returns ``extra``."""
    state = torch.load(io.BytesIO(data), map_location=map_location, weights_only=False)
    module = getattr(model, "module", model)
    module.load_state_dict(state["model"])
    if optimizer is not None and state.get("optimizer") is not None:
        optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None and state.get("scheduler") is not None:
        scheduler.load_state_dict(state["scheduler"])
    rng = state.get("rng", {})
    if rng.get("python") is not None:
        random.setstate(rng["python"])
    if rng.get("numpy") is not None:
        import numpy as np

        np.random.set_state(rng["numpy"])
    if rng.get("torch") is not None:
        torch.set_rng_state(rng["torch"])
    if rng.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    return state.get("extra", {})
