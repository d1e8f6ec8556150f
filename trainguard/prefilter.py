"""A one-pass prefilter for a table of line regexes: which lines can match any of them at all.

Running a table of a hundred regexes on every line of a 200 MB log costs minutes in Python: the
regexes are cheap, the hundreds of millions of calls are not. Most lines of a log match nothing,
and every regex of a failure table needs some literal words (``out of memory``, ``PERMISSION``…).
:func:`skeleton` reads a regex's parse tree and writes a looser regex over lower-cased bytes that
every line the original matches also matches: the literals it requires, in order, with gaps.
:class:`Prefilter` joins the skeletons of a whole table into a trie of literals, compiled as one
regex per first byte, that runs over big blocks of the lower-cased file in C; only the few lines
it finds go to the real table, and of the table only the regexes whose required words
(:func:`gate_words`) the line holds.

The skeleton is a superset by construction: literals are lower-cased (so is the text), anything
that is not a plain ASCII literal becomes a gap (``[^\\n]*?``, which may be empty), an optional
part is dropped, a branch keeps all its alternatives. Python's case-insensitive matching also
folds four non-ASCII letters onto ASCII ones (Kelvin sign ``K``, ``ſ``, ``İ``, ``ı``): a line
holding one of them is always a candidate. Each literal is looked for from a short, rare suffix
(the regex engine skips fast to few distinct first bytes), and the rest of it is checked at once
behind it, so the suffix alone never makes a candidate. What must follow a literal on the line
is looked for byte run by byte run (:func:`_then`), not byte by byte.

A log repeats its lines but for their numbers. :func:`digit_blind` tells which regexes cannot
tell one digit from another (they match a line exactly when they match it with every digit made
``0``), and :func:`digit_relaxed` turns the others into a digit-blind superset: the scan works
out what a line *shape* shows once, and runs on each line only the few regexes that read digits
and may match it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import compress, count

# Python 3.11+ keeps the regex parser private; the prefilter reads literals off its parse tree.
from re import _compiler as _sre_compile  # type: ignore[attr-defined]
from re import _constants as _c  # type: ignore[attr-defined]
from re import _parser as _sre  # type: ignore[attr-defined]

__all__ = [
    "GAP",
    "FOLDED",
    "DIGITS",
    "Prefilter",
    "skeleton",
    "gate_words",
    "has_folded",
    "digit_blind",
    "digit_relaxed",
]

GAP = rb"[^\n]*?"
# CPython before 3.11.5 matched possessive repeats of a group wrongly (gh-106052: "(?:ab?c)*+"
# fullmatched "a"; gh-100061: the input pointer was not restored after a sub-pattern; both fixed
# in 3.11.5, python/cpython#107795 and #108004). There the gap stays the lazy one: the same lines,
# at the slower speed.
POSSESSIVE_GROUPS = sys.version_info >= (3, 11, 5)
# The non-ASCII characters that re.IGNORECASE matches with an ASCII letter (k, s, i, i), found by
# trying every code point; tests/unit/test_triage.py checks the list again.
FOLDED = ("\u212a", "\u017f", "\u0130", "\u0131")
_FOLDED_RE = re.compile("|".join(FOLDED))
_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT} | (
    {_c.POSSESSIVE_REPEAT} if hasattr(_c, "POSSESSIVE_REPEAT") else set()
)
_ATOMIC = getattr(_c, "ATOMIC_GROUP", object())
# The text the prefilter reads has every digit made 0, so that lines differing only in numbers
# (step counters, losses, timestamps) are one line to search; its literals are made alike.
DIGITS = _DIGITS = bytes.maketrans(b"0123456789", b"0000000000")
# Both at once, in one pass: bytes.lower() changes ASCII letters only, so does this table.
_LOWER_DIGITS = bytes.maketrans(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", b"abcdefghijklmnopqrstuvwxyz0000000000"
)
_MIN_LEAD = 3  # a shorter literal is too common a place to start looking from


@dataclass(frozen=True)
class _Alt:
    """A match holds one of the options."""

    options: tuple


@dataclass(frozen=True)
class _Seq:
    """A match holds every item, in order; None is a gap (any run of characters, maybe none)."""

    items: tuple


_Part = bytes | _Alt | _Seq


def _data(sub) -> list:
    return list(sub.data) if hasattr(sub, "data") else list(sub)


def _seq(items: Sequence) -> bytes | _Alt | _Seq | None:
    """What a match of this sequence of parse nodes must contain; None when nothing."""
    parts: list = []
    run = bytearray()
    for op, av in items:
        if op == _c.LITERAL and av < 128:  # ASCII: both it and the text are lower-cased
            run += chr(av).lower().encode()
            continue
        if run:
            parts.append(bytes(run))
            run.clear()
        sub = _node(op, av)
        if sub is not None:
            parts += [None, sub]
        parts.append(None)
    if run:
        parts.append(bytes(run))
    kept = [p for i, p in enumerate(parts) if p is not None or (i and parts[i - 1] is not None)]
    while kept and kept[0] is None:
        kept.pop(0)
    while kept and kept[-1] is None:
        kept.pop()
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else _Seq(tuple(kept))


def _node(op, av) -> bytes | _Alt | _Seq | None:
    """What one non-literal node requires, or None (a class, an anchor, a lookaround…)."""
    if op == _c.SUBPATTERN:
        return _seq(_data(av[3]))
    if op == _ATOMIC:
        return _seq(_data(av))
    if op in _REPEATS:
        low, _high, sub = av
        return _seq(_data(sub)) if low >= 1 else None
    if op == _c.BRANCH:
        options = [_seq(_data(b)) for b in av[1]]
        return None if any(o is None for o in options) else _Alt(tuple(options))
    return None


def _parse(regex: re.Pattern[str] | str) -> bytes | _Alt | _Seq | None:
    if isinstance(regex, re.Pattern):
        return _seq(_data(_sre.parse(regex.pattern, regex.flags)))
    return _seq(_data(_sre.parse(regex, 0)))


def _render(part: bytes | _Alt | _Seq | None) -> bytes:
    if part is None:
        return GAP
    if isinstance(part, bytes):
        return re.escape(part.translate(_DIGITS))
    if isinstance(part, _Alt):
        return b"(?:" + b"|".join(_render(o) for o in part.options) + b")"
    return b"".join(_render(p) for p in part.items)


def _firsts(part: bytes | _Alt | _Seq) -> set[int]:
    """The bytes a match of ``part`` may start with (a sequence starts with an item, not a gap)."""
    if isinstance(part, bytes):
        return {part.translate(_DIGITS)[0]}
    if isinstance(part, _Alt):
        return set().union(*(_firsts(o) for o in part.options))
    return _firsts(part.items[0])


def _then(part: bytes | _Alt | _Seq) -> bytes:
    """A gap then ``part``, all that must follow a literal on the line: what ``[^\\n]*?``
    then ``part`` matches, written so that the engine tries ``part`` only where the line holds
    a byte it may start with.

    The lazy gap tries ``part`` at every byte of the rest of the line, an opcode or more per
    byte; here a possessive run of the other bytes (one loop in C) skips to the next byte
    ``part`` may start with, and a byte where ``part`` does not match is passed. Possessive:
    nothing to go back to, so memory stays flat however long the line (a lazy loop keeps a
    place to go back to per byte passed: 100 MiB on a 4 MB line). Going on from the first
    place where ``part`` matches loses nothing only because nothing follows ``part``, so the
    gaps inside it stay lazy. The same lines match, at a few times the speed on a long line
    (a log line holds a common word such as ``loss``, and the rest of it is read for what
    must follow).
    """
    lazy = _render(part)
    starts = b"".join(re.escape(bytes([byte])) for byte in sorted(_firsts(part) - {ord("\n")}))
    if not starts or not POSSESSIVE_GROUPS:  # not starts: only the end of the line is left to try
        return GAP + lazy
    run = rb"[^\n" + starts + b"]*+"
    return run + b"(?:(?!" + lazy + b")[" + starts + b"]" + run + b")*+" + lazy


def skeleton(regex: re.Pattern[str] | str) -> bytes | None:
    """A regex over a lower-cased UTF-8 line that every line ``regex`` matches also matches.

    Returns None when ``regex`` requires no literal at all (then every line is a candidate).
    """
    part = _parse(regex)
    return None if part is None else _render(part)


def _words(part: bytes | _Alt | _Seq | None) -> tuple[bytes, ...] | None:
    if part is None:
        return None
    if isinstance(part, bytes):
        return (part,)
    if isinstance(part, _Alt):
        words: list[bytes] = []
        for option in part.options:
            found = _words(option)
            if found is None:
                return None  # one alternative needs no word: neither does the branch
            words += found
        return tuple(words)
    options = [w for w in (_words(p) for p in part.items) if w]
    # The most telling requirement: the one whose shortest word is longest.
    return max(options, key=lambda o: min(len(w) for w in o), default=None)


def gate_words(regex: re.Pattern[str] | str) -> tuple[str, ...] | None:
    """Lower-case words of which every line ``regex`` matches holds one; None: cannot tell."""
    words = _words(_parse(regex))
    return tuple(sorted({w.decode() for w in words})) if words else None


def has_folded(text: str) -> bool:
    """True when ``text`` holds a character that case-insensitive matching folds onto ASCII."""
    return _FOLDED_RE.search(text) is not None


def _has_literal(part) -> bool:
    if isinstance(part, bytes):
        return True
    if isinstance(part, _Alt):
        return all(_has_literal(o) for o in part.options)
    return isinstance(part, _Seq) and any(_has_literal(p) for p in part.items if p is not None)


def _strength(part: bytes | _Alt | _Seq | None) -> int:
    """How good a place to start looking a part is: the fewest letters (digits are all alike in
    the text the prefilter reads) among the literals a match may start from."""
    if part is None or not _has_literal(part):
        return 0
    return min(len(head.translate(None, b"0123456789")) for head, _ in _leads(part))


def _leads(part: bytes | _Alt | _Seq) -> list[tuple[bytes, _Part | None]]:
    """(a literal a match holds, what must follow it on the line after a gap, or None) pairs.

    A sequence is looked for from its strongest item: the one whose shortest literal has the
    most letters, the first of equals (not ``e`` in ``E(?:rror|xception)`` nor ``403`` in
    ``403.*forbidden``: every ``e`` or number would be followed by a search of the rest of the
    line; not ``INFO`` in NCCL's ``INFO (?:bootstrap\\.c[cu]|init\\.c[cu]):\\d+ -> [1-9]``: a log
    may hold ``info`` on every line, ``init.c`` on few). What comes before that item is
    dropped: still a superset, a requirement is dropped, none is added.
    """
    if isinstance(part, bytes):
        return [(part, None)]
    if isinstance(part, _Alt):
        return [lead for option in part.options for lead in _leads(option)]
    items = [(i, item) for i, item in enumerate(part.items) if item is not None]
    strengths = [(_strength(item), i) for i, item in items]
    start = max(strengths, key=lambda s: (s[0], -s[1]))[1]
    rest = [item for item in part.items[start + 1 :]]
    while rest and rest[0] is None:
        rest.pop(0)
    after = None if not rest else rest[0] if len(rest) == 1 else _Seq(tuple(rest))
    out = []
    for head, tail in _leads(part.items[start]):
        if tail is None or after is None:
            out.append((head, after if tail is None else tail))
        else:
            out.append((head, _Seq((*_items(tail), None, *_items(after)))))
    return out


def _items(part: _Part) -> tuple:
    return part.items if isinstance(part, _Seq) else (part,)


# How common a byte is in lower-cased logs (higher: more common): digits (all 0 here), a space,
# English letters by frequency, everyday punctuation.
_COMMON = {byte: 60 - i for i, byte in enumerate(b" etaoinsrhldcumfpgwybvkxjqz")}
_COMMON.update({byte: 61 for byte in b"0123456789"})
_COMMON.update({byte: 45 for byte in b".:/-=,\t"})


def _anchors(heads: list[bytes]) -> list[bytes]:
    """Where each literal is looked for from: a suffix of it, at least ``_MIN_LEAD`` bytes long.

    Any part of a required literal is required too, and keeping its end keeps what follows it
    adjacent. The regex engine stops at every byte that starts some suffix and then tries each
    such first byte in turn, so the suffixes start on few distinct bytes, and rare ones: a byte
    another literal already starts on costs nothing more; else the rarest.
    """
    roots: set[int] = set()
    chosen: dict[int, bytes] = {}
    # The literals with the least choice first (a three-letter one has a single start).
    for k in sorted(range(len(heads)), key=lambda k: len(heads[k])):
        head = heads[k].translate(_DIGITS)
        starts = list(range(len(head) - _MIN_LEAD + 1)) if len(head) > _MIN_LEAD else [0]
        starts = [i for i in starts if head[i] in roots] or starts
        best = min(starts, key=lambda i: (_COMMON.get(head[i], 0), i))
        roots.add(head[best])
        chosen[k] = head[best:]
    return [chosen[k] for k in range(len(heads))]


def _root(leads: list[tuple[bytes, _Part | None]]) -> dict:
    """The trie of the leads' anchors: a node maps a byte to the next node, None to what the
    leads that end there need (by the lookbehind their literal needs); :func:`_emit` writes
    it as a regex, each leaf followed by what it needs.

    Python's regex engine tries the alternatives of an alternation one by one at every position:
    a hundred flat alternatives cost a hundred tests per character, a trie a few. The leads of
    one literal that need more on the line share one gap: the rest of the line is read once
    for any of what they need.
    """
    root: dict = {}
    for anchor, (head, rest) in zip(_anchors([h for h, _ in leads]), leads, strict=True):
        node = root
        for byte in anchor:
            node = node.setdefault(byte, {})
        whole = head.translate(_DIGITS)
        # The anchor is the literal's end: the rest of it must stand right before it, checked
        # at once (a fixed-width lookbehind) rather than by every line the anchor alone finds
        # ("throughput" holds "ugh" of "not enough", "totalMemory" the "memory" of "Cannot
        # allocate memory").
        behind = b"" if whole == anchor else b"(?<=" + re.escape(whole) + b")"
        node.setdefault(None, {}).setdefault(behind, {})[None if rest is None else _render(rest)] = rest
    return root


def _implies(part: _Part, other: _Part) -> bool:
    """Whether every line where ``part`` follows a gap also has ``other`` after that gap: then
    a lead that needs ``part`` adds no line to one that needs ``other`` (``loss`` then
    ``is|became`` … ``inf|nan``, beside ``loss`` then ``nan|inf``). Told only for an ``other``
    that is a literal or a choice of literals, held by every choice ``part`` has."""
    if isinstance(other, bytes):
        wanted: tuple = (other,)
    elif isinstance(other, _Alt) and all(isinstance(o, bytes) for o in other.options):
        wanted = other.options
    else:
        return False
    return _holds(part, wanted)


def _holds(part: _Part, wanted: tuple) -> bool:
    if isinstance(part, bytes):
        return any(w in part for w in wanted)
    if isinstance(part, _Alt):
        return all(_holds(o, wanted) for o in part.options)
    return any(_holds(item, wanted) for item in part.items if item is not None)


def _emit(node: dict) -> bytes:
    ends = node.get(None, {})
    if None in ends.get(b"", {}):
        return b""  # a lead that needs nothing more: found
    options = [
        re.escape(bytes([byte])) + _emit(child)
        for byte, child in sorted((k, v) for k, v in node.items() if k is not None)
    ]
    for behind, rests in sorted(ends.items()):
        if None in rests:
            options.append(behind)
            continue
        parts: list[_Part] = []
        for key in sorted(rests, key=lambda k: (len(k), k)):
            if not any(_implies(rests[key], kept) for kept in parts):
                parts.append(rests[key])
        options.append(behind + _then(parts[0] if len(parts) == 1 else _Alt(tuple(parts))))
    if len(options) == 1:
        return options[0]
    return b"(?:" + b"|".join(options) + b")"


class Prefilter:
    """Compiled regexes over lower-cased bytes: the lines any of ``regexes`` can match."""

    def __init__(self, regexes: Sequence[re.Pattern[str]], *, heads_only: bool = False) -> None:
        """Args:
        regexes: the table.
        heads_only: look for each lead's literal alone, not for what must follow it on the
            line: a looser but linear-time filter, for text that is not cut into lines (a
            lazy gap then a literal costs a pass to the end of the text per occurrence).
        """
        parts = [_parse(r) for r in regexes]
        self._leads: tuple[list[tuple[bytes, _Part | None]] | None, ...] = tuple(
            None if p is None else [(h, None) for h, _ in _leads(p)] if heads_only else _leads(p)
            for p in parts
        )
        self._made()

    def _made(self) -> None:
        self.complete = all(leads is not None for leads in self._leads)
        every = [lead for leads in self._leads if leads is not None for lead in leads]
        every += [(ch.encode(), None) for ch in FOLDED]
        self._root = _root(every)
        # One regex per first byte, run one after the other: a regex that starts with one byte
        # skips to it fast (3 GB/s), one that starts with any of a set tests every byte of the
        # text against the set (about 6 ns a byte: the every-line-different step log's 4 MB
        # block took 31 ms so, its 19 first bytes one after the other 25 ms). Each starts
        # where bytes.find (memchr, faster still) sees its byte first, if anywhere: most
        # blocks lack most of them (an ASCII log every byte of the case-folded letters).
        self._searches = (
            tuple(
                (bytes([byte]), re.compile(_emit({byte: self._root[byte]})).search)
                for byte in sorted(self._root)
            )
            if self.complete
            else ()
        )

    def subset(self, keep: Sequence[int]) -> Prefilter:
        """The prefilter of the regexes ``keep`` (indexes) alone, from what is known of each:
        re's own cache hands back the regexes of the first bytes that did not change."""
        other = object.__new__(Prefilter)
        other._leads = tuple(self._leads[k] for k in keep)
        other._made()
        return other

    @cached_property
    def regex(self) -> re.Pattern[bytes] | None:
        """All of it as one compiled regex (None: some regex needs no literal, every line may
        match), for a text searched at once rather than line by line."""
        return re.compile(_emit(self._root)) if self.complete else None

    def lines(self, block: bytes, *, dedup: bool = True) -> tuple[list[int], float]:
        """The indexes of the lines of ``block`` (``block.split(b"\\n")``) that may match, and the
        share of its lines that are distinct (1.0 without ``dedup``).

        The lines are lower-cased with their digits made 0. With ``dedup`` each distinct line is
        searched once however often it repeats (a training log repeats itself but for its
        numbers), the distinct ones joined into one text for one pass of the compiled regex;
        without, the block is searched as it is (cheaper when its lines are all different).
        """
        lowered = block.translate(_LOWER_DIGITS)
        if not self.complete:  # a regex that needs no literal: every line is a candidate
            return list(range(lowered.count(b"\n") + 1)), 1.0
        if not dedup:
            return self._direct(lowered), 1.0
        shapes = lowered.split(b"\n")
        distinct = dict.fromkeys(shapes)
        text = b"\n".join(distinct)
        found = {text[start:stop] for start, stop in self._spans(text)}
        share = len(distinct) / len(shapes)
        if not found:
            return [], share
        # In C: a log whose every line is a candidate (a progress bar with a NaN loss) has a
        # million of them.
        return list(compress(count(), map(found.__contains__, shapes))), share

    def _spans(self, text: bytes) -> list[tuple[int, int]]:
        """(start, end) of each line of ``text`` the compiled regex finds something in, in
        text order."""
        spans: dict[int, int] = {}
        end = len(text)
        for byte, search in self._searches:
            pos = text.find(byte)
            while 0 <= pos <= end:
                match = search(text, pos)
                if match is None:
                    break
                start = text.rfind(b"\n", 0, match.start()) + 1
                stop = text.find(b"\n", match.end())
                stop = end if stop < 0 else stop
                spans[start] = stop
                pos = stop + 1
        return sorted(spans.items())

    def _direct(self, lowered: bytes) -> list[int]:
        found, line, counted = [], 0, 0
        for start, _stop in self._spans(lowered):
            line += lowered.count(b"\n", counted, start)
            counted = start
            found.append(line)
        return found


_ASCII_DIGITS = frozenset(range(ord("0"), ord("9") + 1))
# Character categories hold every ASCII digit or none, so they never tell one digit from another.
_DIGIT_CATEGORIES = {_c.CATEGORY_DIGIT, _c.CATEGORY_WORD, _c.CATEGORY_NOT_SPACE}


def _set_is_blind(items) -> bool:
    """Whether a character set holds every ASCII digit or none of them."""
    covered: set[int] = set()
    for op, av in items:
        if op == _c.LITERAL and av in _ASCII_DIGITS:
            covered.add(av)
        elif op == _c.RANGE:
            covered |= _ASCII_DIGITS & set(range(av[0], av[1] + 1))
        elif op == _c.CATEGORY and av in _DIGIT_CATEGORIES:
            return True  # every digit is in it, whatever the literals add
    return len(covered) in (0, len(_ASCII_DIGITS))


def _children(op, av) -> list:
    """The parse-tree lists nested in one node (a group's, a repeat's, a branch's, a lookaround's)."""
    if op == _c.SUBPATTERN:
        return [_data(av[3])]
    if op == _ATOMIC:
        return [_data(av)]
    if op in _REPEATS:
        return [_data(av[2])]
    if op == _c.BRANCH:
        return [_data(b) for b in av[1]]
    if op in (_c.ASSERT, _c.ASSERT_NOT):
        return [_data(av[1])]
    return []


def _tree_is_blind(items) -> bool:
    for op, av in items:
        if op in (_c.LITERAL, _c.NOT_LITERAL) and av in _ASCII_DIGITS:
            return False
        if op == _c.IN and not _set_is_blind(av):
            return False
        if op in (_c.GROUPREF, _c.GROUPREF_EXISTS):
            return False  # a back-reference repeats the very digits it saw
        if not all(_tree_is_blind(child) for child in _children(op, av)):
            return False
    return True


def digit_blind(regex: re.Pattern[str]) -> bool:
    """True when ``regex`` cannot tell one ASCII digit from another.

    Such a regex finds a match in a line exactly when it finds one in the line with every digit
    made ``0`` (a digit stands where a digit stood, so ``\\d``, ``\\w``, ``\\b`` and ``.`` see
    the same): a log's lines that differ only in their numbers (step counters, losses,
    timestamps) need it run once. A literal digit (``137``), a set holding some digits but not
    others (``[1-9]``) or a back-reference makes it see digits.
    """
    return _tree_is_blind(_data(_sre.parse(regex.pattern, regex.flags)))


_ANY = [(_c.CATEGORY, _c.CATEGORY_DIGIT), (_c.CATEGORY, _c.CATEGORY_NOT_DIGIT)]


class _Unrelaxable(Exception):
    """A back-reference: what it matches depends on the digits seen before."""


def _relax_set(items: list) -> list:
    if _set_is_blind(items):
        return items
    if items and items[0][0] == _c.NEGATE:  # [^0-4x]: let every digit through
        kept = [items[0]]
        for op, av in items[1:]:
            if op == _c.LITERAL and av in _ASCII_DIGITS:
                continue
            if op == _c.RANGE:
                low, high = av
                kept += [(_c.RANGE, r) for r in ((low, min(high, 47)), (max(low, 58), high)) if r[0] <= r[1]]
                continue
            kept.append((op, av))
        return kept
    return [*items, (_c.CATEGORY, _c.CATEGORY_DIGIT)]  # [1-9x]: every digit


def _relax(items) -> list:
    out: list[tuple[object, object]] = []
    for op, av in items:
        if op == _c.LITERAL and av in _ASCII_DIGITS:
            out.append((_c.IN, [(_c.CATEGORY, _c.CATEGORY_DIGIT)]))
        elif op == _c.NOT_LITERAL and av in _ASCII_DIGITS:
            out.append((_c.IN, list(_ANY)))
        elif op == _c.IN:
            out.append((op, _relax_set(list(av))))
        elif op in (_c.GROUPREF, _c.GROUPREF_EXISTS):
            raise _Unrelaxable
        elif op == _c.SUBPATTERN:
            out.append((op, (*av[:3], _sub(av[3], _relax(_data(av[3]))))))
        elif op == _ATOMIC:
            out.append((op, _sub(av, _relax(_data(av)))))
        elif op in _REPEATS:
            out.append((op, (av[0], av[1], _sub(av[2], _relax(_data(av[2]))))))
        elif op == _c.BRANCH:
            out.append((op, (av[0], [_sub(b, _relax(_data(b))) for b in av[1]])))
        elif op == _c.ASSERT:
            out.append((op, (av[0], _sub(av[1], _relax(_data(av[1]))))))
        elif op == _c.ASSERT_NOT:
            continue  # a negative assertion relaxed inside would refuse more: drop it instead
        else:
            out.append((op, av))
    return out


def _sub(like, data: list):
    return _sre.SubPattern(like.state, data)


def digit_relaxed(regex: re.Pattern[str]) -> re.Pattern[str] | None:
    """A digit-blind regex that matches wherever ``regex`` matches (any digit where it wants
    one digit, no negative assertion), or None when there is none (a back-reference).

    It tells which lines of one shape (digits made ``0``) a digit-reading signature may match
    at all: where the relaxed form does not match the shape, the signature matches none of
    the shape's lines.
    """
    tree = _sre.parse(regex.pattern, regex.flags)
    try:
        relaxed = _sub(tree, _relax(_data(tree)))
    except _Unrelaxable:
        return None
    if not _tree_is_blind(_data(relaxed)):
        return None
    return _sre_compile.compile(relaxed, regex.flags)
