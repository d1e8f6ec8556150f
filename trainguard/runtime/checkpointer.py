"""The framework-agnostic checkpointer: one object a training loop talks to.

A framework adapter (``TorchCheckpointer``, a JAX one) subclasses :class:`Checkpointer` and
implements four hooks; everything else lives here, once:

* **ordering** — ``wait`` for the previous save (its staging buffers are reused) → ``_stage`` (start
  copying the state, on the training thread) → hand the payload to the
  :class:`~trainguard.runtime.checkpoint.CheckpointManager` (written in the background);
* **when** — the :class:`SavePolicy`, a save at each validation when the best checkpoints are kept,
  a save on SIGTERM; every rank decides the same thing (``_agree`` takes the max over ranks);
* **preemption** — SIGTERM sets a flag; the next ``step()`` saves (blocking), closes, and exits
  with 143 (or returns False with ``exit_on_preemption=False``);
* **ranks** — the chief (rank 0) writes ``COMMIT`` and the history; sharded payloads are written by
  every rank;
* **history** — train and validation metrics go to the JSONL history
  (:class:`~trainguard.runtime.history.HistoryWriter`), trimmed to the restored step on resume;
* **restore** — the newest complete checkpoint, refused with one clear
  :class:`~trainguard.errors.CheckpointError` when it is damaged, crafted, of another format, or
  when the directory holds another framework's checkpoint.

Hooks for a subclass: ``format``/``reads`` (class attributes), ``_stage(extra)``,
``_payload(staged, step)``, ``_load(checkpoint, strict)``, and ``_agree(values)`` for multi-process
jobs. See ``torch_checkpointer.py`` for a complete one.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from trainguard.errors import CheckpointError
from trainguard.runtime.checkpoint import (
    Checkpoint,
    CheckpointManager,
    Payload,
    RetentionPolicy,
    SavePolicy,
    Scan,
    Sharded,
    attempt_name,
    note,
    save_policy,
)
from trainguard.runtime.env import VertexEnv
from trainguard.runtime.history import HistoryWriter

__all__ = ["Checkpointer", "Start", "PREEMPTED_EXIT", "FOREIGN_CHECKPOINTS"]

#: The exit status after a SIGTERM save (128 + SIGTERM), as a process killed by it would report.
PREEMPTED_EXIT = 143

#: Files that betray another framework's checkpoint in a directory without trainguard checkpoints.
FOREIGN_CHECKPOINTS: tuple[tuple[str, str], ...] = (
    (r"(^|/)\.metadata$", "a torch.distributed.checkpoint (DCP) checkpoint"),
    (r"(^|/)(_CHECKPOINT_METADATA|_METADATA|_sharding|manifest\.ocdbt)$|^\d+/", "an orbax (JAX) checkpoint"),
    (r"\.ckpt$", "a PyTorch Lightning checkpoint"),
    (r"\.keras$|\.h5$", "a Keras checkpoint"),
    (r"(^|/)checkpoint$|\.index$|\.data-\d{5}-of-\d{5}$", "a TensorFlow checkpoint"),
    (r"\.safetensors$", "a safetensors (Hugging Face) checkpoint"),
    (r"\.(pt|pth|bin|pkl)$", "a model file saved outside trainguard"),
)


@dataclass(frozen=True)
class Start:
    """Where training starts.

    Attributes:
        step: the step of the restored checkpoint (0 on a fresh run): continue at ``step + 1``.
        extra: what was passed as ``extra`` when it was saved (the data position); {} when fresh.
        checkpoint: the restored checkpoint, or None.
    """

    step: int = 0
    extra: dict = field(default_factory=dict)
    checkpoint: Checkpoint | None = None

    @property
    def resumed(self) -> bool:
        """True when a checkpoint was restored."""
        return self.checkpoint is not None


class Checkpointer:
    """Checkpoints, preemption and history for one training loop (subclass per framework).

    Args:
        directory: the checkpoint directory (``gs://``, local, ``/gcs/``; default
            ``$AIP_CHECKPOINT_DIR``).
        save: when to save: a :class:`SavePolicy`, or N to save every N steps (default 100).
        retention: which checkpoints to keep (default: the last 3). With ``keep_best`` > 0, every
            ``step()`` that reports validation metrics saves, so the best one can be kept.
        async_save: write in the background (the state is staged first).
        history: the JSONL history path (None: no history).
        log_every: log the train metrics of every N-th step.
        rank, world_size: this process in the job (the chief, rank 0, commits).
        exit_on_preemption: after the SIGTERM save, exit with 143 (False: ``step()`` returns False).
        handle_sigterm: install the SIGTERM handler (main thread only).
        deadline_s: the retry deadline of each storage call (default: minutes).
    """

    format: ClassVar[str] = ""
    reads: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        directory: str | None = None,
        *,
        save: SavePolicy | int | None = None,
        retention: RetentionPolicy | None = None,
        async_save: bool = True,
        history: str | None = None,
        log_every: int = 1,
        rank: int = 0,
        world_size: int = 1,
        exit_on_preemption: bool = True,
        handle_sigterm: bool = True,
        deadline_s: float | None = None,
    ) -> None:
        save = save_policy(save)
        if not 0 <= rank < max(1, world_size):
            raise ValueError(f"rank {rank} is outside world size {world_size}")
        self.rank, self.world_size = rank, max(1, world_size)
        self.manager = CheckpointManager(
            directory,
            save=save,
            retention=retention,
            async_save=async_save,
            is_chief=rank == 0,
            deadline_s=deadline_s,
        )
        self.history_path = history
        self.history: HistoryWriter | None = None
        self.log_every = max(1, int(log_every))
        self.exit_on_preemption = exit_on_preemption
        self._closed = False
        self._restored: Start | None = None
        self._held_s = 0.0
        if handle_sigterm and threading.current_thread() is threading.main_thread():
            self.manager.install_sigterm_handler()

    @staticmethod
    def env_kwargs(
        environ: Mapping[str, str] | None = None, default_base: str = "./trainguard-output"
    ) -> dict:
        """``directory``, ``history``, ``rank`` and ``world_size`` from Vertex's environment
        contract (``AIP_CHECKPOINT_DIR``, ``TRAINGUARD_HISTORY``, ``RANK``, ``WORLD_SIZE``)."""
        env = VertexEnv.from_environ(environ, default_base=default_base)
        return {
            "directory": env.checkpoint_dir,
            "history": env.history_path,
            "rank": env.rank,
            "world_size": env.world_size,
        }

    @property
    def is_chief(self) -> bool:
        """True on rank 0, which writes COMMIT markers and the history."""
        return self.rank == 0

    @property
    def directory(self) -> str:
        return self.manager.directory

    @property
    def stall_s(self) -> float:
        """Seconds the training thread has been held by checkpointing so far (waiting for the
        previous save, starting the snapshot, blocking saves)."""
        return self._held_s

    @property
    def preempted(self) -> bool:
        """True once SIGTERM arrived here (another rank's SIGTERM is seen at the next ``step``)."""
        return self.manager.preempted

    # -- restore --

    def restore(self, step: int | None = None, *, strict: bool = True) -> Start:
        """Loads the newest complete checkpoint (or that of ``step``) into the training state.

        Args:
            step: restore this step rather than the newest.
            strict: a checkpoint that lacks state the loop has (an optimizer) is an error; False
                loads what it has and leaves the rest as it is.

        Returns:
            Where to continue: ``Start(step=0, extra={})`` on a fresh run.

        Raises:
            CheckpointError: the checkpoint cannot be used as it is (damaged, crafted, another
                format, does not fit), or the directory holds another framework's checkpoint.
                Nothing is deleted; the message names the intact checkpoint to fall back to.
        """
        self.manager.raise_pending()
        scan = self.manager.scan()
        chosen = self._choose(scan, step)
        if chosen is None:
            self._refuse_foreign(scan)
            if scan.incomplete and self.is_chief:
                note(
                    f"ignored {len(scan.incomplete)} incomplete save(s) in {self.directory} "
                    "(a job stopped while writing; removed by the next save)"
                )
            start = Start()
        else:
            if not self._accepts(chosen):
                raise CheckpointError(
                    f"{chosen.uri} was saved by another checkpointer (format {chosen.format!r}); "
                    f"{type(self).__name__} reads {', '.join(self.reads)}. Point the checkpoint "
                    "directory at this framework's run, or at an empty directory to start afresh"
                )
            try:
                extra = self._load(chosen, strict)
            except CheckpointError as exc:
                raise CheckpointError(f"{exc}. {self.manager.fallback_hint(chosen.step, scan)}") from None
            start = Start(chosen.step, dict(extra), chosen)
            if self.is_chief:
                note(f"resumed from checkpoint step {chosen.step} ({chosen.uri})")
        self.manager._last_step = start.step if start.resumed else None
        self._open_history(start.step if start.resumed else None)
        self._restored = start
        return start

    def _choose(self, scan: Scan, step: int | None) -> Checkpoint | None:
        if step is not None:
            found = next((c for c in scan.complete if c.step == step), None)
            if found is None:
                have = ", ".join(str(c.step) for c in scan.complete[-10:]) or "none"
                why = f" ({scan.damaged[step]})" if step in scan.damaged else ""
                raise CheckpointError(
                    f"no complete checkpoint of step {step} in {self.directory}{why}; complete ones: {have}"
                )
            return found
        latest = scan.complete[-1] if scan.complete else None
        newer = [s for s in scan.damaged if latest is None or s > latest.step]
        if newer:
            worst = max(newer)
            raise CheckpointError(
                f"{self.manager._uri(worst)} is damaged: {scan.damaged[worst]}. "
                + self.manager.fallback_hint(worst, scan)
            )
        return latest

    def _refuse_foreign(self, scan: Scan) -> None:
        for name in scan.others:
            for pattern, what in FOREIGN_CHECKPOINTS:
                if re.search(pattern, name):
                    raise CheckpointError(
                        f"{self.directory} holds {what} ({name}) but no trainguard checkpoint "
                        "(step-NNNNNNNNN/COMMIT), so this run would start from scratch beside it. "
                        "Point the checkpoint directory (AIP_CHECKPOINT_DIR) at an empty directory, "
                        "or load that checkpoint into the model yourself before training"
                    )

    def _open_history(self, resume_step: int | None) -> None:
        if self.history is not None or not self.history_path:
            return
        self.history = HistoryWriter(self.history_path, resume_step=resume_step, enabled=self.is_chief)

    def plan(self, total_steps: int) -> None:
        """Declares how many steps the run will take, after ``restore()`` (the in-flight guard
        then says what stopping it saved: the time to that step at the pace so far)."""
        if self.history is not None:
            self.history.plan(total_steps)

    # -- the loop --

    def step(
        self,
        step: int,
        loss: float | None = None,
        *,
        extra: Mapping | None = None,
        epoch: int | None = None,
        val: Mapping[str, float] | None = None,
        **metrics: float,
    ) -> bool:
        """Call once per training step, on every rank, after ``optimizer.step()``.

        Logs the history, saves when due (in the background), and handles SIGTERM.

        Args:
            step: the step just completed (1, 2, …).
            loss: the training loss (history, and ``loss`` in the COMMIT metrics).
            extra: plain data to restore with the state: the data position (epoch, batch).
            epoch: recorded in the history.
            val: validation metrics of this step (``{"loss": 0.3}`` → ``val_loss``).
            **metrics: more training metrics (``lr=…``).

        Returns:
            True to go on; False after a SIGTERM save with ``exit_on_preemption=False``.
        """
        self._check_open()
        if self._restored is None:
            self._open_history(None)
        train = {"loss": loss, **metrics} if loss is not None else dict(metrics)
        if self.history is not None:
            if train and step % self.log_every == 0:
                self.history.log(step, "train", epoch=epoch, **train)
            if val:
                self.history.log(step, "val", epoch=epoch, **val)
        recorded = {**train, **{f"val_{k}": v for k, v in (val or {}).items()}}
        due = self.manager.should_save(step) or bool(val and self.manager.retention.keep_best)
        nonce = secrets.randbits(47) + 1 if self.is_chief else 0
        want, preempted, nonce = self._agree([int(due), int(self.manager.preempted), nonce])
        if want or preempted:
            self._save(step, extra, recorded, blocking=bool(preempted), attempt=attempt_name(nonce))
        if not preempted:
            return True
        self.close()
        if self.is_chief:
            note(f"{self.manager.stop_reason}: saved step {step}, stopping")
        if self.exit_on_preemption:
            raise SystemExit(self.manager.stop_exit_code)
        return False

    def save(
        self,
        step: int,
        *,
        extra: Mapping | None = None,
        metrics: Mapping[str, float] | None = None,
        blocking: bool = False,
    ) -> None:
        """Saves now (call on every rank), e.g. the final step."""
        self._check_open()
        nonce = secrets.randbits(47) + 1 if self.is_chief else 0
        (nonce,) = self._agree([nonce])
        self._save(step, extra, dict(metrics or {}), blocking=blocking, attempt=attempt_name(nonce))

    def _save(self, step: int, extra: Mapping | None, metrics: dict, *, blocking: bool, attempt: str) -> None:
        started = time.perf_counter()
        try:
            self._save_now(step, extra, metrics, blocking=blocking, attempt=attempt)
        finally:
            self._held_s += time.perf_counter() - started

    def _save_now(
        self, step: int, extra: Mapping | None, metrics: dict, *, blocking: bool, attempt: str
    ) -> None:
        if self.history is not None:
            self.history.flush()  # the history up to this step is durable with the checkpoint
        self.manager.wait()  # the previous save is written: its staging buffers are free
        if not self.is_chief and not self.all_ranks_write:
            self.manager.save(step, {}, metrics)  # remembers the step; writes nothing
            return
        staged = self._stage(dict(extra or {}), blocking=blocking)
        self.manager.save(
            step,
            self._payload(staged, step),
            metrics,
            blocking=True if blocking else None,
            format=self.format,
            attempt=attempt,
            meta=self._meta(),
        )

    def wait(self) -> None:
        """Blocks until the save in flight is written; raises its error."""
        self.manager.wait()

    def close(self) -> None:
        """Waits for the save in flight, closes the history, puts back the SIGTERM handler."""
        if self._closed:
            return
        self._closed = True
        try:
            self.manager.wait()
        finally:
            self.manager.uninstall_sigterm_handler()
            if self.history is not None:
                self.history.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- hooks --

    #: True when every rank writes part of the payload (sharded); else only the chief writes.
    all_ranks_write: bool = False

    def _stage(self, extra: dict, blocking: bool = False) -> object:
        """Starts copying the training state (training thread); returns what ``_payload`` needs.
        With ``blocking`` the save completes before training goes on: no copy is needed."""
        raise NotImplementedError

    def _payload(self, staged: object, step: int) -> Payload | Sharded:
        """The payload for the manager (runs the serialisation on the saver thread)."""
        raise NotImplementedError

    def _load(self, checkpoint: Checkpoint, strict: bool) -> dict:
        """Loads ``checkpoint`` into the training state; returns its ``extra``."""
        raise NotImplementedError

    def _accepts(self, checkpoint: Checkpoint) -> bool:
        """True when ``_load`` can read ``checkpoint`` (by default: its format is in ``reads``)."""
        return checkpoint.format in self.reads

    def _agree(self, values: list[int]) -> list[int]:
        """The element-wise max of ``values`` over all ranks (one process: ``values``)."""
        return values

    def _meta(self) -> dict:
        """More COMMIT fields."""
        return {"world_size": self.world_size}
