"""Hugging Face ``transformers``: a ``Trainer`` checkpointed, resumed and preempted safely.

::

    from trainguard.runtime.hf import Guard

    guard = Guard()
    trainer = Trainer(model=model, args=args, train_dataset=train, callbacks=[guard])
    trainer.train(resume_from_checkpoint=guard.resume_from())

``Guard`` is a ``TrainerCallback``. The ``Trainer`` keeps writing its own checkpoints
(``checkpoint-N`` in ``args.output_dir``, best on a fast local disk) when ``save_strategy`` says;
after each one the guard

* commits it through trainguard's manager: ``<AIP_CHECKPOINT_DIR>/step-NNNNNNNNN/`` with the same
  files, then an atomic ``COMMIT``, on local disks, ``/gcs/`` FUSE mounts and ``gs://`` alike, in the
  background (the files are hard-linked first, so the ``Trainer`` may rotate its own copy away).
  ``training_args.bin`` is left out: it is a pickle, and a resume does not read it;

``guard.resume_from()`` gives ``resume_from_checkpoint`` the newest *complete* checkpoint there (None
on a fresh run), downloaded first when it is on ``gs://``; its torch files are checked with
``torch.load(weights_only=True)`` before the ``Trainer`` reads them, so a crafted or damaged file
is refused by name. And the guard

* on SIGTERM (Vertex's preemption notice) asks the ``Trainer`` to save at the end of the running
  step, commits that checkpoint blocking, and exits with status 143;
* moves a save that falls on an epoch's last step (periodic or SIGTERM) to just after that epoch's
  evaluation (``eval_strategy="epoch"``): the ``Trainer`` would otherwise save before evaluating,
  and a resume from there neither evaluates that epoch nor replays the evaluation's draws from the
  RNG, so it would not match an uninterrupted run;
* writes trainguard's JSONL history (``TRAINGUARD_HISTORY``) from the ``Trainer``'s logs: the
  training logs (``loss``, ``grad_norm``, ``learning_rate``) as the ``train`` split, ``eval_*`` as
  ``val``; timings and the end-of-run summary are left out; ``step`` is ``state.global_step``.

The ``Trainer`` restores everything else itself (weights, optimizer, scheduler, RNG states, the
data position through its seedable sampler), so a resumed run ends with the same weights as an
uninterrupted one. One difference it keeps: its train ``loss`` is a mean over the steps since the
last log, and a resume restarts that mean, so with ``logging_steps`` > 1 the first train record
after a resume that fell between two logs averages fewer steps.

Single-node jobs (one or more processes on one machine); the chief process commits.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import torch
from transformers import TrainerCallback

from trainguard.errors import CheckpointError
from trainguard.runtime.checkpoint import Checkpoint, RetentionPolicy, Stream, safe_relative_name
from trainguard.runtime.core import CheckpointCore
from trainguard.runtime.env import VertexEnv
from trainguard.runtime.guard_base import GuardOptions, load_torch, note, restore_point, split_metric
from trainguard.runtime.storage import join

__all__ = ["Guard", "STATE_FILE", "LEFT_OUT"]

#: Every ``Trainer`` checkpoint holds it; a checkpoint without it is not one.
STATE_FILE = "trainer_state.json"
FRAMEWORK = "hf"  # the COMMIT format of the guard's checkpoints
#: Files of a ``Trainer`` checkpoint that are not committed (a pickle that a resume never reads).
LEFT_OUT = frozenset({"training_args.bin"})
_TORCH_SUFFIXES = (".pt", ".pth", ".bin")
_NOT_METRICS = ("epoch", "total_flos", "step")
_STAGING = ".trainguard-staging"


def _copier(path: str):
    def write(handle) -> None:
        with open(path, "rb") as source:
            shutil.copyfileobj(source, handle, 8 << 20)

    return write


def _link_or_copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:  # another filesystem, or one without hard links (a FUSE mount)
        shutil.copyfile(source, target)


class Guard(TrainerCallback):
    """trainguard's checkpoints, resume, preemption and history for a ``transformers.Trainer``.

    Args:
        directory: the checkpoint directory (default ``AIP_CHECKPOINT_DIR``).
        retention: which committed checkpoints to keep (default the last 3; ``keep_best`` by a
            metric of the last evaluation such as ``eval_loss``). ``save_total_limit`` still
            governs the ``Trainer``'s own copies in ``output_dir``.
        async_save: commit in the background.
        history: the JSONL history path (default ``TRAINGUARD_HISTORY``); False for none.
        exit_on_preemption: after the SIGTERM save, exit with 143 (False: stop training).
    """

    def __init__(
        self,
        directory: str | None = None,
        *,
        retention: RetentionPolicy | None = None,
        async_save: bool = True,
        history: str | bool | None = None,
        exit_on_preemption: bool = True,
    ) -> None:
        # save: unused, the Trainer decides when to save (save_strategy); a SIGTERM saves too.
        self._options = GuardOptions(directory, retention=retention, async_save=async_save, history=history)
        self.exit_on_preemption = exit_on_preemption
        self.core: CheckpointCore | None = None
        self.resumed_step: int | None = None
        self._download: str | None = None
        self._staged: list[Path] = []
        self._eval: dict[str, float] = {}
        self._deferred = False  # a save moved from an epoch's last step to after its evaluation

    def _core(self, is_chief: bool | None = None) -> CheckpointCore:
        if self.core is None:
            chief = VertexEnv.from_environ().is_chief if is_chief is None else is_chief
            self.core = self._options.core(is_chief=chief)
        return self.core

    # -- resume --

    def resume_from(self) -> str | None:
        """The local directory of the newest complete checkpoint, for
        ``trainer.train(resume_from_checkpoint=...)``; None on a fresh run.

        Raises:
            CheckpointError: that checkpoint is not a ``Trainer`` checkpoint, or one of its torch
                files holds more than tensors and plain data (nothing is deleted).
        """
        core = self._core()
        latest = restore_point(core, FRAMEWORK, STATE_FILE)
        if latest is None:
            return None
        local = self._local_copy(core, latest)
        self._check_torch_files(local, latest)
        self.resumed_step = latest.step
        if core.is_chief:
            note(f"resuming from checkpoint step {latest.step} ({latest.uri})")
        return local

    def _local_copy(self, core: CheckpointCore, checkpoint: Checkpoint) -> str:
        """A local directory holding the checkpoint's files, for the Trainer to read by path (the
        manager has checked that COMMIT names plain relative files that are there)."""
        root = checkpoint.root
        if not root.startswith("gs://"):
            for name in checkpoint.files:
                path = join(root, name)
                if os.path.islink(path) or not os.path.isfile(path):
                    raise CheckpointError(
                        f"{path}: not a regular file (symbolic links are not "
                        "followed); move the checkpoint out of the checkpoint "
                        "directory"
                    )
            return root
        target = Path(tempfile.mkdtemp(prefix="trainguard-resume-")) / f"checkpoint-{checkpoint.step}"
        store = core.manager.store
        for name in checkpoint.files:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            store.download_file(join(root, name), str(target / name))
        self._download = str(target.parent)
        return str(target)

    @staticmethod
    def _check_torch_files(local: str, checkpoint: Checkpoint) -> None:
        """Every torch file loads with ``weights_only=True`` (memory-mapped: tensors not read)."""
        from transformers.trainer_pt_utils import safe_globals

        for name in checkpoint.files:
            if not name.endswith(_TORCH_SUFFIXES):
                continue
            path = os.path.join(local, name)
            where = checkpoint.path(name)  # the name a user can find
            with safe_globals(), open(path, "rb") as handle:  # numpy RNG states, as the Trainer
                try:
                    torch.load(path, map_location="cpu", weights_only=True, mmap=True)
                except Exception:  # noqa: BLE001 - load_torch names the file and the cause
                    load_torch(handle, where)

    # -- the run --

    def on_init_end(self, args, state, control, **kwargs):
        self._core(is_chief=args.process_index == 0)
        if args.save_strategy == "no" and self.core is not None and self.core.is_chief:
            note(
                "save_strategy='no': only a SIGTERM saves a checkpoint; set save_strategy "
                "and save_steps to save periodically"
            )

    def on_train_begin(self, args, state, control, **kwargs):
        core = self._core(is_chief=args.process_index == 0)
        core.open_history(state.global_step if state.global_step > 0 else None)
        core.install_signal_handlers()

    def on_step_end(self, args, state, control, **kwargs):
        preempted = self._preempted(args)
        epoch_end = state.epoch is not None and state.epoch > 0 and float(state.epoch).is_integer()
        if epoch_end and args.eval_strategy == "epoch" and (preempted or control.should_save):
            # The epoch's evaluation runs next (and a resume would not run it again): save after
            # it, so the checkpoint's RNG states and the history include it.
            control.should_save = False
            self._deferred = True
        elif preempted:
            control.should_save = True

    def on_epoch_end(self, args, state, control, **kwargs):
        if self._deferred or self._preempted(args):
            control.should_save = True
            self._deferred = False

    def on_log(self, args, state, control, logs: Mapping | None = None, **kwargs):
        core = self.core
        if core is None or not logs or "train_runtime" in logs:
            return  # the end-of-run summary: its means cover only this process's steps
        by_split: dict[str, dict[str, float]] = {}
        for name, value in logs.items():
            if name in _NOT_METRICS or name.endswith(("_runtime", "_per_second")):
                continue
            if not isinstance(value, int | float) or isinstance(value, bool):
                continue
            split, base = split_metric(name)
            by_split.setdefault(split, {})[base] = float(value)
            if split == "val":
                self._eval[name] = float(value)
        epoch = None
        if isinstance(logs.get("epoch"), int | float):
            epoch = max(0, int(-(-float(logs["epoch"]) // 1)) - 1)  # 1.0 ends epoch 0
        for split, metrics in by_split.items():
            core.log(state.global_step, split, epoch, metrics)

    def on_save(self, args, state, control, **kwargs):
        core = self.core
        if core is None:
            return
        step = state.global_step
        preempted = core.preempted
        if core.is_chief:
            folder = Path(args.output_dir) / f"checkpoint-{step}"
            if not (folder / STATE_FILE).is_file():
                raise CheckpointError(
                    f"{folder}: the Trainer's checkpoint of step {step} is not "
                    "there; trainguard's guard needs args.output_dir as the "
                    "Trainer saved it (no hyper-parameter search)"
                )
            core.wait()
            self._clean_staging()
            staged = self._stage(folder, Path(args.output_dir) / _STAGING / f"step-{step}")
            payload = {name: Stream(_copier(str(staged / name))) for name in sorted(self._names(staged))}
            core.commit(step, payload, self._eval, blocking=preempted, format=FRAMEWORK)
        else:
            core.commit(step, {}, self._eval)  # records the step; the chief writes
        if preempted:
            core.stop(step, exit=self.exit_on_preemption)
            control.should_training_stop = True

    def on_train_end(self, args, state, control, **kwargs):
        if self.core is not None:
            self.core.close()
            self._clean_staging()
        if self._download:
            shutil.rmtree(self._download, ignore_errors=True)
            self._download = None

    # -- helpers --

    def _preempted(self, args) -> bool:
        """SIGTERM here or on any other process (they must all stop at the same step)."""
        core = self.core
        flag = bool(core is not None and core.preempted)
        if args.world_size > 1 and torch.distributed.is_available() and torch.distributed.is_initialized():
            tensor = torch.tensor([int(flag)], device=args.device)
            torch.distributed.all_reduce(tensor, op=torch.distributed.ReduceOp.MAX)
            flag = bool(tensor.item())
            if flag and core is not None:
                core.mark_preempted()
        return flag

    @staticmethod
    def _names(folder: Path) -> list[str]:
        return [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()]

    def _stage(self, folder: Path, staging: Path) -> Path:
        """Hard links to the checkpoint's files: the Trainer may delete its folder meanwhile."""
        shutil.rmtree(staging, ignore_errors=True)
        for name in self._names(folder):
            if name in LEFT_OUT or not safe_relative_name(name):
                continue
            _link_or_copy(folder / name, staging / name)
        self._staged.append(staging)
        return staging

    def _clean_staging(self) -> None:
        for staged in self._staged:
            shutil.rmtree(staged, ignore_errors=True)
            with contextlib.suppress(OSError):
                staged.parent.rmdir()
        self._staged = []
