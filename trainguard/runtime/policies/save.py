"""When a checkpoint is due: every ``every_steps`` steps and/or every ``every_seconds`` seconds.

>>> SavePolicy(every_steps=50).due(100, now=0.0, last_step=None, last_time=0.0)
True
>>> SavePolicy(every_seconds=600).due(7, now=700.0, last_step=3, last_time=0.0)
True
>>> save_policy(25)
SavePolicy(every_steps=25, every_seconds=None)
>>> SavePolicy()  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
trainguard.errors.ConfigError: SavePolicy() would never save: pass every_steps=N (save every N steps) ...
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainguard.errors import ConfigError

__all__ = ["SavePolicy", "save_policy", "DEFAULT_EVERY_STEPS"]

#: What ``save=None`` means in every checkpointer and guard.
DEFAULT_EVERY_STEPS = 100


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class SavePolicy:
    """When to save: every ``every_steps`` steps and/or every ``every_seconds`` seconds.

    Args:
        every_steps: save at each step divisible by it (an int >= 1), or None.
        every_seconds: save at the first step this many seconds (> 0) after the last save, or None.

    Raises:
        ConfigError: neither is given (the policy would never save), or one is not a positive
            number; the message says what to pass.
    """

    every_steps: int | None = None
    every_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.every_steps is not None and not (_whole(self.every_steps) and self.every_steps >= 1):
            raise ConfigError(
                f"SavePolicy(every_steps={self.every_steps!r}): pass a whole number of steps >= 1, or None"
            )
        seconds = self.every_seconds
        if seconds is not None and not (
            isinstance(seconds, int | float)
            and not isinstance(seconds, bool)
            and math.isfinite(seconds)
            and seconds > 0
        ):
            raise ConfigError(f"SavePolicy(every_seconds={seconds!r}): pass a number of seconds > 0, or None")
        if self.every_steps is None and seconds is None:
            raise ConfigError(
                "SavePolicy() would never save: pass every_steps=N (save every N steps) and/or "
                "every_seconds=S (every S seconds); save=N does the same in the checkpointers and "
                f"guards (default: every {DEFAULT_EVERY_STEPS} steps)"
            )

    def due(self, step: int, now: float, last_step: int | None, last_time: float) -> bool:
        """True when a save is due at ``step``.

        Args:
            step: the step just completed.
            now: the monotonic clock now (seconds).
            last_step: the step of the last save (or of the checkpoint resumed from); None if none.
            last_time: the monotonic clock at that save (or when the run started).
        """
        if last_step is not None and step <= last_step:
            return False
        if self.every_steps and step % self.every_steps == 0:
            return True
        return bool(self.every_seconds and now - last_time >= self.every_seconds)


def save_policy(save: SavePolicy | int | None) -> SavePolicy:
    """A :class:`SavePolicy` from a checkpointer's ``save=``: a policy, N (every N steps), or None
    (every :data:`DEFAULT_EVERY_STEPS` steps).

    Raises:
        ConfigError: anything else (0, a negative number, a float, a string, a bool).
    """
    if save is None:
        return SavePolicy(every_steps=DEFAULT_EVERY_STEPS)
    if isinstance(save, SavePolicy):
        return save
    if _whole(save) and save >= 1:
        return SavePolicy(every_steps=save)
    raise ConfigError(
        f"save={save!r}: pass N >= 1 (save every N steps) or a SavePolicy(every_steps=..., every_seconds=...)"
    )
