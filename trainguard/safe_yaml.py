"""YAML/JSON text → Python data, with the size of what it expands to capped before it expands.

A 430-byte YAML "billion laughs" (nine anchors, each aliased nine times by the next) stands for
a billion values; a JSON or YAML document nested 500 deep overflows Python's stack in the
parser's constructor or in whatever walks the result. :func:`load` first reads the document as
a stream of parser events (libyaml's when available), counting the values each anchor stands
for, the characters of its strings and how deep it nests, and refuses the document as soon as
one cap is passed, with a message that says which and why. Only then is it constructed (aliases
become shared references, cheap). :func:`check_shape` applies the same caps to data that did
not come from text (a mapping handed in by a pipeline).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from trainguard.errors import SpecError
from trainguard.redaction import bound, redact

__all__ = ["MAX_DEPTH", "MAX_VALUES", "MAX_CHARS", "MAX_TEXT_CHARS", "load", "check_shape"]

MAX_DEPTH = 64  # a CustomJob body nests about 8 deep
MAX_VALUES = 100_000  # values after alias expansion: thousands of env vars still fit
MAX_CHARS = 16_000_000  # characters of all strings after alias expansion
MAX_TEXT_CHARS = 8_000_000  # of the document itself

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def _too_deep(where: str) -> SpecError:
    return SpecError(
        f"nests more than {MAX_DEPTH} levels deep (a CustomJobSpec nests about 8); "
        "check for a runaway structure or aliases that nest into each other",
        where,
    )


def _too_big(where: str, values: int, chars: int) -> SpecError:
    what = (
        f"more than {MAX_VALUES:,} values" if values > MAX_VALUES else f"more than {MAX_CHARS:,} characters"
    )
    return SpecError(
        f"expands to {what} (YAML anchors and aliases multiply what they repeat: "
        "a few hundred bytes can stand for billions of values); write the spec out "
        "without nested aliases",
        where,
    )


class _Open:
    """A mapping or sequence being read: its anchor and the totals when it opened; for a
    mapping, the keys seen so far and whether the next node is a key."""

    __slots__ = ("anchor", "values", "chars", "height", "keys", "at_key")

    def __init__(self, anchor: str | None, values: int, chars: int, mapping: bool) -> None:
        self.anchor, self.values, self.chars, self.height = anchor, values, chars, 0
        self.keys: set[tuple[str, bool]] | None = set() if mapping else None
        self.at_key = True


def _node_ended(stack: list[_Open], event: yaml.Event, where: str) -> None:
    """A node ended inside ``stack[-1]``: when it is a mapping's key, refuses a key seen before.

    YAML and JSON parsers keep the last of two equal keys, so a spec with ``serviceAccount``
    twice would silently lose one (gcloud refuses it). Keys compare as written: the same text,
    both plain or both quoted (plain ``1`` and quoted ``"1"`` are different keys).
    """
    parent = stack[-1] if stack else None
    keys = parent.keys if parent is not None else None
    if parent is None or keys is None:
        return
    if parent.at_key and isinstance(event, yaml.ScalarEvent) and event.value != "<<":
        key = (event.value, bool(event.implicit[0]))
        if key in keys:
            line = event.start_mark.line + 1 if event.start_mark else 0
            raise SpecError(
                f"the key {bound(redact(repr(event.value)), 120)} appears twice in "
                f"one mapping (line {line}); YAML and JSON would keep only the last "
                "value and silently drop the other: keep one",
                where,
            )
        keys.add(key)
    parent.at_key = not parent.at_key


def _precheck(text: str, where: str) -> None:
    """Walks the parser's events and raises SpecError at the first cap passed."""
    anchors: dict[str, tuple[int, int, int]] = {}  # anchor -> (values, chars, height)
    stack: list[_Open] = []
    values = chars = 0
    for event in yaml.parse(text, Loader=_Loader):
        height = 0
        if isinstance(event, _OPEN):
            if len(stack) >= MAX_DEPTH:
                raise _too_deep(where)
            values += 1
            stack.append(_Open(event.anchor, values, chars, isinstance(event, yaml.MappingStartEvent)))
            continue
        if isinstance(event, _CLOSE):
            node = stack.pop()
            _node_ended(stack, event, where)
            height = node.height + 1
            if node.anchor is not None:
                anchors[node.anchor] = (values - node.values + 1, chars - node.chars, height)
        elif isinstance(event, yaml.ScalarEvent):
            _node_ended(stack, event, where)
            values += 1
            chars += len(event.value)
            if event.anchor is not None:
                anchors[event.anchor] = (1, len(event.value), 0)
        elif isinstance(event, yaml.AliasEvent):
            _node_ended(stack, event, where)
            more_values, more_chars, height = anchors.get(event.anchor or "", (1, 0, 0))
            values += more_values
            chars += more_chars
            if len(stack) + height > MAX_DEPTH:
                raise _too_deep(where)
        else:
            continue
        if values > MAX_VALUES or chars > MAX_CHARS:
            raise _too_big(where, values, chars)
        if stack:
            stack[-1].height = max(stack[-1].height, height)


def load(text: str, where: str) -> Any:
    """Parses YAML or JSON ``text`` within the caps.

    Raises:
        SpecError: not YAML/JSON, too large, nested too deep, or expanding past the caps;
            ``where`` names the source in the message.
    """
    if len(text) > MAX_TEXT_CHARS:
        raise SpecError(
            f"is {len(text):,} characters; a CustomJobSpec is a few thousand "
            f"(the limit is {MAX_TEXT_CHARS:,})",
            where,
        )
    try:
        _precheck(text, where)
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        message = bound(redact(_one_line(exc)), 2000)
        raise SpecError(f"is not valid YAML or JSON: {message}", where) from None
    except (ValueError, OverflowError, RecursionError) as exc:  # e.g. an int of 5,000 digits
        raise SpecError(f"is not valid YAML or JSON: {bound(redact(str(exc)), 300)}", where) from None


def check_shape(data: Any, where: str) -> None:
    """Applies :func:`load`'s caps to data already in memory, counting shared references as many
    times as they appear (as a JSON encoder would write them).

    Raises:
        SpecError: nested too deep or too big.
    """
    values = chars = 0
    pending: list[tuple[Any, int]] = [(data, 1)]
    while pending:
        node, depth = pending.pop()
        values += 1
        if isinstance(node, str):
            chars += len(node)
        elif isinstance(node, Mapping | Sequence) and not isinstance(node, bytes | bytearray):
            if depth > MAX_DEPTH:
                raise _too_deep(where)
            if values + len(node) > MAX_VALUES:
                raise _too_big(where, values + len(node), chars)
            items = list(node.items()) if isinstance(node, Mapping) else list(node)
            if isinstance(node, Mapping):
                chars += sum(len(k) for k, _ in items if isinstance(k, str))
                items = [v for _, v in items]
            pending.extend((item, depth + 1) for item in items)
        if values > MAX_VALUES or chars > MAX_CHARS:
            raise _too_big(where, values, chars)


def _one_line(exc: yaml.YAMLError) -> str:
    """``line 2, column 18: did not find expected ',' or '}' (while parsing a flow mapping)``."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or not problem:
        return " ".join(str(exc).split())
    context = getattr(exc, "context", None)
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" + (f" ({context})" if context else "")
