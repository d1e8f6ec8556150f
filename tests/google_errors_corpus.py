"""The real Google API error corpus: loading it, reading each text as an error, and scoring.

The corpus (tests/fixtures/google_errors, see its README.md) holds error answers copied from
public threads, each labelled with what the thread says it was: a disabled API, a project that is
not one, a missing permission, a quota *limit* (refused, retrying cannot help) or a *rate* limit
(retry). Texts come as the clients print them (JSON bodies, google-api-core's ``str``, gcloud,
googleapi for Go, gRPC dumps), so :func:`facts_of` reads the same few things from any of them:
the HTTP status (or the status name), the ErrorInfo reason, the discovery-era ``errors[].reason``,
and the message (the whole text). It is split like the triage corpus (``split_of``: a stable hash
of the source URL), so the rules in ``trainguard/api_errors.py`` are tuned on ``dev`` only.

``before`` is what trainguard did before it read bodies (a 429 is a rate limit and retried; a 401
or 403 is a missing role), for the before/after figures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.triage_corpus import split_of
from trainguard import api_errors

__all__ = ["CORPUS_DIR", "SPLITS", "Entry", "Score", "load", "facts_of", "before", "after", "score"]

CORPUS_DIR = Path(__file__).resolve().parent / "fixtures" / "google_errors"
SPLITS = ("dev", "test")
_STATUS_CODES = {"RESOURCE_EXHAUSTED": 429, "PERMISSION_DENIED": 403, "UNAUTHENTICATED": 401}
_CODE = re.compile(
    r'(?:"code"\s*:\s*|\bcode[:=]\s*|\bError |\bHTTP |HttpError |status: |^|\b[A-Z][A-Za-z]+: )'
    r"(?P<code>4\d\d)\b",
    re.MULTILINE,
)
_REASON = re.compile(r"""\breason["']?\s*[:=]?\s*["']?(?P<reason>[A-Za-z_]{6,})["']?""")
_TRAILING_REASON = re.compile(r"retry\., (?P<reason>[a-z][A-Za-z]+)\b")


@dataclass(frozen=True)
class Entry:
    """One real error answer, what it was, and where it was published."""

    id: str
    kind: str
    source: str
    why: str
    text: str


def load(split: str) -> list[Entry]:
    """Reads one part of the corpus (``dev`` or ``test``)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; one of {SPLITS}")
    lines = (CORPUS_DIR / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
    return [Entry(**json.loads(line)) for line in lines if line.strip()]


def facts_of(text: str) -> api_errors.ErrorFacts:
    """The error facts any client's printout of a Google error shows (see the module docstring)."""
    unescaped = text.replace('\\"', '"').replace("\\n", "\n")
    code_match = _CODE.search(unescaped)
    code = int(code_match["code"]) if code_match else None
    status = next((s for s in _STATUS_CODES if s in unescaped), "")
    if code is None and status:
        code = _STATUS_CODES[status]
    reasons = [m["reason"] for m in _REASON.finditer(unescaped)]
    reasons += [m["reason"] for m in _TRAILING_REASON.finditer(unescaped)]
    info = next((r for r in reasons if r.isupper()), "")  # ErrorInfo reasons are UPPER_SNAKE
    legacy = tuple(r for r in reasons if not r.isupper())  # errors[].reason are lowerCamel
    return api_errors.ErrorFacts(code, unescaped, status, info, legacy_reasons=legacy)


def before(facts: api_errors.ErrorFacts) -> str:
    """trainguard before it read error bodies: 429 → retry as a rate limit; 401/403 → a role."""
    if facts.code == 429 or facts.status == "RESOURCE_EXHAUSTED":
        return api_errors.RATE_LIMIT
    if facts.code in (401, 403) or facts.status in ("PERMISSION_DENIED", "UNAUTHENTICATED"):
        return api_errors.PERMISSION
    return api_errors.OTHER


def after(facts: api_errors.ErrorFacts) -> str:
    """trainguard now (``trainguard.api_errors.kind``)."""
    return api_errors.kind(facts)


@dataclass
class Score:
    """Accuracy over some entries, and the two costly confusions counted apart."""

    total: int = 0
    correct: int = 0
    # a quota refusal retried as a rate limit (15 minutes of retries), or a rate limit refused
    # as over quota (a job failed that would have gone through)
    quota_rate_swaps: int = 0
    # a disabled API or a bad project told to grant a role
    disabled_as_permission: int = 0
    misses: list[tuple[Entry, str]] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0

    def line(self, name: str) -> str:
        return (
            f"{name}: {self.correct}/{self.total} right ({self.accuracy:.0%}); quota/rate swapped "
            f"{self.quota_rate_swaps}; disabled API or bad project called a permission "
            f"{self.disabled_as_permission}"
        )


def score(entries: list[Entry], classify: Callable[[api_errors.ErrorFacts], str]) -> Score:
    """Scores ``classify`` over ``entries``."""
    out = Score()
    pair = {api_errors.QUOTA_LIMIT, api_errors.RATE_LIMIT}
    for entry in entries:
        got = classify(facts_of(entry.text))
        out.total += 1
        if got == entry.kind:
            out.correct += 1
            continue
        out.misses.append((entry, got))
        if {got, entry.kind} == pair:
            out.quota_rate_swaps += 1
        if got == api_errors.PERMISSION and entry.kind in (
            api_errors.SERVICE_DISABLED,
            api_errors.CONSUMER_INVALID,
        ):
            out.disabled_as_permission += 1
    return out


def split_is_by_source(entries: list[Entry], split: str) -> list[str]:
    """Entries that sit in the wrong part (their source hashes to the other one)."""
    return [e.id for e in entries if split_of(e.source) != split]
