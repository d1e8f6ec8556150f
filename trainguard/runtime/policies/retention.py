"""Which complete checkpoints to keep: the last ``keep_last`` and the ``keep_best`` best by a metric.

The newest checkpoint is always kept (it is the one a restart resumes from). ``mode`` says which
way the metric improves, parsed case-forgivingly into :class:`~trainguard.choices.Mode`, so
``mode="MAX"`` keeps the highest values rather than, silently, the lowest.

>>> from trainguard.runtime.checkpoint import Checkpoint
>>> kept = [Checkpoint(s, f"step-{s}", ("a",), {"acc": a}) for s, a in ((1, 0.9), (2, 0.5), (3, 0.6))]
>>> policy = RetentionPolicy(keep_last=1, keep_best=1, metric="acc", mode="MAX")
>>> policy.mode
<Mode.MAX: 'max'>
>>> [c.step for c in policy.to_delete(kept)]
[2]
>>> RetentionPolicy(keep_last=-2)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
trainguard.errors.ConfigError: RetentionPolicy(keep_last=-2): pass a whole number >= 1 ...
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainguard.choices import Mode, parse
from trainguard.errors import ConfigError

if TYPE_CHECKING:  # checkpoint.py imports this module
    from trainguard.runtime.checkpoint import Checkpoint

__all__ = ["RetentionPolicy"]


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def finite(value: object) -> bool:
    """True for a real, finite number (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class RetentionPolicy:
    """Which checkpoints to keep.

    Args:
        keep_last: the newest N complete checkpoints (an int >= 1).
        keep_best: also the N best by ``metric`` (an int >= 0; 0: none kept for their metric).
        metric: the COMMIT metric that ranks them (``val_loss``: validation metrics are recorded
            with a ``val_`` prefix).
        mode: ``min`` or ``max`` (any case): which way ``metric`` improves.

    Raises:
        ConfigError: a count that is not a whole number in range, an empty metric name, or a mode
            other than min/max; the message says what to pass.
    """

    keep_last: int = 3
    keep_best: int = 0
    metric: str = "val_loss"
    mode: Mode = Mode.MIN

    def __post_init__(self) -> None:
        if not (_whole(self.keep_last) and self.keep_last >= 1):
            raise ConfigError(
                f"RetentionPolicy(keep_last={self.keep_last!r}): pass a whole number >= 1 "
                "(the newest checkpoint is always kept)"
            )
        if not (_whole(self.keep_best) and self.keep_best >= 0):
            raise ConfigError(
                f"RetentionPolicy(keep_best={self.keep_best!r}): pass a whole number >= 0 "
                "(how many of the best checkpoints by metric= to keep as well)"
            )
        if not isinstance(self.metric, str) or not self.metric.strip():
            raise ConfigError(
                f"RetentionPolicy(metric={self.metric!r}): pass the name of a metric recorded with "
                "the checkpoints, e.g. 'val_loss' (validation metrics carry a val_ prefix)"
            )
        # frozen: the parsed member replaces the text the caller gave ("MAX" -> Mode.MAX)
        object.__setattr__(self, "mode", parse(Mode, self.mode, "RetentionPolicy(mode=...)"))

    def to_delete(self, checkpoints: Sequence[Checkpoint]) -> list[Checkpoint]:
        """The complete checkpoints (sorted by step) this policy no longer keeps."""
        ordered = sorted(checkpoints, key=lambda c: c.step)
        keep = {c.step for c in ordered[-self.keep_last :]}
        if self.keep_best:
            scored = [c for c in ordered if finite(c.metrics.get(self.metric))]
            scored.sort(key=lambda c: c.metrics[self.metric], reverse=self.mode is Mode.MAX)
            keep |= {c.step for c in scored[: self.keep_best]}
        if ordered:
            keep.add(ordered[-1].step)  # never delete the newest
        return [c for c in ordered if c.step not in keep]
