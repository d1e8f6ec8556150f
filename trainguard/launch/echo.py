"""What the launchers echo of a job's own text: redacted, and bounded in size.

Workers print what they like (a signed URL, a token in a traceback, a 10 MB line) and Vertex AI's
error messages quote them. Every line a launcher prints that carries such text, every log tail and
every job error it returns goes through these, so that nothing secret and nothing unbounded reaches
a terminal, a KFP task log, a ``--json`` file or a diagnosis artifact.

Redaction comes first, bounding second: cutting first could split a secret so that what is left of
it no longer looks like one.
"""

from __future__ import annotations

from collections.abc import Iterable

from trainguard.redaction import bound, redact

__all__ = ["MAX_LINE_CHARS", "MAX_TAIL_CHARS", "MAX_ERROR_CHARS", "safe_line", "safe_tail", "safe_error"]

MAX_LINE_CHARS = 2_000
"""The most characters kept of one line (a progress line, one line of a worker's output)."""
MAX_TAIL_CHARS = 32_000
"""The most characters kept of a log tail (about 400 lines of 80)."""
MAX_ERROR_CHARS = 4_000
"""The most characters kept of a job's error message."""


def safe_line(text: str) -> str:
    """One line of output: redacted, then cut to :data:`MAX_LINE_CHARS`."""
    return bound(redact(text), MAX_LINE_CHARS)


def safe_tail(lines: Iterable[str]) -> str:
    """Log lines joined: each redacted and cut, the whole cut to :data:`MAX_TAIL_CHARS`."""
    return bound("\n".join(safe_line(line) for line in lines), MAX_TAIL_CHARS)


def safe_error(text: str) -> str:
    """A job's error message: redacted, then cut to :data:`MAX_ERROR_CHARS`."""
    return bound(redact(text), MAX_ERROR_CHARS)
