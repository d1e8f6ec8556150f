"""Which weights the ``model`` output ships: the last ones, or the kept checkpoint nearest the best
validation step.

The best validation step is where the validation series that ``validate`` judged is best (lowest
loss, highest accuracy): the step early stopping would have kept. With ``--model best`` the model
is whichever saved weights lie nearest that step — a complete checkpoint under
``AIP_CHECKPOINT_DIR`` (listed by :class:`~trainguard.runtime.checkpoint.CheckpointManager`; the
runtime keeps the best one with ``keep_best``) or the job's final ``AIP_MODEL_DIR`` — ties going to
the earlier step. ``--model last`` ships ``AIP_MODEL_DIR``, or the newest checkpoint when a stopped
job wrote none. The step, the metric and its value go into the artifact's metadata; how the
picked weights are laid out in the artifact (one layout, whichever step shipped) is
:mod:`trainguard.guard.layout`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainguard.choices import ModelChoice
from trainguard.runtime.storage import store_for
from trainguard.validation.verdict import Verdict

__all__ = ["BestStep", "ModelPick", "best_validation", "pick_model", "publish_model", "LAST_MODEL_DIRNAME"]

LAST_MODEL_DIRNAME = "model-last"  # where the job's final weights go when a checkpoint ships instead


@dataclass(frozen=True)
class BestStep:
    """The best validation step of a judged run.

    Attributes:
        step: where the validation series is best.
        series: its name (``val/loss``).
        value: its value there.
        last_step: the last validation step.
        steps, values: the validation series (finite points), for the value at another step.
        nonfinite_from: where the judged training or validation series became NaN/Inf and stayed
            so to its end (None when it did not): weights saved from there on are not a model.
    """

    step: float
    series: str
    value: float
    last_step: float
    steps: np.ndarray
    values: np.ndarray
    nonfinite_from: float | None = None

    def value_at(self, step: float) -> tuple[float, float] | None:
        """(evaluation step, value) of the last evaluation at or before ``step``."""
        i = int(np.searchsorted(self.steps, step, side="right")) - 1
        return (float(self.steps[i]), float(self.values[i])) if i >= 0 else None


def best_validation(verdict: Verdict) -> BestStep | None:
    """The best step of the validation series ``verdict`` judged; None without one."""
    described = verdict.series.get("val") if verdict.series else None
    history = verdict.history
    if not described or history is None or described["name"] not in history.series:
        return None
    series = history.series[described["name"]]
    ok = np.isfinite(series.values)
    steps, values = series.steps[ok], series.values[ok]
    if values.size == 0:
        return None
    best = int(np.argmax(values) if verdict.series.get("mode") == "max" else np.argmin(values))
    return BestStep(
        float(steps[best]),
        series.name,
        float(values[best]),
        float(steps[-1]),
        steps,
        values,
        _first_nonfinite(verdict),
    )


def _first_nonfinite(verdict: Verdict) -> float | None:
    """Where the judged train or validation series went NaN/Inf for good (the run of non-finite
    points it ends with begins), or None. A NaN the run recovered from (a skipped fp16 step) does
    not count: the weights after it are finite."""
    firsts = []
    for role in ("train", "val"):
        described = verdict.series.get(role)
        series = (
            verdict.history.series.get(described["name"])
            if described and verdict.history is not None
            else None
        )
        if series is None or not len(series) or np.isfinite(series.values[-1]):
            continue
        finite = np.flatnonzero(np.isfinite(series.values))
        firsts.append(float(series.steps[finite[-1] + 1 if finite.size else 0]))
    return min(firsts) if firsts else None


@dataclass(frozen=True)
class ModelPick:
    """The weights chosen as the model.

    Attributes:
        choice: ``best`` or ``last``.
        uri: the directory holding them ('' when the job left no weights at all).
        source: ``checkpoint``, ``model_dir`` or ``none``.
        step: the checkpoint's step (the last step for ``model_dir``), None when unknown.
        files: the payload files (a checkpoint's; empty for a model directory: all of it).
        reason: one line saying why these.
        best: the best validation step, when there was a validation series.
        metric, value, value_step: the validation metric at those weights (the checkpoint's own
            record, else the last evaluation at or before ``step``) and where it was measured.
        format: the format of the shipped step's checkpoint ('' when it has none).
        checkpoint_uri, checkpoint_files: the shipped step's training checkpoint (its attempt
            directory and payload files; for the final weights, a checkpoint at the same step).
        final_step: the step of the job's final weights, when it left some (a fallback).
    """

    choice: str
    uri: str
    source: str
    step: int | None
    files: tuple[str, ...]
    reason: str
    best: BestStep | None = None
    metric: str = ""
    value: float | None = None
    value_step: float | None = None
    format: str = ""
    checkpoint_uri: str = ""
    checkpoint_files: tuple[str, ...] = ()
    final_step: int | None = None

    def metadata(self) -> dict[str, Any]:
        """What goes into the model artifact's metadata (JSON-safe)."""
        out: dict[str, Any] = {
            "model_choice": self.choice,
            "model_source": self.source,
            "model_uri": self.uri,
            "model_reason": self.reason,
        }
        if self.step is not None:
            out["model_step"] = self.step
        if self.metric:
            out["model_metric"] = self.metric
        if self.value is not None and math.isfinite(self.value):
            out["model_metric_value"] = self.value
            if self.value_step is not None:
                out["model_metric_step"] = self.value_step
        if self.best is not None:
            out.update(best_step=self.best.step, best_metric=self.best.series, best_value=self.best.value)
        return {k: (int(v) if isinstance(v, float) and v.is_integer() else v) for k, v in out.items()}

    def describe(self) -> str:
        """One line for people."""
        if self.source == "none":
            return f"model: none ({self.reason})"
        where = f"checkpoint step {self.step}" if self.source == "checkpoint" else "final weights"
        value = ""
        if self.value is not None and math.isfinite(self.value):
            value = f", {self.metric} {self.value:.4g}"
        return f"model ({self.choice}): {where}{value} at {self.uri} — {self.reason}"


def _has_files(uri: str) -> bool:
    if not uri:
        return False
    try:
        return bool(store_for(uri).list(uri.rstrip("/")))
    except Exception:  # unreadable: not something to ship
        return False


def _checkpoints(checkpoint_dir: str) -> list:
    if not checkpoint_dir:
        return []
    from trainguard.runtime.checkpoint import CheckpointManager

    return CheckpointManager(checkpoint_dir).checkpoints()


def _metric_of(checkpoint: Any, best: BestStep) -> float | None:
    """The checkpoint's own record of the validation metric (``val_loss`` for ``val/loss``)."""
    metrics = getattr(checkpoint, "metrics", None) or {}
    name = best.series
    split, _, metric = name.partition("/")
    for key in (name, f"{split}_{metric}" if metric else name, f"val_{metric or name}"):
        value = metrics.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def pick_model(
    choice: ModelChoice | str,
    *,
    model_dir: str,
    checkpoint_dir: str,
    best: BestStep | None,
    last_step: float | None = None,
) -> ModelPick:
    """Chooses the weights to ship (see the module docstring).

    Args:
        choice: ``best`` or ``last``.
        model_dir: the job's ``AIP_MODEL_DIR``.
        checkpoint_dir: its ``AIP_CHECKPOINT_DIR``.
        best: the best validation step (None when the run had no validation series).
        last_step: the run's last step (where the final weights are).

    Raises:
        Exception: the storage client's errors when checkpoints cannot be listed.
    """
    choice = ModelChoice(choice)
    final = _has_files(model_dir)
    checkpoints = _checkpoints(checkpoint_dir)
    pick = _pick(choice, model_dir, best, last_step, final, checkpoints)
    final_step = (int(last_step) if last_step is not None else None) if final else None
    if pick.source == "checkpoint":
        c = next(c for c in checkpoints if _files_dir(c) == pick.uri)
        return _replace(
            pick, format=_format(c), checkpoint_uri=pick.uri, checkpoint_files=c.files, final_step=final_step
        )
    same = [c for c in checkpoints if pick.step is not None and c.step == pick.step]
    if pick.source == "model_dir" and same:  # the training checkpoint of the final step, too
        c = same[-1]
        return _replace(pick, format=_format(c), checkpoint_uri=_files_dir(c), checkpoint_files=c.files)
    return pick


def _format(checkpoint: Any) -> str:
    """A checkpoint's format; one committed before formats were recorded holding ``state.pt`` is
    TorchCheckpointer's (as the runtime reads it)."""
    if "format" not in (getattr(checkpoint, "meta", None) or {}) and "state.pt" in checkpoint.files:
        return "torch"
    return str(checkpoint.format)


def _pick(
    choice: ModelChoice,
    model_dir: str,
    best: BestStep | None,
    last_step: float | None,
    final: bool,
    checkpoints: list,
) -> ModelPick:
    last_weights = ModelPick(
        choice.value,
        model_dir,
        "model_dir",
        int(last_step) if last_step is not None else None,
        (),
        "the job's final weights",
        best,
    )
    if choice == ModelChoice.LAST or best is None:
        why = "--model last" if choice == ModelChoice.LAST else "no validation series to pick by"
        if final:
            return _with_value(_replace(last_weights, reason=f"the job's final weights ({why})"))
        if checkpoints:
            c = checkpoints[-1]
            return _with_value(
                ModelPick(
                    choice.value,
                    _files_dir(c),
                    "checkpoint",
                    c.step,
                    c.files,
                    f"the newest checkpoint: the job wrote no final weights ({why})",
                    best,
                ),
                c,
            )
        return ModelPick(
            choice.value,
            "",
            "none",
            None,
            (),
            "the job left no weights: no AIP_MODEL_DIR files and no complete checkpoint",
            best,
        )
    candidates: list[tuple[float, float, Any]] = []
    if final:  # first: on a tie the final weights (a plain model file) ship, not a training state
        step = last_step if last_step is not None else best.last_step
        candidates.append((abs(step - best.step), step, None))
    candidates += [(abs(c.step - best.step), c.step, c) for c in checkpoints]
    if not candidates:
        return ModelPick(
            choice.value,
            "",
            "none",
            None,
            (),
            "the job left no weights: no AIP_MODEL_DIR files and no complete checkpoint",
            best,
        )
    candidates, finite_note = _before_nonfinite(candidates, best)
    _, step, chosen = min(candidates, key=lambda item: (item[0], item[1]))
    best_text = f"best validation step {best.step:g} ({best.series} {best.value:.4g}){finite_note}"
    if chosen is None:
        reason = f"the final weights are the saved weights nearest the {best_text}"
        return _with_value(_replace(last_weights, reason=reason))
    reason = f"the kept checkpoint nearest the {best_text}"
    return _with_value(
        ModelPick(choice.value, _files_dir(chosen), "checkpoint", chosen.step, chosen.files, reason, best),
        chosen,
    )


def _files_dir(checkpoint: Any) -> str:
    """Where a checkpoint's payload files are: its attempt directory (``step-N/a-<id>/``), or the
    step directory itself for checkpoints written before attempts existed."""
    return getattr(checkpoint, "root", "") or checkpoint.uri


def _before_nonfinite(
    candidates: list[tuple[float, float, Any]], best: BestStep
) -> tuple[list[tuple[float, float, Any]], str]:
    """The candidates saved before the run went NaN/Inf (a checkpoint at or after that step holds
    weights the NaN already reached), and a note for the reason; all of them, with a warning,
    when none was."""
    if best.nonfinite_from is None:
        return candidates, ""
    at = f"{best.nonfinite_from:g}"
    healthy = [c for c in candidates if c[1] < best.nonfinite_from]
    if healthy:
        return healthy, f", saved before the run went NaN/Inf at step {at}"
    return candidates, f"; every saved weight comes after the run went NaN/Inf at step {at}"


def _replace(pick: ModelPick, **changes: Any) -> ModelPick:
    from dataclasses import replace

    return replace(pick, **changes)


def _with_value(pick: ModelPick, checkpoint: Any = None) -> ModelPick:
    """Adds the validation metric at the picked weights."""
    best = pick.best
    if best is None or pick.step is None:
        return pick
    own = _metric_of(checkpoint, best) if checkpoint is not None else None
    if own is not None:
        return _replace(pick, metric=best.series, value=own, value_step=float(pick.step))
    at = best.value_at(pick.step)
    if at is None:
        return _replace(pick, metric=best.series)
    return _replace(pick, metric=best.series, value=at[1], value_step=at[0])


def publish_model(pick: ModelPick, model: Any, *, model_dir: str) -> ModelPick:
    """Makes the artifact ``model`` hold the picked weights in the one model layout
    (:mod:`trainguard.guard.layout`); returns the pick that shipped (the final weights when the
    picked checkpoint cannot be exported and the job left some)."""
    from trainguard.guard.layout import publish

    return publish(pick, model, model_dir=model_dir)
