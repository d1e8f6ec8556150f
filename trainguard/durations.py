"""Durations as people type them: ``90``, ``20s``, ``1.5m``, ``45m``, ``2h``, ``500ms``.

One parser for every flag and parameter that takes a time (``--preempt-after``, ``--max-queued``,
``TRAINGUARD_RETRY_DEADLINE``), so they all accept the same spellings.
"""

from __future__ import annotations

import re

from trainguard.errors import ConfigError

__all__ = ["parse_duration", "parse_durations", "format_duration"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?")
_SCALE = {"ms": 0.001, "s": 1.0, None: 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str | float | int, option: str) -> float:
    """Seconds in ``text`` (a number of seconds, or a number with ms/s/m/h/d).

    Args:
        text: what the user gave.
        option: the flag or parameter it came from, for the message.

    Raises:
        ConfigError: ``text`` is not a non-negative duration.
    """
    if isinstance(text, bool):
        raise ConfigError(f"{option}: {text!r} is not a duration such as 90, 20s, 45m or 2h")
    if isinstance(text, int | float):
        if text < 0 or text != text:  # negative or NaN
            raise ConfigError(f"{option}: {text!r} is not a duration such as 90, 20s, 45m or 2h")
        return float(text)
    m = _DURATION.fullmatch(str(text).strip().lower())
    if not m:
        raise ConfigError(f"{option}: {str(text)[:40]!r} is not a duration such as 90, 20s, 45m or 2h")
    return float(m.group(1)) * _SCALE[m.group(2)]


def parse_durations(text: str, option: str) -> list[float]:
    """``20s,1m,90`` → sorted seconds (empty text → [])."""
    return sorted(
        parse_duration(part, option) for part in (p.strip() for p in (text or "").split(",")) if part
    )


def format_duration(seconds: float) -> str:
    """``2700`` → ``45m``; ``90`` → ``90s``; ``5400`` → ``1.5h`` (for messages)."""
    if seconds >= 3600 and seconds % 360 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"
