"""``validate``: read a history, pick the series, run every rule, and return the verdict."""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

from trainguard.errors import ConfigError
from trainguard.failure_classes import get as failure_class
from trainguard.validation import rules
from trainguard.validation.history import History, Series, select_series
from trainguard.validation.readers import load_history
from trainguard.validation.rules import (
    DEFAULT_SEVERITY,
    RULE_ORDER,
    SUPPRESSES,
    Detection,
    NotJudged,
    RuleConfig,
)
from trainguard.validation.verdict import Finding, Verdict

__all__ = ["validate", "resolve_severities"]


def resolve_severities(fail_on: Iterable[str] | None = None,
                       warn_on: Iterable[str] | None = None) -> dict[str, str]:
    """The severity of each class: the defaults, with the listed classes moved.

    ``fail_on`` and ``warn_on`` override per class; classes not listed keep their default (so
    ``fail_on=["plateau"]`` makes plateau fail and leaves NaN failing too).

    Raises:
        ConfigError: an unknown class, or one listed in both.
    """
    fail = _classes(fail_on, "fail_on")
    warn = _classes(warn_on, "warn_on")
    both = sorted(fail & warn)
    if both:
        raise ConfigError(f"{', '.join(both)} listed in both fail_on and warn_on")
    out = dict(DEFAULT_SEVERITY)
    out.update({name: "fail" for name in fail})
    out.update({name: "warn" for name in warn})
    return out


def _classes(names: Iterable[str] | None, option: str) -> set[str]:
    if names is None:
        return set()
    if isinstance(names, str):
        names = [n for n in names.replace(",", " ").split() if n]
    chosen = {n.strip() for n in names if n.strip()}
    unknown = sorted(chosen - set(DEFAULT_SEVERITY))
    if unknown:
        raise ConfigError(f"{option}: unknown class(es) {', '.join(unknown)}; validation judges "
                          f"{', '.join(RULE_ORDER)}")
    return chosen


def validate(source: str | os.PathLike | History, format: str | None = None,  # noqa: A002
             train_metric: str | None = None, val_metric: str | None = None,
             mode: str = "min", fail_on: Iterable[str] | None = None,
             warn_on: Iterable[str] | None = None,
             thresholds: dict[str, float | None] | None = None) -> Verdict:
    """Judges a training run from its history.

    Args:
        source: a path or ``gs://`` URI (see :func:`~trainguard.validation.load_history`), or a
            :class:`History` already read.
        format: the history format, None to detect it.
        train_metric: the training series (a name as the file writes it, or a base metric);
            None finds the training loss.
        val_metric: likewise for validation.
        mode: ``min`` for a loss, ``max`` for an accuracy-like metric.
        fail_on: classes that fail the verdict (in addition to, or moved from, the defaults).
        warn_on: classes that only warn.
        thresholds: :class:`RuleConfig` field -> value, overriding the defaults.

    Returns:
        The verdict; ``passed`` is False when a finding of severity ``fail`` was made.

    Raises:
        HistoryError: the history cannot be read, or holds neither a training nor a validation
            series.
        ConfigError: a bad option (unknown class, threshold, format, metric or mode).
    """
    severities = resolve_severities(fail_on, warn_on)
    cfg = RuleConfig().with_overrides(thresholds)
    history = source if isinstance(source, History) else load_history(source, format)
    train, val = select_series(history, train_metric, val_metric, mode)

    found: list[tuple[str, Detection, Series]] = []
    not_judged: dict[str, str] = {}
    judged: set[str] = set()

    def record(name: str, outcome: rules.Outcome, series: Series) -> None:
        if isinstance(outcome, NotJudged):
            not_judged.setdefault(name, f"{series.name}: {outcome.reason}")
            return
        judged.add(name)
        if outcome is not None:
            found.append((name, outcome, series))

    for series in (s for s in (train, val) if s is not None):
        record("non_finite", rules.non_finite(series.steps, series.values, series.name), series)

    tx, ty = _finite(train)
    vx, vy = _finite(val)
    # Judge the training curve when there is one; a validation-only history is judged on it.
    main = train if train is not None else val
    mx, my = (tx, ty) if train is not None else (vx, vy)
    record("divergence", rules.divergence(mx, my, cfg, main.name, mode), main)
    # Instability is judged on validation, a full evaluation: per-batch training losses swing by
    # half their level on healthy runs. Without validation, on training averaged over a
    # twentieth of the run.
    if val is not None:
        record("instability", rules.instability(vx, vy, cfg, val.name, mode), val)
    else:
        window = max(5, tx.size // 20)
        record("instability", rules.instability(tx, ty, cfg, train.name, mode, window), train)
    if train is not None:
        record("stalled", rules.stalled(tx, ty, cfg, train.name), train)
        record("plateau", rules.plateau(tx, ty, cfg, train.name, mode), train)
    else:
        not_judged["stalled"] = not_judged["plateau"] = "no training series"
    if train is not None and val is not None:
        record("overfit", rules.overfit(tx, ty, vx, vy, cfg, val.name, mode), val)
    else:
        not_judged["overfit"] = ("no validation series" if val is None
                                 else "no training series to compare with")

    present = {name for name, _, _ in found}
    dropped = {victim for name in present for victim in SUPPRESSES.get(name, ())}
    kept = [(name, d, s) for name, d, s in found if name not in dropped]
    for name in judged | dropped:
        not_judged.pop(name, None)
    order = {name: i for i, name in enumerate(RULE_ORDER)}
    findings = [
        Finding(name, severities[name], d.step_range, d.evidence, d.message,
                _remedy(name, d, s), s.name)
        for name, d, s in sorted(kept, key=lambda item: order[item[0]])
    ]
    findings.sort(key=lambda f: (f.severity != "fail", order[f.failure_class]))
    failing = [f for f in findings if f.severity == "fail"]
    return Verdict(
        passed=not failing,
        failure_class=failing[0].failure_class if failing else None,
        findings=findings,
        series=_series_summary(history, train, val, mode),
        not_judged={k: not_judged[k] for k in RULE_ORDER if k in not_judged},
        notes=list(history.notes),
        thresholds=cfg.to_dict(),
        severities=severities,
        summary=_summary(train, val, tx, ty, vx, vy, mode),
        history=history,
    )


def _finite(series: Series | None) -> tuple[np.ndarray, np.ndarray]:
    if series is None:
        return np.zeros(0), np.zeros(0)
    ok = np.isfinite(series.values)
    if ok.all():
        return series.steps, series.values
    return series.steps[ok], series.values[ok]


def _remedy(name: str, detection: Detection, series: Series) -> str:
    """The class's first remedy (one table); for overfit it names the step to stop at."""
    remedy = failure_class(name).remedy
    if name != "overfit":
        return remedy
    step = float(detection.evidence["best_step"])
    step_text = str(int(step)) if step.is_integer() else f"{step:g}"
    rest = remedy.split(";", 1)[1].strip() if ";" in remedy else remedy
    return (f"early stopping at the best validation step, {step_text} ({series.name} "
            f"{detection.evidence['best_value']:.4g}): restore the checkpoint nearest it; then "
            f"{rest}")


def _series_summary(history: History, train: Series | None, val: Series | None,
                    mode: str) -> dict:
    granular = [s.granularity for s in (train, val) if s is not None]
    x = "epoch" if history.x_label == "epoch" or (granular and all(
        g == "epoch" for g in granular)) else "step"
    return {
        "train": train.describe() if train is not None else None,
        "val": val.describe() if val is not None else None,
        "available": history.describe(),
        "format": history.format,
        "source": history.source,
        "records": history.records,
        "mode": mode,
        "x": x,
    }


def _summary(train: Series | None, val: Series | None, tx: np.ndarray, ty: np.ndarray,
             vx: np.ndarray, vy: np.ndarray, mode: str) -> dict[str, float]:
    metric = (val or train).metric or "value"
    out: dict[str, float] = {}
    if train is not None:
        out["train_points"] = float(len(train))
    if val is not None:
        out["val_points"] = float(len(val))
    if vy.size:
        best = int(np.argmin(vy) if mode == "min" else np.argmax(vy))
        out["best_step"] = float(vx[best])
        out[f"best_val_{metric}"] = float(vy[best])
        out[f"final_val_{metric}"] = float(vy[-1])
    if ty.size:
        if vy.size:
            final_train = float(rules.interval_means(tx, ty, vx)[-1])
        else:
            final_train = float(ty[-1])
            best = int(np.argmin(ty) if mode == "min" else np.argmax(ty))
            out["best_step"] = float(tx[best])
        out[f"final_train_{metric}"] = final_train
        if vy.size:
            out["final_gap"] = float(vy[-1]) - final_train
    return out
