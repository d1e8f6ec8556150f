"""The one table of secret shapes, and the function every output that echoes user text uses.

Logs, error messages and specs can carry credentials: OAuth tokens, signed URLs, keys, cookies,
database URLs. Anything trainguard prints, writes to a report or an artifact from such text goes
through :func:`redact` first (triage evidence, launcher log tails, diagnosis artifacts, spec
errors), and :func:`bound` keeps it to a size a person reads.

Each shape names what it catches. The shapes are anchored on what makes a secret a secret (a
known prefix such as ``ghp_`` or ``AKIA``, a credential's key name, a header, a URL's
``user:password@``, a PEM marker), never on length or entropy alone: a random-looking value is
redacted only right after a secret-like word (``secret``, ``password``, ``token``, ``api key``…),
so ordinary log lines (losses, step counters, run ids, the hashes in checkpoint paths and
commits) come out unchanged.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SECRET_SHAPES", "SecretShape", "redact", "bound", "printable", "looks_random", "REDACTED"]

REDACTED = "[REDACTED]"


@dataclass(frozen=True)
class SecretShape:
    """One kind of secret: what it is, how it looks, what replaces it (``\\1``… keep context)."""

    name: str
    regex: re.Pattern[str]
    replacement: str | Callable[[re.Match[str]], str]
    # A regex that finds something in the lower-cased text wherever ``regex`` matches (the end
    # of a key name and its separator, without the lookbehinds and the name prefix that make
    # ``regex`` try every position): where it finds nothing, the shape is not run.
    gate: re.Pattern[str] | None = None

    def __iter__(self):  # (regex, replacement), as the table's first form was read
        return iter((self.regex, self.replacement))


def _shape(
    name: str,
    regex: str,
    replacement: str | Callable[[re.Match[str]], str] = REDACTED,
    flags: int = 0,
    gate: str | None = None,
) -> SecretShape:
    return SecretShape(
        name, re.compile(regex, flags), replacement, None if gate is None else re.compile(gate)
    )


# A random-looking value, as generated keys are: at least 16 characters, either base64-like
# (upper and lower case letters and digits: an AWS secret access key is 40 of them, with "/" and
# "+") or a run of hex (a hex token, a digest), spread over many distinct characters (a Shannon
# entropy of 3 bits per character or more). Paths and file names are not secrets: a value with a
# plain lower-case word between its slashes, or a file extension, is left alone.
_MIN_SECRET_CHARS = 16
_MIN_BITS_PER_CHAR = 3.0
_HEX_RUN = re.compile(
    r"(?=[0-9a-f]{16})(?=(?:[a-f]*[0-9]){4})(?=(?:[0-9]*[a-f]){4})|(?=[0-9A-F]{16})(?=(?:[A-F]*[0-9]){4})(?=(?:[0-9]*[A-F]){4})"
)
_PATH_LIKE = re.compile(r"^\.{0,2}/|://|(?:^|/)[a-z_.-]{3,}(?:/|$)|\.[a-z]{2,4}$")


def looks_random(value: str) -> bool:
    """Whether ``value`` reads as a generated secret rather than a word, a name, a path or a
    number."""
    if len(value) < _MIN_SECRET_CHARS or _PATH_LIKE.search(value):
        return False
    base64_like = (
        any(c.islower() for c in value)
        and any(c.isupper() for c in value)
        and any(c.isdigit() for c in value)
    )
    if not base64_like and not _HEX_RUN.search(value):
        return False
    counts = Counter(value)
    bits = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return bits >= _MIN_BITS_PER_CHAR


def _flag_value(match: re.Match[str]) -> str:
    """``--password hunter2`` redacted; argparse's usage line (``--eos-token EOS_TOKEN``, the
    flag's own metavar) left as it is."""
    flag, value = match.group(1), match.group("value")
    metavar = flag.lstrip("-").upper().replace("-", "_")
    if value.rstrip("]") == metavar:
        return match.group(0)
    return f"{flag} {REDACTED}"


def _random_value(match: re.Match[str]) -> str:
    """The match with its value redacted when the value looks random, else unchanged."""
    if not looks_random(match.group("value")):
        return match.group(0)
    return match.group(0)[: match.start("value") - match.start()] + REDACTED


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
_SECRET_KEY_NAMES = (
    r"(?:(?:access|id|refresh|auth|session|client|bearer)[_-]?token|token"
    r"|client[_-]?secret|secret[_-]?(?:access[_-]?)?key|secret|private[_-]?key(?:[_-]?id)?"
    r"|(?:aws[_-]?)?(?:access[_-]?)?key[_-]?id|api[_-]?key|x-api-key|[a-z]{0,8}passw(?:or)?d|pwd"
    r"|x-goog-signature|x-goog-credential|x-amz-signature|x-amz-credential|x-amz-security-token"
    r"|signature|sig)"
)
# (A name's words are matched possessively: backtracking into a word cannot find its "_".)
_SECRET_KEYS = r"(?:[a-z0-9]++[_-])*" + _SECRET_KEY_NAMES

# A PEM/PGP private key label; a log wrapped at a fixed width may break it anywhere a space is.
_PEM_LABEL = r"\s+(?:[A-Z0-9]+\s+)*?PRIVATE\s+KEY(?:\s+BLOCK)?"
# Words that say a secret comes next ("AWS Secret Access Key [None]: …", "the token is …").
_SECRET_WORD = (
    r"(?i)(?<![A-Za-z])(?:secret|passw(?:or)?d|passphrase|token|api[ _-]?key|access[ _-]?key"
    r"|private[ _-]?key|credentials?)(?![A-Za-z])"
)
_TOKEN_CHARS = r"A-Za-z0-9+/=_.~-"

# fmt: off
SECRET_SHAPES: tuple[SecretShape, ...] = (
    # Whole blocks first: a PEM private key (RSA, EC, OpenSSH, PKCS#8, encrypted) or a PGP
    # private key block, across lines or JSON-escaped on one; cut off, up to the end of the text.
    _shape("PEM/PGP private key block",
           r"-----BEGIN" + _PEM_LABEL + r"-----.*?(?:-----END" + _PEM_LABEL + r"-----|\Z)",
           "[REDACTED PRIVATE KEY]", re.DOTALL),
    # A log tail that starts inside a key: its base64 lines (a launcher's replica prefix on each,
    # or JSON-escaped "\n" between them) up to the END marker.
    _shape("PEM private key tail",
           r"(?:[A-Za-z0-9+/=]{16,}[^\S\n]*(?:\\n|\r?\n[^\S\n]*(?:\[[\w.:-]+\] )?))+"
           r"-----END" + _PEM_LABEL + r"-----",
           "[REDACTED PRIVATE KEY]"),
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
    # A password may hold "/" (the user's "p4ss/w0rd"), but "host:443/path/bob@x" is a port and
    # a path, not a password.
    _shape("URL credentials",
           r"(?i)\b([a-z][a-z0-9+.-]{1,20}://[^\s:/@]{0,200}:)(?!\d{1,5}(?:/|$))(?:[^\s@]{1,500}+@)+"
           r"(?=[^\s/@]*(?:[\s/?#]|$))",
           r"\1[REDACTED]@"),
    # Tokens with a known prefix, wherever they appear.
    _shape("Google OAuth access token", r"ya29\.[\w.-]+"),
    _shape("Google OAuth refresh token", r"(?<![\w/])1//0[\w-]{20,}"),
    _shape("Google API key", r"AIza[\w-]{30,}"),
    # A JWT is base64url JSON: its header, and its claims when glued to a word, start "eyJ".
    _shape("JSON Web Token",
           r"(?:(?<![A-Za-z0-9])eyJ[\w-]+\.[\w-]+\.[\w-]+|eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]+)"),
    _shape("GitHub token", r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"),
    _shape("Slack token", r"xox[abposre]-[A-Za-z0-9-]{10,}"),
    _shape("Hugging Face token", r"hf_[A-Za-z0-9]{30,}"),
    # "sk-" alone starts ordinary names ("disk-0123…"): glued only with its longer prefixes.
    _shape("OpenAI API key",
           r"(?:sk-(?:proj|svcacct|admin)-|(?<![\w-])sk-)[A-Za-z0-9_-]{32,}"),
    _shape("Slack webhook", r"(?i)\bhooks\.slack\.com/services/[\w/]+",
           "hooks.slack.com/services/[REDACTED]"),
    # An AWS access key id, and the 40-character secret written after it (a key pair).
    _shape("AWS access key pair",
           r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}\b"
           r"(?:[\s:=,;|/\"']{1,10}[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+]))?"),
    # key=value, "key": "value", key: value, and their URL-encoded forms, for secret key names.
    _shape("secret key=value",
           r"(?i)" + _START + r"(" + _SECRET_KEYS + r")(" + _SEP + r")" + _VALUE, r"\1\2[REDACTED]",
           gate=r"(?:token|secret|key(?:[_-]?id)?|passw(?:or)?d|pwd|signature|sig|credential)"
                r"(?:[\"']|%2[27])?\s*(?:[:=]|%3[ad])"),
    # A command line's "--password hunter2" (the value after a space, as argv is echoed).
    _shape("secret command-line flag",
           r"(?i)(?<![\w-])(--" + _SECRET_KEYS + r")\s+(?!-)(?P<value>[^\s\"']+)", _flag_value),
    # A random-looking value within a few words after a secret-like word, whatever separates
    # them ("aws secret wJalrXUtnFEMI/K7MDENG/…", "Secret Access Key [None]: …").
    _shape("random value after a secret word",
           _SECRET_WORD + r"[^\n]{0,40}?(?<![" + _TOKEN_CHARS + r"])(?P<value>[" + _TOKEN_CHARS
           + r"]{16,})(?![" + _TOKEN_CHARS + r"])", _random_value),
)
# fmt: on


def redact(text: str) -> str:
    """Returns ``text`` with anything shaped like a credential replaced by ``[REDACTED]``.

    The shapes are :data:`SECRET_SHAPES`: private key blocks (PEM, PGP, also broken across
    lines or only their tail), Authorization and cookie headers, bearer tokens, URL credentials,
    Google (``ya29.``, ``1//0``, ``AIza``, service-account ``private_key``/``private_key_id``),
    JWTs, GitHub, Slack, Hugging Face, OpenAI and AWS keys (also glued to a word),
    ``token=``/``password=``-style values, also URL-encoded (signed URLs included), and a
    random-looking value right after a secret-like word.
    """
    from trainguard.prefilter import has_folded

    # Case-insensitive matching folds a few non-ASCII letters onto ASCII ones ("ſ" onto "s"),
    # which lower-casing does not: with one of them, the shapes' own gates are not used.
    lowered, lower = _lowered(text), None if has_folded(text) else text.lower()
    for shape, gate in zip(SECRET_SHAPES, _gates(), strict=True):
        # A shape runs only where a literal every match of it holds is there (most text holds
        # no "-----end", "eyj" or "://"), and where its own gate finds something: the gates
        # are supersets of the shapes, never filters.
        if gate is not None and gate.search(lowered) is None:
            continue
        if shape.gate is not None and lower is not None and shape.gate.search(lower) is None:
            continue
        redacted = shape.regex.sub(shape.replacement, text)
        if redacted != text:
            text, lowered = redacted, _lowered(redacted)
            lower = None if lower is None else text.lower()
    return text


def _lowered(text: str) -> bytes:
    """``text`` as the gates read it: lower-case UTF-8, digits made 0."""
    from trainguard.prefilter import DIGITS

    return text.encode("utf-8", "surrogatepass").lower().translate(DIGITS)


_GATES: list[re.Pattern[bytes] | None] = []


def _gates() -> list[re.Pattern[bytes] | None]:
    """Per shape, the prefilter of :mod:`trainguard.prefilter` (None: the shape always runs);
    built on first use, so importing this module stays cheap."""
    if not _GATES:
        from trainguard.prefilter import Prefilter

        _GATES.extend(Prefilter([shape.regex], heads_only=True).regex for shape in SECRET_SHAPES)
    return _GATES


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
    if limit <= 40:  # no room to say how much was elided: the head, and the marker
        return text[: max(0, limit - len(marker))] + marker
    keep = limit - 40
    head, tail = keep // 2, keep - keep // 2
    return f"{text[:head]}{marker}[{len(text) - keep} characters elided]{marker}{text[-tail:]}"
