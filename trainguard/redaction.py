"""The one table of secret shapes, and the function every output that echoes user text uses.

Logs, error messages and specs can carry credentials: OAuth tokens, signed URLs, keys. Anything
trainguard prints, writes to a report or an artifact from such text goes through :func:`redact`
first (triage evidence, launcher log tails, diagnosis artifacts), and :func:`bound` keeps it to a
size a person reads.
"""

from __future__ import annotations

import re

__all__ = ["SECRET_SHAPES", "redact", "bound", "REDACTED"]

REDACTED = "[REDACTED]"

# fmt: off
SECRET_SHAPES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"),
     "[REDACTED PRIVATE KEY]"),
    (re.compile(r"(?i)\b(authorization\s*[:=]\s*)(?:bearer\s+|basic\s+)?[^\s,;\"']+"),
     r"\1[REDACTED]"),
    (re.compile(r"(?i)\b(bearer\s+)[\w.~+/=-]+"), r"\1[REDACTED]"),
    (re.compile(r"ya29\.[\w.-]+"), "[REDACTED]"),
    (re.compile(r"\beyJ[\w-]+\.[\w-]+\.[\w-]+"), "[REDACTED]"),
    (re.compile(r"\bAIza[\w-]{30,}"), "[REDACTED]"),
    (re.compile(
        r"(?i)\b((?:access|id|refresh)_token|client_secret|api_?key|password|passwd|token"
        r"|x-goog-signature|x-goog-credential|signature)([\"']?\s*[:=]\s*[\"']?)[^\s\"'&,;]+"),
     r"\1\2[REDACTED]"),
)
# fmt: on


def redact(text: str) -> str:
    """Returns ``text`` with anything that looks like a credential replaced by ``[REDACTED]``.

    Covers OAuth access tokens (``ya29.``), ``Bearer``/``Authorization`` values, JWTs, API keys,
    private keys and ``token=``/``password=``-style parameters (signed URLs included).
    """
    for regex, replacement in SECRET_SHAPES:
        text = regex.sub(replacement, text)
    return text


def bound(text: str, limit: int = 20_000, marker: str = "…") -> str:
    """``text`` cut to at most ``limit`` characters (its head and its tail, the middle elided)."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - 40)
    head, tail = keep // 2, keep - keep // 2
    return f"{text[:head]}{marker}[{len(text) - keep} characters elided]{marker}{text[-tail:]}"
