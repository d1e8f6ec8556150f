"""PyTorch adapter: capture and restore everything a bit-identical resume needs.

Captured: model, optimizer and LR-scheduler state, the RNG states of ``random``, NumPy and torch
(CUDA too when present), and a caller-supplied ``extra`` dict (the data position: epoch, batch).
``snapshot`` copies every tensor on the training thread; ``begin_snapshot`` copies the parameters
and optimizer state on a background thread while the next forward and backward pass run (they read
parameters, they do not write them), and holds the next ``optimizer.step()`` until the copy is done
— so an async save costs the training thread almost nothing. ``serialize`` runs ``torch.save`` and
can run on the checkpoint manager's saver thread.
"""

from __future__ import annotations

import copy
import io
import random
import threading
import time
import weakref

import torch

from trainguard.runtime.checkpoint import Stream

__all__ = ["snapshot", "begin_snapshot", "PendingSnapshot", "Stager", "serialize", "stream",
           "restore", "STATE_FILE"]

STATE_FILE = "state.pt"


def _copy_tensor(tensor: torch.Tensor, buffers: dict | None = None, path: tuple = ()
                 ) -> torch.Tensor:
    if buffers is None:
        return tensor.detach().to("cpu", copy=True)
    buf = buffers.get(path)
    if buf is None or buf.shape != tensor.shape or buf.dtype != tensor.dtype:
        pin = tensor.is_cuda and torch.cuda.is_available()  # pinned: fast device-to-host copies
        buf = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu", pin_memory=pin)
        buffers[path] = buf
    buf.copy_(tensor.detach())
    return buf


def _detach(obj, buffers: dict | None = None, path: tuple = ()):
    if isinstance(obj, torch.Tensor):
        return _copy_tensor(obj, buffers, path)
    if isinstance(obj, dict):
        return {k: _detach(v, buffers, (*path, k)) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_detach(v, buffers, (*path, i)) for i, v in enumerate(obj))
    return copy.deepcopy(obj)


def _rng_state() -> dict:
    try:
        import numpy as np

        np_state = np.random.get_state()
    except ImportError:  # numpy is optional inside user images
        np_state = None
    return {
        "python": random.getstate(),
        "numpy": np_state,
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def snapshot(model, optimizer=None, scheduler=None, extra: dict | None = None) -> dict:
    """A detached CPU copy of the training state, safe to serialise on another thread."""
    module = getattr(model, "module", model)  # unwrap DistributedDataParallel
    return {
        "model": _detach(module.state_dict()),
        "optimizer": _detach(optimizer.state_dict()) if optimizer is not None else None,
        "scheduler": copy.deepcopy(scheduler.state_dict()) if scheduler is not None else None,
        "rng": _rng_state(),
        "extra": copy.deepcopy(extra or {}),
    }


# One step pre-hook per optimizer, installed once and never removed (removing a hook while
# step() iterates over its hooks breaks it); it waits for that optimizer's copies in flight.
_PENDING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PENDING_LOCK = threading.Lock()


def _track(optimizer, pending: PendingSnapshot) -> None:
    with _PENDING_LOCK:
        waiting = _PENDING.get(optimizer)
        if waiting is None:
            waiting = _PENDING[optimizer] = []
            optimizer.register_step_pre_hook(_wait_for_copies)
        waiting.append(pending)


def _wait_for_copies(optimizer, *_) -> None:
    with _PENDING_LOCK:
        waiting = list(_PENDING.get(optimizer, ()))
    for pending in waiting:
        pending._wait_in_step()
    with _PENDING_LOCK:
        _PENDING[optimizer] = [p for p in _PENDING.get(optimizer, ()) if p not in waiting]
    for pending in waiting:
        pending.wait()  # raises a failed copy's error here, on the training thread


class PendingSnapshot:
    """A snapshot whose large tensors are being copied on a background thread.

    Created by ``begin_snapshot``. Until the copy is done, the parameters and optimizer state must
    not change: a pre-hook on ``optimizer.step()`` waits for it. Code that writes parameters
    outside the optimizer (weight averaging into the same model, manual clamping) must call
    ``wait()`` first.
    """

    def __init__(self, model, optimizer=None, scheduler=None, extra: dict | None = None,
                 buffers: dict | None = None) -> None:
        module = getattr(model, "module", model)
        self._staging = buffers
        model_sd = module.state_dict()  # references, taken on the training thread
        buffer_names = {name for name, _ in module.named_buffers()}
        # Buffers (BatchNorm statistics) change during forward: copy them now; they are small.
        self._state = {
            "model": {k: _copy_tensor(v) if k in buffer_names else v
                      for k, v in model_sd.items()},
            "optimizer": optimizer.state_dict() if optimizer is not None else None,
            "scheduler": copy.deepcopy(scheduler.state_dict()) if scheduler is not None else None,
            "rng": _rng_state(),
            "extra": copy.deepcopy(extra or {}),
        }
        self._buffers = buffer_names
        self.blocked_s = 0.0  # time optimizer.step() waited for the copy on the training thread
        self._done = threading.Event()
        self._error: BaseException | None = None
        if optimizer is not None:
            _track(optimizer, self)
        self._thread = threading.Thread(target=self._copy, name="trainguard-snapshot",
                                        daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        try:
            model = self._state["model"]
            staging = self._staging
            self._state["model"] = {k: v if k in self._buffers else _detach(v, staging, ("m", k))
                                    for k, v in model.items()}
            if self._state["optimizer"] is not None:
                self._state["optimizer"] = _detach(self._state["optimizer"], staging, ("o",))
        except BaseException as exc:  # surfaced by wait()/result()
            self._error = exc
        finally:
            self._done.set()

    def _wait_in_step(self) -> None:
        if not self._done.is_set():
            started = time.perf_counter()
            self._done.wait()
            self.blocked_s += time.perf_counter() - started

    def wait(self) -> None:
        """Blocks until the tensors are copied (the training state may change after this)."""
        self._done.wait()
        if self._error is not None:
            raise RuntimeError(f"copying the training state failed: {self._error}") from self._error

    def result(self) -> dict:
        """The snapshot, once copied (what ``snapshot`` would have returned)."""
        self.wait()
        return self._state


def begin_snapshot(model, optimizer=None, scheduler=None, extra: dict | None = None
                   ) -> PendingSnapshot:
    """Starts a snapshot that overlaps the next forward/backward pass; see ``PendingSnapshot``."""
    return PendingSnapshot(model, optimizer, scheduler, extra)


class Stager:
    """Overlapped snapshots into CPU buffers kept from one save to the next.

    Copying into memory already touched is about three times faster than into fresh memory (no
    page faults), so the copy hides behind the next forward/backward more often. The buffers are
    shared by consecutive snapshots: begin the next one only after the previous save finished
    writing (``CheckpointManager.wait()``).
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple, torch.Tensor] = {}

    def begin(self, model, optimizer=None, scheduler=None, extra: dict | None = None
              ) -> PendingSnapshot:
        """Like ``begin_snapshot``, into the kept buffers."""
        return PendingSnapshot(model, optimizer, scheduler, extra, buffers=self._buffers)


def serialize(state: dict) -> bytes:
    """``torch.save`` of a snapshot, as bytes."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def stream(state: dict | PendingSnapshot) -> Stream:
    """A checkpoint payload that writes the state with ``torch.save`` straight to storage (no
    in-memory copy of the serialised bytes); waits for a pending snapshot's copy first."""

    def write(handle) -> None:
        torch.save(state.result() if isinstance(state, PendingSnapshot) else state, handle)

    return Stream(write)


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
