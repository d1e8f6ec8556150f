"""What the framework guards (Lightning, Keras, Hugging Face) share besides the core.

Each guard (``trainguard.runtime.lightning``, ``.keras``, ``.hf``) is one object a user hands to
their framework, built on the :class:`~trainguard.runtime.core.CheckpointCore` (checkpoints on
``AIP_CHECKPOINT_DIR``, save decisions, SIGTERM, the history, closing). This module holds what the
guards add, once:

* :class:`GuardOptions`: the options every guard takes, checked when the guard is made, and the
  core they configure;
* :func:`restore_point`: the newest complete checkpoint of this guard (another writer's is refused);
* RNG states as plain data (JSON-able, and loadable by ``torch.load(weights_only=True)``);
* which split a logged metric belongs to;
* loading a torch file from a checkpoint without ever running code from it.

Nothing here imports a framework; numpy and torch are used only when the process already did.
"""

from __future__ import annotations

import base64
import pickle
import random
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

from trainguard.errors import CheckpointError, ConfigError
from trainguard.runtime.checkpoint import FORMAT_FILES, Checkpoint, RetentionPolicy, SavePolicy, note
from trainguard.runtime.core import PREEMPTED_EXIT, CheckpointCore
from trainguard.runtime.env import VertexEnv
from trainguard.runtime.policies import save_policy

__all__ = [
    "GuardOptions",
    "restore_point",
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


@dataclass(frozen=True)
class GuardOptions:
    """The options every framework guard takes, checked when the guard is made.

    Args:
        directory: the checkpoint directory (default ``AIP_CHECKPOINT_DIR``, else
            ``./trainguard-output/checkpoints``).
        save: when to save: N (every N steps, default 100) or a :class:`SavePolicy`.
        retention: which checkpoints to keep (default the last 3).
        async_save: write in the background (the state is copied first).
        history: the JSONL history path (default ``TRAINGUARD_HISTORY``); False for none.

    Raises:
        ConfigError: an option of the wrong kind or out of range; the message says what to pass.
    """

    directory: str | None = None
    save: SavePolicy | int | None = None
    retention: RetentionPolicy | None = None
    async_save: bool = True
    history: str | bool | None = None

    def __post_init__(self) -> None:
        if self.directory is not None and not (isinstance(self.directory, str) and self.directory):
            raise ConfigError(
                f"directory={self.directory!r}: pass a checkpoint directory (a path or gs:// URI)"
            )
        object.__setattr__(self, "save", save_policy(self.save))
        if self.retention is not None and not isinstance(self.retention, RetentionPolicy):
            raise ConfigError(
                f"retention={self.retention!r}: pass a "
                "RetentionPolicy(keep_last=..., keep_best=..., metric=...)"
            )
        if not isinstance(self.async_save, bool):
            raise ConfigError(f"async_save={self.async_save!r}: pass True or False")
        if self.history is not None and not isinstance(self.history, str | bool):
            raise ConfigError(
                f"history={self.history!r}: pass the JSONL history's path, True (TRAINGUARD_HISTORY) "
                "or False (no history)"
            )

    def core(self, *, is_chief: bool) -> CheckpointCore:
        """The checkpoint core these options describe, read against Vertex's environment now."""
        env = VertexEnv.from_environ()
        history = env.history_path if self.history is None or self.history is True else (self.history or None)
        return CheckpointCore(
            self.directory or env.checkpoint_dir,
            save=self.save,
            retention=self.retention,
            async_save=self.async_save,
            is_chief=is_chief,
            history=history,
            finish_at_exit=True,
        )


def restore_point(core: CheckpointCore, framework: str, marker: str) -> Checkpoint | None:
    """The newest complete checkpoint written by ``framework``'s guard, or None on a fresh run.

    Args:
        core: the guard's core.
        framework: the guard's name, recorded as the ``COMMIT`` format (``lightning``, ``keras``, ``hf``).
        marker: the payload file every checkpoint of this guard holds.

    Raises:
        CheckpointError: the newest checkpoint is damaged or was written by something else (it is
            left as it is).
    """

    def accepts(checkpoint: Checkpoint) -> bool:
        # FORMAT_FILES: COMMITs written before the guards recorded their own format.
        return marker in checkpoint.files and checkpoint.format in (FORMAT_FILES, framework)

    return core.restore_point(accepts=accepts, reader=f"trainguard's {framework} guard", reads=marker)
