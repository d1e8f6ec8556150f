"""The checkpoint core: one run's checkpoints, save decisions, SIGTERM, history and closing.

Every adapter is built on :class:`CheckpointCore`, and nothing else holds these parts:

* the training loops' :class:`~trainguard.runtime.checkpointer.Checkpointer` (PyTorch, DCP and JAX
  each add an :class:`~trainguard.runtime.checkpointer.Engine`: how their state is staged, written
  and read back);
* the framework guards (``lightning.py``, ``keras.py``, ``hf.py``), which call it from their
  framework's callbacks.

What it owns:

* **storage** — a :class:`~trainguard.runtime.checkpoint.CheckpointManager` (atomic ``COMMIT``,
  retention, background writes) over a :class:`~trainguard.runtime.storage.FileStore`; ``store=``
  is where a faster store plugs in;
* **when to save** — the :class:`~trainguard.runtime.policies.SavePolicy`, the steps that report
  validation metrics when the best checkpoints are kept, and every step once a stop was asked;
* **where to resume** — the newest complete checkpoint, refused with one
  :class:`~trainguard.errors.CheckpointError` when it is damaged or another reader's;
* **SIGTERM and SIGINT** — one :class:`~trainguard.runtime.preemption.SigtermFlag`: a Spot reclaim
  or Ctrl-C sets a flag, the adapter saves at its next step and :meth:`CheckpointCore.stop` exits
  with 128 + the signal (143, 130);
* **the history** — the JSONL :class:`~trainguard.runtime.history.HistoryWriter`, trimmed to the
  restored step on resume and made durable with each checkpoint;
* **closing** — the save in flight finished, the history closed, the signal handlers put back
  (and, for the guards, the same at the process's exit, which their frameworks give no hook for).

>>> import tempfile
>>> core = CheckpointCore(tempfile.mkdtemp(), save=2, async_save=False)
>>> core.restore_point(accepts=lambda c: True, reader="this example", reads="anything") is None
True
>>> [step for step in range(1, 6) if core.due(step) and core.commit(step, {"s": b"x"}) is None]
[2, 4]
>>> [c.step for c in core.manager.checkpoints()]
[2, 4]
>>> core.close()
"""

from __future__ import annotations

import atexit
import re
import time
from collections.abc import Callable, Mapping

from trainguard.errors import CheckpointError
from trainguard.runtime.checkpoint import (
    FORMAT_FILES,
    Checkpoint,
    CheckpointManager,
    Payload,
    Scan,
    Sharded,
    note,
)
from trainguard.runtime.history import HistoryWriter
from trainguard.runtime.policies import RetentionPolicy, SavePolicy, save_policy
from trainguard.runtime.preemption import SigtermFlag
from trainguard.runtime.save_cost import SaveMeasure, fits, misfit_sentence, notice_from_env
from trainguard.runtime.storage import FileStore

__all__ = ["CheckpointCore", "PREEMPTED_EXIT", "FOREIGN_CHECKPOINTS"]

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


class CheckpointCore:
    """Checkpoints, save decisions, SIGTERM, history and closing for one training run.

    Args:
        directory: the checkpoint directory (``gs://``, local, ``/gcs/``; default
            ``$AIP_CHECKPOINT_DIR``).
        save: when to save: a :class:`SavePolicy`, or N to save every N steps (default 100).
        retention: which checkpoints to keep (default: the last 3). With ``keep_best`` > 0, every
            step that reports validation metrics is due, so the best one can be kept.
        async_save: write in the background.
        is_chief: this process commits and writes the history (rank 0).
        history: the JSONL history path (None: no history).
        store: the storage to write through (default: the one for ``directory``).
        deadline_s: the retry deadline of each storage call (default: minutes).
        finish_at_exit: at the process's exit, finish the save in flight and flush the history
            (for the framework guards, whose frameworks give no hook when an exception ends the
            run; the loops' sharded saves wait on peer processes that may be gone by then).

    Raises:
        ConfigError: an option is invalid (the message says what to pass).
    """

    def __init__(
        self,
        directory: str | None = None,
        *,
        save: SavePolicy | int | None = None,
        retention: RetentionPolicy | None = None,
        async_save: bool = True,
        is_chief: bool = True,
        history: str | None = None,
        store: FileStore | None = None,
        deadline_s: float | None = None,
        finish_at_exit: bool = False,
    ) -> None:
        self.save_policy = save_policy(save)
        self.manager = CheckpointManager(
            directory,
            retention=retention,
            async_save=async_save,
            is_chief=is_chief,
            store=store,
            deadline_s=deadline_s,
        )
        self.is_chief = bool(is_chief)
        self.history_path = history or ""
        self.history: HistoryWriter | None = None
        self.last_saved: int | None = None  # the newest checkpoint's step, restored or saved
        self._last_time = time.monotonic()
        self._signals = SigtermFlag()
        self._finish_at_exit = finish_at_exit
        self._at_exit = False
        #: Seconds of notice a preemption gives this job (``TRAINGUARD_PREEMPTION_NOTICE``).
        self.preemption_notice_s = notice_from_env()
        self.saves: list[SaveMeasure] = []  # every save of this process, measured
        self._started = time.time()

    @property
    def directory(self) -> str:
        """The checkpoint directory (no trailing slash)."""
        return self.manager.directory

    @property
    def retention(self) -> RetentionPolicy:
        """Which checkpoints are kept."""
        return self.manager.retention

    # -- where to resume --

    def restore_point(
        self,
        step: int | None = None,
        *,
        accepts: Callable[[Checkpoint], bool],
        reader: str,
        reads: str,
        refuse_foreign: bool = False,
    ) -> Checkpoint | None:
        """The checkpoint to resume from: that of ``step``, else the newest complete one; None on a
        fresh run. The save decisions count from it.

        Args:
            step: this step's checkpoint rather than the newest.
            accepts: whether the adapter can read a checkpoint (its format, its files).
            reader: who reads, for the message (``TorchCheckpointer``).
            reads: what it reads, for the message (its formats or its file).
            refuse_foreign: with no trainguard checkpoint, refuse a directory that holds another
                framework's (this run would start from scratch beside it).

        Raises:
            CheckpointError: the checkpoint is damaged, missing, or not the adapter's; or the
                directory holds only another framework's checkpoint. Nothing is deleted; the
                message names the intact checkpoint to fall back to.
        """
        self.manager.raise_pending()
        scan = self.manager.scan()
        chosen = self.manager.choose(step, scan)
        if chosen is None:
            if refuse_foreign:
                self._refuse_foreign(scan)
            if scan.incomplete and self.is_chief:
                note(
                    f"ignored {len(scan.incomplete)} incomplete save(s) in {self.directory} "
                    "(a job stopped while writing; removed by the next save)"
                )
        elif not accepts(chosen):
            holds = ", ".join(chosen.files[:6]) or "nothing"
            raise CheckpointError(
                f"{chosen.uri} was saved by another checkpointer (format {chosen.format!r}), "
                f"holding {holds}: not written by {reader}, which reads {reads}. Point the "
                "checkpoint directory (AIP_CHECKPOINT_DIR) at this run's own checkpoints, or at an "
                "empty directory to start afresh (nothing was deleted)"
            )
        self.last_saved = chosen.step if chosen is not None else None
        return chosen

    def fallback_hint(self, step: int) -> str:
        """What to do when checkpoint ``step`` cannot be used: the intact one to fall back to."""
        return self.manager.fallback_hint(step)

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

    # -- the history --

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

    def plan(self, total_steps: int) -> None:
        """Declares how many steps the run takes (the in-flight guard sizes what stopping it saved)."""
        if self.history is not None:
            self.history.plan(total_steps)

    # -- saving --

    def due(self, step: int, *, validated: bool = False) -> bool:
        """True when a save is due at ``step``: a stop was asked, the save policy says so, or
        ``validated`` (the step reported validation metrics) while the best checkpoints are kept."""
        if self.preempted or (validated and self.retention.keep_best > 0):
            return True
        return self.save_policy.due(step, time.monotonic(), self.last_saved, self._last_time)

    def wait(self) -> None:
        """Blocks until the save in flight is written; raises its error."""
        self.manager.wait()

    def commit(
        self,
        step: int,
        payload: Payload | Sharded,
        metrics: Mapping[str, object] | None = None,
        *,
        blocking: bool = False,
        format: str = FORMAT_FILES,
        attempt: str | None = None,
        meta: Mapping[str, object] | None = None,
    ) -> None:
        """Saves ``payload`` as step ``step`` (call it on every rank: the others record the step).

        The history up to this step is flushed first, so it is durable with the checkpoint. Once a
        stop was asked the save blocks; otherwise it runs in the background when ``async_save``.
        Metrics that are not numbers are left out of ``COMMIT``.
        """
        self._record_saves()
        if self.history is not None:
            self.history.flush()
        if self._finish_at_exit and not self._at_exit:
            atexit.register(self._finish)
            self._at_exit = True
        numbers = {k: v for k, v in (metrics or {}).items() if not isinstance(v, bool | str)}
        self.manager.save(
            step,
            payload,
            numbers,
            blocking=True if blocking or self.preempted else None,
            format=format,
            attempt=attempt,
            meta=meta,
        )
        self.last_saved, self._last_time = step, time.monotonic()
        self._record_saves()

    def _record_saves(self) -> None:
        """Writes the finished saves' measures to the history; says the first one's cost and
        whether a preemption save fits the notice (chief only)."""
        for measure in self.manager.take_measures():
            first = not self.saves
            previous = self.saves[-1].started if self.saves else self._started
            self.saves.append(measure)
            if self.history is not None:
                self.history.record(measure.record(self.preemption_notice_s))
            if first and self.is_chief:
                self._say_first_save(measure, max(0.0, measure.started - previous))

    def _say_first_save(self, measure: SaveMeasure, interval_s: float) -> None:
        notice = self.preemption_notice_s
        line = f"checkpoint step {measure.step}: saved {measure.describe()}"
        if notice is None:
            note(f"{line}; no preemption notice is set ({'TRAINGUARD_PREEMPTION_NOTICE'})")
        elif fits(measure.seconds, notice):
            note(f"{line}; a preemption save fits the {notice:g} s notice")
        else:
            note(f"WARNING: {line}; {misfit_sentence(measure.seconds, notice, interval_s or None)}")

    # -- stopping --

    @property
    def preempted(self) -> bool:
        """True once SIGTERM or Ctrl-C arrived (or :meth:`mark_preempted` was called): save, stop."""
        return self._signals.is_set

    @property
    def stop_reason(self) -> str:
        """Why the run stops: ``interrupted (Ctrl-C)`` or ``stopped by SIGTERM (…)``."""
        return self._signals.reason

    @property
    def stop_exit_code(self) -> int:
        """The exit status after the stop's save: 143 for SIGTERM, 130 for Ctrl-C."""
        return self._signals.exit_code

    def mark_preempted(self) -> None:
        """Acts as if SIGTERM had arrived (another process of the job got it)."""
        self._signals.set()

    def install_signal_handlers(self) -> None:
        """SIGTERM (and Ctrl-C) set the flag instead of killing the run mid-step. Only the main
        thread can install handlers: elsewhere this does nothing (a framework running callbacks on
        a worker thread installs from the main thread)."""
        self._signals.install(main_thread_only=True)

    def uninstall_signal_handlers(self) -> None:
        """Puts back the handlers that were there before."""
        self._signals.uninstall()

    def stop(self, step: int, *, exit: bool = True) -> bool:
        """After the stop's save: closes, says so, and exits with 128 + the signal (143, 130).

        Returns:
            False (with ``exit=False``): the caller stops its loop.
        """
        self.close()
        if self.is_chief:
            note(f"{self.stop_reason}: saved step {step} in {self.directory}, stopping")
        if exit:
            raise SystemExit(self.stop_exit_code)
        return False

    def close(self) -> None:
        """Waits for the save in flight, closes the history, puts back the signal handlers. It may
        be called again, and the core used again (a framework's second ``fit``)."""
        try:
            self.manager.wait()
        finally:
            self.uninstall_signal_handlers()
            self._record_saves()
            if self.history is not None:
                self.history.close()
                self.history = None
            if self._at_exit:
                atexit.unregister(self._finish)
                self._at_exit = False

    def _finish(self) -> None:
        """At the process's exit: the save in flight completes, the history is flushed (what
        fails is reported: the process is exiting anyway)."""
        work = (("the checkpoint save in flight", self.manager.wait), ("flushing the history", self._flush))
        for what, action in work:
            try:
                action()
            except Exception as exc:  # noqa: BLE001 - say what was lost, then exit
                note(f"{what} failed: {exc}")

    def _flush(self) -> None:
        self._record_saves()
        if self.history is not None:
            self.history.flush()
