"""The training-loop checkpointer: one object a loop talks to, for any framework.

:class:`Checkpointer` drives the :class:`~trainguard.runtime.core.CheckpointCore` (save decisions,
SIGTERM, history, closing) from a loop's ``restore()`` / ``step()`` / ``close()``; what differs
between frameworks is an :class:`Engine`, the typed extension point:

* **staging** — ``stage(state, extra, slot)`` starts copying the training state on the training
  thread, after the previous save finished (its staging buffers are reused);
* **writing** — ``payload(staged, slot)`` is what the saver thread writes: named files, or a
  :class:`~trainguard.runtime.checkpoint.Sharded` writer every rank runs;
* **reading** — ``load(checkpoint, target, strict=, store=)`` fits a checkpoint into the training
  state and returns the data position (``extra``) and, for value states (JAX), the restored state;
* **ranks** — ``agree(values)`` is the element-wise max over the job's processes, so every rank
  decides the same thing at each step.

The engine says whether the loop hands it the state at each call (``needs_state``: a JAX pytree is
a value, a new one every step) or holds references to it (a PyTorch model and optimizer).
``TorchCheckpointer`` and ``JaxCheckpointer`` are this class with their engine; a new framework is
``Checkpointer(MyEngine(...), directory)``.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from trainguard.errors import CheckpointError, ConfigError
from trainguard.runtime.checkpoint import (
    Checkpoint,
    CheckpointManager,
    Payload,
    RetentionPolicy,
    SavePolicy,
    Sharded,
    attempt_name,
    note,
)
from trainguard.runtime.core import FOREIGN_CHECKPOINTS, PREEMPTED_EXIT, CheckpointCore
from trainguard.runtime.env import VertexEnv
from trainguard.runtime.history import HistoryWriter
from trainguard.runtime.storage import FileStore

__all__ = ["Checkpointer", "Engine", "Restored", "Slot", "Start", "PREEMPTED_EXIT", "FOREIGN_CHECKPOINTS"]

S = TypeVar("S")  # the training state a loop hands over (None where the engine holds references)
St = TypeVar("St")  # what an engine's stage() hands its payload()


@dataclass(frozen=True)
class Start(Generic[S]):
    """Where training starts.

    Attributes:
        step: the step of the restored checkpoint (0 on a fresh run): continue at ``step + 1``.
        extra: what was passed as ``extra`` when it was saved (the data position); {} when fresh.
        checkpoint: the restored checkpoint, or None.
        state: for engines whose state is a value (JAX): the restored state, or on a fresh run the
            target as given; None for engines that load into objects (PyTorch).
    """

    step: int = 0
    extra: dict = field(default_factory=dict)
    checkpoint: Checkpoint | None = None
    state: S | None = None

    @property
    def resumed(self) -> bool:
        """True when a checkpoint was restored."""
        return self.checkpoint is not None


@dataclass(frozen=True)
class Slot:
    """Where one save goes.

    Attributes:
        step: the step saved.
        uri: the attempt directory its files go into (every rank of a sharded save gets the same).
        store: the storage to write through.
        blocking: the training thread waits for this save (a stop's save): no copy is needed.
    """

    step: int
    uri: str
    store: FileStore
    blocking: bool = False


@dataclass(frozen=True)
class Restored(Generic[S]):
    """What an engine read from a checkpoint: the data position, and the state when it is a value."""

    extra: dict
    state: S | None = None


class Engine(Generic[S, St]):
    """What a framework adds to the checkpointer (subclass it; see ``torch_checkpointer.py``).

    Attributes:
        format: recorded in ``COMMIT``: who can read the checkpoint.
        reads: the formats ``load`` reads.
        all_ranks_write: every rank writes part of the payload (sharded); else only the chief.
        needs_state: ``step()`` and ``save()`` must pass ``state=`` (and ``restore`` a target).
        rank, world_size: this process in the job (the chief, rank 0, commits).
    """

    format: str = ""
    reads: tuple[str, ...] = ()
    all_ranks_write: bool = False
    needs_state: bool = False

    def __init__(self, rank: int = 0, world_size: int = 1) -> None:
        for name, value, least in (("rank", rank, 0), ("world_size", world_size, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ConfigError(f"{name}={value!r}: pass a whole number >= {least}")
        if rank >= world_size:
            raise ConfigError(
                f"rank {rank} is outside world size {world_size}: ranks run 0..{world_size - 1}"
            )
        self.rank, self.world_size = rank, world_size

    def accepts(self, checkpoint: Checkpoint) -> bool:
        """True when ``load`` can read ``checkpoint`` (by default: its format is in ``reads``)."""
        return checkpoint.format in self.reads

    def stage(self, state: S | None, extra: dict, slot: Slot) -> St:
        """Starts copying the training state (training thread); returns what ``payload`` needs."""
        raise NotImplementedError

    def payload(self, staged: St, slot: Slot) -> Payload | Sharded:
        """The payload for the manager (its serialisation runs on the saver thread)."""
        raise NotImplementedError

    def load(
        self, checkpoint: Checkpoint, target: S | None, *, strict: bool, store: FileStore
    ) -> Restored[S]:
        """Loads ``checkpoint`` into the training state (or the shape of ``target``)."""
        raise NotImplementedError

    def agree(self, values: list[int]) -> list[int]:
        """The element-wise max of ``values`` over all ranks (one process: ``values``)."""
        return values

    def meta(self) -> dict:
        """More ``COMMIT`` fields (versions, the world size)."""
        return {"world_size": self.world_size}

    def held_s(self) -> float:
        """Seconds the engine held the training thread outside ``step()`` (waiting for a copy)."""
        return 0.0

    def close(self) -> None:
        """Releases what the engine holds (after the last save is written)."""


class Checkpointer(Generic[S]):
    """Checkpoints, preemption and history for one training loop.

    Args:
        engine: the framework's part (how the state is staged, written and read).
        directory: the checkpoint directory (``gs://``, local, ``/gcs/``; default
            ``$AIP_CHECKPOINT_DIR``).
        save: when to save: a :class:`SavePolicy`, or N to save every N steps (default 100).
        retention: which checkpoints to keep (default: the last 3). With ``keep_best`` > 0, every
            ``step()`` that reports validation metrics saves, so the best one can be kept.
        async_save: write in the background (the state is staged first).
        history: the JSONL history path (None: no history).
        log_every: log the train metrics of every N-th step.
        exit_on_preemption: after the SIGTERM save, exit with 143 (False: ``step()`` returns False).
        handle_sigterm: install the SIGTERM handler (main thread only).
        deadline_s: the retry deadline of each storage call (default: minutes).
        store: the storage to write through (default: the one for ``directory``).

    Raises:
        ConfigError: an option is invalid (the message says what to pass).
    """

    def __init__(
        self,
        engine: Engine[S, Any],
        directory: str | None = None,
        *,
        save: SavePolicy | int | None = None,
        retention: RetentionPolicy | None = None,
        async_save: bool = True,
        history: str | None = None,
        log_every: int = 1,
        exit_on_preemption: bool = True,
        handle_sigterm: bool = True,
        deadline_s: float | None = None,
        store: FileStore | None = None,
    ) -> None:
        if not isinstance(log_every, int) or isinstance(log_every, bool) or log_every < 1:
            raise ConfigError(f"log_every={log_every!r}: pass a whole number >= 1 (log every N-th step)")
        if history is not None and not isinstance(history, str):
            raise ConfigError(f"history={history!r}: pass the JSONL history's path, or None for no history")
        self.engine = engine
        self.core = CheckpointCore(
            directory,
            save=save,
            retention=retention,
            async_save=async_save,
            is_chief=engine.rank == 0,
            history=history,
            store=store,
            deadline_s=deadline_s,
        )
        self.log_every = log_every
        self.exit_on_preemption = bool(exit_on_preemption)
        self._closed = False
        self._restored: Start[S] | None = None
        self._held_s = 0.0
        if handle_sigterm and threading.current_thread() is threading.main_thread():
            self.core.install_signal_handlers()

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
    def rank(self) -> int:
        """This process's rank in the job."""
        return self.engine.rank

    @property
    def world_size(self) -> int:
        """The number of processes in the job."""
        return self.engine.world_size

    @property
    def is_chief(self) -> bool:
        """True on rank 0, which writes COMMIT markers and the history."""
        return self.engine.rank == 0

    @property
    def format(self) -> str:
        """The format this checkpointer records in ``COMMIT``."""
        return self.engine.format

    @property
    def directory(self) -> str:
        """The checkpoint directory."""
        return self.core.directory

    @property
    def manager(self) -> CheckpointManager:
        """The storage layer (list the checkpoints: ``ckpt.manager.checkpoints()``)."""
        return self.core.manager

    @property
    def history(self) -> HistoryWriter | None:
        """The history writer (None before ``restore()``/the first ``step()``, or without one)."""
        return self.core.history

    @property
    def stall_s(self) -> float:
        """Seconds the training thread has been held by checkpointing so far (waiting for the
        previous save, starting the snapshot, blocking saves, and waiting for a copy)."""
        return self._held_s + self.engine.held_s()

    @property
    def preempted(self) -> bool:
        """True once SIGTERM arrived here (another rank's SIGTERM is seen at the next ``step``)."""
        return self.core.preempted

    # -- restore --

    def restore(self, target: S | None = None, step: int | None = None, *, strict: bool = True) -> Start[S]:
        """Loads the newest complete checkpoint (or that of ``step``) into the training state.

        Args:
            target: for engines whose state is a value (JAX): the state as freshly initialised,
                whose tree, shapes, dtypes and shardings the restored one takes.
            step: restore this step rather than the newest.
            strict: a checkpoint that lacks state the loop has (an optimizer) is an error; False
                loads what it has and leaves the rest as it is.

        Returns:
            Where to continue: ``Start(step=0, extra={})`` on a fresh run.

        Raises:
            CheckpointError: the checkpoint cannot be used as it is (damaged, crafted, another
                format, does not fit), or the directory holds another framework's checkpoint.
                Nothing is deleted; the message names the intact checkpoint to fall back to.
            ConfigError: ``target`` is missing where the engine needs one, or given where not.
        """
        self._check_state(target, "restore", "a target: the state as freshly initialised")
        engine = self.engine
        chosen = self.core.restore_point(
            step,
            accepts=engine.accepts,
            reader=type(self).__name__,
            reads=", ".join(engine.reads),
            refuse_foreign=True,
        )
        if chosen is None:
            start: Start[S] = Start(state=target)
        else:
            try:
                restored = engine.load(chosen, target, strict=strict, store=self.core.manager.store)
            except CheckpointError as exc:
                raise CheckpointError(f"{exc}. {self.core.fallback_hint(chosen.step)}") from None
            start = Start(chosen.step, dict(restored.extra), chosen, restored.state)
            if self.is_chief:
                note(f"resumed from checkpoint step {chosen.step} ({chosen.uri})")
        if self.core.history is None:
            self.core.open_history(start.step if start.resumed else None)
        self._restored = start
        return start

    def plan(self, total_steps: int) -> None:
        """Declares how many steps the run will take, after ``restore()`` (the in-flight guard
        then says what stopping it saved: the time to that step at the pace so far)."""
        self.core.plan(total_steps)

    # -- the loop --

    def step(
        self,
        step: int,
        loss: float | None = None,
        *,
        state: S | None = None,
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
            state: the state after the step, for engines whose state is a value (JAX).
            extra: plain data to restore with the state: the data position (epoch, batch).
            epoch: recorded in the history.
            val: validation metrics of this step (``{"loss": 0.3}`` → ``val_loss``).
            **metrics: more training metrics (``lr=…``).

        Returns:
            True to go on; False after a SIGTERM save with ``exit_on_preemption=False``.
        """
        self._check_open()
        self._check_state(state, "step", "state=, the state after this step")
        core = self.core
        if self._restored is None and core.history is None:
            core.open_history(None)
        train = {"loss": loss, **metrics} if loss is not None else dict(metrics)
        if train and step % self.log_every == 0:
            core.log(step, "train", epoch, train)
        if val:
            core.log(step, "val", epoch, val)
        recorded = {**train, **{f"val_{k}": v for k, v in (val or {}).items()}}
        due = core.due(step, validated=bool(val))
        nonce = secrets.randbits(47) + 1 if self.is_chief else 0
        want, preempted, nonce = self.engine.agree([int(due), int(core.preempted), nonce])
        if preempted and not core.preempted:
            core.mark_preempted()  # another rank got SIGTERM: stop at the same step as it
        if want or preempted:
            self._save(step, state, extra, recorded, blocking=bool(preempted), attempt=attempt_name(nonce))
        if not preempted:
            return True
        self.close()
        return core.stop(step, exit=self.exit_on_preemption)

    def save(
        self,
        step: int,
        *,
        state: S | None = None,
        extra: Mapping | None = None,
        metrics: Mapping[str, float] | None = None,
        blocking: bool = False,
    ) -> None:
        """Saves now (call on every rank), e.g. the final step."""
        self._check_open()
        self._check_state(state, "save", "state=, the state to save")
        nonce = secrets.randbits(47) + 1 if self.is_chief else 0
        (nonce,) = self.engine.agree([nonce])
        self._save(step, state, extra, dict(metrics or {}), blocking=blocking, attempt=attempt_name(nonce))

    def _save(
        self,
        step: int,
        state: S | None,
        extra: Mapping | None,
        metrics: dict,
        *,
        blocking: bool,
        attempt: str,
    ) -> None:
        started = time.perf_counter()
        try:
            self.core.wait()  # the previous save is written: its staging buffers are free
            if not self.is_chief and not self.engine.all_ranks_write:
                self.core.commit(step, {}, metrics)  # records the step; the chief writes
                return
            slot = Slot(step, self.core.manager.attempt_uri(step, attempt), self.core.manager.store, blocking)
            staged = self.engine.stage(state, dict(extra or {}), slot)
            self.core.commit(
                step,
                self.engine.payload(staged, slot),
                metrics,
                blocking=blocking,
                format=self.engine.format,
                attempt=attempt,
                meta=self.engine.meta(),
            )
        finally:
            self._held_s += time.perf_counter() - started

    def wait(self) -> None:
        """Blocks until the save in flight is written; raises its error."""
        self.core.wait()

    def close(self) -> None:
        """Waits for the save in flight, closes the history, puts back the SIGTERM handler."""
        if self._closed:
            return
        self._closed = True
        try:
            self.core.close()
        finally:
            self.engine.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")

    def _check_state(self, state: object, call: str, what: str) -> None:
        name = type(self).__name__
        if self.engine.needs_state and state is None:
            raise ConfigError(f"{name}.{call}() needs {what}")
        if not self.engine.needs_state and state is not None:
            raise ConfigError(
                f"{name}.{call}() reads the objects it was given (model, optimizer, ...) and takes "
                "no state" + (": pass step= by keyword to restore a chosen step" if call == "restore" else "")
            )

    def __enter__(self) -> Checkpointer[S]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
