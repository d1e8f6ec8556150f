"""One exception hierarchy for trainguard, and the CLI exit codes it maps to.

Two families matter to a user: *bad input* (the spec, a history file, a flag: fix your input,
exit 2) and *the guarded thing failed* (a preflight check, the job, the verdict: exit 1).
Transient errors (a 503, a timeout) are retried where it is safe and otherwise reported as such.

This module is the bottom of the house: it imports nothing of trainguard but, when a message is
made, :mod:`trainguard.redaction` (itself a leaf). The results an error carries (a preflight
report, a ``TrainResult``, a ``Diagnosis``) are typed where they are made, not here, so that every
module can import its errors without an import circle.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "MAX_MESSAGE_CHARS",
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_BAD_INPUT",
    "TrainguardError",
    "UserError",
    "SpecError",
    "HistoryError",
    "ConfigError",
    "GuardFailed",
    "PreflightFailed",
    "TrainingFailed",
    "ValidationFailed",
    "TransientError",
    "EndpointUnreachable",
    "CheckpointError",
    "Interrupted",
    "EXIT_INTERRUPTED",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C
# An error's message is shown whole (CLI, a pipeline task's log): it echoes what the user gave
# (a flag, a series name, a path), so it is redacted and kept to a size a person reads.
MAX_MESSAGE_CHARS = 10_000


class TrainguardError(Exception):
    """Base of every error trainguard raises on purpose.

    The message is passed through :func:`trainguard.redaction.redact` and
    :func:`~trainguard.redaction.printable` and bounded to :data:`MAX_MESSAGE_CHARS` here, once
    for every raise site: a message that quotes a flag, a metric name or a URL never carries a
    credential, never drives the terminal, and never floods a terminal or a log.
    """

    exit_code = EXIT_FAILED

    def __init__(self, *args: Any) -> None:
        if len(args) == 1 and isinstance(args[0], str):
            from trainguard.redaction import bound, printable, redact

            args = (bound(printable(redact(args[0])), MAX_MESSAGE_CHARS),)
        super().__init__(*args)


class UserError(TrainguardError):
    """Bad input: the message says what is wrong and what to do."""

    exit_code = EXIT_BAD_INPUT


class SpecError(UserError):
    """The job spec is malformed; ``path`` names the offending field (may be empty)."""

    def __init__(self, message: str, path: str = "") -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class HistoryError(UserError):
    """A training-history file cannot be read."""


class ConfigError(UserError):
    """A flag, parameter or environment setting is invalid."""


class GuardFailed(TrainguardError):
    """The guarded thing failed; carries a result object for reports."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, result: Any = None) -> None:
        self.result = result
        super().__init__(message)


class PreflightFailed(GuardFailed):
    """At least one preflight check failed (``result`` is the report)."""


class TrainingFailed(GuardFailed):
    """The training job failed.

    Attributes:
        result: the job's :class:`~trainguard.launch.base.TrainResult` (None before it ran).
        diagnosis: the :class:`~trainguard.triage.Diagnosis` naming the failure class, when known.
    """

    def __init__(self, message: str, result: Any = None, diagnosis: Any = None) -> None:
        self.diagnosis = diagnosis
        super().__init__(message, result)


class ValidationFailed(GuardFailed):
    """The validation verdict failed (``result`` is the verdict)."""


class TransientError(TrainguardError):
    """A remote service was unavailable or slow; retrying later may succeed."""


class EndpointUnreachable(UserError):
    """An endpoint never answered within the retry deadline: a wrong override, or no network."""


class CheckpointError(UserError):
    """A checkpoint cannot be used as it is: written by another framework, torn, crafted, or for
    a state that does not fit (the message names the file and what to do; the newest complete
    checkpoint is left untouched)."""


class Interrupted(TrainguardError):
    """The run was stopped from outside — Ctrl-C, or SIGTERM to the launcher — not by a failure of
    the job: exit status 128 + the signal (130 for Ctrl-C, 143 for SIGTERM)."""

    def __init__(self, message: str, signum: int = 2) -> None:
        self.exit_code = 128 + signum
        super().__init__(message)
