"""After a guarded job ends: publish its history, pick the model, and say what the guard did.

:func:`conclude` is what the train stage runs once the backend returns: it publishes whatever
history the job wrote (:mod:`trainguard.guard.discover`), judges it to find the best validation
step, picks and publishes the model (:mod:`trainguard.guard.model`), and returns a
:class:`GuardedResult` — the backend's :class:`~trainguard.launch.base.TrainResult` plus ``guard``
(what the guard did) and ``model`` (which weights ship, and why).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TextIO

from trainguard.choices import ModelChoice
from trainguard.errors import ConfigError, HistoryError
from trainguard.failure_classes import get as failure_class
from trainguard.guard.discover import FoundHistory, find_history, publish_history
from trainguard.guard.model import ModelPick, best_validation, pick_model, publish_model
from trainguard.launch.base import TrainResult
from trainguard.validation.history import History

__all__ = ["GuardedResult", "conclude", "stop_diagnosis", "stop_message", "early_stopped"]


@dataclass
class GuardedResult(TrainResult):
    """A TrainResult with what the guard did and which weights ship.

    Attributes:
        guard: the guard's summary (mode, source, polls, stop, "stopped guarding" reason).
        model: the picked model's metadata (see :meth:`ModelPick.metadata`).
        history_format: the format of the history the job wrote ('' when none).
        cost: what the run cost, attempt by attempt, and what a guard stop saved
            (:meth:`trainguard.guard.ledger.RunCost.to_dict`).
    """

    guard: dict = field(default_factory=dict)
    model: dict = field(default_factory=dict)
    history_format: str = ""
    cost: dict = field(default_factory=dict)

    @classmethod
    def of(cls, result: TrainResult, **extra: Any) -> GuardedResult:
        return cls(**{f.name: getattr(result, f.name) for f in fields(result)}, **extra)

    @property
    def model_step(self) -> int:
        """The step of the checkpoint shipped as the model; -1 for the final weights, or none."""
        step = self.model.get("model_step")
        return int(step) if isinstance(step, int | float) else -1

    @property
    def model_uri(self) -> str:
        """Where the shipped weights are ('' when the job left none)."""
        if self.model.get("model_source") == "none":
            return ""
        return str(self.model.get("model_uri") or self.model_dir)


def early_stopped(result: TrainResult) -> bool:
    """True when the guard ended the job as success-with-finding (a confirmed overfit)."""
    return bool(result.stopped) and bool(result.stopped.get("success"))


def stop_message(stop: dict) -> str:
    """One paragraph: class, evidence, remedy, hours saved."""
    saved = stop.get("details", {}).get("saved", "")
    return f"[{stop['failure_class']}] {stop['evidence']}. Remedy: {stop['remedy']}" + (
        f". {saved}" if saved else ""
    )


def stop_diagnosis(stop: dict):
    """The guard's stop as a triage Diagnosis (what the CLI and the diagnosis artifact show)."""
    from trainguard.triage import Diagnosis

    details = stop.get("details", {})
    saved = details.get("saved", "")
    if stop["failure_class"] == "budget":
        seen = "its spend reached the budget (time RUNNING × the Cloud Billing Catalog price)"
    else:
        seen = f"{details.get('series') or 'the history'} showed it ({details.get('source', '')})"
    reason = f"the in-flight guard stopped the job when {seen}" + (f"; {saved}" if saved else "")
    return Diagnosis(
        stop["failure_class"],
        stop["evidence"],
        stop["remedy"],
        failure_class(stop["failure_class"]).trap,
        1.0,
        reason,
    )


def _verdict(watcher: Any, found: FoundHistory | None, published: str | None):
    """The verdict on the whole history: the one the guard followed when it has it, else read."""
    from trainguard.validation import validate

    history: History | None = None
    if watcher is not None and found is not None and watcher.kind == found.format:
        history = watcher.history()
    source: Any = history
    if source is None:
        if found is None:
            return None, "the job wrote no history"
        source = published or found.uri
    try:
        return validate(source, format=found.format if found else None), ""
    except (HistoryError, ConfigError) as exc:
        return None, f"its history could not be judged ({exc})"


def _last_step(history: History | None) -> float | None:
    if history is None or not history.series:
        return None
    return max(float(s.steps[-1]) for s in history.series.values() if len(s))


def conclude(
    result: TrainResult,
    watcher: Any = None,
    *,
    model: Any = None,
    history: Any = None,
    model_choice: ModelChoice | str = ModelChoice.BEST,
    stream: TextIO | None = None,
) -> GuardedResult:
    """Publishes the history and the model of a finished job; says what the guard did.

    Args:
        result: what the backend returned.
        watcher: the :class:`~trainguard.guard.HistoryGuard` that followed it (None: unguarded).
        model: the model artifact (``.path``, ``.uri``, ``.metadata``), or None.
        history: the history artifact, or None.
        model_choice: ``best`` or ``last``.
        stream: where the lines for people go.
    """
    guard = watcher.finish() if watcher is not None else {"mode": "off"}
    base = result.base_output_dir
    found = find_history(
        history_path=result.history_path,
        tensorboard_dir=f"{base}/logs/" if base else "",
        base_output_dir=base,
    )
    published = None
    if history is not None:
        history.metadata.update(publish_history(found, history.path))
        published = history.path
    out = GuardedResult.of(result, guard=guard, history_format=found.format if found else "")
    if found is not None and found.format != "jsonl":
        _say(stream, f"history: no trainguard JSONL; using the job's {found.format} at {found.uri}")
    if not (result.succeeded or early_stopped(result)):
        if model is not None:  # a failed job: what it left, as it is, for inspection
            left = ModelPick(
                ModelChoice(model_choice).value,
                result.model_dir,
                "model_dir",
                None,
                (),
                f"the job ended {result.state}",
            )
            try:
                publish_model(left, model, model_dir=result.model_dir)
            except Exception as exc:  # noqa: BLE001 - the job's failure is what the task reports
                model.metadata.update(left.metadata())
                _say(stream, f"model: what the job left could not be published ({exc})")
            model.metadata.update(
                {"job": result.job_name, "state": result.state, "restarts": result.restarts}
            )
        return out
    verdict, why = (None, "")
    if ModelChoice(model_choice) == ModelChoice.BEST:
        verdict, why = _verdict(watcher, found, published)
    best = best_validation(verdict) if verdict is not None else None
    try:
        pick = pick_model(
            model_choice,
            model_dir=result.model_dir,
            checkpoint_dir=result.checkpoint_dir,
            best=best,
            last_step=_last_step(verdict.history if verdict is not None else None),
        )
    except Exception as exc:  # checkpoints that cannot be listed: ship the final weights
        pick = ModelPick(
            ModelChoice(model_choice).value,
            result.model_dir,
            "model_dir",
            None,
            (),
            f"the final weights: checkpoints could not be listed ({exc})",
        )
    if why and pick.choice == ModelChoice.BEST.value:
        pick = ModelPick(
            pick.choice, pick.uri, pick.source, pick.step, pick.files, f"{pick.reason}; {why}", pick.best
        )
    if model is not None:
        pick = publish_model(pick, model, model_dir=result.model_dir)
        model.metadata.update({"job": result.job_name, "state": result.state, "restarts": result.restarts})
        if result.stopped:
            model.metadata["guard_stop"] = result.stopped.get("failure_class", "")
    out.model = pick.metadata()
    _say(stream, pick.describe())
    return out


def _say(stream: TextIO | None, line: str) -> None:
    if stream is not None:
        print(f"[trainguard] {line}", file=stream, flush=True)
