"""The shipped step's weights, exported as the trainers export their final model.

When a checkpoint ships instead of the job's final export (``--model best`` and an earlier step
was better), a serving container must still find what it loads in the same place and the same
form. This module turns a checkpoint the runtime wrote into that export, read from the checkpoint
alone, per the format its ``COMMIT`` records (:data:`EXPORTERS`):

- ``torch`` (``TorchCheckpointer``, one ``state.pt``) and ``torch-dcp`` (its sharded
  ``torch.distributed.checkpoint`` saves): ``model.pt``, the model's ``state_dict`` as
  ``torch.save(model.state_dict(), …)`` writes it — what ``containers/trainer/train.py`` and
  ``lightning_train.py`` export (the DCP shards consolidated into full tensors);
- ``lightning`` (the Lightning guard's ``lightning.ckpt``): ``model.pt``, its ``state_dict``;
- ``hf`` (the Hugging Face guard's ``checkpoint-N`` files): what ``Trainer.save_model`` writes,
  the checkpoint without the optimizer, scheduler, scaler, RNG and trainer state.

Keras, orbax and plain ``files`` checkpoints hold training state whose export only the trainer
knows (:data:`NOT_EXPORTABLE`, each with the reason). Everything loads with
``torch.load(weights_only=True)`` (DCP metadata through the runtime's allow-list): exporting never
runs code from a checkpoint. Nothing here raises: a checkpoint that cannot be exported (a
framework that is not installed, a damaged file) comes back as the reason, for the caller to say.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Export", "Exporter", "EXPORTERS", "NOT_EXPORTABLE", "MODEL_FILE", "export_checkpoint"]

MODEL_FILE = "model.pt"  # the PyTorch trainers' export: torch.save(model.state_dict())

# The files of a Trainer checkpoint that are training state, not the model: transformers'
# trainer.py names them (TRAINING_ARGS_NAME, TRAINER_STATE_NAME, OPTIMIZER_NAME, SCALER_NAME,
# OPTIMIZER_NAME_BIN, SCHEDULER_NAME) and _save_rng_state writes rng_state[_N].pth.
_HF_TRAINING_STATE = re.compile(
    r"^(training_args\.bin|trainer_state\.json|optimizer\.pt|optimizer\.bin|scaler\.pt|scheduler\.pt"
    r"|rng_state(_\d+)?\.pth)$"
)


@dataclass(frozen=True)
class Export:
    """What was exported: ``files`` (names in the output directory) and how, in one line."""

    files: tuple[str, ...]
    how: str


@dataclass(frozen=True)
class Exporter:
    """How to export one checkpoint format.

    Attributes:
        needs: the packages it imports (absent: the export cannot be made here).
        how: one line for the model's manifest and the README.
        run: ``(checkpoint directory, its files, output directory) → exported file names``.
    """

    needs: tuple[str, ...]
    how: str
    run: Callable[[Path, Sequence[str], Path], tuple[str, ...]]


def _torch_save(state_dict, out: Path) -> tuple[str, ...]:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    torch.save(state_dict, str(out / MODEL_FILE))
    return (MODEL_FILE,)


def _load(path: Path):
    from trainguard.runtime.guard_base import load_torch

    with path.open("rb") as handle:
        return load_torch(handle, str(path))


def _from_state(src: Path, files: Sequence[str], out: Path) -> tuple[str, ...]:
    state = _load(src / "state.pt")  # trainguard.runtime.torch_state.STATE_FILE
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        raise ValueError("state.pt holds no 'model' state_dict: not written by TorchCheckpointer")
    return _torch_save(state["model"], out)


def _from_lightning(src: Path, files: Sequence[str], out: Path) -> tuple[str, ...]:
    state = _load(src / "lightning.ckpt")  # trainguard.runtime.lightning.CHECKPOINT_FILE
    if not isinstance(state, dict) or not isinstance(state.get("state_dict"), dict):
        raise ValueError("lightning.ckpt holds no 'state_dict': not a Lightning checkpoint")
    return _torch_save(state["state_dict"], out)


def _from_dcp(src: Path, files: Sequence[str], out: Path) -> tuple[str, ...]:
    # What torch's own dcp_to_torch_save does (format_utils): the internal loader fills the dict
    # the planner rebuilds from the metadata (the public dcp.load would copy it away).
    from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

    from trainguard.runtime.torch_dcp import SafeLoadPlanner, SafeReader

    class ModelOnly(SafeLoadPlanner, _EmptyStateDictLoadPlanner):
        """Rebuilds the ``model`` entries from the metadata (no model object needed); loads any
        non-tensor item with ``weights_only=True``."""

    state: dict = {}
    _load_state_dict(
        state,
        storage_reader=SafeReader(str(src), files),
        planner=ModelOnly(keys={"model"}),
        no_dist=True,
    )
    if not isinstance(state.get("model"), dict) or not state["model"]:
        raise ValueError("the sharded checkpoint holds no 'model' entries: not written by TorchCheckpointer")
    return _torch_save(state["model"], out)


def _from_hf(src: Path, files: Sequence[str], out: Path) -> tuple[str, ...]:
    kept = tuple(sorted(n for n in files if not _HF_TRAINING_STATE.match(n.rsplit("/", 1)[-1])))
    if not any(n.endswith((".safetensors", ".bin")) for n in kept):
        raise ValueError("the Trainer checkpoint holds no model weights (*.safetensors or *.bin)")
    for name in kept:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / name, out / name)
    return kept


#: Checkpoint format (the ``format`` a ``COMMIT`` records; the runtime's FORMAT_TORCH,
#: FORMAT_DCP and its framework guards' names) → how its model is exported.
EXPORTERS: dict[str, Exporter] = {
    "torch": Exporter(
        ("torch",), "model.pt: the model's state_dict from the checkpoint's state.pt", _from_state
    ),
    "torch-dcp": Exporter(
        ("torch",), "model.pt: the model's state_dict, its shards consolidated into full tensors", _from_dcp
    ),
    "lightning": Exporter(
        ("torch",), "model.pt: the state_dict of the checkpoint's lightning.ckpt", _from_lightning
    ),
    "hf": Exporter(
        (),
        "the files Trainer.save_model writes: the checkpoint without its optimizer, scheduler, "
        "scaler, RNG and trainer state",
        _from_hf,
    ),
}

#: Formats whose model only the trainer can export, and why.
NOT_EXPORTABLE: dict[str, str] = {
    "keras": "a Keras checkpoint holds the variables' values, not the model: only the trainer's "
    "model.save_weights() writes model.weights.h5",
    "orbax": "an orbax checkpoint holds the whole training state: which part of it is the model, and "
    "how it is exported, is the trainer's choice",
    "files": "its files were saved with CheckpointManager.save: how the trainer exports a model from "
    "them is the trainer's own",
}


def export_checkpoint(fmt: str, src: str | os.PathLike, files: Sequence[str], out: str | os.PathLike):
    """Exports the model of the checkpoint in the local directory ``src`` into ``out``.

    Args:
        fmt: the checkpoint's format (its ``COMMIT``'s ``format``).
        src: a local directory holding the checkpoint's ``files``.
        files: the checkpoint's payload files (relative names).
        out: where the export goes (created).

    Returns:
        ``(Export, "")``, or ``(None, why it cannot be exported here)``.
    """
    exporter = EXPORTERS.get(fmt)
    if exporter is None:
        return None, NOT_EXPORTABLE.get(fmt, f"trainguard knows no export of a {fmt!r} checkpoint")
    missing = [name for name in exporter.needs if importlib.util.find_spec(name) is None]
    if missing:
        return None, (
            f"exporting a {fmt} checkpoint needs {', '.join(missing)}, which is not installed where "
            "the train task runs (install trainguard[torch] in the components image)"
        )
    try:
        written = exporter.run(Path(src), tuple(files), Path(out))
    except Exception as exc:  # noqa: BLE001 - a damaged or foreign checkpoint is said, not raised
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        return None, f"its {fmt} checkpoint could not be exported ({first})"
    return Export(written, exporter.how), ""
