"""Detectors: small pure functions over (steps, values) arrays, one per failure class.

Every rule sees values *oriented* so that lower is better (``values`` for a loss, ``-values`` for
an accuracy-like metric in mode max), finite points only unless it is about non-finite points.
Thresholds live in :class:`RuleConfig`, severities in :data:`DEFAULT_SEVERITY`, the order in
which classes are named in :data:`RULE_ORDER`, and which finding makes another redundant in
:data:`SUPPRESSES`: one table each.

Expected patterns must not fire: validation below training (dropout), noisy validation around a
falling trend, a short warm-up bump, a single spike that recovers. Each rule says how it avoids
them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from trainguard.errors import ConfigError

__all__ = [
    "RuleConfig",
    "Detection",
    "NotJudged",
    "DEFAULT_SEVERITY",
    "RULE_ORDER",
    "SUPPRESSES",
    "SEVERITIES",
    "non_finite",
    "divergence",
    "instability",
    "plateau",
    "stalled",
    "overfit",
    "interval_means",
    "rolling_mean",
]

SEVERITIES = ("fail", "warn")

# Default severity per class (overridable with fail_on / warn_on).
DEFAULT_SEVERITY: dict[str, str] = {
    "non_finite": "fail",
    "divergence": "fail",
    "instability": "fail",
    "overfit": "fail",
    "plateau": "warn",
    "stalled": "warn",
}

# The order in which classes are named: the first failing one is the verdict's failure class.
RULE_ORDER: tuple[str, ...] = (
    "non_finite", "divergence", "instability", "overfit", "stalled", "plateau")

# A finding of the key class makes those of the listed classes redundant (dropped): a loss that
# turned NaN or exploded is neither "flat" nor merely "oscillating", and a stalled pipeline
# explains a flat curve (raising the LR on it would be the trap).
SUPPRESSES: dict[str, tuple[str, ...]] = {
    "non_finite": ("divergence", "instability", "plateau", "stalled"),
    "divergence": ("instability", "plateau"),
    "instability": ("plateau",),
    "stalled": ("plateau",),
}


@dataclass(frozen=True)
class RuleConfig:
    """Every threshold of every rule, with its default (one table).

    Attributes:
        divergence_factor: the loss diverged when it stays above ``best + factor * scale``,
            ``scale`` being the larger of (first value - best) and |best|: 0.5 means "back more
            than half-way to where it started, or 50 % above a best that was never left".
        divergence_min_points: the excursion must last at least this many logged points up to the
            end of the run (one spike that recovers is not divergence).
        divergence_min_fraction: and this share of the points from its start on must be above the
            line (noisy per-batch losses dip now and then).
        instability_swing: a rise between consecutive points of at least this share of the
            series' median level (over the second half of the run) is a swing.
        instability_min_swings: at least this many swings in the second half, ...
        instability_swing_fraction: ... and at least this share of its steps, make oscillation
            (one spike that recovers is one swing).
        instability_min_points: fewer points in the judged series are not judged.
        instability_start_share: a swing is also measured against this share of the run's
            starting level, so that a loss near 0 is not "oscillating" by tiny amounts.
        plateau_min_improvement: the training loss plateaued when its best (smoothed) level is
            less than this share below its start.
        plateau_min_points: fewer training points are not judged for plateau.
        stalled_min_repeats: this many consecutive identical training values is a stall.
        stalled_rel_tol: values closer than this (relative) count as identical.
        overfit_patience: validation evaluations after the best one before overfit is judged.
        overfit_min_rise: validation (smoothed) must end at least this share above its best, ...
        overfit_smoothing: ... smoothed over this many evaluations at least (noisy validation;
            with many evaluations, over a twentieth of them).
        overfit_train_improvement: and training must have improved by at least this share since
            the best validation step (training that also stalled is not overfitting).
        overfit_gap_ratio: when set, (val - train) / |train| above it over the last
            ``overfit_patience`` evaluations is also overfit, as SageMaker Debugger's Overfit rule
            (ratio_threshold 0.1) judges it. Off by default: on a converged run the training loss
            nears 0 and that ratio exceeds 0.1 on almost every healthy run.
    """

    divergence_factor: float = 0.5
    divergence_min_points: int = 3
    divergence_min_fraction: float = 0.9
    instability_swing: float = 0.25
    instability_min_swings: int = 2
    instability_swing_fraction: float = 0.15
    instability_min_points: int = 8
    instability_start_share: float = 0.1
    plateau_min_improvement: float = 0.2
    plateau_min_points: int = 8
    stalled_min_repeats: int = 5
    stalled_rel_tol: float = 1e-9
    overfit_patience: int = 3
    overfit_min_rise: float = 0.1
    overfit_smoothing: int = 3
    overfit_train_improvement: float = 0.05
    overfit_gap_ratio: float | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None and f.name == "overfit_gap_ratio":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or \
                    not math.isfinite(value) or value < 0:
                raise ConfigError(f"threshold {f.name} must be a non-negative number, "
                                  f"not {value!r}")
            if f.type == "int" and value != int(value):
                raise ConfigError(f"threshold {f.name} must be a whole number, not {value!r}")
        for name in ("divergence_min_points", "instability_min_points", "plateau_min_points",
                     "stalled_min_repeats", "overfit_patience", "overfit_smoothing",
                     "instability_min_swings"):
            if getattr(self, name) < 1:
                raise ConfigError(f"threshold {name} must be at least 1")
        if self.stalled_min_repeats < 2:
            raise ConfigError("threshold stalled_min_repeats must be at least 2")
        if not 0 < self.divergence_min_fraction <= 1:
            raise ConfigError("threshold divergence_min_fraction must be in (0, 1]")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The threshold names a user may set."""
        return tuple(f.name for f in dataclasses.fields(cls))

    def with_overrides(self, overrides: dict[str, float | None] | None) -> RuleConfig:
        """A copy with ``overrides`` (name -> value) applied.

        Raises:
            ConfigError: an unknown name or a bad value.
        """
        if not overrides:
            return self
        unknown = sorted(set(overrides) - set(self.names()))
        if unknown:
            raise ConfigError(f"unknown threshold(s) {', '.join(unknown)}; known: "
                              f"{', '.join(self.names())}")
        clean = {}
        for name, value in overrides.items():
            if isinstance(value, str):
                text = value.strip().lower()
                if name == "overfit_gap_ratio" and text in ("", "none", "off"):
                    clean[name] = None
                    continue
                try:
                    value = float(value)
                except ValueError:
                    raise ConfigError(f"threshold {name} must be a number, not {value!r}") \
                        from None
            kind = next(f.type for f in dataclasses.fields(self) if f.name == name)
            if kind == "int" and isinstance(value, float) and value.is_integer():
                value = int(value)
            clean[name] = value
        return dataclasses.replace(self, **clean)

    def to_dict(self) -> dict[str, float | None]:
        """Every threshold by name."""
        return {name: getattr(self, name) for name in self.names()}


@dataclass(frozen=True)
class Detection:
    """What a rule found: where, the numbers behind it, and a one-line account."""

    step_range: tuple[float, float]
    evidence: dict[str, float]
    message: str


@dataclass(frozen=True)
class NotJudged:
    """Why a rule could not judge (too few points, a missing series)."""

    reason: str


Outcome = Detection | NotJudged | None


# --- helpers ---------------------------------------------------------------------------------


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _step(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def rolling_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Centred moving average (the window shrinks at the edges), O(n) time, three arrays."""
    n = values.size
    window = max(1, min(int(window), n))
    if window == 1 or n == 0:
        return values.astype(np.float64, copy=True)
    half = window // 2
    csum = np.empty(n + 1)
    csum[0] = 0.0
    np.cumsum(values, out=csum[1:])
    out = np.empty(n)
    # Interior: index i averages values[i - half : i - half + window].
    lo, hi = half, n - window + half  # i in [lo, hi]
    np.subtract(csum[window:], csum[:n + 1 - window], out=out[lo:hi + 1])
    out[lo:hi + 1] /= window
    for i in (*range(0, lo), *range(hi + 1, n)):  # the edges: fewer than ``window`` points
        a, b = max(i - half, 0), min(i - half + window, n)
        out[i] = (csum[b] - csum[a]) / (b - a)
    return out


def interval_means(steps: np.ndarray, values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """For each step in ``at``: the mean of ``values`` logged since the previous one.

    With training logged per step and validation per epoch this is each epoch's mean training
    loss, the number to set against the validation loss. An interval without points takes the
    last value before it (or the first after, before any).
    """
    n = values.size
    if n == 0:
        return np.full(at.size, np.nan)
    upto = np.searchsorted(steps, at, side="right")
    since = np.concatenate(([0], upto[:-1]))
    csum = np.concatenate(([0.0], np.cumsum(values, dtype=np.float64)))
    count = upto - since
    nearest = values[np.clip(upto - 1, 0, n - 1)]
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (csum[upto] - csum[since]) / np.maximum(count, 1)
    return np.where(count > 0, means, nearest)


def _orient(values: np.ndarray, mode: str) -> tuple[np.ndarray, float]:
    """Values with lower = better, and the sign that turns them back into the metric's units."""
    return (values, 1.0) if mode == "min" else (-values, -1.0)


def _words(mode: str) -> tuple[str, str]:
    """How a worsening reads: ("rose", "above") for a loss, ("fell", "below") for accuracy."""
    return ("rose", "above") if mode == "min" else ("fell", "below")


def _head(values: np.ndarray) -> float:
    """The level a run started at: median of its first few points (robust to one spike)."""
    k = max(1, min(10, values.size // 10))
    return float(np.median(values[:k]))


# --- rules -----------------------------------------------------------------------------------


def non_finite(steps: np.ndarray, values: np.ndarray, label: str = "loss") -> Outcome:
    """NaN or Inf in a monitored series (any, anywhere: a NaN loss means NaN weights).

    Args:
        steps: the series' steps.
        values: raw values (not oriented; NaN/Inf kept).
        label: the series' name for the message.
    """
    bad = ~np.isfinite(values)
    if not bad.any():
        return None
    first = int(np.argmax(bad))
    last = int(bad.size - 1 - np.argmax(bad[::-1]))
    nan = int(np.count_nonzero(np.isnan(values)))
    count = int(np.count_nonzero(bad))
    kind = "NaN" if np.isnan(values[first]) else ("+Inf" if values[first] > 0 else "-Inf")
    evidence: dict[str, float] = {
        "first_non_finite_step": float(steps[first]), "non_finite_points": count,
        "nan_points": nan, "inf_points": count - nan, "points": int(values.size)}
    before = values[:first]
    if before.size:
        evidence["last_finite_value"] = float(before[-1])
        evidence["largest_finite_value_before"] = float(np.max(np.abs(before)))
    message = (f"{label} became {kind} at step {_step(steps[first])} ({count} of {values.size} "
               f"points non-finite)")
    if before.size:
        message += f"; the last finite value was {_fmt(before[-1])}"
    return Detection((float(steps[first]), float(steps[last])), evidence, message)


def divergence(steps: np.ndarray, values: np.ndarray, cfg: RuleConfig, label: str = "loss",
               mode: str = "min") -> Outcome:
    """The metric got far worse than its best and stayed there to the end of the run.

    In loss terms (lower is better) the line is ``best + divergence_factor * max(first - best,
    |best|)``; the run diverged when, from some point on, at least ``divergence_min_fraction`` of
    the points (and the first of them) lie beyond it, for at least ``divergence_min_points``
    points, and for more than twice as long as any earlier excursion beyond it (else it is the
    last high phase of an oscillation). A single spike that recovers leaves the points after it
    below the line; a noisy per-batch loss may dip below it now and then.

    Args:
        steps: finite points' steps.
        values: finite values in the metric's units.
        cfg: thresholds.
        label: the series' name for the message.
        mode: ``min`` (a loss) or ``max`` (accuracy-like).
    """
    y, sign = _orient(values, mode)
    n = y.size
    if n < cfg.divergence_min_points + 1:
        return NotJudged(f"{n} finite points (needs {cfg.divergence_min_points + 1})")
    best_index = int(np.argmin(y))
    best = float(y[best_index])
    scale = max(float(y[0]) - best, abs(best), 1e-12)
    line = best + cfg.divergence_factor * scale
    above = y > line
    if not above[-1]:
        return None
    # Share of points beyond the line from each index to the end, counted from the back.
    above_from = np.cumsum(above[::-1])[::-1]
    length = n - np.arange(n)
    ok = above & (above_from >= cfg.divergence_min_fraction * length) & (
        length >= cfg.divergence_min_points) & (np.arange(n) > best_index)
    if not ok.any():
        return None
    start = int(np.argmax(ok))
    # An oscillation also ends in a high phase; divergence is an excursion longer than any before
    # it (twice the longest earlier run beyond the line, which came back).
    earlier = above[best_index + 1:start]
    if earlier.any():
        edges = np.flatnonzero(np.diff(np.concatenate(([0], earlier.view(np.int8), [0]))))
        if 2 * int((edges[1::2] - edges[::2]).max()) > n - start:
            return None
    tail = y[start:]
    level = sign * float(np.median(tail))
    worst = sign * float(np.max(tail))
    best_value = sign * best
    evidence = {"best": best_value, "best_step": float(steps[best_index]),
                "line": sign * line, "tail_median": level, "worst": worst,
                "points_beyond": int(above[start:].sum()), "points": int(tail.size)}
    if best_value > 0 and level > 0:
        evidence["ratio_to_best"] = level / best_value
    worse, _ = _words(mode)
    message = (f"{label} {worse} from its best {_fmt(best_value)} (step "
               f"{_step(steps[best_index])}) to {_fmt(level)} (median) from step "
               f"{_step(steps[start])} on and stayed there (worst {_fmt(worst)})")
    return Detection((float(steps[start]), float(steps[-1])), evidence, message)


def instability(steps: np.ndarray, values: np.ndarray, cfg: RuleConfig, label: str = "loss",
                mode: str = "min", smoothing: int = 1) -> Outcome:
    """Large oscillation that goes on: repeated big swings for the worse in the run's second half.

    A swing is a worsening between consecutive (smoothed) points of at least
    ``instability_swing`` times the second half's median level. Oscillation is at least
    ``instability_min_swings`` swings that are also at least ``instability_swing_fraction`` of
    the second half's steps. A falling curve rarely rises; noise around a falling trend rises by
    less than a swing; one spike that recovers is one swing.

    Args:
        steps: finite points' steps.
        values: finite values in the metric's units.
        cfg: thresholds.
        label: the series' name for the message.
        mode: ``min`` (a loss) or ``max`` (accuracy-like).
        smoothing: points to average first (per-batch training losses: about one epoch's worth);
            the second half is then judged one point per window.
    """
    y, sign = _orient(values, mode)
    n = y.size
    if n < cfg.instability_min_points:
        return NotJudged(f"{n} finite points (needs {cfg.instability_min_points})")
    curve = rolling_mean(y, smoothing) if smoothing > 1 else y
    half = n // 2
    tail = curve[half:]
    tail_steps = steps[half:]
    if smoothing > 1:
        tail = tail[::smoothing]
        tail_steps = tail_steps[::smoothing]
        if tail.size < 4:
            return NotJudged(f"{tail.size} points once averaged over {smoothing} (needs 4)")
    level = float(np.median(tail))
    # Near-zero losses (a converged per-batch loss) swing by large ratios of a tiny level; a
    # swing must also be large against where the run started.
    reference = max(abs(level), cfg.instability_start_share * abs(_head(y)), 1e-12)
    rises = np.diff(tail)
    swings = rises >= cfg.instability_swing * reference
    count = int(np.count_nonzero(swings))
    needed = max(cfg.instability_min_swings,
                 math.ceil(cfg.instability_swing_fraction * rises.size))
    if count < needed:
        return None
    first_swing = int(np.argmax(swings))
    largest = float(rises.max()) / reference
    low, high = sorted((sign * float(tail.min()), sign * float(tail.max())))
    evidence = {"swings": count, "steps_judged": int(rises.size), "median_level": sign * level,
                "largest_swing_ratio": largest, "low": low, "high": high}
    message = (f"{label} oscillates: {count} swings of {cfg.instability_swing:.0%} or more of its "
               f"level ({_fmt(sign * level)}) in the second half of the run, between "
               f"{_fmt(low)} and {_fmt(high)}, with no downward trend")
    return Detection((float(tail_steps[first_swing]), float(tail_steps[-1])), evidence, message)


def plateau(steps: np.ndarray, values: np.ndarray, cfg: RuleConfig, label: str = "loss",
            mode: str = "min") -> Outcome:
    """The training metric never improved: its best smoothed level is barely better than its start.

    Args:
        steps: finite points' steps.
        values: finite values in the metric's units.
        cfg: thresholds.
        label: the series' name for the message.
        mode: ``min`` (a loss) or ``max`` (accuracy-like).
    """
    y, sign = _orient(values, mode)
    n = y.size
    if n < cfg.plateau_min_points:
        return NotJudged(f"{n} finite points (needs {cfg.plateau_min_points})")
    smooth = rolling_mean(y, max(1, n // 20))
    head = _head(y)
    best = float(smooth.min())
    scale = max(abs(head), abs(best), 1e-12)
    improvement = (head - best) / scale
    if improvement >= cfg.plateau_min_improvement:
        return None
    evidence = {"start": sign * head, "best_smoothed": sign * best, "final": float(values[-1]),
                "improvement": improvement, "points": int(n)}
    message = (f"{label} stayed flat: from {_fmt(sign * head)} at the start its best (smoothed) "
               f"level is {_fmt(sign * best)}, {max(improvement, 0):.1%} better, over {n} points")
    return Detection((float(steps[0]), float(steps[-1])), evidence, message)


def stalled(steps: np.ndarray, values: np.ndarray, cfg: RuleConfig,
            label: str = "loss") -> Outcome:
    """The same training loss, to the last digit, at ``stalled_min_repeats`` consecutive points.

    Shuffled mini-batches never give identical losses twice in a row; a pipeline that feeds one
    batch to a model that does not change does. A loss of exactly 0 repeated (a perfectly fit
    batch) is not a stall.

    Args:
        steps: finite points' steps.
        values: finite values (equality does not depend on the mode).
        cfg: thresholds.
        label: the series' name for the message.
    """
    n = values.size
    if n < cfg.stalled_min_repeats:
        return NotJudged(f"{n} finite points (needs {cfg.stalled_min_repeats})")
    tol = cfg.stalled_rel_tol * np.maximum(np.abs(values[1:]), np.abs(values[:-1]))
    same = (np.abs(np.diff(values)) <= tol) & (values[1:] != 0)
    if not same.any():
        return None
    # Runs of True in ``same``: a run of k Trues is k + 1 identical values.
    edges = np.flatnonzero(np.diff(np.concatenate(([0], same.view(np.int8), [0]))))
    starts, ends = edges[::2], edges[1::2]
    lengths = ends - starts + 1
    longest = int(np.argmax(lengths))
    if lengths[longest] < cfg.stalled_min_repeats:
        return None
    stuck = lengths >= cfg.stalled_min_repeats
    a, b = int(starts[longest]), int(ends[longest])
    evidence = {"value": float(values[a]), "repeats": int(lengths[longest]),
                "stalled_points": int(lengths[stuck].sum()), "stalls": int(stuck.sum()),
                "points": int(n)}
    message = (f"{label} was {_fmt(values[a])} to the last digit at {lengths[longest]} "
               f"consecutive points (steps {_step(steps[a])}-{_step(steps[b])})")
    if stuck.sum() > 1:
        message += f"; {int(stuck.sum())} such runs"
    return Detection((float(steps[a]), float(steps[b])), evidence, message)


def overfit(train_steps: np.ndarray, train_values: np.ndarray, val_steps: np.ndarray,
            val_values: np.ndarray, cfg: RuleConfig, label: str = "validation loss",
            mode: str = "min") -> Outcome:
    """Validation got worse after its best while training kept improving.

    Validation (smoothed over ``overfit_smoothing`` evaluations, so noise around a falling trend
    does not count) must end ``overfit_min_rise`` worse than its best, relative to the best, at
    least ``overfit_patience`` evaluations after it, while the training metric over those
    evaluations (its mean per validation interval) is better than at the best. Validation below
    training (dropout) is not overfit; neither is one bad evaluation, which the median of the
    last ``overfit_patience`` absorbs. With ``overfit_gap_ratio`` set, a gap ratio
    (val - train) / |train| above it on each of the last ``overfit_patience`` evaluations also
    counts.

    Args:
        train_steps: finite training points' steps.
        train_values: finite training values in the metric's units.
        val_steps: finite validation points' steps.
        val_values: finite validation values in the metric's units.
        cfg: thresholds.
        label: the validation series' name for the message.
        mode: ``min`` (a loss) or ``max`` (accuracy-like).
    """
    vy, sign = _orient(val_values, mode)
    ty, _ = _orient(train_values, mode)
    nv = vy.size
    need = cfg.overfit_patience + 2
    if nv < need:
        return NotJudged(f"{nv} validation points (needs {need})")
    if ty.size == 0:
        return NotJudged("no finite training points to compare with")
    window = max(cfg.overfit_smoothing, nv // 20)
    smooth = rolling_mean(vy, window)
    best_index = int(np.argmin(vy))  # the checkpoint early stopping would keep
    best_smooth = float(smooth.min())
    patience = cfg.overfit_patience
    end_level = float(np.median(vy[-max(patience, window):]))
    rise = (end_level - best_smooth) / max(abs(best_smooth), 1e-12)
    after = nv - 1 - best_index
    train_at = interval_means(train_steps, ty, val_steps)
    train_at_best = float(train_at[best_index])
    train_end = float(np.median(train_at[-max(patience, window):]))
    train_gain = (train_at_best - train_end) / max(abs(train_at_best), 1e-12)
    gap = end_level - train_end  # worse-than-training, in loss terms
    gap_ratio = gap / max(abs(train_end), 1e-12)
    best_step = float(val_steps[best_index])
    evidence = {"best_step": best_step, "best_value": sign * float(vy[best_index]),
                "final_value": float(val_values[-1]), "worsening": rise,
                "evaluations_since_best": after, "train_at_best": sign * train_at_best,
                "train_improvement": train_gain,
                "train_final": sign * train_end, "gap": gap, "gap_ratio": gap_ratio}
    rising = (after >= patience and rise >= cfg.overfit_min_rise
              and train_gain >= cfg.overfit_train_improvement)
    gapped = False
    if cfg.overfit_gap_ratio is not None:
        recent = (vy[-patience:] - train_at[-patience:]) / np.maximum(
            np.abs(train_at[-patience:]), 1e-12)
        gapped = bool(np.all(recent > cfg.overfit_gap_ratio))
    if not (rising or gapped):
        return None
    worse, beyond = _words(mode)
    if rising:
        message = (f"{label} {worse} {rise:.0%} {beyond} its best ({_fmt(sign * vy[best_index])} "
                   f"at step {_step(best_step)}) over the {after} evaluations since, while "
                   f"training kept improving ({_fmt(sign * train_at_best)} -> "
                   f"{_fmt(sign * train_end)})")
        start = best_step
    else:
        message = (f"the gap between {label} and training ({_fmt(abs(gap))}, ratio "
                   f"{gap_ratio:.2f}) stayed above {cfg.overfit_gap_ratio} over the last "
                   f"{patience} evaluations")
        start = float(val_steps[-patience])
    return Detection((start, float(val_steps[-1])), evidence, message)
