"""``validate``: read a history, pair its series, run every rule and gate, and return the verdict.

Each metric's training/validation pair is judged (:mod:`~trainguard.validation.pairs`): NaN/Inf,
divergence, instability and overfit on every pair; plateau, stalled and no learning on the primary
pair (the loss, or what the user named; its validation series alone when there is no training
series), whose best step and numbers the verdict reports. A plateau is named only when every
training loss of the run is flat (Ultralytics' ``box_loss`` may crawl while ``cls_loss`` falls
fourfold); NaN/Inf is also looked for in the other loggings of the primary metric (its per-step
series when the per-epoch one is judged). Gates
(:mod:`~trainguard.validation.gates`) are read at that best step or at the end. The function
accepts a :class:`History` already read, so the in-flight guard can call it on every poll of a
growing history; every rule is O(points).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from trainguard.choices import GateAt, Mode, Severity, parse
from trainguard.errors import ConfigError
from trainguard.failure_classes import get as failure_class
from trainguard.validation import rules
from trainguard.validation.gates import GateResult, find_metric, judge_gate, parse_gates
from trainguard.validation.history import (
    History,
    Series,
    is_loss_like,
    is_overall_loss,
    prefer_epoch,
    select_series,
)
from trainguard.validation.pairs import Pair, find_pairs, infer_mode, parse_directions
from trainguard.validation.readers import load_history
from trainguard.validation.rules import (
    CURVE_RULES,
    DEFAULT_SEVERITY,
    RULE_ORDER,
    SUPPRESSES,
    Detection,
    NotJudged,
    RuleConfig,
)
from trainguard.validation.saves import account_for_saves
from trainguard.validation.shipped import account_for_shipped_model
from trainguard.validation.stats import head, interval_means
from trainguard.validation.verdict import Finding, Verdict

__all__ = ["validate", "resolve_severities"]


def resolve_severities(
    fail_on: Iterable[str] | None = None, warn_on: Iterable[str] | None = None
) -> dict[str, Severity]:
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
    out.update(dict.fromkeys(fail, Severity.FAIL))
    out.update(dict.fromkeys(warn, Severity.WARN))
    return out


def _classes(names: Iterable[str] | None, option: str) -> set[str]:
    if names is None:
        return set()
    if isinstance(names, str):
        names = [n for n in names.replace(",", " ").split() if n]
    chosen = {n.strip() for n in names if n.strip()}
    unknown = sorted(chosen - set(DEFAULT_SEVERITY))
    if unknown:
        raise ConfigError(
            f"{option}: unknown class(es) {', '.join(unknown)}; validation judges {', '.join(RULE_ORDER)}"
        )
    return chosen


@dataclass
class _Judgement:
    """What the rules made of one pair."""

    pair: Pair
    found: list[tuple[str, Detection, Series]] = field(default_factory=list)
    not_judged: dict[str, str] = field(default_factory=dict)
    judged: set[str] = field(default_factory=set)

    def record(self, name: str, outcome: rules.Outcome, series: Series) -> None:
        if isinstance(outcome, NotJudged):
            self.not_judged.setdefault(name, f"{series.name}: {outcome.reason}")
            return
        self.judged.add(name)
        self.not_judged.pop(name, None)
        if outcome is not None:
            self.found.append((name, outcome, series))


def _finite(series: Series | None, from_step: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The series' finite points, from ``from_step`` on when that is set (warm-up ignored)."""
    if series is None:
        return np.zeros(0), np.zeros(0)
    ok = np.isfinite(series.values)
    if from_step > 0:
        ok &= series.steps >= from_step
    if ok.all():
        return series.steps, series.values
    return series.steps[ok], series.values[ok]


def _start(train: Series | None, val: Series | None) -> float | None:
    """Where the run started: the larger first level of its series (training logs earliest)."""
    heads = [abs(head(v)) for v in (_finite(train)[1], _finite(val)[1]) if v.size]
    return max(heads) if heads else None


def _judge_pair(
    pair: Pair,
    cfg: RuleConfig,
    accuracy: Series | None = None,
    also: tuple[Series, ...] = (),
    lone_validation: bool = False,
) -> _Judgement:
    """Every rule on one pair; plateau, stalled and no learning on the primary pair only.

    Args:
        pair: the pair.
        cfg: thresholds.
        accuracy: the validation accuracy, for the primary pair's chance test.
        also: other loggings of the pair's metric, judged for NaN/Inf only.
        lone_validation: the primary pair has no validation series, so a validation-only pair
            of a metric whose direction its name says (a Dice score, an accuracy) is the run's
            evaluation: no learning is judged on it too.
    """
    out = _Judgement(pair)
    train, val, mode = pair.train, pair.val, pair.mode
    for series in (s for s in (train, val, *also) if s is not None):
        out.record("non_finite", rules.non_finite(series.steps, series.values, series.name), series)
    tx, ty = _finite(train, cfg.warmup_steps)
    vx, vy = _finite(val, cfg.warmup_steps)
    # Judge the training curve when there is one; a validation-only pair is judged on it.
    main, mx, my = (train, tx, ty) if train is not None else (val, vx, vy)
    assert main is not None  # a pair has at least one series
    out.record("divergence", rules.divergence(mx, my, cfg, main.name, mode), main)
    # Instability is judged on validation, a full evaluation: per-batch training losses swing by
    # half their level on healthy runs (training must not fall over the same steps). Without
    # validation, on training averaged over a twentieth of the run.
    if val is not None:
        confirm = (tx, ty) if train is not None else None
        out.record(
            "instability",
            rules.instability(vx, vy, cfg, val.name, mode, start=_start(train, val), confirm=confirm),
            val,
        )
    else:
        window = max(5, tx.size // 20)
        out.record("instability", rules.instability(tx, ty, cfg, main.name, mode, window), main)
    if pair.primary:
        # Stalls are judged on training; a history with only validation is judged on validation
        # alone. Plateau is the training curve's class (under-fitting): not judged without one.
        own, ox, oy = (train, tx, ty) if train is not None else (val, vx, vy)
        assert own is not None
        out.record("stalled", rules.stalled(ox, oy, cfg, own.name), own)
        if train is not None:
            out.record("plateau", rules.plateau(tx, ty, cfg, train.name, mode), train)
        else:
            out.not_judged["plateau"] = "no training series"
        if val is not None:
            acc = None
            if accuracy is not None:
                acc = (_finite(accuracy, cfg.warmup_steps)[1], accuracy.name)
            verdict = rules.no_learning(
                (tx, ty) if train is not None else None, (vx, vy), cfg, val.name, mode, accuracy=acc
            )
            out.record("no_learning", verdict, val)
        else:
            out.not_judged["no_learning"] = "no validation series"
    elif lone_validation and train is None and val is not None and infer_mode(val.name) is not None:
        out.record("no_learning", rules.no_learning(None, (vx, vy), cfg, val.name, mode), val)
    if train is not None and val is not None:
        out.record("overfit", rules.overfit(tx, ty, vx, vy, cfg, val.name, mode), val)
    else:
        out.not_judged["overfit"] = (
            "no validation series" if val is None else "no training series to compare with"
        )
    return out


def _primary_mode(mode: str | None, train_metric: str | None, val_metric: str | None) -> Mode:
    """The user's mode; without one, the direction the named metric's words give (else min)."""
    if mode:
        return parse(Mode, mode, "--mode")
    for name in (val_metric, train_metric):
        if name and infer_mode(name) is not None:
            return infer_mode(name)  # type: ignore[return-value]
    return Mode.MIN


def validate(
    source: str | os.PathLike | History,
    format: str | None = None,  # noqa: A002
    train_metric: str | None = None,
    val_metric: str | None = None,
    mode: str | None = None,
    fail_on: Iterable[str] | None = None,
    warn_on: Iterable[str] | None = None,
    thresholds: Mapping[str, float | str | None] | None = None,
    gates: str | Iterable[str] | None = None,
    gate_at: str = GateAt.BEST,
    directions: str | Iterable[str] | Mapping[str, str] | None = None,
    shipped_step: float | None = None,
) -> Verdict:
    """Judges a training run from its history.

    Args:
        source: a path or ``gs://`` URI (see :func:`~trainguard.validation.load_history`), or a
            :class:`History` already read.
        format: the history format, None to detect it.
        train_metric: the primary training series (a name as the file writes it, or a base
            metric); None finds the training loss.
        val_metric: likewise for validation.
        mode: ``min`` for a loss, ``max`` for an accuracy-like metric (the primary pair); None
            infers it from the metric named (accuracy, AUC, F1... maximise), else ``min``.
        fail_on: classes that fail the verdict (in addition to, or moved from, the defaults).
        warn_on: classes that only warn.
        thresholds: :class:`RuleConfig` field -> value, overriding the defaults.
        gates: quality gates (``val_accuracy>=0.9``, ``val_loss<=0.3@last``), see
            :mod:`~trainguard.validation.gates`.
        gate_at: where gates without ``@best``/``@last`` read: ``best`` (the best validation
            step) or ``last``.
        directions: ``metric=min|max`` overriding the inferred direction of the other pairs.
        shipped_step: the step of the checkpoint the train task shipped as the model; an
            overfit it escaped (its validation value within ``overfit_min_rise`` of the best) is
            a warning, not a failure (see :mod:`~trainguard.validation.shipped`).

    The history's checkpoint saves, when it recorded any, are summed up in ``saves``; a save
    that does not fit the preemption notice is a ``preemption`` warning
    (:mod:`~trainguard.validation.saves`).

    Returns:
        The verdict; ``passed`` is False when a finding of severity ``fail`` was made, and
        ``undecided`` says so when nothing at all could be judged.

    Raises:
        HistoryError: the history cannot be read, or holds neither a training nor a validation
            series.
        ConfigError: a bad option (unknown class, threshold, format, metric, mode, a malformed
            gate or a gate on a metric the history lacks).
    """
    severities = resolve_severities(fail_on, warn_on)
    cfg = RuleConfig().with_overrides(thresholds)
    gate_list = parse_gates(gates, gate_at)
    modes = parse_directions(directions)
    primary_mode = _primary_mode(mode, train_metric, val_metric)
    history = source if isinstance(source, History) else load_history(source, format)
    gated = [(gate, find_metric(history, gate.metric)) for gate in gate_list]
    train, val = select_series(history, train_metric, val_metric, primary_mode)
    pairs, skipped = find_pairs(history, train, val, primary_mode, modes)
    # Values near the float range (1e308 losses) overflow in sums and differences: the rules
    # read the resulting inf as "far worse", which is what such a curve is; no warning spam.
    accuracy = _validation_accuracy(history) if pairs[0].mode == Mode.MIN else None
    also = _other_loggings(history, pairs[0])
    with np.errstate(over="ignore", invalid="ignore"):
        lone = pairs[0].val is None
        judgements = [
            _judge_pair(pair, cfg, accuracy if pair.primary else None, also if pair.primary else (), lone)
            for pair in pairs
        ]
        _plateau_of_the_run(judgements, cfg)
        tx, ty = _finite(train)
        vx, vy = _finite(val)
        summary = _summary(train, val, tx, ty, vx, vy, primary_mode)
        gate_results = [judge_gate(gate, series, summary.get("best_step")) for gate, series in gated]
    findings, not_judged = _findings(judgements, gate_results, severities)
    failing = [f for f in findings if f.severity == Severity.FAIL]
    undecided = None
    if not findings and not gate_results and not any(set(CURVE_RULES) & j.judged for j in judgements):
        undecided = _undecided(train, val, cfg)
    series = _series_summary(history, train, val, primary_mode)
    series["pairs"] = [dict(j.pair.describe(), not_judged=j.not_judged) for j in judgements]
    series["skipped"] = skipped
    verdict = Verdict(
        passed=not failing,
        failure_class=failing[0].failure_class if failing else None,
        findings=findings,
        series=series,
        not_judged=not_judged,
        notes=list(history.notes),
        thresholds=cfg.to_dict(),
        severities=severities,
        summary=summary,
        gates=[r.to_dict() for r in gate_results],
        undecided=undecided,
        history=history,
    )
    return account_for_saves(account_for_shipped_model(verdict, shipped_step, cfg.overfit_min_rise))


def _validation_accuracy(history: History) -> Series | None:
    """The validation accuracy, for the chance test: the val-split ``accuracy``/``acc`` series
    (per epoch when logged so), or None."""
    found = [s for s in history.series.values() if s.split == "val" and s.metric in ("accuracy", "acc")]
    found = prefer_epoch(found)
    return max(found, key=lambda s: (s.finite_count, len(s)), default=None)


def _other_loggings(history: History, primary: Pair) -> tuple[Series, ...]:
    """The primary metric's other series (its per-step logging when the per-epoch one is judged)."""
    chosen = {id(s) for s in (primary.train, primary.val) if s is not None}
    return tuple(
        s
        for s in history.series.values()
        if s.metric == primary.metric and s.split in ("train", "val") and id(s) not in chosen
    )


def _plateau_of_the_run(judgements: list[_Judgement], cfg: RuleConfig) -> None:
    """Drops the primary pair's plateau when it is one loss component among several and another
    training loss of the run improved well: the run is learning (Ultralytics' box_loss crawls
    while cls_loss falls fourfold). A flat overall loss (``loss``, ``mean_loss``) stays flat
    whatever its parts do."""
    primary = judgements[0]
    found = [item for item in primary.found if item[0] == "plateau"]
    if not found or is_overall_loss(primary.pair.metric):
        return
    for judgement in judgements[1:]:
        series = judgement.pair.train
        if series is None or judgement.pair.mode != Mode.MIN or not is_loss_like(judgement.pair.metric):
            continue
        x, y = _finite(series, cfg.warmup_steps)
        if isinstance(rules.plateau(x, y, cfg, series.name, judgement.pair.mode), NotJudged):
            continue
        if rules.plateau(x, y, cfg, series.name, judgement.pair.mode) is None:
            primary.found = [item for item in primary.found if item[0] != "plateau"]
            primary.not_judged["plateau"] = f"{series.name} improved; the run is not flat"
            return


def _findings(
    judgements: list[_Judgement], gate_results: list[GateResult], severities: dict[str, Severity]
) -> tuple[list[Finding], dict[str, str]]:
    """Findings in order (fails first, rule order, primary pair first), and the primary pair's
    not-judged reasons. A finding's class makes the classes it suppresses redundant anywhere."""
    found = [(name, d, s, j.pair.primary) for j in judgements for name, d, s in j.found]
    present = {name for name, _, _, _ in found}
    dropped = {victim for name in present for victim in SUPPRESSES.get(name, ())}
    order = {name: i for i, name in enumerate(RULE_ORDER)}
    findings = [
        (
            Finding(name, severities[name], d.step_range, d.evidence, d.message, _remedy(name, d, s), s.name),
            primary,
        )
        for name, d, s, primary in found
        if name not in dropped
    ]
    findings += [(_gate_finding(r, severities["gate"]), True) for r in gate_results if not r.passed]
    findings.sort(
        key=lambda item: (item[0].severity != Severity.FAIL, order[item[0].failure_class], not item[1])
    )
    primary = judgements[0]
    not_judged = {k: v for k, v in primary.not_judged.items() if k not in dropped}
    return [f for f, _ in findings], {k: not_judged[k] for k in RULE_ORDER if k in not_judged}


def _gate_finding(result: GateResult, severity: Severity) -> Finding:
    gate = result.gate
    where = "the best validation step" if gate.at == GateAt.BEST else "the last value"
    message = (
        f"gate {gate.metric} {gate.op} {gate.bound:g} missed: {result.series} was "
        f"{result.value:.4g} at step {_step_text(result.step)} ({where})"
    )
    evidence = {"value": result.value, "bound": gate.bound, "step": result.step}
    return Finding(
        "gate",
        severity,
        (result.step, result.step),
        evidence,
        message,
        failure_class("gate").remedy,
        result.series,
    )


def _step_text(step: float) -> str:
    return str(int(step)) if float(step).is_integer() else f"{step:g}"


def _undecided(train: Series | None, val: Series | None, cfg: RuleConfig) -> str:
    """What was found and what to log, when no rule could judge anything."""
    parts = [f"{len(s)} point{'s' if len(s) != 1 else ''} of {s.name}" for s in (train, val) if s is not None]
    needs = {
        "divergence": cfg.divergence_min_points + 1,
        "stalled": cfg.stalled_min_repeats,
        "instability": cfg.instability_min_points,
        "plateau": cfg.plateau_min_points,
    }
    warm = f" from step {cfg.warmup_steps:g} on (warmup_steps)" if cfg.warmup_steps else ""
    ends = [float(s.steps[-1]) for s in (train, val) if s is not None and len(s)]
    if cfg.warmup_steps and ends and max(ends) < cfg.warmup_steps:
        return (
            f"{' and '.join(parts)}: every point is before step {cfg.warmup_steps:g}, where "
            f"warmup_steps starts judging (the history ends at step {_step_text(max(ends))}): lower "
            "warmup_steps, or judge a longer run"
        )
    return (
        f"{' and '.join(parts)}: nothing can be judged; log at least "
        f"{min(needs.values())} finite points{warm} ({max(needs.values())} for every rule, "
        f"and {cfg.overfit_patience + 2} validation evaluations for overfit)"
    )


def _remedy(name: str, detection: Detection, series: Series) -> str:
    """The class's first remedy (one table); for overfit it names the step to stop at."""
    remedy = failure_class(name).remedy
    if name != "overfit":
        return remedy
    step_text = _step_text(float(detection.evidence["best_step"]))
    rest = remedy.split(";", 1)[1].strip() if ";" in remedy else remedy
    return (
        f"early stopping at the best validation step, {step_text} ({series.name} "
        f"{detection.evidence['best_value']:.4g}): restore the checkpoint nearest it; then "
        f"{rest}"
    )


def _series_summary(history: History, train: Series | None, val: Series | None, mode: str) -> dict:
    granular = [s.granularity for s in (train, val) if s is not None]
    x = (
        "epoch"
        if history.x_label == "epoch" or (granular and all(g == "epoch" for g in granular))
        else "step"
    )
    return {
        "train": train.describe() if train is not None else None,
        "val": val.describe() if val is not None else None,
        "available": history.describe(),
        "format": history.format,
        "source": history.source,
        "records": history.records,
        "mode": str(mode),
        "x": x,
    }


def _summary(
    train: Series | None,
    val: Series | None,
    tx: np.ndarray,
    ty: np.ndarray,
    vx: np.ndarray,
    vy: np.ndarray,
    mode: str,
) -> dict[str, float]:
    chosen = val if val is not None else train
    metric = (chosen.metric if chosen is not None else "") or "value"
    out: dict[str, float] = {}
    if train is not None:
        out["train_points"] = float(len(train))
    if val is not None:
        out["val_points"] = float(len(val))
    if vy.size:
        best = int(np.argmin(vy) if mode == Mode.MIN else np.argmax(vy))
        out["best_step"] = float(vx[best])
        out[f"best_val_{metric}"] = float(vy[best])
        out[f"final_val_{metric}"] = float(vy[-1])
    if ty.size:
        if vy.size:
            final_train = float(interval_means(tx, ty, vx)[-1])
        else:
            final_train = float(ty[-1])
            best = int(np.argmin(ty) if mode == Mode.MIN else np.argmax(ty))
            out["best_step"] = float(tx[best])
        out[f"final_train_{metric}"] = final_train
        if vy.size:
            out["final_gap"] = float(vy[-1]) - final_train
    return out
