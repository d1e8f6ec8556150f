"""What the framework guards (Lightning, Keras, Hugging Face) share.

Each guard (``trainguard.runtime.lightning``, ``.keras``, ``.hf``) is one object a user hands to
their framework. Underneath, :class:`GuardCore` owns the parts that do not depend on the framework:

* the :class:`~trainguard.runtime.checkpoint.CheckpointManager` on ``AIP_CHECKPOINT_DIR`` (atomic
  ``COMMIT``, retention, background writes) and the choice of the newest *complete* checkpoint;
* the JSONL history (``TRAINGUARD_HISTORY``), trimmed to the restored step on resume;
* SIGTERM: a flag the guard reads at its next save point (it then saves, blocking, and exits 143);
* RNG states as plain data (JSON-able, and loadable by ``torch.load(weights_only=True)``);
* loading a torch file from a checkpoint without ever running code from it.

Nothing here imports a framework; numpy and torch are used only when the process already did.
"""

from __future__ import annotations

import atexit
import base64
import inspect
import os
import pickle
import random
import sys
from collections.abc import Mapping
from typing import Any, BinaryIO

from trainguard.errors import CheckpointError
from trainguard.runtime.checkpoint import (
    Checkpoint,
    CheckpointManager,
    RetentionPolicy,
    SavePolicy,
    note,
    safe_relative_name,
    save_policy,
)
from trainguard.runtime.checkpointer import PREEMPTED_EXIT
from trainguard.runtime.env import VertexEnv
from trainguard.runtime.history import HistoryWriter
from trainguard.runtime.preemption import SigtermFlag
from trainguard.runtime.storage import join, store_for

__all__ = [
    "GuardCore",
    "PREEMPTED_EXIT",
    "rng_state",
    "set_rng_state",
    "split_metric",
    "load_torch",
    "note",
    "save_policy",
]

# Metric-name prefixes that say which split a logged value belongs to (Lightning's ``val_loss``,
# ``val/acc``, Hugging Face's ``eval_loss``, Keras' ``val_accuracy``). One table for every guard.
_SPLIT_PREFIXES: tuple[tuple[str, str], ...] = (
    ("validation_", "val"),
    ("validation/", "val"),
    ("valid_", "val"),
    ("valid/", "val"),
    ("val_", "val"),
    ("val/", "val"),
    ("eval_", "val"),
    ("eval/", "val"),
    ("test_", "test"),
    ("test/", "test"),
    ("training_", "train"),
    ("training/", "train"),
    ("train_", "train"),
    ("train/", "train"),
)


def split_metric(name: str) -> tuple[str, str]:
    """``(split, name without the split prefix)`` of a logged metric; unprefixed names are train.

    >>> split_metric("val_loss"), split_metric("train/acc"), split_metric("loss")
    (('val', 'loss'), ('train', 'acc'), ('train', 'loss'))
    """
    lower = name.lower()
    for prefix, split in _SPLIT_PREFIXES:
        if lower.startswith(prefix) and len(name) > len(prefix):
            return split, name[len(prefix) :]
    return "train", name


# -- RNG states as plain data --


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def rng_state() -> dict:
    """The RNG states of ``random``, NumPy and torch (CPU, CUDA) as JSON-able plain data.

    NumPy and torch are captured only when the process has imported them (a Keras job on JAX does
    not carry torch).
    """
    version, internal, gauss = random.getstate()
    state: dict[str, Any] = {"python": [version, list(internal), gauss]}
    np = sys.modules.get("numpy")
    if np is not None:
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        state["numpy"] = [str(kind), [int(k) for k in keys], int(pos), int(has_gauss), float(cached)]
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_rng_state"):
        state["torch"] = _b64(torch.get_rng_state().numpy().tobytes())
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = [_b64(s.numpy().tobytes()) for s in torch.cuda.get_rng_state_all()]
    return state


def set_rng_state(state: Mapping) -> None:
    """Restores what :func:`rng_state` captured (the parts this process can use)."""
    python = state.get("python")
    if python is not None:
        version, internal, gauss = python
        random.setstate((int(version), tuple(int(v) for v in internal), gauss))
    np = sys.modules.get("numpy")
    if np is not None and state.get("numpy") is not None:
        kind, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state(
            (kind, np.asarray(keys, dtype=np.uint32), int(pos), int(has_gauss), float(cached))
        )
    torch = sys.modules.get("torch")
    if torch is not None and state.get("torch") is not None:
        # RNG states always live on the CPU: set_rng_state takes only a CPU ByteTensor.
        raw = bytearray(base64.b64decode(state["torch"]))
        torch.set_rng_state(torch.frombuffer(raw, dtype=torch.uint8).clone())
        cuda = state.get("cuda")
        if cuda and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(
                [torch.frombuffer(bytearray(base64.b64decode(s)), dtype=torch.uint8).clone() for s in cuda]
            )


# -- loading --


def load_torch(handle: BinaryIO, name: str) -> Any:
    """``torch.load(weights_only=True)`` of a checkpoint file: tensors and plain data only.

    Raises:
        CheckpointError: the file holds anything else (a crafted pickle, a custom class) or is not
            a torch file; the message names it.
    """
    import torch

    try:
        return torch.load(handle, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(
            f"{name}: refused to load it: it holds more than tensors and plain Python data "
            f"({first}). trainguard loads checkpoints with torch.load(weights_only=True) so that "
            "a checkpoint can never run code; if your own state holds a custom class, allow-list "
            "it with torch.serialization.add_safe_globals([...]), or move this checkpoint out of "
            "the checkpoint directory"
        ) from None
    except (RuntimeError, EOFError, ValueError, OSError) as exc:
        raise CheckpointError(
            f"{name}: not a readable torch checkpoint "
            f"({type(exc).__name__}: {str(exc)[:200]}); it is damaged: move it "
            "out of the checkpoint directory to resume from an older one"
        ) from None


class GuardCore:
    """Checkpoints, SIGTERM and history for one framework guard.

    Args:
        framework: the guard's name (``lightning``, ``keras``, ``hf``), recorded in ``COMMIT`` as
            its format where the manager supports formats.
        marker: the payload file that every checkpoint of this guard holds; a checkpoint without
            it was written by someone else and is refused.
        directory: the checkpoint directory (default ``AIP_CHECKPOINT_DIR``, else
            ``./trainguard-output/checkpoints``).
        save: when to save: a :class:`SavePolicy`, or N to save every N steps (default 100).
        retention: which checkpoints to keep (default the last 3).
        async_save: write in the background (the state is copied first).
        history: the JSONL history path (default ``TRAINGUARD_HISTORY``); ``False`` for none.
        is_chief: only the chief writes checkpoints and the history.
    """

    def __init__(
        self,
        framework: str,
        marker: str,
        directory: str | None = None,
        *,
        save: SavePolicy | int | None = None,
        retention: RetentionPolicy | None = None,
        async_save: bool = True,
        history: str | bool | None = None,
        is_chief: bool = True,
    ) -> None:
        env = VertexEnv.from_environ()
        self.framework, self.marker = framework, marker
        self.is_chief = is_chief
        self.manager = CheckpointManager(
            directory or env.checkpoint_dir,
            save=save_policy(save),
            retention=retention or RetentionPolicy(),
            async_save=async_save,
            is_chief=is_chief,
        )
        self.directory = self.manager.directory
        self.history_path = env.history_path if history is None or history is True else (history or "")
        self.history: HistoryWriter | None = None
        self._sigterm = SigtermFlag()
        self._formats = "format" in inspect.signature(self.manager.save).parameters
        self.last_saved: int | None = None  # the step of the newest checkpoint, restored or saved
        self._at_exit = False

    # -- restore --

    def latest(self) -> Checkpoint | None:
        """The newest complete checkpoint of this guard, or None on a fresh run.

        Raises:
            CheckpointError: the newest complete checkpoint was written by something else (it is
                left as it is).
        """
        latest = self.manager.restore_latest()
        if latest is None:
            return None
        self.last_saved = latest.step
        fmt = getattr(latest, "format", None)
        if self.marker not in latest.files or fmt not in (None, "files", self.framework):
            holds = ", ".join(latest.files[:6]) or "nothing"
            raise CheckpointError(
                f"{latest.uri} was not written by trainguard's {self.framework} guard (it holds "
                f"{holds}{f'; format {fmt}' if fmt else ''}; this guard reads {self.marker}). "
                "Point AIP_CHECKPOINT_DIR at this run's own checkpoint directory, or at an empty "
                "one to start afresh (nothing was deleted)"
            )
        return latest

    @staticmethod
    def root(checkpoint: Checkpoint) -> str:
        """The directory that holds the checkpoint's files."""
        return getattr(checkpoint, "root", "") or checkpoint.uri

    def open_file(self, checkpoint: Checkpoint, name: str) -> BinaryIO:
        """A binary handle on payload file ``name`` (local and FUSE paths are read in place;
        symbolic links are refused)."""
        import io

        if not safe_relative_name(name) or name not in checkpoint.files:
            raise CheckpointError(f"{checkpoint.uri}: no file {name!r} in the checkpoint")
        path = join(self.root(checkpoint), name)
        if path.startswith("gs://"):
            return io.BytesIO(store_for(path).read_bytes(path))
        if os.path.islink(path) or not os.path.isfile(path):
            raise CheckpointError(
                f"{path}: not a regular file (symbolic links are not followed); "
                "move the checkpoint out of the checkpoint directory"
            )
        return open(path, "rb")  # noqa: SIM115 - the caller closes it

    def open_history(self, resume_step: int | None) -> None:
        """(Re)opens the history; records after ``resume_step`` (about to be logged again) go."""
        if self.history is not None:
            self.history.close()
            self.history = None
        if self.history_path:
            self.history = HistoryWriter(self.history_path, resume_step=resume_step, enabled=self.is_chief)

    def log(self, step: int, split: str, epoch: int | None, metrics: Mapping[str, float]) -> None:
        """One history record (nothing when there are no metrics or no history)."""
        if self.history is not None and metrics:
            self.history.log(step, split, epoch=epoch, **metrics)

    # -- save --

    def should_save(self, step: int) -> bool:
        """True when the save policy asks for a save at ``step`` (not yet saved)."""
        return self.manager.should_save(step)

    def commit(
        self,
        step: int,
        payload: Mapping,
        metrics: Mapping[str, float] | None = None,
        *,
        blocking: bool = False,
    ) -> None:
        """Saves ``payload`` as step ``step`` through the manager (history flushed first)."""
        if self.history is not None:
            self.history.flush()  # the history up to this step is durable with the checkpoint
        if not self._at_exit:
            # An exception that ends the process (the frameworks give no hook for it) must not
            # cut the save in flight short: the saver thread is a daemon.
            atexit.register(self._finish)
            self._at_exit = True
        extra = {"format": self.framework} if self._formats else {}
        clean = {
            k: float(v)
            for k, v in (metrics or {}).items()
            if isinstance(v, int | float) and not isinstance(v, bool)
        }
        self.manager.save(step, payload, clean, blocking=blocking, **extra)
        self.last_saved = step

    # -- preemption --

    @property
    def preempted(self) -> bool:
        """True once SIGTERM arrived."""
        return self._sigterm.is_set

    def mark_preempted(self) -> None:
        """Acts as if SIGTERM had arrived (another process of the job got it)."""
        self._sigterm.set()

    def install_sigterm_handler(self) -> None:
        """On SIGTERM, set the flag the guard checks at its next save point (main thread only)."""
        self._sigterm.install(main_thread_only=True)

    def uninstall_sigterm_handler(self) -> None:
        """Puts back the SIGTERM handler that was there before."""
        self._sigterm.uninstall()

    def preempted_exit(self, step: int, exit: bool = True) -> None:
        """After the SIGTERM (or Ctrl-C) save: close and exit 143 (130), or return with
        ``exit=False``."""
        self.close()
        if self.is_chief:
            note(f"{self._sigterm.reason}: saved step {step} in {self.directory}, stopping")
        if exit:
            raise SystemExit(self._sigterm.exit_code)

    def close(self) -> None:
        """Waits for the save in flight, closes the history, puts back the SIGTERM handler."""
        try:
            self.manager.wait()
        finally:
            self.uninstall_sigterm_handler()
            if self.history is not None:
                self.history.close()
                self.history = None
            if self._at_exit:
                atexit.unregister(self._finish)
                self._at_exit = False

    def _finish(self) -> None:
        """At the process's exit: the save in flight completes, the history is flushed (what
        fails is reported: the process is exiting anyway)."""
        for what, step in (
            ("the checkpoint save in flight", self.manager.wait),
            ("flushing the history", self._flush_history),
        ):
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - say what was lost, then exit
                note(f"{what} failed: {exc}")

    def _flush_history(self) -> None:
        if self.history is not None:
            self.history.flush()
