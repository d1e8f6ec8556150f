"""Lightning: a ``Trainer`` checkpointed, resumed and preempted safely, in one line.

::

    import lightning as L
    from trainguard.runtime.lightning import Guard

    trainer = L.Trainer(max_epochs=10, callbacks=[Guard()])
    trainer.fit(model, train_loader, val_loader)

``Guard`` is a callback plus a :class:`CheckpointIO` (Lightning's storage plugin, installed on the
strategy by the callback). It

* saves Lightning's own complete checkpoint (weights, optimizers, schedulers, loops, callbacks,
  precision state) plus the RNG states and the data position, through trainguard's checkpoint
  manager: ``<AIP_CHECKPOINT_DIR>/step-NNNNNNNNN/lightning.ckpt`` and an atomic ``COMMIT``, on local
  disks, ``/gcs/`` FUSE mounts and ``gs://`` alike, written in the background;
* on ``fit``, resumes from the newest *complete* checkpoint there (no path to name; an explicit
  ``fit(ckpt_path=...)`` still wins), loading it with ``torch.load(weights_only=True)``;
* resumes mid-epoch exactly: each training ``DataLoader`` is wrapped so that its shuffle order and
  position are restored (Lightning's own stateful-loader protocol), so a resumed run ends with the
  same weights as an uninterrupted one, bit for bit on CPU;
* on SIGTERM (a Spot reclaim, Vertex's preemption notice) saves at the end of the running batch,
  blocking, and exits with status 143;
* writes trainguard's JSONL history (``TRAINGUARD_HISTORY``) from the logged metrics: names with a
  ``val_``/``val/`` prefix go to the ``val`` split at each validation, the others to ``train`` every
  ``log_every_n_steps`` steps; ``step`` is ``trainer.global_step``.

A save (periodic or SIGTERM) that falls on an epoch's last batch is taken at the end of that epoch,
after its validation: resumed from the last batch, Lightning would not validate that epoch again,
so the history would lack it and the RNG states would not match an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.fabric.plugins import CheckpointIO
from lightning.fabric.utilities.types import _Stateful

from trainguard.errors import CheckpointError
from trainguard.runtime.checkpoint import RetentionPolicy, SavePolicy, Stream
from trainguard.runtime.core import CheckpointCore
from trainguard.runtime.guard_base import (
    GuardOptions,
    load_torch,
    note,
    restore_point,
    rng_state,
    set_rng_state,
    split_metric,
)
from trainguard.runtime.storage import join

__all__ = ["Guard", "GuardCheckpointIO", "ResumableLoader", "CHECKPOINT_FILE"]

#: The payload file: a standard Lightning checkpoint (``Model.load_from_checkpoint`` reads it).
CHECKPOINT_FILE = "lightning.ckpt"
FRAMEWORK = "lightning"  # the COMMIT format of the guard's checkpoints
_PLAIN = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.Size)


@dataclass(frozen=True)
class _Request:
    """What the guard asks its CheckpointIO to save (passed as ``storage_options``)."""

    step: int
    metrics: dict = field(default_factory=dict)
    blocking: bool = False


def _plain_copy(obj: Any, where: str, lenient: bool = False) -> Any:
    """A copy made of what ``torch.load(weights_only=True)`` reads back: tensors (cloned to the CPU,
    so the save can run in the background) and plain Python data.

    Raises:
        CheckpointError: ``obj`` holds another type at ``where`` (unless ``lenient``: then it is
            replaced by its ``repr``, as hyper-parameters are, which a resume does not use).
    """
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, _PLAIN):
        return obj
    if isinstance(obj, dict):
        out = {k: _plain_copy(v, f"{where}[{k!r}]", lenient) for k, v in obj.items()}
        return OrderedDict(out) if isinstance(obj, OrderedDict) else out
    if type(obj) in (list, tuple, set):
        return type(obj)(_plain_copy(v, f"{where}[{i}]", lenient) for i, v in enumerate(obj))
    if type(obj).__module__ == "numpy":
        return obj.item() if obj.ndim == 0 else torch.from_numpy(obj.copy())
    if type(obj) in set(torch.serialization.get_safe_globals()):
        return copy.deepcopy(obj)
    if lenient:
        return repr(obj)
    raise CheckpointError(
        f"the Lightning checkpoint holds a {type(obj).__module__}.{type(obj).__qualname__} at "
        f"{where}: trainguard's checkpoints hold only tensors and plain Python data, so that "
        "restoring one can never run code. Store plain values there (in on_save_checkpoint), or "
        "allow-list the class with torch.serialization.add_safe_globals([...])"
    )


class GuardCheckpointIO(CheckpointIO):
    """Lightning's storage plugin, writing the guard's saves through trainguard's manager.

    Saves and loads the guard asks for go to ``<directory>/step-N/lightning.ckpt`` (``COMMIT``
    last); every other path (a ``ModelCheckpoint`` of the user's) goes to the plugin it wraps.
    """

    def __init__(self, core: CheckpointCore, wrapped: CheckpointIO | None) -> None:
        self.core = core
        self.wrapped = wrapped

    def _ours(self, path) -> bool:
        return str(path).startswith(self.core.directory + "/step-")

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options=None) -> None:
        if not isinstance(storage_options, _Request):
            if self.wrapped is None:
                raise RuntimeError("no CheckpointIO to save a checkpoint outside trainguard's")
            return self.wrapped.save_checkpoint(checkpoint, path, storage_options=storage_options)
        request = storage_options
        # The copy is taken here, on the training thread; torch.save runs on the saver thread.
        state = {k: _plain_copy(v, k, lenient=k.endswith("hyper_parameters")) for k, v in checkpoint.items()}
        self.core.commit(
            request.step,
            {CHECKPOINT_FILE: Stream(lambda handle: torch.save(state, handle))},
            request.metrics,
            blocking=request.blocking,
            format=FRAMEWORK,
        )
        return None

    def load_checkpoint(self, path, map_location=None, weights_only=None) -> dict[str, Any]:
        if not self._ours(path):
            if self.wrapped is None:
                raise RuntimeError(f"no CheckpointIO to load {path}")
            return self.wrapped.load_checkpoint(path, map_location=map_location, weights_only=weights_only)
        step_dir = str(path).rsplit("/", 1)[0]
        found = next((c for c in self.core.manager.checkpoints() if c.uri == step_dir), None)
        if found is None:
            raise CheckpointError(f"{path}: no complete checkpoint there any more")
        with self.core.manager.open_file(found, CHECKPOINT_FILE) as handle:
            state = load_torch(handle, found.path(CHECKPOINT_FILE))
        if not isinstance(state, dict) or "state_dict" not in state or "loops" not in state:
            raise CheckpointError(
                f"{path}: not a Lightning checkpoint written by trainguard's "
                "guard (no state_dict/loops); move it out of the checkpoint "
                "directory"
            )
        if map_location is not None:
            state = _to_device(state, map_location)
        return state

    def remove_checkpoint(self, path) -> None:
        if not self._ours(path) and self.wrapped is not None:
            self.wrapped.remove_checkpoint(path)

    def teardown(self) -> None:
        self.core.wait()
        if self.wrapped is not None:
            self.wrapped.teardown()


def _to_device(obj: Any, device) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return type(obj)((k, _to_device(v, device)) for k, v in obj.items())
    if type(obj) in (list, tuple):
        return type(obj)(_to_device(v, device) for v in obj)
    return obj


class ResumableLoader:
    """A training ``DataLoader`` that Lightning can put back where it was, mid-epoch.

    It remembers the RNG states at the moment each epoch's iterator was made (they decide the
    shuffle order) and how many batches it handed out; restored (Lightning calls
    ``load_state_dict`` before it asks for the iterator), it makes the iterator again from those
    states, skips the batches already trained on, and puts the RNG states back as they were. The
    guard wraps every training ``DataLoader`` that is not stateful already; everything else is the
    wrapped loader's.
    """

    def __init__(self, loader) -> None:
        object.__setattr__(self, "loader", loader)
        object.__setattr__(self, "_rng_at_iter", None)
        object.__setattr__(self, "_yielded", 0)
        object.__setattr__(self, "_pending", None)

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str):
        if name == "loader":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.loader, name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self.loader, name, value)  # e.g. Lightning's worker_init_fn

    def __iter__(self):
        pending = self._pending
        object.__setattr__(self, "_pending", None)
        resume_rng = rng_state() if pending else None
        if pending:
            set_rng_state(pending["rng_at_iter"])
        object.__setattr__(self, "_rng_at_iter", rng_state())
        object.__setattr__(self, "_yielded", 0)
        iterator = iter(self.loader)
        for _ in range(pending["yielded"] if pending else 0):
            try:
                next(iterator)
            except StopIteration:
                break
            object.__setattr__(self, "_yielded", self._yielded + 1)
        if resume_rng is not None:
            set_rng_state(resume_rng)
        return self._count(iterator)

    def _count(self, iterator):
        for batch in iterator:
            object.__setattr__(self, "_yielded", self._yielded + 1)
            yield batch

    def state_dict(self) -> dict:
        """Where the loader is: RNG states at the epoch's start and batches handed out."""
        return {"rng_at_iter": self._rng_at_iter, "yielded": self._yielded}

    def load_state_dict(self, state: dict) -> None:
        """Makes the next iterator continue from ``state`` (a finished epoch starts afresh)."""
        ok = isinstance(state, dict) and state.get("rng_at_iter") and state.get("yielded")
        done = False
        with contextlib.suppress(TypeError):  # no length: an iterable dataset
            done = bool(ok) and state["yielded"] >= len(self.loader)
        object.__setattr__(self, "_pending", None if done or not ok else dict(state))


def _wrap_loaders(original, trainer: pl.Trainer, dataloader):
    """``strategy.process_dataloader`` that also makes training loaders resumable."""
    dataloader = original(dataloader)
    if (
        trainer.state.stage == "train"
        and isinstance(dataloader, torch.utils.data.DataLoader)
        and not isinstance(dataloader, _Stateful)
    ):
        return ResumableLoader(dataloader)
    return dataloader


def _scalar(value) -> float | None:
    if isinstance(value, torch.Tensor):
        return float(value.detach().float().item()) if value.numel() == 1 else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


class Guard(pl.Callback):
    """trainguard's checkpoints, resume, preemption and history for a Lightning ``Trainer``.

    Args:
        directory: the checkpoint directory (default ``AIP_CHECKPOINT_DIR``).
        save: when to save: N (every N optimizer steps, default 100) or a ``SavePolicy``
            (``every_seconds`` too). SIGTERM always saves.
        retention: which checkpoints to keep (default the last 3; ``keep_best`` by a logged
            metric such as ``val_loss``).
        async_save: write in the background (the state is copied to the CPU first).
        history: the JSONL history path (default ``TRAINGUARD_HISTORY``); False for none.
        resume: resume from the newest complete checkpoint (default True).
        exit_on_preemption: after the SIGTERM save, exit with 143 (False: stop training).
        save_on_train_end: save the final step too, so that a job restarted after the end does
            not train again.
    """

    def __init__(
        self,
        directory: str | None = None,
        *,
        save: SavePolicy | int | None = None,
        retention: RetentionPolicy | None = None,
        async_save: bool = True,
        history: str | bool | None = None,
        resume: bool = True,
        exit_on_preemption: bool = True,
        save_on_train_end: bool = True,
    ) -> None:
        self._options = GuardOptions(directory, save, retention, async_save, history)
        self.resume = resume
        self.exit_on_preemption = exit_on_preemption
        self.save_on_train_end = save_on_train_end
        self.core: CheckpointCore | None = None
        self.resumed_step: int | None = None
        self._io: GuardCheckpointIO | None = None
        self._logged_step = -1

    @property
    def state_key(self) -> str:
        return "trainguard.Guard"

    # -- set up and restore --

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        if self.core is not None:
            self.core.close()  # a previous fit that ended with an exception
        self.core = core = self._options.core(is_chief=trainer.is_global_zero)
        strategy = trainer.strategy
        self._io = GuardCheckpointIO(core, strategy.checkpoint_io)
        strategy.checkpoint_io = self._io
        strategy.process_dataloader = functools.partial(_wrap_loaders, strategy.process_dataloader, trainer)
        latest = restore_point(core, FRAMEWORK, CHECKPOINT_FILE) if self.resume else None
        if latest is not None:
            # Lightning restores from this right after setup (model, callbacks, loops, optimizers,
            # schedulers); an explicit fit(ckpt_path=...) replaces it.
            trainer._checkpoint_connector._loaded_checkpoint = strategy.load_checkpoint(
                join(latest.uri, CHECKPOINT_FILE)
            )
            self.resumed_step = latest.step
            if core.is_chief:
                note(f"resumed from checkpoint step {latest.step} ({latest.uri})")
        core.open_history(latest.step if latest is not None else None)
        self._logged_step = latest.step if latest is not None else -1

    def state_dict(self) -> dict[str, Any]:
        return {"rng": rng_state()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if state_dict.get("rng"):
            set_rng_state(state_dict["rng"])

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # After Lightning's own signal handlers: ours decides when to save and stop.
        if self.core is not None:
            self.core.install_signal_handlers()

    # -- the loop --

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs, batch, batch_idx: int
    ) -> None:
        core = self.core
        if core is None:
            return
        step = trainer.global_step
        every = max(1, int(getattr(trainer, "log_every_n_steps", 50) or 1))
        if step != self._logged_step and step % every == 0:
            self._logged_step = step
            core.log(step, "train", trainer.current_epoch, self._metrics(trainer, "train"))
        if batch_idx + 1 < trainer.num_training_batches:
            self._save_when_due(trainer)
        # else: saved at the epoch's end, after its validation (a resume would not validate it)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.core is None or trainer.sanity_checking or trainer.state.fn != "fit":
            return
        self.core.log(trainer.global_step, "val", trainer.current_epoch, self._metrics(trainer, "val"))

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        core = self.core
        if core is None:
            return
        step = trainer.global_step
        core.log(step, "train", trainer.current_epoch, self._metrics(trainer, "train", epoch=True))
        self._save_when_due(trainer)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        core = self.core
        if core is None:
            return
        step = trainer.global_step
        if self.save_on_train_end and core.last_saved != step and step > 0:
            self._save(trainer, blocking=True)
        core.close()

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        if self.core is not None:
            self.core.close()  # the save in flight is finished, the history flushed

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit" or self.core is None:
            return
        strategy = trainer.strategy
        if self._io is not None and self._io.wrapped is not None and strategy.checkpoint_io is self._io:
            strategy.checkpoint_io = self._io.wrapped
        strategy.__dict__.pop("process_dataloader", None)
        self.core.close()

    # -- helpers --

    def _save_when_due(self, trainer: pl.Trainer) -> None:
        """Saves when SIGTERM came (then stops) or the policy says so; every rank agrees."""
        core = self.core
        assert core is not None
        step = trainer.global_step
        preempted, due = core.preempted, core.due(step)
        if trainer.world_size > 1:
            preempted = trainer.strategy.reduce_boolean_decision(preempted, all=False)
            due = trainer.strategy.reduce_boolean_decision(due, all=False)
        if preempted:
            if not core.preempted:
                core.mark_preempted()
            self._save(trainer, blocking=True)
            core.stop(step, exit=self.exit_on_preemption)
            trainer.should_stop = True
        elif due:
            self._save(trainer)

    def _metrics(self, trainer: pl.Trainer, split: str, epoch: bool = False) -> dict[str, float]:
        out = {}
        for name, value in trainer.callback_metrics.items():
            if name.endswith("_epoch") != epoch:
                continue
            found, base = split_metric(name)
            number = _scalar(value)
            if found == split and number is not None:
                out[base] = number
        return out

    def _save(self, trainer: pl.Trainer, blocking: bool = False) -> None:
        core = self.core
        assert core is not None
        step = trainer.global_step
        metrics = {
            k: n
            for k, v in trainer.callback_metrics.items()
            if (n := _scalar(v)) is not None and math.isfinite(n)
        }
        request = _Request(step, metrics, blocking)
        if not trainer.is_global_zero:
            core.commit(step, {}, metrics)  # records the step; only rank 0 writes
        trainer.save_checkpoint(
            join(core.directory, f"step-{step:09d}", CHECKPOINT_FILE),
            weights_only=False,
            storage_options=request,
        )
        if blocking:
            core.wait()
