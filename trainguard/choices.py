"""The fixed choices a user makes, as enums shared by the CLI, the components and the core.

Each is a ``StrEnum``, so a member compares equal to its string (``Backend.LOCAL == "local"``)
and KFP parameters, JSON and flags carry plain strings. :func:`parse` turns user text into a
member or raises one :class:`~trainguard.errors.ConfigError` that lists the valid values.

Example::

    >>> from trainguard.choices import Backend, parse
    >>> parse(Backend, "local", "--backend")
    <Backend.LOCAL: 'local'>
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from trainguard.errors import ConfigError

__all__ = ["Backend", "FailOn", "Severity", "Mode", "GuardMode", "ModelChoice", "parse", "values"]


class Backend(StrEnum):
    """Where the training job runs."""

    LOCAL = "local"  # this machine, with Vertex's environment contract
    VERTEX = "vertex"  # a Vertex AI CustomJob


class FailOn(StrEnum):
    """The lowest preflight status that fails the run."""

    FAIL = "fail"
    UNKNOWN = "unknown"
    WARN = "warn"


class Severity(StrEnum):
    """What a validation finding does to the verdict."""

    FAIL = "fail"
    WARN = "warn"


class Mode(StrEnum):
    """Which way a metric improves."""

    MIN = "min"  # a loss, an error
    MAX = "max"  # accuracy, AUC, F1


class GuardMode(StrEnum):
    """What the in-flight guard does while a job runs."""

    OFF = "off"  # follow nothing
    NONFINITE = "nonfinite"  # stop the job on NaN/Inf only
    FAIL = "fail"  # stop it on any failing finding (and early-stop a confirmed overfit)


class ModelChoice(StrEnum):
    """Which checkpoint the train task publishes as the model."""

    LAST = "last"
    BEST = "best"


class GateAt(StrEnum):
    """Where a quality gate reads its metric."""

    BEST = "best"  # at the best validation step: the checkpoint ``--model best`` ships
    LAST = "last"  # the last value logged


__all__ += ["GateAt"]

_E = TypeVar("_E", bound=StrEnum)


def values(enum: type[StrEnum]) -> tuple[str, ...]:
    """The valid values of ``enum``, in declaration order."""
    return tuple(member.value for member in enum)


def parse(enum: type[_E], value: str | _E, option: str) -> _E:
    """``value`` as a member of ``enum``.

    Args:
        enum: the choice's enum.
        value: what the user gave (surrounding spaces and case are forgiven).
        option: how the user gave it (``--backend``), for the message.

    Raises:
        ConfigError: ``value`` is not one of the enum's values; the message lists them.
    """
    if isinstance(value, enum):
        return value
    text = str(value).strip().lower()
    try:
        return enum(text)
    except ValueError:
        shown = str(value)[:60]
        raise ConfigError(f"{option} {shown!r} is not one of: {', '.join(values(enum))}") from None
