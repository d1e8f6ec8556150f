"""A generic walk of JSON-like data against a protobuf descriptor, with errors that name the path.

protobuf's own ``json_format.ParseDict`` stops at the first problem with a bare message
("Failed to parse acceleratorCount field: Value out of range"). This walk checks every field the
way Vertex AI would read it and reports each problem with its path
(``workerPoolSpecs[0].machineSpec.acceleratorCount``) and what to do, so a spec can be fixed in
one go. It also normalises what people write: snake_case keys become the camelCase JSON names
(once, here), a single mapping or scalar where a list belongs becomes a one-item list (as
gcloud's ``--config`` reader does) and plain seconds become durations (``timeout: 3600``).

Every value echoed in a message is redacted and cut short (:func:`show`): a 5 MB string, a
token or an alias-expanded tree never reaches the terminal whole.
"""

from __future__ import annotations

import difflib
import math
import re
import reprlib
from collections.abc import Mapping, Sequence
from functools import cache, lru_cache
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from trainguard.redaction import bound, redact

__all__ = [
    "Problems",
    "show",
    "kind",
    "normalise_keys",
    "check_message",
    "wrap_singletons",
    "normalise_durations",
    "MAX_DURATION_S",
]

# One problem: (path, message). A list of them is what a walk returns.
Problems = list[tuple[str, str]]

_DURATION = "google.protobuf.Duration"
_OPAQUE = ("google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue")
_DURATION_RE = re.compile(r"^(-?)(\d{1,12})(\.\d{1,9})?s$")
MAX_DURATION_S = 315_576_000_000  # protobuf's Duration range: ±10,000 years
_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
_FLOAT_TYPES = {FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE}
_SHOWN_CHARS = 120


class _ShortRepr(reprlib.Repr):
    """repr() with every part cut short, and never the whole of a huge number."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxdict, self.maxlist, self.maxtuple = 2, 4, 4, 4
        self.maxset, self.maxfrozenset, self.maxstring, self.maxother, self.maxlong = 4, 4, 60, 60, 40

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:  # a huge int's repr is slow, and refused past 4300 digits
            return f"<a whole number of {x.bit_length()} bits>"
        return super().repr_int(x, level)


_REPR = _ShortRepr()


def show(value: Any) -> str:
    """``value`` as a user reads it in an error: short, and with credentials redacted."""
    return bound(redact(_REPR.repr(value)), _SHOWN_CHARS)


def kind(value: Any) -> str:
    """What a YAML/JSON value is, in words ("a string", "a list", …)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return "a list"
    return type(value).__name__


def _repeated(f: FieldDescriptor) -> bool:
    return f.is_repeated if hasattr(f, "is_repeated") else f.label == f.LABEL_REPEATED


def _is_map(f: FieldDescriptor) -> bool:
    return f.message_type is not None and f.message_type.GetOptions().map_entry


@cache
def _fields(desc: Descriptor) -> dict[str, FieldDescriptor]:
    """Fields by JSON (camelCase) name: the only spelling left after :func:`normalise_keys`."""
    return {f.json_name: f for f in desc.fields}


@cache
def _snake_to_json(desc: Descriptor) -> dict[str, str]:
    return {f.name: f.json_name for f in desc.fields if f.name != f.json_name}


def _suggest(value: str, names: Sequence[str]) -> str | None:
    """The closest valid name: one containing the typed text first, then the one sharing most
    of its words (``NVIDIA_T4`` → ``NVIDIA_TESLA_T4``, ``NVIDIA_TESLA_L4`` → ``NVIDIA_L4``:
    people drop or add ``TESLA``, which plain similarity reads as another GPU), then by
    similarity."""
    upper = value.upper()
    contained = [n for n in names if upper and upper.replace("_", "") in n.replace("_", "")]
    if contained:
        return min(contained, key=len)
    words = set(upper.split("_")) - {""}

    def overlap(name: str) -> float:
        theirs = set(name.split("_"))
        return len(words & theirs) / len(words | theirs)

    best = max(names, key=overlap, default=None)
    if best is not None and overlap(best) >= 0.6:
        return best
    close = difflib.get_close_matches(upper, names, n=1)
    return close[0] if close else None


# --- normalising --------------------------------------------------------------------------


def normalise_keys(desc: Descriptor, data: Any, path: str, problems: Problems) -> Any:
    """``data`` with every known snake_case key spelled as its camelCase JSON name, recursively.

    A field given in both spellings is a problem (which one would win is anybody's guess).
    Unknown keys and map keys (labels, env names) are kept as written.
    """
    if not isinstance(data, Mapping):
        return data
    renames = _snake_to_json(desc)
    fields = _fields(desc)
    out: dict[Any, Any] = {}
    spelled: dict[Any, Any] = {}  # JSON name -> the spelling it was first given in
    for key, value in data.items():
        name = renames.get(key, key) if isinstance(key, str) else key
        sub = _join(path, name)
        if name in out:
            first = spelled[name]
            both = f"as {first} and {key}" if first != key else f"twice as {key}"
            problems.append((sub, f"is given twice ({both}); keep one"))
            continue
        spelled[name] = key
        f = fields.get(name) if isinstance(name, str) else None
        if (
            f is not None
            and f.message_type is not None
            and not _is_map(f)
            and f.message_type.full_name not in _OPAQUE
        ):
            if _repeated(f) and isinstance(value, list):
                value = [
                    normalise_keys(f.message_type, v, f"{sub}[{i}]", problems) for i, v in enumerate(value)
                ]
            else:
                value = normalise_keys(f.message_type, value, sub, problems)
        elif f is not None and _is_map(f) and isinstance(value, Mapping):
            value_field = f.message_type.fields_by_name["value"]
            if value_field.message_type is not None:
                value = {
                    k: normalise_keys(value_field.message_type, v, _join(sub, k), problems)
                    for k, v in value.items()
                }
        out[name] = value
    return out


def wrap_singletons(desc: Descriptor, data: Any) -> Any:
    """A single value where a list belongs becomes a one-item list, as gcloud's ``--config``
    reader decodes it: a mapping for a list of messages (gcloud's own example writes
    ``workerPoolSpecs:`` as one mapping) and a scalar for a list of strings or numbers
    (``args: --epochs=3``, ``packageUris: gs://…``)."""
    if not isinstance(data, Mapping):
        return data
    fields = _fields(desc)
    out = {}
    for key, value in data.items():
        f = fields.get(key) if isinstance(key, str) else None
        if f is not None and value is not None and not _is_map(f):
            if f.message_type is not None and f.message_type.full_name not in _OPAQUE:
                if _repeated(f):
                    items = [value] if isinstance(value, Mapping) else value
                    if isinstance(items, list):
                        value = [wrap_singletons(f.message_type, v) for v in items]
                else:
                    value = wrap_singletons(f.message_type, value)
            elif f.message_type is None and _repeated(f) and isinstance(value, str | int | float | bool):
                value = [value]
        out[key] = value
    return out


def normalise_durations(desc: Descriptor, data: Any) -> Any:
    """Plain seconds for Duration fields (``timeout: 3600``) become ``"3600s"``.

    Call after :func:`check_message` found nothing: the numbers are finite and in range then.
    """
    if not isinstance(data, Mapping):
        return data
    fields = _fields(desc)
    out = {}
    for key, value in data.items():
        f = fields.get(key) if isinstance(key, str) else None
        if f is not None and f.message_type is not None and value is not None:
            if f.message_type.full_name == _DURATION:
                if isinstance(value, int | float) and not isinstance(value, bool):
                    value = f"{int(value)}s" if float(value).is_integer() else f"{value:.9f}s"
                elif isinstance(value, str):
                    value = value.strip()
            elif not _is_map(f):
                if _repeated(f) and isinstance(value, list):
                    value = [normalise_durations(f.message_type, v) for v in value]
                else:
                    value = normalise_durations(f.message_type, value)
        out[key] = value
    return out


# --- checking -----------------------------------------------------------------------------


_CACHED_KEY_CHARS = 200  # field names and short user keys; a long key is shown afresh each time


@lru_cache(maxsize=4096)
def _shown_key(key: str) -> str:
    return bound(redact(key), 80)


def _join(path: str, key: Any) -> str:
    # Every field's path is made as the walk passes (the problem may be found below it): the
    # redaction of the few names a spec repeats is done once, not once per pool or per entry.
    if isinstance(key, str):
        name = _shown_key(key) if len(key) <= _CACHED_KEY_CHARS else bound(redact(key), 80)
    else:
        name = bound(redact(show(key)), 80)
    return f"{path}.{name}" if path else name


def _check_duration(value: Any, path: str, problems: Problems) -> None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
        if not math.isfinite(seconds) or abs(seconds) > MAX_DURATION_S:
            problems.append((path, f'must be a duration such as "3600s", got {show(value)}'))
        elif seconds < 0:
            problems.append(
                (
                    path,
                    f"must not be negative, got {show(value)}; give the time "
                    'in seconds, such as 3600 or "3600s"',
                )
            )
        return
    match = _DURATION_RE.match(value.strip()) if isinstance(value, str) else None
    if match is None or int(match.group(2)) > MAX_DURATION_S:
        problems.append((path, f'must be a duration such as "3600s", got {show(value)}'))
    elif match.group(1) and (int(match.group(2)) or int((match.group(3) or ".0")[1:])):
        problems.append(
            (path, f'must not be negative, got {show(value)}; give the time in seconds, such as "3600s"')
        )


def _check_int(f: FieldDescriptor, value: Any, path: str, problems: Problems) -> None:
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        digits = value.strip().lstrip("-").lstrip("0")
        number = int(value) if len(digits) <= 40 else (-1 if "-" in value else 10**41)
    if number is None:
        problems.append((path, f"must be a whole number, got {kind(value)} ({show(value)})"))
        return
    low, high = _INT_RANGES.get(f.type, (-(2**63), 2**63 - 1))
    if number < 0:
        problems.append((path, f"must not be negative, got {show(number)}"))
    elif number > high or number < low:
        problems.append((path, f"is out of range: {show(number)} is more than {high}"))


def _check_enum(f: FieldDescriptor, value: Any, path: str, problems: Problems) -> None:
    names = [v.name for v in f.enum_type.values]
    usable = ", ".join(n for n in names if not n.endswith("UNSPECIFIED"))
    if isinstance(value, bool):
        problems.append((path, f"must be one of {usable}"))
    elif isinstance(value, int):
        if value not in [v.number for v in f.enum_type.values]:
            problems.append((path, f"{show(value)} is not a valid value; use one of {usable}"))
    elif not isinstance(value, str) or value not in names:
        close = _suggest(str(value)[:100], names) if isinstance(value, str) else None
        hint = f" (did you mean {close}?)" if close else ""
        problems.append((path, f"{show(value)} is not a valid value{hint}; use one of {usable}"))


def _check_scalar(f: FieldDescriptor, value: Any, path: str, problems: Problems) -> None:
    if f.type == FieldDescriptor.TYPE_STRING:
        if not isinstance(value, str):
            problems.append((path, f"must be a string, got {kind(value)} ({show(value)})"))
    elif f.type == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            problems.append((path, f"must be true or false, got {kind(value)} ({show(value)})"))
    elif f.type in _INT_RANGES:
        _check_int(f, value, path, problems)
    elif f.type in _FLOAT_TYPES:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            problems.append((path, f"must be a number, got {kind(value)} ({show(value)})"))
    elif f.type == FieldDescriptor.TYPE_ENUM:
        _check_enum(f, value, path, problems)
    elif f.type == FieldDescriptor.TYPE_BYTES and not isinstance(value, str):
        problems.append((path, f"must be a base64 string, got {kind(value)} ({show(value)})"))


def _check_field(f: FieldDescriptor, value: Any, path: str, problems: Problems) -> None:
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        check_message(f.message_type, value, path, problems)
    else:
        _check_scalar(f, value, path, problems)


def _check_repeated(f: FieldDescriptor, value: Any, path: str, problems: Problems) -> None:
    if _is_map(f):
        if not isinstance(value, Mapping):
            problems.append((path, f"must be a mapping, got {kind(value)} ({show(value)})"))
            return
        key_field = f.message_type.fields_by_name["key"]
        value_field = f.message_type.fields_by_name["value"]
        for k, v in value.items():
            sub = _join(path, k)
            if key_field.type == FieldDescriptor.TYPE_STRING and not isinstance(k, str):
                problems.append((sub, f"the key must be a string, got {kind(k)} ({show(k)})"))
            elif v is not None:
                _check_field(value_field, v, sub, problems)
        return
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        problems.append((path, f"must be a list, got {kind(value)} ({show(value)})"))
        return
    for i, item in enumerate(value):
        _check_field(f, item, f"{path}[{i}]", problems)


def check_message(desc: Descriptor, data: Any, path: str, problems: Problems) -> None:
    """Appends to ``problems`` what is wrong with ``data`` as a ``desc`` message, by path.

    Expects keys already normalised (:func:`normalise_keys`): camelCase JSON names.
    """
    if desc.full_name == _DURATION:
        _check_duration(data, path, problems)
        return
    if desc.full_name in _OPAQUE:
        return
    if not isinstance(data, Mapping):
        problems.append((path or desc.name, f"must be a mapping of fields, got {kind(data)} ({show(data)})"))
        return
    fields = _fields(desc)
    for key, value in data.items():
        sub = _join(path, key)
        f = fields.get(key) if isinstance(key, str) else None
        if f is None:
            names = sorted(fields)
            # a field the mapping already sets is not what the typo meant ('accelerator' beside
            # acceleratorType means acceleratorCount)
            free = [n for n in names if n not in data]
            close = difflib.get_close_matches(key[:100], free, n=1) if isinstance(key, str) else []
            hint = f"did you mean {close[0]!r}? " if close else ""
            problems.append((sub, f"unknown field; {hint}{desc.name} has: {', '.join(names)}"))
        elif value is None:
            continue
        elif _repeated(f):
            _check_repeated(f, value, sub, problems)
        else:
            _check_field(f, value, sub, problems)
