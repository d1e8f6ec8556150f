"""Keras 3: ``model.fit`` checkpointed, resumed and preempted safely, in one line.

::

    from trainguard.runtime.keras import Guard

    model.fit(x, y, epochs=10, validation_data=(x_val, y_val), callbacks=[Guard()])

``Guard`` is a Keras callback with ``BackupAndRestore``'s semantics — run the same ``fit`` again
after an interruption and it continues where the last checkpoint left off — and more:

* checkpoints go through trainguard's manager: ``<AIP_CHECKPOINT_DIR>/step-NNNNNNNNN/`` holding
  ``keras-state.npz`` (every model, optimizer and metric variable, seed-generator states included)
  and ``keras-state.json`` (the position and the RNG states), then an atomic ``COMMIT``; on local
  disks, ``/gcs/`` FUSE mounts and ``gs://`` alike, written in the background. Loading reads arrays
  only (``numpy.load(allow_pickle=False)``): a checkpoint can never run code;
* it resumes mid-epoch, which ``BackupAndRestore`` does not: Keras restarts at the saved epoch
  (``initial_epoch``), the guard puts back the RNG states that decide that epoch's shuffle order,
  lets the batches already trained on go by without a train step, and restores the metric
  accumulators, so a resumed run ends with the same weights as an uninterrupted one (bit for bit on
  CPU, torch and JAX backends);
* on SIGTERM (Vertex's preemption notice) it saves at the end of the running batch, blocking, and
  exits with status 143;
* it writes trainguard's JSONL history (``TRAINGUARD_HISTORY``): the training logs every
  ``log_every`` steps and at each epoch end (``loss``, ``accuracy``, … — Keras reports running
  means over the epoch), the ``val_*`` logs as the ``val`` split; ``step`` counts batches trained.

Backends: torch and JAX (set ``KERAS_BACKEND``). With TensorFlow the train step pulls its own
batches, so batches cannot be passed over; use ``keras.callbacks.BackupAndRestore`` there.
"""

from __future__ import annotations

import json
import math

import keras
import numpy as np

from trainguard.errors import CheckpointError, ConfigError
from trainguard.runtime.checkpoint import Checkpoint, RetentionPolicy, SavePolicy, Stream
from trainguard.runtime.core import CheckpointCore
from trainguard.runtime.env import VertexEnv
from trainguard.runtime.guard_base import (
    GuardOptions,
    note,
    restore_point,
    rng_state,
    set_rng_state,
    split_metric,
)

__all__ = ["Guard", "STATE_FILE", "META_FILE"]

STATE_FILE = "keras-state.npz"
FRAMEWORK = "keras"  # the COMMIT format of the guard's checkpoints
META_FILE = "keras-state.json"
_GROUPS = ("model", "optimizer", "metrics")
_BACKENDS = ("torch", "jax")


def _variables(model: keras.Model) -> dict[str, list]:
    optimizer = model.optimizer
    return {
        "model": list(model.variables),
        "optimizer": list(optimizer.variables) if optimizer is not None else [],
        "metrics": list(model.metrics_variables),
    }


def _no_train_step(backend: str, steps_per_execution: int):
    """A train function that trains nothing: the batches it is given go by."""
    if backend == "jax":

        def skip(state, iterator):  # the JAX train function pulls its own batches
            for _ in range(max(1, steps_per_execution)):
                next(iterator)
            return {}, state

        return skip
    return lambda *args, **kwargs: {}


class Guard(keras.callbacks.Callback):
    """trainguard's checkpoints, resume, preemption and history for ``model.fit``.

    Args:
        directory: the checkpoint directory (default ``AIP_CHECKPOINT_DIR``).
        save: when to save: N (every N batches, default 100) or a ``SavePolicy`` (``every_seconds``
            too); a save due on an epoch's last batch is taken at the epoch's end, after
            validation. SIGTERM always saves.
        retention: which checkpoints to keep (default the last 3; ``keep_best`` by a logged metric
            such as ``val_loss``).
        async_save: write in the background (the variables are copied first).
        history: the JSONL history path (default ``TRAINGUARD_HISTORY``); False for none.
        log_every: record the training logs every N batches (and at each epoch end).
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
        log_every: int = 10,
        resume: bool = True,
        exit_on_preemption: bool = True,
        save_on_train_end: bool = True,
    ) -> None:
        super().__init__()
        self._options = GuardOptions(directory, save, retention, async_save, history)
        if not isinstance(log_every, int) or isinstance(log_every, bool) or log_every < 1:
            raise ConfigError(f"log_every={log_every!r}: pass a whole number >= 1 (log every N-th batch)")
        self.log_every = log_every
        self.resume = resume
        self.exit_on_preemption = exit_on_preemption
        self.save_on_train_end = save_on_train_end
        self.core: CheckpointCore | None = None
        self.resumed_step: int | None = None
        self._pending: dict | None = None  # a restored position not reached yet
        self._skip = 0  # batches of this epoch to pass over
        self._train_function = None
        self._epoch = 0
        self._epoch_start_step = 0
        self._batches = 0  # batches of this epoch done
        self._step = 0
        self._logged_step = -1
        self._rng_at_epoch: dict = {}
        self._last_logs: dict = {}

    # -- start and restore --

    def on_train_begin(self, logs=None) -> None:
        backend = keras.backend.backend()
        if backend not in _BACKENDS:
            raise CheckpointError(
                f"trainguard's Keras guard supports the {' and '.join(_BACKENDS)} backends, not "
                f"{backend} (its train step pulls its own batches); set KERAS_BACKEND, or use "
                "keras.callbacks.BackupAndRestore(backup_dir=AIP_CHECKPOINT_DIR)"
            )
        if self.core is not None:
            self.core.close()  # a previous fit that ended with an exception
        env = VertexEnv.from_environ()
        self.core = core = self._options.core(is_chief=env.is_chief)
        model = self.model  # synchronises the JAX state into the variables
        latest = restore_point(core, FRAMEWORK, STATE_FILE) if self.resume else None
        self._step = 0
        if latest is not None:
            self._pending = self._load(model, latest)
            model._initial_epoch = self._pending["epoch"]  # what BackupAndRestore sets
            self._step = latest.step
            self.resumed_step = latest.step
            if core.is_chief:
                note(
                    f"resumed from checkpoint step {latest.step} ({latest.uri}): epoch "
                    f"{self._pending['epoch']}, batch {self._pending['batch']}"
                )
        core.open_history(latest.step if latest is not None else None)
        self._logged_step = self._step
        core.install_signal_handlers()

    def _load(self, model: keras.Model, checkpoint: Checkpoint) -> dict:
        core = self.core
        assert core is not None
        where = checkpoint.path(STATE_FILE)
        try:
            with core.manager.open_file(checkpoint, META_FILE) as handle:
                meta = json.loads(handle.read())
            # Arrays only: an object array (a pickle) is refused, never unpickled.
            with (
                core.manager.open_file(checkpoint, STATE_FILE) as handle,
                np.load(handle, allow_pickle=False) as arrays,
            ):
                values = {name: arrays[name] for name in arrays.files}
            saved_metrics = list(meta.get("paths", {}).get("metrics", []))
            position = {
                "epoch": int(meta["epoch"]),
                "batch": int(meta["batch"]),
                "rng": dict(meta["rng"]),
                "rng_at_epoch": dict(meta.get("rng_at_epoch") or meta["rng"]),
                "metrics": [values[f"metrics.{i}"] for i in range(len(saved_metrics))],
                "where": where,
            }
        except (ValueError, OSError, KeyError, TypeError, AttributeError) as exc:
            raise CheckpointError(
                f"{where}: not a readable trainguard Keras checkpoint "
                f"({type(exc).__name__}: {str(exc)[:200]}); move it out of the "
                "checkpoint directory to resume from an older one"
            ) from None
        variables = _variables(model)
        for group in ("model", "optimizer"):
            self._check(where, group, variables[group], meta, values)
        for group in ("model", "optimizer"):
            for i, variable in enumerate(variables[group]):
                variable.assign(values[f"{group}.{i}"])
        return position

    @staticmethod
    def _check(where: str, group: str, variables: list, meta: dict, values: dict) -> None:
        paths = meta.get("paths", {}).get(group)
        if not isinstance(paths, list) or len(paths) != len(variables):
            raise CheckpointError(
                f"{where}: it holds {len(paths) if isinstance(paths, list) else 'no'} {group} "
                f"variables, this model has {len(variables)}: resume with the model (and "
                "optimizer) that saved it, or start in an empty checkpoint directory"
            )
        for i, (path, variable) in enumerate(zip(paths, variables, strict=True)):
            array = values.get(f"{group}.{i}")
            if array is None or tuple(array.shape) != tuple(variable.shape):
                raise CheckpointError(
                    f"{where}: {group} variable {path!r} has shape "
                    f"{None if array is None else tuple(array.shape)} there but "
                    f"{tuple(variable.shape)} in this model: resume with the model that saved it"
                )

    def on_epoch_begin(self, epoch: int, logs=None) -> None:
        if self.core is None:
            return
        self._epoch, self._batches = epoch, 0
        pending = self._pending
        if pending is not None and pending["epoch"] == epoch:
            if pending["batch"] > 0:
                # The shuffle order of this epoch comes from the RNG states at its start.
                set_rng_state(pending["rng_at_epoch"])
                self._skip = int(pending["batch"])
            else:
                set_rng_state(pending["rng"])
                self._pending = None
        self._rng_at_epoch = rng_state()
        self._epoch_start_step = self._step - self._skip

    # -- the loop --

    def on_train_batch_begin(self, batch: int, logs=None) -> None:
        if self._skip and batch < self._skip and self._train_function is None:
            model = self._model
            self._train_function = model.train_function
            model.train_function = _no_train_step(
                keras.backend.backend(), int(getattr(model, "steps_per_execution", 1))
            )

    def on_train_batch_end(self, batch: int, logs=None) -> None:
        core = self.core
        if core is None:
            return
        if self._skip:
            if batch + 1 >= self._skip:
                self._end_skip()
            return
        self._batches = batch + 1
        self._step = step = self._epoch_start_step + self._batches
        self._last_logs.update(logs or {})
        if step % self.log_every == 0:
            self._log_train(step, logs)
        steps = self.params.get("steps") if self.params else None
        last = isinstance(steps, int) and 0 < steps <= self._batches
        if core.preempted:
            self._save(blocking=True)
            self._stop(step)
        elif not last and core.due(step):
            self._save()

    def _end_skip(self) -> None:
        """The batches trained before the checkpoint went by: train from here, as it was then."""
        pending = self._pending
        assert pending is not None
        model = self.model  # JAX: the state is read from the variables again at the next batch
        if self._train_function is not None:
            model.train_function = self._train_function
            self._train_function = None
        variables = _variables(model)["metrics"]
        if len(variables) == len(pending["metrics"]):
            for variable, value in zip(variables, pending["metrics"], strict=True):
                variable.assign(value)
        elif self.core is not None and self.core.is_chief:
            note(
                f"{pending['where']}: the metric accumulators do not match this model's metrics; "
                "this epoch's running metrics start afresh"
            )
        set_rng_state(pending["rng"])
        self._batches = self._skip
        self._skip = 0
        self._pending = None

    def on_epoch_end(self, epoch: int, logs=None) -> None:
        core = self.core
        if core is None:
            return
        if self._skip:  # the epoch ended while passing over batches (fewer batches than saved)
            self._end_skip()
        step = self._step
        self._last_logs.update(logs or {})
        if step != self._logged_step:
            self._log_train(step, logs)
        core.log(step, "val", epoch, self._split(logs, "val"))
        self._epoch, self._batches = epoch + 1, 0
        self._rng_at_epoch = {}
        if core.preempted:
            self._save(blocking=True)
            self._stop(step)
        elif core.due(step):
            self._save()

    def on_train_end(self, logs=None) -> None:
        core = self.core
        if core is None:
            return
        if self._train_function is not None:
            self._model.train_function = self._train_function
            self._train_function = None
        self._model._initial_epoch = None
        if self.save_on_train_end and self._step > 0 and core.last_saved != self._step:
            self._save(blocking=True)
        core.close()

    # -- helpers --

    def _log_train(self, step: int, logs) -> None:
        self._logged_step = step
        assert self.core is not None
        self.core.log(step, "train", self._epoch, self._split(logs, "train"))

    @staticmethod
    def _split(logs, split: str) -> dict[str, float]:
        out = {}
        for name, value in (logs or {}).items():
            found, base = split_metric(name)
            try:
                number = float(value)
            except (TypeError, ValueError):
                continue
            if found == split:
                out[base] = number
        return out

    def _save(self, blocking: bool = False) -> None:
        core = self.core
        assert core is not None
        model = self.model  # synchronises the JAX state into the variables
        arrays: dict[str, np.ndarray] = {}
        paths: dict[str, list[str]] = {}
        for group, variables in _variables(model).items():
            paths[group] = [v.path for v in variables]
            for i, variable in enumerate(variables):
                # A copy, taken now: the variables change while the save is written.
                arrays[f"{group}.{i}"] = np.array(keras.ops.convert_to_numpy(variable.value), copy=True)
        meta = {
            "epoch": self._epoch,
            "batch": self._batches,
            "step": self._step,
            "rng": rng_state(),
            "rng_at_epoch": self._rng_at_epoch or None,
            "paths": paths,
            "backend": keras.backend.backend(),
            "keras": keras.__version__,
        }
        metrics = {
            k: float(v)
            for k, v in self._last_logs.items()
            if isinstance(v, int | float) and math.isfinite(float(v))
        }
        core.commit(
            self._step,
            {
                STATE_FILE: Stream(lambda handle: np.savez(handle, **arrays)),  # type: ignore[arg-type]
                META_FILE: json.dumps(meta).encode("utf-8"),
            },
            metrics,
            blocking=blocking,
            format=FRAMEWORK,
        )

    def _stop(self, step: int) -> None:
        assert self.core is not None
        self.core.stop(step, exit=self.exit_on_preemption)
        self._model.stop_training = True
