"""What a training history is once read: named series of (step, value) points, whatever the format.

Every reader turns its format into a :class:`History`. A series' name is what the file calls it
(``val_loss``, ``train/loss``, ``validation/epoch_loss``); from the name come its split (train or
validation), its base metric (``loss``) and its granularity (per step or per epoch), which is how
the training and validation losses are found without being told. ``select_series`` makes that
choice, or honours the one the user made.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from trainguard.errors import ConfigError, HistoryError
from trainguard.redaction import printable, redact

__all__ = [
    "Series",
    "SeriesParts",
    "History",
    "describe_name",
    "is_loss_like",
    "is_overall_loss",
    "prefer_epoch",
    "shown_name",
    "select_series",
    "DEFAULT_METRICS",
    "MODES",
]

MODES = ("min", "max")

# Which base metric is "the loss" when the user names none, in order of preference.
DEFAULT_METRICS: dict[str, tuple[str, ...]] = {
    "min": ("loss", "total_loss", "nll", "nll_loss", "cross_entropy", "ce_loss", "mse", "mae"),
    "max": ("accuracy", "acc", "categorical_accuracy", "sparse_categorical_accuracy", "top1", "f1", "auc"),
}

_SPLIT_TOKENS = {
    "train": "train",
    "training": "train",
    "val": "val",
    "valid": "val",
    "validation": "val",
    "eval": "val",
    "evaluation": "val",
    "dev": "val",
    "test": "test",
    "testing": "test",
}
_GRANULARITY_TOKENS = {
    "step": "step",
    "steps": "step",
    "batch": "step",
    "iter": "step",
    "iteration": "step",
    "iterations": "step",
    "epoch": "epoch",
    "epochs": "epoch",
}
_TOKEN_SPLIT = re.compile(r"[/_\-.\s:]+")
# Words a writer spells another way for the same metric: ``avg_train_losses`` (a real MLflow run,
# tests/fixtures/real_histories) is the run's average training loss.
_METRIC_WORDS = {"losses": "loss"}
# Of several ``*_loss`` series and no plain ``loss``, the one named with one of these words is the
# run's overall loss (PINNs' ``mean_loss``, ``total_loss``); else the first the file writes.
_OVERALL_WORDS = frozenset(("total", "mean", "avg", "average", "sum", "overall", "combined", "all"))
# An epoch-level series needs this many points to be preferred over its per-step logging.
_EPOCH_POINTS = 3
MAX_SERIES_NOTES = 10  # a note per repaired series, then one line for the rest


def describe_name(name: str, split: str | None = None, context: str = "") -> tuple[str, str, str]:
    """Infers (split, base metric, granularity) from a series name.

    Args:
        name: the name as the file writes it (``val_loss``, ``train_loss_step``, ``Loss/train``).
        split: the split when the format states it (our JSONL does); normalised if given.
        context: where the name was found, e.g. a TensorBoard run directory (``validation``),
            used for the split only.

    Returns:
        ``split`` in train / val / test (or the given split as-is when unknown), ``metric`` the
        name without split and granularity words (``loss``), and ``granularity`` in step / epoch /
        "" (unknown).
    """
    tokens = [t for t in _TOKEN_SPLIT.split(name.lower()) if t]
    found_split = ""
    granularity = ""
    metric_tokens = []
    for token in tokens:
        if token in _SPLIT_TOKENS:
            found_split = found_split or _SPLIT_TOKENS[token]
        elif token in _GRANULARITY_TOKENS:
            granularity = granularity or _GRANULARITY_TOKENS[token]
        else:
            metric_tokens.append(_METRIC_WORDS.get(token, token))
    if split is not None:
        key = split.lower()
        found_split = _SPLIT_TOKENS.get(key, key)
    if not found_split:
        for token in _TOKEN_SPLIT.split(context.lower()):
            if token in _SPLIT_TOKENS:
                found_split = _SPLIT_TOKENS[token]
    return found_split or "train", "_".join(metric_tokens), granularity


@dataclass(frozen=True, eq=False)
class Series:
    """One metric over training: sorted steps and their values (NaN/Inf kept).

    Attributes:
        name: unique within the history, as the file names it (a credential-shaped name redacted).
        split: ``train``, ``val``, ``test`` or a custom split.
        metric: the base metric name (``loss``), used to pair training and validation series.
        granularity: ``step``, ``epoch`` or "" when the name does not say.
        steps: float64, non-decreasing.
        values: float64, same length as ``steps``.
    """

    name: str
    split: str
    metric: str
    granularity: str
    steps: np.ndarray = field(repr=False)
    values: np.ndarray = field(repr=False)

    def __len__(self) -> int:
        return int(self.values.size)

    @property
    def finite_count(self) -> int:
        """How many points are finite numbers."""
        return int(np.count_nonzero(np.isfinite(self.values)))

    def describe(self) -> dict:
        """A JSON-safe summary: name, split, metric, points, first and last step."""
        out = {
            "name": self.name,
            "split": self.split,
            "metric": self.metric,
            "points": len(self),
            "finite_points": self.finite_count,
        }
        if len(self):
            out["first_step"] = _plain(self.steps[0])
            out["last_step"] = _plain(self.steps[-1])
        return out


def _plain(x: float) -> int | float:
    value = float(x)
    return int(value) if value.is_integer() else value


class SeriesParts:
    """A series as a reader collects it: growing arrays of steps and values, and its naming.

    Points are appended into preallocated buffers. Untouched capacity of a large ``np.empty`` is
    never paged in, so a generous ``expected`` costs address space, not memory; that is what keeps
    a 10-million-point read at about one copy of the points.

    Attributes:
        tag: the name to interpret (a column, a metric key, a TensorBoard tag).
        split: the split the format states, "" to infer it from the name.
        context: where the name was found (a TensorBoard run directory), for the split.
    """

    def __init__(self, tag: str, split: str = "", context: str = "", expected: int = 0) -> None:
        self.tag = tag
        self.split = split
        self.context = context
        self._steps = np.empty(max(int(expected), 256))
        self._values = np.empty_like(self._steps)
        self.size = 0

    def reserve(self, expected: int) -> None:
        """Makes room for ``expected`` points in all (a reader's estimate from the file size)."""
        if expected > self._steps.size:
            self._grow(int(expected))

    def _grow(self, capacity: int) -> None:
        steps, values = np.empty(capacity), np.empty(capacity)
        steps[: self.size] = self._steps[: self.size]
        values[: self.size] = self._values[: self.size]
        self._steps, self._values = steps, values

    def add(self, steps: np.ndarray | list[float], values: np.ndarray | list[float]) -> None:
        """Appends points."""
        steps = np.asarray(steps, dtype=np.float64)
        n = steps.size
        if self.size + n > self._steps.size:
            self._grow(max(2 * self._steps.size, self.size + n))
        self._steps[self.size : self.size + n] = steps
        self._values[self.size : self.size + n] = values
        self.size += n

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The points so far (views, no copy)."""
        return self._steps[: self.size], self._values[: self.size]


@dataclass
class History:
    """Every series read from one source.

    Attributes:
        series: by name.
        format: ``jsonl``, ``keras_csv``, ``lightning_csv`` or ``tensorboard``.
        source: the path or URI read.
        x_label: what the steps count: ``step`` or ``epoch``.
        records: rows, records or events read.
        notes: what the reader skipped or repaired (a torn last line, re-logged steps).
        saves: the checkpoint saves' measures, oldest first (trainguard's JSONL only: records
            of split ``checkpoint``, see :mod:`~trainguard.runtime.save_cost`).
    """

    series: dict[str, Series]
    format: str
    source: str
    x_label: str = "step"
    records: int = 0
    notes: list[str] = field(default_factory=list)
    saves: list[dict] = field(default_factory=list)

    @classmethod
    def build(
        cls,
        parts: dict[str, SeriesParts],
        fmt: str,
        source: str,
        x_label: str = "step",
        records: int = 0,
        notes: list[str] | None = None,
    ) -> History:
        """Assembles a history from the series a reader collected, sorting and de-duplicating steps.

        Args:
            parts: series name -> its points and naming facts.
            fmt: the format name.
            source: the path or URI.
            x_label: ``step`` or ``epoch``.
            records: how many records were read.
            notes: reader notes so far.

        Raises:
            HistoryError: when there is not a single point.
        """
        notes = list(notes or [])
        series: dict[str, Series] = {}
        repaired = 0
        for raw in list(parts):
            part = parts.pop(raw)
            steps, values = part.arrays()
            if steps.size == 0:
                continue
            name = _unique(shown_name(raw), raw, series)
            steps, values, note = _ordered(steps, values, name)
            if note:
                repaired += 1
                if repaired <= MAX_SERIES_NOTES:
                    notes.append(note)
            split, metric, granularity = describe_name(
                shown_name(part.tag or raw), shown_name(part.split) or None, shown_name(part.context)
            )
            series[name] = Series(name, split, metric, granularity, steps, values)
        if repaired > MAX_SERIES_NOTES:
            notes.append(
                f"… and {repaired - MAX_SERIES_NOTES} more series re-ordered or de-duplicated the same way"
            )
        if not series:
            raise HistoryError(f"{source}: no metric values found ({records} records read)")
        return cls(series, fmt, source, x_label, records, notes)

    @property
    def points(self) -> int:
        """Points over all series."""
        return sum(len(s) for s in self.series.values())

    def describe(self) -> list[dict]:
        """Every series' summary (see :meth:`Series.describe`)."""
        return [s.describe() for s in self.series.values()]


@functools.lru_cache(maxsize=4096)
def shown_name(text: str) -> str:
    """A name from the file as trainguard may show it: a series named like a credential (a
    token logged as a metric key, a database URL as a column) is redacted before anything
    derives from it (split, metric, messages, reports), since those lower-case and re-join it
    past what the secret shapes recognise; terminal control characters are written as escapes
    (a name must not clear the screen or rewrite the verdict's line)."""
    return printable(redact(text), one_line=True) if text else text


def _unique(shown: str, raw: str, taken: Mapping[str, object]) -> str:
    """``shown``, or ``shown #2``… when redaction made two different names alike."""
    if shown == raw or shown not in taken:
        return shown
    n = 2
    while f"{shown} #{n}" in taken:
        n += 1
    return f"{shown} #{n}"


def _ordered(steps: np.ndarray, values: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray, str]:
    """Sorts by step; a step logged twice keeps its last value (a restarted run re-logged it, or a
    writer logged several values at one step). Repeats of the same value (Lightning logs ``epoch``
    beside both its training and its validation metrics, at one step) are dropped without a note."""
    # A bool per point, not a float difference: the common case (in order) stays cheap.
    if steps.size < 2 or bool(np.all(steps[1:] > steps[:-1])):
        return steps, values, ""
    went_back = bool(np.any(steps[1:] < steps[:-1]))
    order = np.argsort(steps, kind="stable")
    steps, values = steps[order], values[order]
    last = np.ones(steps.size, dtype=bool)
    last[:-1] = steps[1:] != steps[:-1]
    kept = np.flatnonzero(last)
    dropped = np.flatnonzero(~last)
    note, changed = "", 0
    if dropped.size:
        # Each dropped point's step keeps the group's last point: the first kept index after it.
        instead = values[kept[np.searchsorted(kept, dropped)]]
        before = values[dropped]
        changed = int(np.count_nonzero((before != instead) & ~(np.isnan(before) & np.isnan(instead))))
    if changed:
        note = (
            f"{name}: {changed} point(s) at a step logged again with another value were "
            f"replaced by the last one logged at that step (a restarted run re-logging steps, "
            f"or several values logged at one step)"
        )
    elif went_back:  # some steps went back (equal repeats aside)
        note = f"{name}: points were out of step order and have been sorted"
    return steps[last], values[last], note


def _names(history: History, shown: int = 40) -> str:
    """The series names for a message: sorted, the first ``shown``, each bounded."""
    names = sorted(history.series)
    text = ", ".join(name[:80] for name in names[:shown]) or "(none)"
    return text + (f", … ({len(names)} series)" if len(names) > shown else "")


def _match(history: History, wanted: str, split: str) -> list[Series]:
    """Series the user meant by ``wanted``, preferring those of ``split``."""
    key = wanted.strip().lower()
    exact = [s for s in history.series.values() if s.name.lower() == key]
    if exact:
        return exact
    tail = [s for s in history.series.values() if s.name.rsplit("/", 1)[-1].lower() == key]
    if not tail:
        _, metric, _ = describe_name(wanted)
        tail = [s for s in history.series.values() if s.metric == metric and metric]
    in_split = [s for s in tail if s.split == split]
    return in_split or tail


def prefer_epoch(candidates: list[Series]) -> list[Series]:
    """The epoch-level loggings of a metric when there are enough points in one: a per-batch
    (``_step``) series swings by half its level on healthy runs, the epoch mean does not."""
    epoch = [s for s in candidates if s.granularity == "epoch" and s.finite_count >= _EPOCH_POINTS]
    return epoch or candidates


def _best(candidates: list[Series], prefer_granularity: str = "", epoch_first: bool = False) -> Series | None:
    """Among equally named candidates: the preferred granularity (with ``epoch_first``, the
    epoch-level loggings), then the most finite points."""
    if not candidates:
        return None
    if prefer_granularity:
        same = [s for s in candidates if s.granularity == prefer_granularity]
        candidates = same or candidates
    if epoch_first:
        candidates = prefer_epoch(candidates)
    return max(candidates, key=lambda s: (s.finite_count, len(s), -len(s.name)))


def is_loss_like(metric: str) -> bool:
    """Whether a base metric names a loss: its last word is ``loss`` (``mean_loss``, ``box_loss``,
    ``elbo_loss``)."""
    return metric.rsplit("_", 1)[-1] == "loss"


def is_overall_loss(metric: str) -> bool:
    """Whether a loss is the run's whole objective rather than one of its parts: ``loss`` itself,
    or named ``total``/``mean``/``avg``... (``mean_loss``, ``total_loss``, ``avg_loss``)."""
    return metric == "loss" or bool(_OVERALL_WORDS.intersection(metric.split("_")))


def _loss_like(history: History, split: str, prefer_granularity: str = "") -> Series | None:
    """The run's loss when none is named plainly: a ``*_loss`` series, the overall one first."""
    found = [s for s in history.series.values() if s.split == split and is_loss_like(s.metric)]
    if not found:
        return None
    overall = [s for s in found if _OVERALL_WORDS.intersection(s.metric.split("_"))]
    metric = (overall or found)[0].metric
    return _best([s for s in found if s.metric == metric], prefer_granularity, epoch_first=split == "val")


def _by_default_names(
    history: History, split: str, names: tuple[str, ...], prefer_granularity: str = ""
) -> Series | None:
    for metric in names:
        found = [s for s in history.series.values() if s.split == split and s.metric == metric]
        if found:
            # A validation metric logged per batch too (Lightning's val_loss_step) counts its own
            # batches on its own axis: the per-epoch logging is the one to pair with training.
            return _best(found, prefer_granularity, epoch_first=split == "val")
    return None


def select_series(
    history: History, train_metric: str | None = None, val_metric: str | None = None, mode: str = "min"
) -> tuple[Series | None, Series | None]:
    """Finds the training and validation series to judge.

    Without names, the training series is the train-split series whose base metric comes first
    in :data:`DEFAULT_METRICS` for ``mode`` (``loss`` for min), else (mode min) a ``*_loss``
    series (the one named ``total``/``mean``... first: PINNs' ``mean_loss``, else the first the
    file writes: Ultralytics' ``box_loss``), and the validation series the val-split series of the
    same metric. Of a validation metric logged per batch and per epoch (Lightning's
    ``val_loss_step``, counted on its own axis, and ``val_loss_epoch``), the per-epoch logging is
    chosen; when the validation series is per epoch (Keras' TensorBoard ``epoch_loss``), a
    per-epoch training series is preferred so the two share an x axis; otherwise the training
    series with the most points (the rules average a per-batch loss per validation interval).

    Args:
        history: what was read.
        train_metric: a series name (``train_loss_step``), a column/tag (``loss``) or a base metric.
        val_metric: likewise for validation.
        mode: ``min`` (a loss) or ``max`` (accuracy-like).

    Returns:
        (train, val); either may be None when the history lacks it, not both.

    Raises:
        ConfigError: a named metric that the history does not have, or an unknown mode.
        HistoryError: neither series could be found.
    """
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    available = _names(history)
    val = None
    if val_metric:
        val = _best(_match(history, val_metric, "val"))
        if val is None:
            raise ConfigError(
                f"validation metric {val_metric!r} is not in {history.source}; the history has: {available}"
            )
    train = None
    if train_metric:
        train = _best(
            _match(history, train_metric, "train"),
            val.granularity if val is not None and val.granularity == "epoch" else "",
        )
        if train is None:
            raise ConfigError(
                f"training metric {train_metric!r} is not in {history.source}; the history has: {available}"
            )
    names = DEFAULT_METRICS[mode]
    if val is None and not val_metric:
        metric_names = (train.metric,) if train is not None else names
        val = _by_default_names(history, "val", metric_names)
    if train is None and not train_metric:
        metric_names = (val.metric,) if val is not None else names
        prefer = "epoch" if val is not None and val.granularity == "epoch" else ""
        train = _by_default_names(history, "train", metric_names, prefer)
        if train is None and val is None:
            train = _by_default_names(history, "train", names)
    if train is None and val is None and mode == "min" and not (train_metric or val_metric):
        train = _loss_like(history, "train")
        val = _by_default_names(history, "val", (train.metric,)) if train is not None else None
        val = val or _loss_like(history, "val")
        if train is None and val is not None:
            train = _by_default_names(history, "train", (val.metric,))
    if train is None and val is None:
        hint = "" if mode == "max" else " (for an accuracy-like metric use mode max)"
        raise HistoryError(
            f"{history.source}: no training or validation series named like "
            f"{' / '.join(names[:3])} found{hint}; name them with --train-metric / "
            f"--val-metric. The history has: {available}"
        )
    return train, val
