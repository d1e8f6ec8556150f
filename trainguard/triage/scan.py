"""The scan: one pass over a log's lines, the whole signature table only on candidate lines.

A prefilter (:mod:`trainguard.prefilter`) reads each block of lines in C and names the few lines
any signature can match; of the table, only the signatures whose required words a line holds run
on it. The result is every hit the full table would find on every line, as :class:`Hit`\\ s in
text order (a signature keeps its first :data:`HITS_PER_PATTERN` hits). Once many candidate lines
are candidates only for signatures that have all their hits, the scan goes on with a table
without them (:meth:`Table.subset`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from trainguard.prefilter import DIGITS, Prefilter, digit_blind, digit_relaxed, gate_words, has_folded
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
# ``raise ValueError("... MASTER_ADDR expected ...")``): they echo an error, they are not one. A
# Python frame is the whole line (``File "…", line N, in f``): a traceback pasted as one line
# goes on with the error itself after it.
_PY_FRAME = r'File "[^"]*", line \d+(?:, in \S+)?\s*$'
FRAME = re.compile(r"^\s*(?:frame #\d+: |" + _PY_FRAME + r"|[\^~]+\s*$)")
PYTHON_FRAME = re.compile(r"^\s*" + _PY_FRAME)
# The replica prefix trainguard's launchers put on each log line ("[workerpool0-0] ").
REPLICA_PREFIX = re.compile(r"^\[[\w.:-]+\] ")
_DIGITS_STR = str.maketrans("0123456789", "0000000000")

# The first hits of each signature are all a diagnosis uses (the earliest wins; a few more count
# towards the confidence): a log that repeats one line a million times keeps this many.
HITS_PER_PATTERN = 64
# When most lines of a block are distinct, de-duplicating costs more than it saves: the next
# blocks are searched as they are, then de-duplication is tried again.
_MOSTLY_DISTINCT = 0.8
_PLAIN_BLOCKS = 8
# Line shapes up to this long are remembered (at most this many at once) with what they show.
_SHAPE_BYTES = 4096
_SHAPES = 4096
# A table is made anew without the signatures that have all their hits once this many lines
# were worked out for them alone: the new table takes about 20 ms (Table.subset), a line's
# shape (gating, the signatures it may show) about 60 us, so a new table costs at most what
# those lines cost, and there is one at most per signature.
_REBUILD_AFTER = 400


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
class _Shape:
    """What a line shape (a line with its digits made ``0``) shows, piece by piece.

    Attributes:
        shown: per piece, the digit-blind signatures it matches (every line of the shape does).
        to_run: per piece, the signatures that read digits and whose words it holds: they are
            run on each line itself.
        signatures: all of them, once.
    """

    shown: tuple[tuple[int, ...], ...]
    to_run: tuple[tuple[int, ...], ...]
    signatures: tuple[int, ...]


@dataclass(frozen=True)
class Table:
    """A signature table compiled for the scan: one prefilter, which signatures each word a
    line may hold lets through (a signature without words always runs), which signatures are
    blind to digits (:func:`trainguard.prefilter.digit_blind`) and, for the others, a relaxed
    digit-blind form (:func:`trainguard.prefilter.digit_relaxed`)."""

    patterns: tuple[Pattern, ...]
    prefilter: Prefilter
    words: tuple[str, ...]
    by_word: dict[str, tuple[int, ...]]
    ungated: tuple[int, ...]
    blind: tuple[bool, ...]
    relaxed: tuple[re.Pattern[str] | None, ...]
    gates: tuple[tuple[str, ...] | None, ...]  # per signature, its words (None: it has none)

    @classmethod
    def of(cls, patterns: tuple[Pattern, ...]) -> Table:
        """Compiles ``patterns`` (slow: once per table)."""
        # Words are looked for in a line shape, whose digits are all 0: so are theirs.
        gates = []
        for pattern in patterns:
            words = gate_words(pattern.regex)
            gates.append(None if words is None else tuple(sorted({w.translate(_DIGITS_STR) for w in words})))
        blind = tuple(digit_blind(p.regex) for p in patterns)
        return cls._made(
            patterns,
            Prefilter([p.regex for p in patterns]),
            blind,
            tuple(None if b else digit_relaxed(p.regex) for p, b in zip(patterns, blind, strict=True)),
            tuple(gates),
        )

    def subset(self, keep: tuple[int, ...]) -> Table:
        """The table of the signatures ``keep`` (indexes, in order): what is known of each is
        kept, only the prefilter's regexes that change are compiled anew."""
        return self._made(
            tuple(self.patterns[k] for k in keep),
            self.prefilter.subset(keep),
            tuple(self.blind[k] for k in keep),
            tuple(self.relaxed[k] for k in keep),
            tuple(self.gates[k] for k in keep),
        )

    @classmethod
    def _made(
        cls,
        patterns: tuple[Pattern, ...],
        prefilter: Prefilter,
        blind: tuple[bool, ...],
        relaxed: tuple[re.Pattern[str] | None, ...],
        gates: tuple[tuple[str, ...] | None, ...],
    ) -> Table:
        by_word: dict[str, list[int]] = {}
        for index, words in enumerate(gates):
            for word in words or ():
                by_word.setdefault(word, []).append(index)
        ungated = tuple(i for i, words in enumerate(gates) if words is None)
        return cls(
            patterns,
            prefilter,
            tuple(by_word),
            {w: tuple(i) for w, i in by_word.items()},
            ungated,
            blind,
            relaxed,
            gates,
        )

    def gated(self, piece: str) -> list[int]:
        """The signatures worth running on ``piece`` (or its shape): those whose words it
        holds, in order."""
        if has_folded(piece):
            return list(range(len(self.patterns)))
        lowered = piece.lower().translate(_DIGITS_STR)
        chosen = set(self.ungated)
        for word in [w for w in self.words if w in lowered]:
            chosen.update(self.by_word[word])
        return sorted(chosen)

    def shape(self, text: str, after_python_frame: bool) -> _Shape:
        """What the lines of shape ``text`` show (``after_python_frame``: the line before is a
        Python frame, so an indented line is the source it quotes)."""
        shown: list[tuple[int, ...]] = []
        to_run: list[tuple[int, ...]] = []
        for piece in pieces(text):
            quoted_source = after_python_frame and piece[:1] in (" ", "\t")
            after_python_frame = bool(PYTHON_FRAME.match(piece))
            if quoted_source or FRAME.match(piece):
                shown.append(())
                to_run.append(())
                continue
            gated = self.gated(piece)
            shown.append(tuple(i for i in gated if self.blind[i] and self.patterns[i].regex.search(piece)))
            to_run.append(tuple(i for i in gated if not self.blind[i] and self._may_match(i, piece)))
        everything = sorted({i for part in (*shown, *to_run) for i in part})
        return _Shape(tuple(shown), tuple(to_run), tuple(everything))

    def _may_match(self, index: int, shape_piece: str) -> bool:
        """Whether a digit-reading signature can match some line of this shape: its relaxed,
        digit-blind form matches the shape (no relaxed form: it may)."""
        relaxed = self.relaxed[index]
        return relaxed is None or relaxed.search(shape_piece) is not None


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
    everything = compiled.patterns
    hits: list[Hit] = []
    counts = [0] * len(everything)
    # The table the scan runs: at first the whole one; later, once many lines are candidates
    # only for signatures that have all their hits, the others alone (``origin``: their
    # indexes in the whole table).
    active, origin = compiled, tuple(range(len(everything)))
    # A log repeats its lines but for their numbers (step counters, losses, timestamps, a
    # progress bar's counts): what a line shape shows is worked out once.
    shapes: dict[tuple[bytes, bool], _Shape] = {}
    frames: dict[bytes, bool] = {}
    # Line shapes whose every signature has all the hits it keeps, whatever the line before:
    # their lines are passed at the cost of a lookup (a progress bar with a NaN loss on each
    # of its million lines is a candidate a million times).
    spent: set[bytes] = set()
    line_number = 1  # of the first line of the block
    previous = b""  # the last line of the previous block
    plain = 0  # blocks left to search without de-duplicating (their lines were all different)
    dead = 0  # lines whose shape was worked out for signatures that have all their hits
    for block in blocks:
        candidates, distinct = active.prefilter.lines(block, dedup=plain == 0)
        plain = max(0, plain - 1) if plain else (_PLAIN_BLOCKS if distinct > _MOSTLY_DISTINCT else 0)
        # The block ends with a line end: the last item is empty. Cut only when some line is
        # a candidate (most blocks of a healthy log have none).
        lines = block.split(b"\n") if candidates else []
        at = 0
        while at < len(candidates):
            index = candidates[at]
            at += 1
            line = lines[index]
            text_shape = line.translate(DIGITS)
            if text_shape in spent:
                continue
            after_frame = _ends_in_frame(lines[index - 1] if index else previous, frames, errors)
            key = (text_shape, after_frame)
            shape = shapes.get(key)
            if shape is None:
                shape = active.shape(text_shape.decode("utf-8", errors), after_frame)
                if len(line) <= _SHAPE_BYTES:
                    if len(shapes) >= _SHAPES:
                        shapes.clear()
                    shapes[key] = shape
            if all(counts[origin[i]] >= HITS_PER_PATTERN for i in shape.signatures):
                # Every signature this line can show has all the hits it keeps. After a Python
                # frame a line shows what it shows after any other line or less (its first
                # piece may be quoted source): only the other case tells about every line.
                if not after_frame and len(line) <= _SHAPE_BYTES:
                    if len(spent) >= _SHAPES:
                        spent.clear()
                    spent.add(text_shape)
                dead += bool(shape.signatures)
                if dead >= _REBUILD_AFTER and len(collecting := _collecting(counts)) < len(origin):
                    # Lines no two alike (a NaN loss with a request id on each): no shape
                    # repeats, each costs its gating. A table without the signatures that
                    # have all their hits lets those lines through no more: the same hits, in
                    # the same order (its signatures are a subsequence), the block's lines
                    # after this one searched again.
                    active, origin = compiled.subset(collecting), collecting
                    shapes.clear()
                    rest = block[len(b"\n".join(lines[: index + 1])) + 1 :]
                    candidates = [index + 1 + i for i in active.prefilter.lines(rest, dedup=False)[0]]
                    at = dead = 0
                continue
            for segment, piece in enumerate(pieces(line.decode("utf-8", errors))):
                found = list(shape.shown[segment])
                found += [i for i in shape.to_run[segment] if active.patterns[i].regex.search(piece)]
                for i in sorted(found):
                    if counts[origin[i]] < HITS_PER_PATTERN:
                        counts[origin[i]] += 1
                        hits.append(Hit(line_number + index, segment, piece, active.patterns[i]))
        line_number += block.count(b"\n")
        previous = block[block.rfind(b"\n", 0, len(block) - 1) + 1 : -1]
    return hits


def _collecting(counts: list[int]) -> tuple[int, ...]:
    """The signatures that do not have all the hits they keep yet."""
    return tuple(k for k, n in enumerate(counts) if n < HITS_PER_PATTERN)


def pieces(line: str) -> list[str]:
    """The pieces of a line a signature is matched against: the launcher's replica prefix off,
    split at literal ``\\n`` (error messages printed through ``repr()`` carry them)."""
    line = REPLICA_PREFIX.sub("", line, count=1)
    return line.split("\\n")


def _ends_in_frame(line: bytes, known: dict[bytes, bool], errors: str) -> bool:
    """Whether the last piece of a line is a Python frame (``File "…", line N``); digit-blind,
    so remembered by the line's shape."""
    shape = line.translate(DIGITS)
    found = known.get(shape)
    if found is None:
        found = bool(PYTHON_FRAME.match(pieces(shape.decode("utf-8", errors))[-1]))
        if len(shape) <= _SHAPE_BYTES:
            if len(known) >= _SHAPES:
                known.clear()
            known[shape] = found
    return found
