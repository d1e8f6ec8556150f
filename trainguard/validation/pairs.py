"""Which series are judged together: each metric's training/validation pair, and its direction.

A history often holds several metrics (loss and accuracy, several losses). Each base metric that
has a training or a validation series is one :class:`Pair`; its direction comes from its name
(:data:`DIRECTION_WORDS`: accuracy, AUC, F1, precision and recall are maximised; loss, error and
perplexity minimised) unless the user says otherwise. The name's last word decides, after
qualifiers such as ``mean`` or ``score`` (:data:`QUALIFIERS`): a word further in says what the
metric is about, not what it is (``acc_mean_pos`` is a rank, not an accuracy). Learning rates and
other settings (:data:`NOT_METRICS`, any ``lr_*``) are not judged; a metric whose direction cannot
be told is listed as skipped with what to pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from trainguard.choices import Mode, parse
from trainguard.validation.history import History, Series, prefer_epoch
from trainguard.validation.thresholds import parse_assignments

__all__ = [
    "Pair",
    "DIRECTION_WORDS",
    "QUALIFIERS",
    "NOT_METRICS",
    "infer_mode",
    "is_setting",
    "find_pairs",
    "parse_directions",
]

# A word in a metric's name -> which way it improves. The first word found decides.
DIRECTION_WORDS: dict[str, Mode] = {
    **dict.fromkeys(
        (
            "loss",
            "error",
            "err",
            "perplexity",
            "ppl",
            "nll",
            "mse",
            "mae",
            "rmse",
            "mape",
            "entropy",
            "ce",
            "wer",
            "cer",
            "distance",
            "regret",
            "kl",
        ),
        Mode.MIN,
    ),
    **dict.fromkeys(
        (
            "accuracy",
            "acc",
            "auc",
            "auroc",
            "auprc",
            "f1",
            "fbeta",
            "precision",
            "recall",
            "iou",
            "miou",
            "map",
            "ap",
            "dice",
            "bleu",
            "rouge",
            "top1",
            "top5",
            "r2",
            "mcc",
            "sensitivity",
            "specificity",
            "psnr",
            "ssim",
            # Ultralytics' mAP columns, whole (a "95" alone says nothing).
            "map50",
            "map75",
            "map50_95",
        ),
        Mode.MAX,
    ),
}
# Words that qualify a metric's name without changing what it measures; skipped from the end
# before the last word decides its direction (``f1_score``, ``loss_total``, ``val_acc_epoch``).
QUALIFIERS = frozenset(
    (
        "score",
        "value",
        "total",
        "mean",
        "avg",
        "average",
        "sum",
        "overall",
        "weighted",
        "macro",
        "micro",
        "running",
        "smoothed",
        "rate",
        "epoch",
        "step",
        "batch",
        "train",
        "val",
        "valid",
        "validation",
        "eval",
        "test",
    )
)

# Logged beside the metrics but not judged: settings and counters, not quality.
NOT_METRICS = frozenset(
    (
        "lr",
        "learning_rate",
        "epoch",
        "step",
        "steps",
        "time",
        "walltime",
        "momentum",
        "weight_decay",
        "batch_size",
        "global_step",
        "lr_pg0",
        "lr_adam",
        "lr_sgd",
        "epoch_learning_rate",
        "throughput",
        "samples",
        "grad_norm",
        "epoch_time",
    )
)

_JUDGED_SPLITS = ("train", "val")


@dataclass(frozen=True)
class Pair:
    """One metric's training and validation series (either may be None, not both).

    Attributes:
        metric: the base metric (``loss``, ``accuracy``).
        mode: which way it improves.
        train: the training series.
        val: the validation series.
        primary: the pair the user chose (or the default loss): it alone is judged for plateau
            and stalled, and gives the verdict's best step and summary.
    """

    metric: str
    mode: Mode
    train: Series | None
    val: Series | None
    primary: bool = False

    def describe(self) -> dict:
        """A JSON-safe summary."""
        return {
            "metric": self.metric,
            "mode": str(self.mode),
            "train": self.train.name if self.train is not None else None,
            "val": self.val.name if self.val is not None else None,
            "primary": self.primary,
        }


def infer_mode(metric: str) -> Mode | None:
    """Which way ``metric`` (a base metric or a series name) improves; None when unknown.

    The whole name, else its last word once trailing :data:`QUALIFIERS` are dropped, must be in
    :data:`DIRECTION_WORDS`: ``box_loss`` is a loss, ``acc_mean_pos`` is not an accuracy.
    """
    name = metric.lower().replace("/", "_").replace("-", "_")
    if name in DIRECTION_WORDS:
        return DIRECTION_WORDS[name]
    words = [w for w in name.split("_") if w]
    while words and words[-1] in QUALIFIERS:
        words.pop()
    return DIRECTION_WORDS.get(words[-1]) if words else None


def is_setting(metric: str) -> bool:
    """A learning rate, a step counter, timing: logged beside the metrics, never judged."""
    return metric in NOT_METRICS or metric.split("_", 1)[0] in ("lr", "time") or metric.endswith("_time")


def parse_directions(items: str | Iterable[str] | Mapping[str, str] | None) -> dict[str, Mode]:
    """``metric=min|max`` items (``--direction``) as metric -> :class:`Mode`.

    Raises:
        ConfigError: a malformed item or a direction other than min / max.
    """
    raw = parse_assignments(items, "--direction", ("METRIC=min", "METRIC=max"))
    return {name.lower(): parse(Mode, value, f"--direction {name}={value}:") for name, value in raw.items()}


def _override(series: Iterable[Series | None], metric: str, directions: Mapping[str, Mode]) -> Mode | None:
    for key in (metric, *(s.name.lower() for s in series if s is not None)):
        if key in directions:
            return directions[key]
    return None


def _pick(candidates: list[Series], prefer: str = "", epoch_first: bool = False) -> Series | None:
    """The series to judge among a metric's candidates: the preferred granularity (with
    ``epoch_first``, the epoch-level logging: validation's), most points."""
    if prefer:
        candidates = [s for s in candidates if s.granularity == prefer] or candidates
    if epoch_first:
        candidates = prefer_epoch(candidates)
    return max(candidates, key=lambda s: (s.finite_count, len(s), -len(s.name)), default=None)


def _duplicate(series: Series, judged: list[Series]) -> bool:
    """The same values logged again under another name (Keras' evaluation_loss_vs_iterations)."""
    return any(
        len(other) == len(series) and np.array_equal(other.values, series.values, equal_nan=True)
        for other in judged
    )


def find_pairs(
    history: History,
    train: Series | None,
    val: Series | None,
    mode: str,
    directions: Mapping[str, Mode] | None = None,
) -> tuple[list[Pair], dict[str, str]]:
    """The pairs to judge: the primary one first, then one per other metric.

    Args:
        history: what was read.
        train: the primary training series (from ``select_series``).
        val: the primary validation series.
        mode: the primary pair's direction (the user's ``--mode``).
        directions: metric or series name (lower case) -> direction, overriding the inferred
            one for the other pairs.

    Returns:
        (pairs, skipped): skipped maps a series name to why it is not judged.
    """
    directions = directions or {}
    chosen = val if val is not None else train
    primary_metric = chosen.metric if chosen is not None else ""
    pairs = [Pair(primary_metric, Mode(mode), train, val, primary=True)]
    judged = [s for s in (train, val) if s is not None]
    groups: dict[str, dict[str, list[Series]]] = {}
    for series in history.series.values():
        if series in judged or series.split not in _JUDGED_SPLITS:
            continue
        if is_setting(series.metric) or series.name.lower() in NOT_METRICS:
            continue
        groups.setdefault(series.metric, {}).setdefault(series.split, []).append(series)
    skipped: dict[str, str] = {}
    for metric, splits in groups.items():
        if metric == primary_metric:
            continue  # another logging of the primary metric (Lightning's _step and _epoch)
        val_s = _pick([s for s in splits.get("val", []) if not _duplicate(s, judged)], epoch_first=True)
        prefer = "epoch" if val_s is not None and val_s.granularity == "epoch" else ""
        train_s = _pick([s for s in splits.get("train", []) if not _duplicate(s, judged)], prefer)
        if train_s is None and val_s is None:
            continue
        metric_mode = _override((train_s, val_s), metric, directions) or infer_mode(metric)
        if metric_mode is None:
            for s in (train_s, val_s):
                if s is not None:
                    skipped[s.name] = (
                        f"which way {metric!r} improves is unknown; pass "
                        f"--direction {metric}=min or =max to judge it"
                    )
            continue
        pairs.append(Pair(metric, metric_mode, train_s, val_s))
        judged += [s for s in (train_s, val_s) if s is not None]
    return pairs, skipped
