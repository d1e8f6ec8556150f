"""The one table of secret shapes, and the function every output that echoes user text uses.

Logs, error messages and specs can carry credentials: OAuth tokens, signed URLs, keys, cookies,
database URLs. Anything trainguard prints, writes to a report or an artifact from such text goes
through :func:`redact` first (triage evidence, launcher log tails, diagnosis artifacts, spec
errors), and :func:`bound` keeps it to a size a person reads.

Each shape names what it catches. The shapes are anchored on what makes a secret a secret (a
known prefix such as ``ghp_`` or ``AKIA``, a credential's key name, a header, a URL's
``user:password@``), never on length or entropy alone, so ordinary log lines (losses, paths,
step counters, hashes of files) come out unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SECRET_SHAPES", "SecretShape", "redact", "bound", "printable", "REDACTED"]

REDACTED = "[REDACTED]"


@dataclass(frozen=True)
class SecretShape:
    """One kind of secret: what it is, how it looks, what replaces it (``\\1``… keep context)."""

    name: str
    regex: re.Pattern[str]
    replacement: str

    def __iter__(self):  # (regex, replacement), as the table's first form was read
        return iter((self.regex, self.replacement))


def _shape(name: str, regex: str, replacement: str = REDACTED, flags: int = 0) -> SecretShape:
    return SecretShape(name, re.compile(regex, flags), replacement)


# A separator between a key name and its value: "=", ":", with quotes and spaces, also URL-encoded
# (%3D "=", %3A ":", %22 '"', %27 "'", %20 " ").
_SEP = r"(?:[\"']|%2[27])?\s*(?:[:=]|%3[ADad])\s*(?:[\"']|%2[27]|%20)?\s*"
# A value: up to a quote, a space, "&", ",", ";" (also URL-encoded: %22 %27 %26 %2C %3B %20).
_VALUE = r"(?:[^\s\"'&,;%<>]|%(?!2[0267Cc]|3[Bb])[0-9A-Fa-f]{2})+"
# Where a key name starts: not inside a word, or right after a URL-encoded quote, space or sign,
# or a command-line flag's "--" (``--hf-token=…``, ``--password …`` as launchers echo argv).
_START = r"(?:(?<![\w-])|(?<=(?<![\w-])--)|(?<=%2[027])|(?<=%3[ADad]))"
# Key names whose value is a secret, in any case, with "_", "-" or nothing between words, and any
# prefix (AWS_SECRET_ACCESS_KEY, HF_TOKEN, WANDB_API_KEY).
_SECRET_KEYS = (
    r"(?:[a-z0-9]+[_-])*(?:"
    + (
        r"(?:access|id|refresh|auth|session|client|bearer)[_-]?token|token"
        r"|client[_-]?secret|secret[_-]?(?:access[_-]?)?key|secret|private[_-]?key(?:[_-]?id)?"
        r"|(?:aws[_-]?)?(?:access[_-]?)?key[_-]?id|api[_-]?key|x-api-key|[a-z]{0,8}passw(?:or)?d|pwd"
        r"|x-goog-signature|x-goog-credential|x-amz-signature|x-amz-credential|x-amz-security-token"
        r"|signature|sig"
    )
    + ")"
)

# fmt: off
SECRET_SHAPES: tuple[SecretShape, ...] = (
    # Whole blocks first: a PEM private key (RSA, EC, OpenSSH, PKCS#8, encrypted) or a PGP
    # private key block, across lines or JSON-escaped on one; cut off, up to the end of the text.
    _shape("PEM/PGP private key block",
           r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
           r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
           "[REDACTED PRIVATE KEY]", re.DOTALL),
    # Headers whose whole value is a secret.
    _shape("Authorization header",
           r"(?i)" + _START + r"((?:proxy-)?authorization\s*(?:[:=]|%3A)\s*(?:%20)?)"
           r"(?:(?:bearer|basic|digest|token)(?:\s+|%20))?" + _VALUE, r"\1[REDACTED]"),
    _shape("Cookie / Set-Cookie header", r"(?im)\b((?:set-)?cookie\s*:\s*)[^\r\n]+",
           r"\1[REDACTED]"),
    _shape("Cookie in JSON or a parameter", r"(?i)" + _START + r"((?:set-)?cookies?" + _SEP + r")" + _VALUE,
           r"\1[REDACTED]"),
    _shape("Bearer token", r"(?i)\b(bearer(?:\s+|%20))[\w.~+/=-]{8,}", r"\1[REDACTED]"),
    # Credentials in a URL: scheme://user:password@host keeps the user, drops the password (the
    # user may be empty, as in redis://:password@host; an unencoded "@" in the password runs to
    # the last "@" before the host).
    _shape("URL credentials",
           r"(?i)\b([a-z][a-z0-9+.-]{1,20}://[^\s:/@]{0,200}:)[^\s/]{1,500}@(?=[^\s/@]*(?:[\s/?#]|$))",
           r"\1[REDACTED]@"),
    # Tokens with a known prefix, wherever they appear.
    _shape("Google OAuth access token", r"\bya29\.[\w.-]+"),
    _shape("Google OAuth refresh token", r"\b1//0[\w-]{20,}"),
    _shape("Google API key", r"\bAIza[\w-]{30,}"),
    _shape("JSON Web Token", r"\beyJ[\w-]+\.[\w-]+\.[\w-]+"),
    _shape("GitHub token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"),
    _shape("Slack token", r"\bxox[abposre]-[A-Za-z0-9-]{10,}"),
    _shape("Hugging Face token", r"\bhf_[A-Za-z0-9]{30,}"),
    _shape("OpenAI API key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}"),
    _shape("Slack webhook", r"(?i)\bhooks\.slack\.com/services/[\w/]+",
           "hooks.slack.com/services/[REDACTED]"),
    # An AWS access key id, and the 40-character secret written after it (a key pair).
    _shape("AWS access key pair",
           r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}\b"
           r"(?:[\s:=,;|/\"']{1,10}[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+]))?"),
    # key=value, "key": "value", key: value, and their URL-encoded forms, for secret key names.
    _shape("secret key=value",
           r"(?i)" + _START + r"(" + _SECRET_KEYS + r")(" + _SEP + r")" + _VALUE, r"\1\2[REDACTED]"),
    # A command line's "--password hunter2" (the value after a space, as argv is echoed).
    _shape("secret command-line flag",
           r"(?i)(?<![\w-])(--" + _SECRET_KEYS + r")\s+(?!-)[^\s\"']+", r"\1 [REDACTED]"),
)
# fmt: on


def redact(text: str) -> str:
    """Returns ``text`` with anything shaped like a credential replaced by ``[REDACTED]``.

    The shapes are :data:`SECRET_SHAPES`: private key blocks (PEM, PGP), Authorization and
    cookie headers, bearer tokens, URL credentials, Google (``ya29.``, ``1//0``, ``AIza``,
    service-account ``private_key``/``private_key_id``), JWTs, GitHub, Slack and AWS keys, and
    ``token=``/``password=``-style values, also URL-encoded (signed URLs included).
    """
    for shape in SECRET_SHAPES:
        text = shape.regex.sub(shape.replacement, text)
    return text


# Terminal control: C0 controls but tab and line feed, DEL, C1 controls (ESC starts ANSI and OSC
# sequences, CR overwrites a line), and the Unicode bidirectional overrides and isolates.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_AND_NEWLINE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` with terminal control characters written as escapes (``\\x1b``, ``\\u202e``).

    Text from a file or a flag that trainguard shows in a verdict, an error or a report must not
    drive the terminal: an ESC sequence can clear the screen or rewrite the line that said
    FAILED, a carriage return can overwrite it, a bidi override can reverse what is read. Tabs
    and line feeds stay (``one_line`` escapes line feeds too, for a name).
    """
    pattern = _CONTROL_AND_NEWLINE if one_line else _CONTROL
    if not pattern.search(text):
        return text
    return pattern.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def bound(text: str, limit: int = 20_000, marker: str = "…") -> str:
    """``text`` cut to at most ``limit`` characters (its head and its tail, the middle elided)."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - 40)
    head, tail = keep // 2, keep - keep // 2
    return f"{text[:head]}{marker}[{len(text) - keep} characters elided]{marker}{text[-tail:]}"
