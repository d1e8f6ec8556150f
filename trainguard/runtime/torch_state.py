"""PyTorch state: capture and restore everything a bit-identical resume needs, safely.

Captured: model, optimizer and LR-scheduler state, the RNG states of ``random``, NumPy and torch
(CUDA too when present), and a caller-supplied ``extra`` dict (the data position: epoch, batch).
Everything is stored as tensors and plain Python types, so a checkpoint loads with
``torch.load(weights_only=True)``: loading one never runs code from it. RNG states always stay on
the CPU (``torch.set_rng_state`` takes only a CPU ByteTensor), whatever ``map_location`` says.

``snapshot`` copies every tensor on the training thread; ``begin_snapshot`` copies the parameters
and optimizer state on a background thread while the next forward and backward pass run (they read
parameters, they do not write them), and holds the next ``optimizer.step()`` until the copy is done
— so an async save costs the training thread almost nothing. ``Stager`` keeps the (pinned, for
CUDA) CPU buffers from one save to the next; DTensor shards (FSDP2) are staged shard by shard.

Most users want :class:`trainguard.runtime.torch_checkpointer.TorchCheckpointer`, which drives all
of this; these functions are its parts.
"""

from __future__ import annotations

import io
import os
import random
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeGuard, cast

import torch

if TYPE_CHECKING:  # importing it costs every process; the type is enough here
    from torch.distributed.tensor import DTensor

from trainguard.errors import CheckpointError
from trainguard.runtime.checkpoint import Stream

__all__ = [
    "snapshot",
    "begin_snapshot",
    "begin_state",
    "PendingSnapshot",
    "Stager",
    "serialize",
    "stream",
    "restore",
    "load_state",
    "apply_state",
    "rng_state",
    "set_rng_state",
    "plain",
    "STATE_FILE",
]

STATE_FILE = "state.pt"
_PLAIN_LEAVES = (type(None), bool, int, float, str, bytes, torch.dtype, torch.device, torch.Size)


def _is_dtensor(obj: object) -> TypeGuard[DTensor]:
    return isinstance(obj, torch.Tensor) and type(obj).__name__ == "DTensor" and hasattr(obj, "_spec")


def _stage(tensor: torch.Tensor, buffers: dict | None, path: tuple) -> torch.Tensor:
    if buffers is None:
        return tensor.detach().to("cpu", copy=True)
    buf = buffers.get(path)
    if buf is None or buf.shape != tensor.shape or buf.dtype != tensor.dtype:
        pin = tensor.is_cuda and torch.cuda.is_available()  # pinned: fast device-to-host copies
        buf = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu", pin_memory=pin)
        buffers[path] = buf
    buf.copy_(tensor.detach())
    return buf


def _copy_tensor(tensor: torch.Tensor, buffers: dict | None = None, path: tuple = ()) -> torch.Tensor:
    if _is_dtensor(tensor):
        # A shard of a sharded tensor (FSDP2): stage the local shard, keep the sharding spec, so
        # torch.distributed.checkpoint writes this rank's part with its global offsets.
        local = _stage(tensor._local_tensor, buffers, path)
        return type(tensor)(local, tensor._spec, requires_grad=False)
    return _stage(tensor, buffers, path)


def _detach(obj, buffers: dict | None = None, path: tuple = ()):
    if isinstance(obj, torch.Tensor):
        return _copy_tensor(obj, buffers, path)
    if isinstance(obj, dict):
        out = {k: _detach(v, buffers, (*path, k)) for k, v in obj.items()}
        return OrderedDict(out) if isinstance(obj, OrderedDict) else out
    if isinstance(obj, list | tuple):
        return type(obj)(_detach(v, buffers, (*path, i)) for i, v in enumerate(obj))
    return plain(obj, "/".join(map(str, path)))


def plain(obj, where: str = "extra"):
    """A copy of ``obj`` made of what ``torch.load(weights_only=True)`` accepts (tensors and plain
    Python types); NumPy scalars become Python numbers, NumPy arrays tensors.

    Raises:
        CheckpointError: ``obj`` holds something else (a function, a custom class), which a safe
            restore could not load.
    """
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, _PLAIN_LEAVES):
        return obj
    if isinstance(obj, dict):
        out = {k: plain(v, f"{where}[{k!r}]") for k, v in obj.items()}
        for key in obj:
            if not isinstance(key, str | int | float | bool | type(None)):
                raise CheckpointError(f"{where}: key {key!r} is not a plain type")
        return OrderedDict(out) if isinstance(obj, OrderedDict) else out
    if isinstance(obj, list | tuple | set):
        return type(obj)(plain(v, f"{where}[{i}]") for i, v in enumerate(obj))
    module = type(obj).__module__
    if module == "numpy":
        import numpy as np

        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return torch.from_numpy(obj.copy())
    raise CheckpointError(
        f"{where} holds a {module}.{type(obj).__qualname__}: a checkpoint holds only tensors and "
        "plain Python types (dict, list, tuple, str, int, float, bool, None), so that restoring "
        "it can never run code; store a plain value instead"
    )


def rng_state() -> dict:
    """The RNG states of ``random``, NumPy (when installed) and torch (CPU, CUDA), as tensors and
    plain types."""
    try:
        import numpy as np

        # legacy=True (the default) returns the tuple form, as NumPy documents it.
        legacy = cast("tuple[str, Any, int, int, float]", np.random.get_state(legacy=True))
        kind, keys, pos, has_gauss, cached = legacy
        np_state = {
            "kind": str(kind),
            "keys": torch.from_numpy(keys.astype("int64")),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        }
    except ImportError:  # numpy is optional inside user images
        np_state = None
    return {
        "python": random.getstate(),
        "numpy": np_state,
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def set_rng_state(rng: dict) -> None:
    """Restores what ``rng_state`` captured. The torch states are moved to the CPU first: they
    must never follow a ``map_location`` (``set_rng_state`` takes only a CPU ByteTensor)."""
    if rng.get("python") is not None:
        version, internal, gauss = rng["python"]
        random.setstate((version, tuple(internal), gauss))
    numpy_state = rng.get("numpy")
    if numpy_state is not None:
        import numpy as np

        np.random.set_state(
            (
                numpy_state["kind"],
                numpy_state["keys"].cpu().numpy().astype("uint32"),
                numpy_state["pos"],
                numpy_state["has_gauss"],
                numpy_state["cached_gaussian"],
            )
        )
    if rng.get("torch") is not None:
        torch.set_rng_state(rng["torch"].cpu())
    if rng.get("cuda") is not None and torch.cuda.is_available():
        states = [s.cpu() for s in rng["cuda"]]
        if len(states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(states)
        else:  # fewer/more GPUs than when saved: seed what matches, leave the rest
            for index, state in enumerate(states[: torch.cuda.device_count()]):
                torch.cuda.set_rng_state(state, index)


def _unwrap(model):
    return getattr(model, "module", model)  # DistributedDataParallel


def snapshot(model, optimizer=None, scheduler=None, extra: dict | None = None) -> dict:
    """A detached CPU copy of the training state, safe to serialise on another thread."""
    return {
        "model": _detach(_unwrap(model).state_dict()),
        "optimizer": _detach(optimizer.state_dict()) if optimizer is not None else None,
        "scheduler": plain(scheduler.state_dict(), "scheduler") if scheduler is not None else None,
        "rng": rng_state(),
        "extra": plain(extra or {}),
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

    Created by ``begin_snapshot`` (or ``begin_state`` for a prepared state dict). Until the copy is
    done, the parameters and optimizer state must not change: a pre-hook on ``optimizer.step()``
    waits for it. Code that writes parameters outside the optimizer (weight averaging into the same
    model, manual clamping) must call ``wait()`` first.
    """

    def __init__(
        self, model, optimizer=None, scheduler=None, extra: dict | None = None, buffers: dict | None = None
    ) -> None:
        module = _unwrap(model)
        refs = {
            "model": module.state_dict(),  # references, taken on the training thread
            "optimizer": optimizer.state_dict() if optimizer is not None else None,
            "scheduler": plain(scheduler.state_dict(), "scheduler") if scheduler is not None else None,
            "rng": rng_state(),
            "extra": plain(extra or {}),
        }
        early = {("model", name) for name, _ in module.named_buffers()}
        self._start(refs, early, [optimizer] if optimizer is not None else [], buffers)

    @classmethod
    def of(
        cls, refs: dict, early: set[tuple], optimizers: Iterable, buffers: dict | None = None
    ) -> PendingSnapshot:
        """A snapshot of a prepared nested dict of tensor references; the tensors at the paths in
        ``early`` are copied at once (they change during forward: BatchNorm statistics)."""
        self = cls.__new__(cls)
        self._start(refs, early, list(optimizers), buffers)
        return self

    def _start(self, refs: dict, early: set[tuple], optimizers: list, buffers: dict | None) -> None:
        self._staging = buffers
        self._early = early
        self._state = _copy_paths(refs, early)
        self.blocked_s = 0.0  # time optimizer.step() waited for the copy on the training thread
        self._done = threading.Event()
        self._error: BaseException | None = None
        for optimizer in optimizers:
            _track(optimizer, self)
        self._thread = threading.Thread(target=self._copy, name="trainguard-snapshot", daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        try:
            self._state = _detach_except(self._state, self._early, self._staging)
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
            if isinstance(self._error, CheckpointError):
                raise self._error
            raise RuntimeError(f"copying the training state failed: {self._error}") from self._error

    def result(self) -> dict:
        """The snapshot, once copied (what ``snapshot`` would have returned)."""
        self.wait()
        return self._state


def _copy_paths(refs: dict, early: set[tuple]) -> dict:
    """``refs`` with the tensors at ``early`` paths copied now (two levels: section, key)."""
    if not early:
        return dict(refs)
    out = dict(refs)
    for section in {p[0] for p in early}:
        part = refs.get(section)
        if isinstance(part, dict):
            out[section] = {
                k: _copy_tensor(v) if (section, k) in early and isinstance(v, torch.Tensor) else v
                for k, v in part.items()
            }
    return out


def _detach_except(state: dict, early: set[tuple], buffers: dict | None) -> dict:
    out = {}
    for section, part in state.items():
        if isinstance(part, dict) and any(p[0] == section for p in early):
            out[section] = {
                k: v if (section, k) in early else _detach(v, buffers, (section, k)) for k, v in part.items()
            }
        else:
            out[section] = _detach(part, buffers, (section,))
    return out


def begin_snapshot(model, optimizer=None, scheduler=None, extra: dict | None = None) -> PendingSnapshot:
    """Starts a snapshot that overlaps the next forward/backward pass; see ``PendingSnapshot``."""
    return PendingSnapshot(model, optimizer, scheduler, extra)


def begin_state(
    refs: dict, early: set[tuple], optimizers: Iterable, buffers: dict | None = None
) -> PendingSnapshot:
    """Like ``begin_snapshot`` for a prepared state dict (``get_state_dict`` for DCP)."""
    return PendingSnapshot.of(refs, early, optimizers, buffers)


class Stager:
    """Overlapped snapshots into CPU buffers kept from one save to the next.

    Copying into memory already touched is about three times faster than into fresh memory (no
    page faults), so the copy hides behind the next forward/backward more often. The buffers are
    shared by consecutive snapshots: begin the next one only after the previous save finished
    writing (``CheckpointManager.wait()``).
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple, torch.Tensor] = {}

    def begin(self, model, optimizer=None, scheduler=None, extra: dict | None = None) -> PendingSnapshot:
        """Like ``begin_snapshot``, into the kept buffers."""
        return PendingSnapshot(model, optimizer, scheduler, extra, buffers=self._buffers)

    def begin_state(self, refs: dict, early: set[tuple], optimizers: Iterable) -> PendingSnapshot:
        """Like ``begin_state``, into the kept buffers."""
        return PendingSnapshot.of(refs, early, optimizers, self._buffers)


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


def load_state(source, name: str = STATE_FILE, map_location=None) -> dict:
    """Loads a saved snapshot with ``weights_only=True`` (never runs code from it).

    Args:
        source: bytes, a path, or a binary file object.
        name: what to call it in errors (the file's path).
        map_location: where the model and optimizer tensors go (a device or its name; default:
            the CPU). RNG states always stay on the CPU.

    Raises:
        CheckpointError: the file is not a snapshot that loads safely (crafted, torn, another
            format), naming ``name``.
    """
    if isinstance(source, bytes | bytearray | memoryview):
        source = io.BytesIO(bytes(source))
    try:
        state = torch.load(source, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - unpickling raises many types; all mean the same
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "weights_only" in str(exc) or "Unsupported global" in str(exc):
            reason = (
                "it holds objects other than tensors and plain types, which could run code "
                "when loaded, so it was refused"
            )
        raise CheckpointError(f"{name}: not a checkpoint this runtime loads safely: {reason[:300]}") from None
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        kind = type(state).__name__
        raise CheckpointError(
            f"{name}: holds a {kind} without a 'model' state, not a trainguard "
            "PyTorch checkpoint (another framework's file?)"
        )
    if map_location is not None and str(map_location) != "cpu":
        for section in ("model", "optimizer"):
            if state.get(section) is not None:
                state[section] = _move(state[section], torch.device(map_location))
    return state


def _move(obj, device: torch.device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        out = {k: _move(v, device) for k, v in obj.items()}
        return OrderedDict(out) if isinstance(obj, OrderedDict) else out
    if isinstance(obj, list | tuple):
        return type(obj)(_move(v, device) for v in obj)
    return obj


def apply_state(
    state: dict, model, optimizer=None, scheduler=None, *, strict: bool = True, name: str = STATE_FILE
) -> dict:
    """Loads a snapshot into the objects and restores the RNG states; returns ``extra``.

    Args:
        strict: a checkpoint without the optimizer/scheduler state that was passed is an error
            (False: those start fresh).

    Raises:
        CheckpointError: the state does not fit the objects (what was found, what to do).
    """
    for section, obj in (("optimizer", optimizer), ("scheduler", scheduler)):
        if obj is not None and state.get(section) is None and strict:
            raise CheckpointError(
                f"{name}: holds no {section} state, but a {section} was given: resume with the "
                f"same setup that saved it, or restore(strict=False) to start the {section} afresh "
                "from these weights"
            )
    try:
        _unwrap(model).load_state_dict(state["model"])
        if optimizer is not None and state.get("optimizer") is not None:
            optimizer.load_state_dict(state["optimizer"])
        if scheduler is not None and state.get("scheduler") is not None:
            scheduler.load_state_dict(state["scheduler"])
    except (RuntimeError, KeyError, ValueError, TypeError) as exc:
        first = str(exc).strip().splitlines()
        raise CheckpointError(
            f"{name}: does not fit this model/optimizer: "
            f"{' '.join(first[:3])[:400]}; resume with the model that saved it"
        ) from None
    set_rng_state(state.get("rng") or {})
    return dict(state.get("extra") or {})


def restore(data, model, optimizer=None, scheduler=None, map_location=None, *, strict: bool = False) -> dict:
    """Loads a serialised snapshot (bytes, path or file) into the objects, restores RNG states;
    returns ``extra``. Safe: see ``load_state``."""
    name = os.fspath(data) if isinstance(data, str | os.PathLike) else STATE_FILE
    state = load_state(data, name, map_location)
    return apply_state(state, model, optimizer, scheduler, strict=strict, name=name)
