"""Robust statistics the rules judge curves with: smoothing, epoch means, a series' own noise, trend.

All are O(n) in the series' length (the trend test works on at most :data:`TREND_POINTS` block
means), so the in-flight guard can re-judge a growing 10-million-point history on every poll.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["rolling_mean", "interval_means", "noise_sigma", "trend_z", "head", "TREND_POINTS"]

# The Mann-Kendall test compares every pair of points; longer series are first reduced to this
# many block means (averaging only sharpens a trend that is there).
TREND_POINTS = 192

# 1.4826 * MAD estimates a normal standard deviation; consecutive differences of independent noise
# have sqrt(2) times the spread of the noise itself.
_MAD_TO_SIGMA = 1.4826 / math.sqrt(2.0)


def rolling_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Centred moving average (the window shrinks at the edges), O(n) time, vectorised."""
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
    np.subtract(csum[window:], csum[: n + 1 - window], out=out[lo : hi + 1])
    out[lo : hi + 1] /= window
    # The edges average fewer than ``window`` points: [0, i - half + window) on the left,
    # [i - half, n) on the right.
    left = np.arange(lo)
    ends = np.minimum(left - half + window, n)
    out[:lo] = csum[ends] / ends
    starts = np.arange(hi + 1, n) - half
    out[hi + 1 :] = (csum[n] - csum[starts]) / (n - starts)
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


def noise_sigma(values: np.ndarray) -> float:
    """A series' own noise: the robust spread of its point-to-point changes, in its units.

    The median absolute deviation of consecutive differences ignores a smooth trend (it moves
    every difference alike) and a single spike (two outlying differences), so a noisy
    validation curve measured on a small or resampled set gets a large value and a smooth one
    a small value. 0 for fewer than three points.
    """
    if values.size < 3:
        return 0.0
    diffs = np.diff(values)
    return float(_MAD_TO_SIGMA * np.median(np.abs(diffs - np.median(diffs))))


def _blocks(values: np.ndarray, count: int) -> np.ndarray:
    """``values`` reduced to at most ``count`` block means (the last block may be shorter)."""
    size = -(-values.size // count)
    count = -(-values.size // size)  # no block made of padding alone
    pad = size * count - values.size
    padded = np.concatenate((values, np.full(pad, np.nan))) if pad else values
    return np.nanmean(padded.reshape(count, size), axis=1)


def trend_z(values: np.ndarray) -> float:
    """How significant a monotonic trend is: the Mann-Kendall z score (positive = rising).

    A rank test: it counts pairs that rise against pairs that fall, so it judges a trend against
    the series' own noise whatever its scale or skew, and one spike moves it little. |z| above
    1.64 (2.0, 2.33) is a trend at the one-sided 5 % (2.3 %, 1 %) level. Ties count for neither
    side. 0 for fewer than three points or a constant series.
    """
    x = values[np.isfinite(values)]
    if x.size > TREND_POINTS:
        x = _blocks(x, TREND_POINTS)
    n = x.size
    if n < 3:
        return 0.0
    upper = np.triu_indices(n, 1)
    s = float(np.sign(x[None, :] - x[:, None])[upper].sum())
    _, counts = np.unique(x, return_counts=True)
    ties = float(np.sum(counts * (counts - 1) * (2 * counts + 5)))
    variance = (n * (n - 1) * (2 * n + 5) - ties) / 18.0
    if variance <= 0 or s == 0:
        return 0.0
    return (s - math.copysign(1.0, s)) / math.sqrt(variance)


def head(values: np.ndarray) -> float:
    """The level a series started at: the highest of its first three points.

    A run starts at its worst, and a per-epoch log's first point is already a whole epoch's mean,
    well below where the run began; so the highest, not the median.
    """
    return float(np.max(values[:3])) if values.size else math.nan
