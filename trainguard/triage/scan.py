"""The scan: one pass over a log's lines, the whole signature table only on candidate lines.

A prefilter (:mod:`trainguard.prefilter`) reads each block of lines in C and names the few lines
any signature can match; of the table, only the signatures whose required words a line holds run
on it. The result is every hit the full table would find on every line, as :class:`Hit`\\ s in
text order (a signature keeps its first :data:`HITS_PER_PATTERN` hits).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from trainguard.prefilter import Prefilter, gate_words, has_folded
from trainguard.triage.signatures import CLASS_PATTERNS, Pattern

__all__ = [
    "Hit",
    "Table",
    "table",
    "scan",
    "pieces",
    "HITS_PER_PATTERN",
    "FRAME",
    "PYTHON_FRAME",
    "REPLICA_PREFIX",
]

# Stack frames name functions and quote source code (``c10::DistNetworkError::DistNetworkError``,
# ``raise ValueError("... MASTER_ADDR expected ...")``): they echo an error, they are not one.
FRAME = re.compile(r'^\s*(?:frame #\d+: |File "[^"]*", line \d+|[\^~]+\s*$)')
PYTHON_FRAME = re.compile(r'^\s*File "[^"]*", line \d+')
# The replica prefix trainguard's launchers put on each log line ("[workerpool0-0] ").
REPLICA_PREFIX = re.compile(r"^\[[\w.:-]+\] ")

# The first hits of each signature are all a diagnosis uses (the earliest wins; a few more count
# towards the confidence): a log that repeats one line a million times keeps this many.
HITS_PER_PATTERN = 64
# When most lines of a block are distinct, de-duplicating costs more than it saves: the next
# blocks are searched as they are, then de-duplication is tried again.
_MOSTLY_DISTINCT = 0.8
_PLAIN_BLOCKS = 8
# Candidate lines up to this long are remembered (at most this many at once) with what they show.
_SEEN_LINE_BYTES = 4096
_SEEN_LINES = 4096


@dataclass(frozen=True)
class Hit:
    """One signature found on one piece of one line.

    Attributes:
        line_number: 1-based line of the text.
        segment: which piece of the line (a line printed through ``repr()`` holds several).
        text: the piece itself.
        pattern: the signature.
    """

    line_number: int
    segment: int
    text: str
    pattern: Pattern

    @property
    def order(self) -> tuple[int, int, float]:
        """Text order; on one piece, the most specific signature first."""
        return (self.line_number, self.segment, -self.pattern.weight)


@dataclass(frozen=True)
class Table:
    """A signature table compiled for the scan: one prefilter, and which signatures each word
    a line may hold lets through (a signature without words always runs)."""

    patterns: tuple[Pattern, ...]
    prefilter: Prefilter
    words: tuple[str, ...]
    by_word: dict[str, tuple[int, ...]]
    ungated: tuple[int, ...]

    @classmethod
    def of(cls, patterns: tuple[Pattern, ...]) -> Table:
        """Compiles ``patterns`` (slow: once per table)."""
        by_word: dict[str, list[int]] = {}
        ungated = []
        for index, pattern in enumerate(patterns):
            words = gate_words(pattern.regex)
            if words is None:
                ungated.append(index)
            for word in words or ():
                by_word.setdefault(word, []).append(index)
        return cls(
            patterns,
            Prefilter([p.regex for p in patterns]),
            tuple(by_word),
            {w: tuple(i) for w, i in by_word.items()},
            tuple(ungated),
        )

    def gated(self, piece: str) -> list[int]:
        """The signatures worth running on ``piece``: those whose words it holds, in order."""
        if has_folded(piece):
            return list(range(len(self.patterns)))
        lowered = piece.lower()
        chosen = set(self.ungated)
        for word in [w for w in self.words if w in lowered]:
            chosen.update(self.by_word[word])
        return sorted(chosen)


_TABLES: dict[int, Table] = {}


def table(patterns: tuple[Pattern, ...] | None = None) -> Table:
    """The compiled table of ``patterns`` (default :data:`CLASS_PATTERNS`), built on first use
    (importing triage stays cheap)."""
    patterns = CLASS_PATTERNS if patterns is None else patterns
    compiled = _TABLES.get(id(patterns))
    if compiled is None or compiled.patterns is not patterns:
        compiled = _TABLES[id(patterns)] = Table.of(patterns)
    return compiled


def scan(
    blocks: Iterable[bytes],
    *,
    errors: str,
    patterns: tuple[Pattern, ...] | None = None,
) -> list[Hit]:
    """Every hit of the table in ``blocks``, in text order.

    Args:
        blocks: whole lines with ``\\n`` line ends, each block ending with one
            (:func:`trainguard.triage.input.blocks`).
        errors: how undecodable bytes are read (``replace``, ``surrogatepass``).
        patterns: the table (default :data:`CLASS_PATTERNS`).
    """
    compiled = table(patterns)
    hits: list[Hit] = []
    counts = [0] * len(compiled.patterns)
    # A log repeats its lines (warnings, progress lines that mention a loss of inf): each
    # distinct candidate line is matched against the table once.
    seen: dict[tuple[bytes, bool], list[tuple[int, int, str]]] = {}
    line_number = 1  # of the first line of the block
    previous = b""  # the last line of the previous block
    plain = 0  # blocks left to search without de-duplicating (their lines were all different)
    for block in blocks:
        lines = block.split(b"\n")  # the block ends with a line end: the last item is empty
        candidates, distinct = compiled.prefilter.lines(block, dedup=plain == 0)
        plain = max(0, plain - 1) if plain else (_PLAIN_BLOCKS if distinct > _MOSTLY_DISTINCT else 0)
        for index in candidates:
            before = lines[index - 1] if index else previous
            key = (lines[index], _ends_in_frame(before.decode("utf-8", errors)))
            found = seen.get(key)
            if found is None:
                found = _matches(compiled, key[0].decode("utf-8", errors), key[1])
                if len(key[0]) <= _SEEN_LINE_BYTES:
                    if len(seen) >= _SEEN_LINES:
                        seen.clear()
                    seen[key] = found
            for segment, pattern_index, piece in found:
                if counts[pattern_index] < HITS_PER_PATTERN:
                    counts[pattern_index] += 1
                    hits.append(Hit(line_number + index, segment, piece, compiled.patterns[pattern_index]))
        line_number += len(lines) - 1
        previous = lines[-2] if len(lines) > 1 else previous
    return hits


def pieces(line: str) -> list[str]:
    """The pieces of a line a signature is matched against: the launcher's replica prefix off,
    split at literal ``\\n`` (error messages printed through ``repr()`` carry them)."""
    line = REPLICA_PREFIX.sub("", line, count=1)
    return line.split("\\n")


def _ends_in_frame(line: str) -> bool:
    """Whether the last piece of a line is a Python frame (``File "…", line N``)."""
    return bool(PYTHON_FRAME.match(pieces(line)[-1]))


def _matches(compiled: Table, line: str, after_python_frame: bool) -> list[tuple[int, int, str]]:
    """(segment, signature index, piece) for every signature the line shows."""
    found = []
    for segment, piece in enumerate(pieces(line)):
        # The source line a traceback quotes is indented; the exception line is not (and
        # comes straight after "File …" when the source is not available).
        quoted_source = after_python_frame and piece[:1] in (" ", "\t")
        after_python_frame = bool(PYTHON_FRAME.match(piece))
        if quoted_source or FRAME.match(piece):
            continue
        found += [
            (segment, index, piece)
            for index in compiled.gated(piece)
            if compiled.patterns[index].regex.search(piece)
        ]
    return found
