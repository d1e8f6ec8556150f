"""Detectors: small pure functions over (steps, values) arrays, one per failure class.

Every rule sees values *oriented* so that lower is better (``values`` for a loss, ``-values`` for
an accuracy-like metric in mode max), finite points only unless it is about non-finite points.
Thresholds live in :class:`~trainguard.validation.thresholds.RuleConfig`, severities in
:data:`DEFAULT_SEVERITY`, the order in which classes are named in :data:`RULE_ORDER`, and which
finding makes another redundant in :data:`SUPPRESSES`: one table each.

Expected patterns must not fire: validation below training (dropout), noisy validation around a
falling trend (a small or resampled validation set), a short warm-up bump, a single spike that
recovers. A rise is judged against the series' own noise (its robust point-to-point spread) and
its trend (a Mann-Kendall rank test, see :mod:`~trainguard.validation.stats`); each rule says how
it avoids them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from trainguard.choices import Mode, Severity
from trainguard.validation.stats import head, interval_means, noise_sigma, rolling_mean, trend_z
from trainguard.validation.thresholds import RuleConfig

__all__ = [
    "RuleConfig",
    "Detection",
    "NotJudged",
    "Outcome",
    "DEFAULT_SEVERITY",
    "RULE_ORDER",
    "CURVE_RULES",
    "SUPPRESSES",
    "non_finite",
    "divergence",
    "instability",
    "plateau",
    "stalled",
    "overfit",
    "no_learning",
    "interval_means",
    "rolling_mean",
]

# Default severity per class (overridable with fail_on / warn_on).
# A run that learnt nothing fails (issue 29: 7 such real runs passed with a warning, and none of
# them should reach a model registry): identical values (a pipeline feeding one batch, a frozen
# model) and no learning at all (validation never better than its first evaluation, or at
# chance). A run that learns slowly only warns (plateau).
DEFAULT_SEVERITY: dict[str, Severity] = {
    "non_finite": Severity.FAIL,
    "divergence": Severity.FAIL,
    "instability": Severity.FAIL,
    "overfit": Severity.FAIL,
    "stalled": Severity.FAIL,
    "no_learning": Severity.FAIL,
    "gate": Severity.FAIL,
    "plateau": Severity.WARN,
}

# The order in which classes are named: the first failing one is the verdict's failure class
# (a run that overfit and so missed its gate is named for the overfit).
RULE_ORDER: tuple[str, ...] = (
    "non_finite",
    "divergence",
    "instability",
    "overfit",
    "stalled",
    "no_learning",
    "gate",
    "plateau",
)

# A finding of the key class makes those of the listed classes redundant (dropped): a loss that
# turned NaN or exploded is neither "flat" nor merely "oscillating", and a stalled pipeline
# explains a flat curve (raising the LR on it would be the trap).
SUPPRESSES: dict[str, tuple[str, ...]] = {
    "non_finite": ("divergence", "instability", "plateau", "stalled", "no_learning"),
    "divergence": ("instability", "plateau", "no_learning"),
    "instability": ("plateau", "no_learning"),
    "stalled": ("plateau", "no_learning"),
    "no_learning": ("plateau",),
}

# The rules that judge a curve's shape (and so need enough points); non_finite judges any point
# and gate any value.
CURVE_RULES: tuple[str, ...] = ("divergence", "instability", "overfit", "stalled", "no_learning", "plateau")


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


def _orient(values: np.ndarray, mode: str) -> tuple[np.ndarray, float]:
    """Values with lower = better, and the sign that turns them back into the metric's units."""
    return (values, 1.0) if mode == Mode.MIN else (-values, -1.0)


def _words(mode: str) -> tuple[str, str]:
    """How a worsening reads: ("rose", "above") for a loss, ("fell", "below") for accuracy."""
    return ("rose", "above") if mode == Mode.MIN else ("fell", "below")


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
        "first_non_finite_step": float(steps[first]),
        "non_finite_points": count,
        "nan_points": nan,
        "inf_points": count - nan,
        "points": int(values.size),
    }
    before = values[:first]
    if before.size:
        evidence["last_finite_value"] = float(before[-1])
        evidence["largest_finite_value_before"] = float(np.max(np.abs(before)))
    message = (
        f"{label} became {kind} at step {_step(steps[first])} ({count} of {values.size} points non-finite)"
    )
    if before.size:
        message += f"; the last finite value was {_fmt(before[-1])}"
    return Detection((float(steps[first]), float(steps[last])), evidence, message)


def _smoothed_min(y: np.ndarray, window: int) -> tuple[int, float]:
    """Where, and how low, the curve averaged over ``window`` centred points is lowest. The first
    and last points count as logged: a run best at its start is not averaged into its rise."""
    if window <= 1 or y.size < 3:
        index = int(np.argmin(y))
        return index, float(y[index])
    if window == 3:  # the default, without rolling_mean's cumulative sums over a long series
        inner = y[:-2] + y[1:-1]
        inner += y[2:]
        inner /= 3
    else:
        inner = rolling_mean(y, window)[1:-1]
    index = int(np.argmin(inner)) + 1
    best = float(inner[index - 1])
    for edge in (0, y.size - 1):
        if y[edge] < best:
            index, best = edge, float(y[edge])
    return index, best


def divergence(
    steps: np.ndarray, values: np.ndarray, cfg: RuleConfig, label: str = "loss", mode: str = "min"
) -> Outcome:
    """The metric got far worse than its best and stayed there to the end of the run.

    In loss terms (lower is better) the line is ``best + divergence_factor * max(first - best,
    |best|)``, best read on the curve averaged over ``divergence_smoothing`` points (one lucky
    batch is not the best); the run diverged when, from some point on, at least
    ``divergence_min_fraction`` of the points (and the first of them) lie beyond it, for at
    least ``divergence_min_points`` points, and for more than twice as long as any earlier
    excursion beyond it (else it is the last high phase of an oscillation). A single spike that
    recovers leaves the points after it below the line; a noisy per-batch loss may dip below it
    now and then.

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
    # The line is drawn from the curve averaged over a few points: a noisy per-batch loss's
    # minimum is one lucky batch, and a line drawn from it has most of a stationary series
    # beyond it. The points judged against it are the logged ones.
    window = cfg.divergence_smoothing if n >= 3 * cfg.divergence_smoothing else 1
    best_index, best = _smoothed_min(y, window)
    scale = max(float(y[0]) - best, abs(best), 1e-12)  # the start as logged: runs start high
    line = best + cfg.divergence_factor * scale
    above = y > line
    if not above[-1]:
        return None
    # Share of points beyond the line from each index to the end, counted from the back.
    above_from = np.cumsum(above[::-1])[::-1]
    length = n - np.arange(n)
    ok = (
        above
        & (above_from >= cfg.divergence_min_fraction * length)
        & (length >= cfg.divergence_min_points)
        & (np.arange(n) > best_index)
    )
    if not ok.any():
        return None
    start = int(np.argmax(ok))
    # An oscillation also ends in a high phase; divergence is an excursion longer than any before
    # it (twice the longest earlier run beyond the line, which came back).
    earlier = above[best_index + 1 : start]
    if earlier.any():
        edges = np.flatnonzero(np.diff(np.concatenate(([0], earlier.view(np.int8), [0]))))
        if 2 * int((edges[1::2] - edges[::2]).max()) > n - start:
            return None
    tail = y[start:]
    level = sign * float(np.median(tail))
    worst = sign * float(np.max(tail))
    best_index = int(np.argmin(y[: start + 1]))  # the logged best, as the user sees it
    best_value = sign * float(y[best_index])
    evidence = {
        "best": best_value,
        "best_step": float(steps[best_index]),
        "line": sign * line,
        "tail_median": level,
        "worst": worst,
        "points_beyond": int(above[start:].sum()),
        "points": int(tail.size),
    }
    if best_value > 0 and level > 0:
        evidence["ratio_to_best"] = level / best_value
    worse, _ = _words(mode)
    message = (
        f"{label} {worse} from its best {_fmt(best_value)} (step "
        f"{_step(steps[best_index])}) to {_fmt(level)} (median) from step "
        f"{_step(steps[start])} on and stayed there (worst {_fmt(worst)})"
    )
    return Detection((float(steps[start]), float(steps[-1])), evidence, message)


def instability(
    steps: np.ndarray,
    values: np.ndarray,
    cfg: RuleConfig,
    label: str = "loss",
    mode: str = "min",
    smoothing: int = 1,
    *,
    start: float | None = None,
    confirm: tuple[np.ndarray, np.ndarray] | None = None,
) -> Outcome:
    """Large oscillation that goes on: repeated big swings, and no downward trend, late in the run.

    A swing is a worsening between consecutive (smoothed) points of at least
    ``instability_swing`` times the reference level: the second half's median, or
    ``instability_start_share`` of where the run started if that is larger (a converged loss
    near 0 does not "oscillate" by tiny amounts). Oscillation is at least
    ``instability_min_swings`` swings that are also at least ``instability_swing_fraction`` of
    the second half's steps, with no downward trend: when the second half falls with a
    Mann-Kendall significance of ``instability_trend_z``, the swings are noise around a falling
    trend. So are they when the ``confirm`` series (the training curve) falls so over the same
    steps while its own means per validation interval do not swing: the optimiser is fine and
    the validation measurement is noisy, as a small or resampled validation set makes it; and
    when the training curve is calm and learnt (fell ``plateau_min_improvement`` below its start)
    and validation ends near its best (its last ``overfit_patience`` evaluations give back less
    than ``instability_near_best`` of its gain from the first evaluation): a tiny validation set's
    swings, on a run too short for the training's fall to be significant. One spike that
    recovers is one swing.

    Args:
        steps: finite points' steps.
        values: finite values in the metric's units.
        cfg: thresholds.
        label: the series' name for the message.
        mode: ``min`` (a loss) or ``max`` (accuracy-like).
        smoothing: points to average first (per-batch training losses: about one epoch's worth);
            the second half is then judged one point per window.
        start: where the run started, in the metric's units (the training curve's first level,
            logged before the first evaluation); None: this series' own start.
        confirm: (steps, values) of the training curve, when judging validation: smooth and
            falling over the same steps, it makes the validation swings measurement noise.
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
    begin = abs(_head(y)) if start is None else max(abs(start), abs(_head(y)))
    reference = max(abs(level), cfg.instability_start_share * begin, 1e-12)
    rises = np.diff(tail)
    swings = rises >= cfg.instability_swing * reference
    count = int(np.count_nonzero(swings))
    needed = max(cfg.instability_min_swings, math.ceil(cfg.instability_swing_fraction * rises.size))
    if count < needed:
        return None
    trend = trend_z(tail)
    if trend <= -cfg.instability_trend_z:
        return None  # noise around a falling trend
    evidence = {
        "swings": count,
        "steps_judged": int(rises.size),
        "median_level": sign * level,
        "largest_swing_ratio": float(rises.max()) / reference,
        "trend_z": trend,
    }
    if confirm is not None and smoothing == 1:
        calm, confirm_trend = _settling(confirm, steps, half, mode, cfg, reference, needed)
        if calm and confirm_trend <= -cfg.instability_trend_z:
            return None  # training falls smoothly: the swings are measurement noise
        evidence["train_trend_z"] = confirm_trend
        given_back = _given_back(y, cfg.overfit_patience)
        evidence["given_back"] = given_back
        if calm and _learnt(confirm, mode, cfg) and given_back < cfg.instability_near_best:
            return None  # a learnt run ending near its best: a small validation set's noise
    first_swing = int(np.argmax(swings))
    low, high = sorted((sign * float(tail.min()), sign * float(tail.max())))
    evidence.update(low=low, high=high)
    message = (
        f"{label} oscillates: {count} swings of {cfg.instability_swing:.0%} or more of its "
        f"level ({_fmt(sign * level)}) in the second half of the run, between "
        f"{_fmt(low)} and {_fmt(high)}, with no downward trend"
    )
    return Detection((float(tail_steps[first_swing]), float(tail_steps[-1])), evidence, message)


def _given_back(y: np.ndarray, last: int) -> float:
    """The share of what an oriented validation curve gained from its first evaluation to its
    best that its last ``last`` evaluations (their median) have given back: 0 at the best, 1 back
    at the first evaluation (inf when it never got better than that)."""
    gain = float(y[0] - y.min())
    back = float(np.median(y[-last:]) - y.min())
    return back / gain if gain > 0 else math.inf


def _learnt(confirm: tuple[np.ndarray, np.ndarray], mode: str, cfg: RuleConfig) -> bool:
    """Whether the training curve ended ``plateau_min_improvement`` below where it started (its
    head, and its last tenth's median: per-batch noise does not decide it)."""
    c_y, _ = _orient(confirm[1], mode)
    if c_y.size < 3:
        return False
    begin = _head(c_y)
    end = float(np.median(c_y[-max(3, c_y.size // 10) :]))
    return begin - end >= cfg.plateau_min_improvement * max(abs(begin), 1e-12)


def _settling(
    confirm: tuple[np.ndarray, np.ndarray],
    steps: np.ndarray,
    half: int,
    mode: str,
    cfg: RuleConfig,
    reference: float,
    needed: int,
) -> tuple[bool, float]:
    """Whether the training curve is calm over the judged half (its means per validation
    interval swing fewer than ``needed`` times), and its trend z there (negative: falling)."""
    c_steps, c_values = confirm
    c_y, _ = _orient(c_values, mode)
    if c_y.size < 3:
        return False, 0.0
    means = interval_means(c_steps, c_y, steps)[half:]
    swings = int(np.count_nonzero(np.diff(means) >= cfg.instability_swing * reference))
    return swings < needed, trend_z(c_y[c_steps >= steps[half]])


def plateau(
    steps: np.ndarray, values: np.ndarray, cfg: RuleConfig, label: str = "loss", mode: str = "min"
) -> Outcome:
    """The training metric never improved much: its best smoothed level is barely below its start.

    The start is where the run really began: the highest of its first three points (a
    per-epoch log's first point is already an epoch's mean, and the median of the first tenth
    is after the fast early drop). A metric that is not positive throughout (a log-likelihood of
    -2.6, a signed objective) has no scale to take a share of: it plateaued when it shows no
    downward trend at all (Mann-Kendall, ``instability_trend_z``).

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
    start = head(y)
    best = float(smooth.min())
    signed = bool(np.any(values <= 0))
    if signed:
        trend = trend_z(y)
        if trend <= -cfg.instability_trend_z:
            return None
        improvement = 0.0
    else:
        scale = max(abs(start), abs(best), 1e-12)
        improvement = (start - best) / scale
        if improvement >= cfg.plateau_min_improvement:
            return None
    evidence = {
        "start": sign * start,
        "best_smoothed": sign * best,
        "final": float(values[-1]),
        "improvement": improvement,
        "points": int(n),
    }
    if signed:
        evidence["trend_z"] = trend
        how = f"no downward trend (Mann-Kendall z {trend:+.1f})"
    else:
        how = f"{max(improvement, 0):.1%} better"
    message = (
        f"{label} stayed flat: from {_fmt(sign * start)} at the start its best (smoothed) "
        f"level is {_fmt(sign * best)}, {how}, over {n} points"
    )
    return Detection((float(steps[0]), float(steps[-1])), evidence, message)


def decimal_quantum(values: np.ndarray, sample: int = 512) -> float:
    """The decimal precision a series was written with (``1e-4`` for losses rounded to 4
    decimals), or 0 when it carries full float precision; read from up to ``sample`` points."""
    if values.size > sample:
        values = values[:: values.size // sample + 1]
    finite = values[np.isfinite(values) & (values != 0)]
    if finite.size == 0:
        return 0.0
    for decimals in range(0, 9):
        scaled = finite * 10.0**decimals
        if np.all(np.abs(scaled - np.round(scaled)) <= 1e-6 * np.maximum(1.0, np.abs(scaled))):
            return 10.0**-decimals
    return 0.0


def stalled(steps: np.ndarray, values: np.ndarray, cfg: RuleConfig, label: str = "loss") -> Outcome:
    """The same training loss, to the last digit, at ``stalled_min_repeats`` consecutive points.

    Shuffled mini-batches never give identical losses twice in a row; a pipeline that feeds one
    batch to a model that does not change does. A loss of exactly 0 repeated (a perfectly fit
    batch) is not a stall, and neither is a value repeated because it was written with few digits
    (``stalled_min_digits``).

    Args:
        steps: finite points' steps.
        values: finite values (equality does not depend on the mode).
        cfg: thresholds.
        label: the series' name for the message.
    """
    n = values.size
    if n < cfg.stalled_min_repeats:
        return NotJudged(f"{n} finite points (needs {cfg.stalled_min_repeats})")
    # A step can be a repeat only if it is within the tolerance of the largest value: that cheap
    # screen leaves few candidates on a long series, and only they get the exact test.
    step = np.diff(values)
    np.abs(step, out=step)
    largest = max(float(values.max()), -float(values.min()))
    repeats = np.flatnonzero(step <= cfg.stalled_rel_tol * largest)
    after, before = values[1:][repeats], values[:-1][repeats]
    tol = cfg.stalled_rel_tol * np.maximum(np.abs(after), np.abs(before))
    keep = (step[repeats] <= tol) & (after != 0)
    # Values written with few digits repeat on healthy runs: a repeat is evidence only when the
    # value carries stalled_min_digits significant digits at the series' own precision.
    if keep.any():
        quantum = decimal_quantum(values)
        if quantum > 0:
            keep &= np.abs(after) >= quantum * 10.0 ** (cfg.stalled_min_digits - 1)
    if not keep.any():
        return None
    same = np.zeros(n - 1, dtype=bool)
    same[repeats[keep]] = True
    # Runs of True in ``same``: a run of k Trues is k + 1 identical values.
    edges = np.flatnonzero(np.diff(np.concatenate(([0], same.view(np.int8), [0]))))
    starts, ends = edges[::2], edges[1::2]
    lengths = ends - starts + 1
    longest = int(np.argmax(lengths))
    if lengths[longest] < cfg.stalled_min_repeats:
        return None
    stuck = lengths >= cfg.stalled_min_repeats
    a, b = int(starts[longest]), int(ends[longest])
    evidence = {
        "value": float(values[a]),
        "repeats": int(lengths[longest]),
        "stalled_points": int(lengths[stuck].sum()),
        "stalls": int(stuck.sum()),
        "points": int(n),
    }
    message = (
        f"{label} was {float(values[a]):.10g} to the last digit at {lengths[longest]} "
        f"consecutive points (steps {_step(steps[a])}-{_step(steps[b])})"
    )
    if stuck.sum() > 1:
        message += f"; {int(stuck.sum())} such runs"
    return Detection((float(steps[a]), float(steps[b])), evidence, message)


def overfit(
    train_steps: np.ndarray,
    train_values: np.ndarray,
    val_steps: np.ndarray,
    val_values: np.ndarray,
    cfg: RuleConfig,
    label: str = "validation loss",
    mode: str = "min",
) -> Outcome:
    """Validation got worse after its best, and is not coming back, while training improved.

    Validation (smoothed over ``overfit_smoothing`` evaluations) must end ``overfit_min_rise``
    worse than its best, relative to the best, at least ``overfit_patience`` evaluations after
    it; that rise must be ``overfit_noise_k`` times the curve's own noise (the robust spread of
    its point-to-point changes, so a noisy small validation set needs a larger rise), or end worse
    than its first evaluation, or last: over at least twice ``overfit_patience`` evaluations after
    the lowest median of ``overfit_smoothing`` consecutive ones, their median is above it by
    ``overfit_lasting_z`` standard errors (noise / sqrt(count)) and gives back
    ``overfit_lasting_share`` of what validation gained from its first evaluation (a noisy set
    shows a mild rise only over many evaluations); and be more than ``overfit_min_delta``;
    validation must not be coming back: the points after its worst
    (since the best) must not improve with a Mann-Kendall significance of ``overfit_trend_z`` (a
    spike the run recovers from improves steadily after its peak; overfitting keeps rising or
    stays up); and the training metric over those evaluations (its mean per validation interval)
    must be better than at the best. Validation below training (dropout)
    is not overfit; neither is one bad evaluation, which the median of the last
    ``overfit_patience`` absorbs. With ``overfit_gap_ratio`` set, a gap ratio
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
    # The checkpoint early stopping would keep: the first within min_delta of the minimum.
    best_index = int(np.argmax(vy <= float(vy.min()) + cfg.overfit_min_delta))
    best_smooth = float(smooth.min())
    patience = cfg.overfit_patience
    end_level = float(np.median(vy[-max(patience, window) :]))
    rise_abs = end_level - best_smooth
    rise = rise_abs / max(abs(best_smooth), 1e-12)
    noise = noise_sigma(vy[min(best_index, nv // 2) :])
    worst = best_index + int(np.argmax(vy[best_index:]))
    recovery = trend_z(vy[worst + 1 :])  # negative: coming back down
    after = nv - 1 - best_index
    train_at = interval_means(train_steps, ty, val_steps)
    train_at_best = float(train_at[best_index])
    train_end = float(np.median(train_at[-max(patience, window) :]))
    train_gain = (train_at_best - train_end) / max(abs(train_at_best), 1e-12)
    gap = end_level - train_end  # worse-than-training, in loss terms
    gap_ratio = gap / max(abs(train_end), 1e-12)
    best_step = float(val_steps[best_index])
    evidence = {
        "best_step": best_step,
        "best_value": sign * float(vy[best_index]),
        "final_value": float(val_values[-1]),
        "worsening": rise,
        "evaluations_since_best": after,
        "noise": noise,
        "rise_in_noise": rise_abs / noise if noise > 0 else math.inf,
        "trend_after_worst_z": recovery,
        "train_at_best": sign * train_at_best,
        "train_improvement": train_gain,
        "train_final": sign * train_end,
        "gap": gap,
        "gap_ratio": gap_ratio,
    }
    # Ending worse than the first evaluation (made after the first epoch of training) is a rise
    # no noise explains: the model is worse on new data than before it fitted the training set.
    above_start = end_level > float(vy[0])
    evidence["above_first_evaluation"] = float(above_start)
    # A lasting rise on a noisy set: one point's noise hides it, the level since the best (the
    # median of every evaluation after it) shows it, to within its standard error. The best is
    # the lowest median of ``window`` consecutive evaluations: one lucky evaluation is not a level.
    base_index, base = _lowest_level(vy, window)
    since = vy[base_index + window // 2 + 1 :]
    lasting_rise = float(np.median(since)) - base if since.size else 0.0
    lasting_z = lasting_rise * math.sqrt(since.size) / noise if noise > 0 else math.inf
    gain = float(vy[0]) - base
    lasting_share = lasting_rise / gain if gain > 0 else math.inf
    evidence.update(lasting_rise_z=lasting_z, lasting_share=lasting_share)
    lasting = (
        since.size >= 2 * patience
        and lasting_z >= cfg.overfit_lasting_z
        and lasting_share >= cfg.overfit_lasting_share
    )
    rising = (
        after >= patience
        and rise >= cfg.overfit_min_rise
        and rise_abs > cfg.overfit_min_delta
        and (rise_abs >= cfg.overfit_noise_k * noise or above_start or lasting)
        and recovery > -cfg.overfit_trend_z
        and train_gain >= cfg.overfit_train_improvement
    )
    gapped = False
    if cfg.overfit_gap_ratio is not None:
        recent = (vy[-patience:] - train_at[-patience:]) / np.maximum(np.abs(train_at[-patience:]), 1e-12)
        gapped = bool(np.all(recent > cfg.overfit_gap_ratio))
    if not (rising or gapped):
        return None
    worse, beyond = _words(mode)
    if rising:
        message = (
            f"{label} {worse} {rise:.0%} {beyond} its best ({_fmt(sign * vy[best_index])} "
            f"at step {_step(best_step)}) over the {after} evaluations since, while "
            f"training kept improving ({_fmt(sign * train_at_best)} -> "
            f"{_fmt(sign * train_end)})"
        )
        start = best_step
    else:
        message = (
            f"the gap between {label} and training ({_fmt(abs(gap))}, ratio "
            f"{gap_ratio:.2f}) stayed above {cfg.overfit_gap_ratio} over the last "
            f"{patience} evaluations"
        )
        start = float(val_steps[-patience])
    return Detection((start, float(val_steps[-1])), evidence, message)


def _lowest_level(y: np.ndarray, window: int) -> tuple[int, float]:
    """Where the centred median of ``window`` consecutive values is lowest, and that median."""
    if y.size < window:
        return int(np.argmin(y)), float(np.median(y))
    medians = np.median(np.lib.stride_tricks.sliding_window_view(y, window), axis=1)
    low = int(np.argmin(medians))
    return low + window // 2, float(medians[low])


def no_learning(
    train: tuple[np.ndarray, np.ndarray] | None,
    val: tuple[np.ndarray, np.ndarray] | None,
    cfg: RuleConfig,
    label: str = "validation loss",
    mode: str = "min",
    *,
    accuracy: tuple[np.ndarray, str] | None = None,
) -> Outcome:
    """The run learnt nothing: validation at chance, or never better than its first evaluation.

    - At chance: a validation loss whose median is near ``ln k`` for an integer k (2 to 100) and
      that never gets ``chance_loss_margin`` below it, while validation accuracy never gets
      ``chance_accuracy_margin`` above ``1/k``: what a model that guesses among k classes scores.
    - Never better: over at least ``no_learning_min_evals`` evaluations, validation is never more
      than ``no_learning_tolerance`` better than its first, while training (its mean per
      validation interval) improved less than ``no_learning_train_improvement``, or validation
      ended worse than it began; with no training series, validation alone decides. A model that
      learnt within its first epoch and then held steady has a training curve that fell.

    Args:
        train: (steps, values) of the training curve, finite, in the metric's units, or None.
        val: (steps, values) of the validation curve, finite, or None.
        cfg: thresholds.
        label: the validation series' name for the message.
        mode: ``min`` (a loss) or ``max`` (accuracy-like).
        accuracy: (values, name) of the validation accuracy, for the chance test (a loss only).
    """
    if val is None:
        return NotJudged("no validation series")
    vx, vv = val
    vy, sign = _orient(vv, mode)
    n = vy.size
    need = cfg.no_learning_min_evals
    if n < need:
        return NotJudged(f"{n} validation points (needs {need})")
    if mode == Mode.MIN and accuracy is not None:
        found = _at_chance(vy, accuracy, cfg, label, vx)
        if found is not None:
            return found
    first = float(vy[0])
    tolerance = cfg.no_learning_tolerance * max(abs(first), 1e-12)
    best_after = float(vy[1:].min())
    if best_after < first - tolerance:
        return None
    end = float(np.median(vy[-min(3, n - 1) :]))
    evidence: dict[str, float] = {
        "first": sign * first,
        "best_after_first": sign * best_after,
        "end": sign * end,
        "evaluations": int(n),
    }
    why = ""
    if train is not None and train[1].size:
        tx, tv = train
        ty, _ = _orient(tv, mode)
        means = interval_means(tx, ty, vx)
        gain = (float(means[0]) - float(means[1:].min())) / max(abs(float(means[0])), 1e-12)
        evidence["train_improvement"] = gain
        if gain < cfg.no_learning_train_improvement:
            moved = f"{_fmt(sign * means[0])} -> {_fmt(sign * means[-1])}"
            why = f"while training moved {max(gain, 0):.1%} ({moved})"
        elif end > first + tolerance:
            why = f"and ended worse ({_fmt(sign * end)}) while training fitted ({gain:.0%} better)"
        else:
            return None  # it learnt in its first epoch and held: training fell
    else:
        why = "and no training series of it says otherwise"
    message = (
        f"{label} was never better than its first evaluation ({_fmt(sign * first)}; best "
        f"after it {_fmt(sign * best_after)}) over {n} evaluations {why}"
    )
    return Detection((float(vx[0]), float(vx[-1])), evidence, message)


_MAX_CLASSES = 100


def _at_chance(
    vy: np.ndarray, accuracy: tuple[np.ndarray, str], cfg: RuleConfig, label: str, vx: np.ndarray
) -> Detection | None:
    """A validation loss at ln k with accuracy near 1/k: guessing among k classes."""
    acc, acc_name = accuracy
    acc = acc[np.isfinite(acc)]
    if acc.size == 0 or float(acc.max()) > 1.0 or float(acc.min()) < 0.0:
        return None  # not an accuracy in [0, 1] (a percentage, a count)
    median = float(np.median(vy))
    if not 0 < median < math.log(_MAX_CLASSES + 0.5):
        return None
    k = int(round(math.exp(median)))
    if k < 2:
        return None
    chance = math.log(k)
    lowest = float(vy.min())
    best_acc = float(acc.max())
    if lowest < (1 - cfg.chance_loss_margin) * chance or best_acc > 1 / k + cfg.chance_accuracy_margin:
        return None
    evidence = {
        "classes": k,
        "chance_loss": chance,
        "lowest_loss": lowest,
        "best_accuracy": best_acc,
        "chance_accuracy": 1 / k,
    }
    message = (
        f"{label} stayed at chance: {_fmt(lowest)}-{_fmt(float(vy.max()))} around ln {k} = "
        f"{_fmt(chance)}, what guessing among {k} classes scores, with {acc_name} at most "
        f"{_fmt(best_acc)} (1/{k} = {_fmt(1 / k)})"
    )
    return Detection((float(vx[0]), float(vx[-1])), evidence, message)
