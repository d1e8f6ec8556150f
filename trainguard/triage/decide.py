"""The decision: which of a text's hits is the root cause, and the diagnosis a user reads.

* an *error* (an exception or message that names why the job stopped) beats an *exit* signal
  (an exit status or kill signal, which says how the process ended but not why), which beats a
  *warning* (a signal that does not stop a job by itself, such as ``loss: nan`` in a progress
  line);
* among errors, the earliest wins: later errors are usually consequences (an NCCL timeout on the
  other ranks after one rank was preempted); on one line, the most specific signature wins;
* when the earliest error has no class in the table (a wall-time limit, labels out of range, a
  checkpoint that does not fit the model), the answer is ``unknown``: the class signals after it
  are its consequences, and naming one would send the user after the wrong fix;
* a weak warning in a text that shows no failure at all is not a diagnosis: healthy logs come
  back ``unknown`` with a confidence below 0.3;
* a *detail* is no signal of its own: it settles what a signal a few lines above it means (the
  first one below a TensorFlow OOM names the op's device, so which memory ran out).

Remedies and traps come from :mod:`trainguard.failure_classes`, the one table of classes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainguard.failure_classes import get as get_failure_class
from trainguard.redaction import printable, redact
from trainguard.triage.scan import Hit
from trainguard.triage.signatures import DETAIL, ERROR, EXIT, RANK, WARNING, Pattern

__all__ = ["MAX_EVIDENCE_CHARS", "Diagnosis", "decide"]

MAX_EVIDENCE_CHARS = 300
# Evidence from a huge line is redacted within this many characters either side of the signal
# (far wider than what is shown, so a secret cut at the edge is never on display).
_REDACT_MARGIN = 8_000
# A warning alone is a diagnosis only when it is strong, or when the text shows the job failed.
_STRONG_WARNING = 0.7
_WARNING_DISCOUNT = 0.75
_MIN_CONFIDENCE = 0.3
_UNKNOWN_NO_SIGNAL = 0.1
_UNKNOWN_WITH_SIGNAL = 0.2


@dataclass(frozen=True)
class Diagnosis:
    """What failed, the line that shows it, and what to do first.

    Attributes:
        failure_class: a class name from :mod:`trainguard.failure_classes`.
        evidence: the line that shows the class, trimmed and redacted (at most
            ``MAX_EVIDENCE_CHARS`` characters); empty when nothing matched.
        remedy: the class's first remedy.
        trap: the plausible fix from the wrong class that does nothing (may be empty).
        confidence: 0..1; below 0.3 means "no real diagnosis".
        reason: why this class, in words (which signal won and what else was seen).
        line_number: 1-based line of the evidence in the text, or None.
    """

    failure_class: str
    evidence: str
    remedy: str
    trap: str
    confidence: float
    reason: str
    line_number: int | None = None

    def to_dict(self) -> dict[str, object]:
        """Returns the diagnosis as a JSON-ready dict."""
        return {
            "failure_class": self.failure_class,
            "evidence": self.evidence,
            "remedy": self.remedy,
            "trap": self.trap,
            "confidence": round(self.confidence, 3),
            "reason": self.reason,
            "line_number": self.line_number,
        }

    def to_markdown(self) -> str:
        """Returns a short report a user reads: class, evidence, first remedy, what not to do."""
        if self.failure_class == "unknown":
            title = "## Training failure: no known failure class"
        else:
            title = f"## Training failure: `{self.failure_class}`"
        lines = [title, "", f"**Why:** {self.reason} (confidence {self.confidence:.2f})", ""]
        if self.evidence:
            where = f" (line {self.line_number})" if self.line_number else ""
            fence = "`" * max(3, _longest_backtick_run(self.evidence) + 1)
            lines += [f"**Evidence**{where}:", "", f"{fence}text", self.evidence, fence, ""]
        lines.append(f"**First remedy:** {self.remedy}")
        if self.trap:
            lines += ["", f"**Do not:** {self.trap}"]
        return "\n".join(lines) + "\n"


def decide(hits: list[Hit]) -> Diagnosis:
    """The diagnosis of a text from its hits (:func:`trainguard.triage.scan.scan`)."""
    hits = _settle(hits)
    known = [h for h in hits if h.pattern.failure_class != "unknown"]
    generic = [h for h in hits if h.pattern.failure_class == "unknown"]

    fatal = [h for h in hits if h.pattern.severity == ERROR]
    first_fatal = min(fatal, key=lambda h: h.order) if fatal else None
    if first_fatal is not None and first_fatal.pattern.failure_class == "unknown":
        # The job died of something no class covers (a wall-time limit, a code bug); the class
        # signals after it are its consequences (SIGTERM to the other ranks, a collective timeout).
        return _unknown(
            first_fatal,
            _UNKNOWN_WITH_SIGNAL,
            f"the earliest fatal error ({first_fatal.pattern.label}, line "
            f"{first_fatal.line_number}) has no known failure class; later signals read as its "
            "consequences",
        )

    for severity in (ERROR, EXIT):
        candidates = [h for h in known if h.pattern.severity == severity]
        if candidates:
            chosen = min(candidates, key=lambda h: h.order)
            return _diagnose(chosen, known, _reason(chosen, known))

    warnings = [h for h in known if h.pattern.severity == WARNING]
    if warnings:
        # The strongest hint; the earliest among equals.
        chosen = min(warnings, key=lambda h: (-h.pattern.weight, h.order))
        if chosen.pattern.weight >= _STRONG_WARNING or generic:
            return _diagnose(chosen, known, _reason(chosen, known))
        return _unknown(
            chosen,
            _UNKNOWN_WITH_SIGNAL,
            f"only a weak hint ({chosen.pattern.label}, line {chosen.line_number}) and no sign "
            "that the job failed",
        )
    if generic:
        first = min(generic, key=lambda h: h.order)
        return _unknown(
            first,
            _UNKNOWN_WITH_SIGNAL,
            f"a failure signal ({first.pattern.label}, line {first.line_number}) but no known "
            "failure signature",
        )
    return _unknown(None, _UNKNOWN_NO_SIGNAL, "no known failure signature")


def _settle(hits: list[Hit]) -> list[Hit]:
    """The hits with each detail applied to the signal it settles, and the details gone.

    A hit of a detail's signature (``of``) at most ``within`` lines above it becomes a hit of the
    detail's class, weight and label, on its own line (the evidence stays the signal's line); the
    first detail below a hit settles it.
    """
    if not any(h.pattern.severity == DETAIL for h in hits):
        return hits
    settled: dict[int, Pattern] = {}  # index of a hit -> what it stands for
    for detail in (h for h in hits if h.pattern.severity == DETAIL):
        of, within = detail.pattern.of, detail.pattern.within
        for index, hit in enumerate(hits):
            distance = detail.line_number - hit.line_number
            if hit.pattern is of and 0 < distance <= within and index not in settled:
                settled[index] = _settled_pattern(of, detail.pattern)
    return [
        Hit(h.line_number, h.segment, h.text, settled[i]) if i in settled else h
        for i, h in enumerate(hits)
        if h.pattern.severity != DETAIL
    ]


def _settled_pattern(signal: Pattern, detail: Pattern) -> Pattern:
    """A signal read as its detail says: the signal's regex and severity (its line is the
    evidence), the detail's class, weight, label and source."""
    return Pattern(
        detail.failure_class, signal.regex, detail.weight, signal.severity, detail.label, detail.source
    )


def _diagnose(chosen: Hit, known: list[Hit], reason: str) -> Diagnosis:
    cls = chosen.pattern.failure_class
    confidence = chosen.pattern.weight
    if chosen.pattern.severity == WARNING:
        confidence *= _WARNING_DISCOUNT
    agreeing = {h.line_number for h in known if h.pattern.failure_class == cls}
    confidence += min(0.1, 0.03 * len(agreeing - {chosen.line_number}))
    # A weaker reading of the chosen line itself (RESOURCE_EXHAUSTED on a TPU HBM line) is no
    # rival: the more specific signature already explains it.
    rivals = {h.pattern.failure_class for h in _others(chosen, known) if h.pattern.severity != WARNING}
    confidence -= min(0.3, 0.1 * len(rivals))
    confidence = max(_MIN_CONFIDENCE, min(0.99, confidence))
    fc = get_failure_class(cls)
    return Diagnosis(
        failure_class=cls,
        evidence=_evidence(chosen),
        remedy=fc.remedy,
        trap=fc.trap,
        confidence=round(confidence, 3),
        reason=reason,
        line_number=chosen.line_number,
    )


def _unknown(hit: Hit | None, confidence: float, reason: str) -> Diagnosis:
    fc = get_failure_class("unknown")
    return Diagnosis(
        failure_class="unknown",
        evidence=_evidence(hit) if hit else "",
        remedy=fc.remedy,
        trap=fc.trap,
        confidence=confidence,
        reason=reason,
        line_number=hit.line_number if hit else None,
    )


def _reason(chosen: Hit, known: list[Hit]) -> str:
    label, line = chosen.pattern.label, chosen.line_number
    severity = chosen.pattern.severity
    if severity == ERROR:
        parts = [f"earliest fatal error: {label} (line {line})"]
    elif severity == EXIT:
        parts = [f"no error names a cause; the process ended: {label} (line {line})"]
    else:
        parts = [f"only a non-fatal signal: {label} (line {line}); no fatal error names a cause"]
    others = _others(chosen, known)
    earlier = sorted((h for h in others if h.order < chosen.order), key=lambda h: h.order)
    for hit in _first_per_class(earlier):
        if hit.pattern.severity == WARNING:
            parts.append(
                f"a non-fatal {hit.pattern.failure_class} signal came first ({hit.pattern.label}, "
                f"line {hit.line_number}) but did not stop the job"
            )
        else:
            # Only an exit signal can precede an error that wins (errors outrank exits).
            parts.append(
                f"the earlier {hit.pattern.failure_class} exit signal (line {hit.line_number}) "
                "says how the process ended, not why"
            )
    later = sorted((h for h in others if h.order > chosen.order), key=lambda h: h.order)
    for hit in _first_per_class(later):
        if RANK[hit.pattern.severity] <= RANK[severity]:
            parts.append(
                f"the later {hit.pattern.failure_class} signal ({hit.pattern.label}, line "
                f"{hit.line_number}) reads as a consequence"
            )
        elif hit.pattern.severity == EXIT:
            parts.append(
                f"the {hit.pattern.failure_class} exit signal (line {hit.line_number}) says how "
                "the process ended, not why"
            )
    return "; ".join(parts)


def _others(chosen: Hit, known: list[Hit]) -> list[Hit]:
    """Hits of other classes, less those on the chosen hit's own line."""
    here = (chosen.line_number, chosen.segment)
    return [
        h
        for h in known
        if h.pattern.failure_class != chosen.pattern.failure_class and (h.line_number, h.segment) != here
    ]


def _first_per_class(hits: list[Hit]) -> list[Hit]:
    seen: set[str] = set()
    firsts = []
    for hit in hits:
        if hit.pattern.failure_class not in seen:
            seen.add(hit.pattern.failure_class)
            firsts.append(hit)
    return firsts


def _evidence(hit: Hit) -> str:
    line = hit.text.strip()
    match = hit.pattern.regex.search(line)
    start = match.start() if match else 0
    if len(line) > 2 * _REDACT_MARGIN:  # redact the signal's neighbourhood, not megabytes
        begin = max(0, start - _REDACT_MARGIN)
        line, start = line[begin : begin + 2 * _REDACT_MARGIN], start - begin
    before = len(line)
    line = printable(redact(line))
    if len(line) <= MAX_EVIDENCE_CHARS:
        return line
    if len(line) != before:  # redaction moved the signal: find it again
        match = hit.pattern.regex.search(line)
        start = match.start() if match else 0
    keep = MAX_EVIDENCE_CHARS - 2  # room for an ellipsis at each end
    begin = max(0, min(start - 80, len(line) - keep))
    window = line[begin : begin + keep]
    return ("…" if begin > 0 else "") + window + ("…" if begin + keep < len(line) else "")


def _longest_backtick_run(text: str) -> int:
    runs = [len(m.group(0)) for m in re.finditer(r"`+", text)]
    return max(runs, default=0)
