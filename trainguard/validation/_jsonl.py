"""A vectorised reader for trainguard's JSONL history, exact on what it accepts.

``json.loads`` per line reads ~0.3 M records/s, too slow for a long run's history. This module finds
the JSON structure of a whole chunk at once with numpy (a byte class table, a few ``flatnonzero``)
and parses every wanted number with one ``np.fromstring`` call. It accepts only plain one-record-
per-line objects; a chunk it cannot prove simple (escapes, arrays, a line that is not one object, a
repeated key, a number spelled in a way JSON does not allow) returns None, and the caller parses
that chunk with ``json``, which also produces the precise error message. On valid JSON both paths
yield the same points.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np
from numpy.lib.stride_tricks import as_strided

__all__ = ["ChunkPoints", "JsonlLineError", "parse_chunk", "parse_chunk_exact", "parse_chunk_fast"]

_SPACE = np.zeros(256, dtype=bool)
for _ch in b" \t\r":
    _SPACE[_ch] = True
_SCALAR_START = np.zeros(256, dtype=bool)  # a number, NaN, Infinity, null, true, false
for _ch in b"-0123456789NItfn":
    _SCALAR_START[_ch] = True
_NUMERIC_START = np.zeros(256, dtype=bool)
for _ch in b"-0123456789NI":
    _NUMERIC_START[_ch] = True

_MAX_KEY = 64  # a longer metric name sends the chunk to the exact parser
_MULT = np.uint64(0x9E3779B97F4A7C15)


class JsonlLineError(ValueError):
    """A line that is not a history record; ``line`` is 1-based within the file."""

    def __init__(self, line: int, reason: str) -> None:
        self.line = line
        self.reason = reason
        super().__init__(f"line {line}: {reason}")


@dataclass
class ChunkPoints:
    """The points of one chunk, grouped by (split, metric name), each group in file order."""

    records: int = 0
    groups: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


class _Unsupported(Exception):
    """The chunk is outside what the vectorised path proves exact."""


def parse_chunk(data: bytes, first_line: int = 1) -> ChunkPoints:
    """Parses whole lines of JSONL history, fast where it can be, exactly everywhere.

    Args:
        data: complete lines (the last one may lack its newline).
        first_line: the file line number of the chunk's first line, for error messages.

    Raises:
        JsonlLineError: for a line that is not a history record.
    """
    fast = parse_chunk_fast(data)
    return fast if fast is not None else parse_chunk_exact(data, first_line)


def parse_chunk_fast(data: bytes) -> ChunkPoints | None:
    """The vectorised path alone: the chunk's points, or None when ``json`` must decide."""
    if not data.endswith(b"\n"):
        data += b"\n"
    try:
        return _parse_fast(data)
    except _Unsupported:
        return None


def _rows(buf: np.ndarray, start: np.ndarray, width: int) -> np.ndarray:
    """``width`` bytes from each start (zero past the end of ``buf``), as an (n, width) array."""
    padded = buf
    if start.size and int(start.max()) + width > buf.size:
        padded = np.concatenate((buf, np.zeros(width, dtype=np.uint8)))
    view = as_strided(padded, shape=(padded.size - width + 1, width), strides=(1, 1),
                      writeable=False)
    return view[start]


def _words(buf: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The span bytes as little-endian uint64 words, zero padded: (n, ceil(max len / 8))."""
    width = max(8, -(-int(length.max(initial=0)) // 8) * 8)
    rows = _rows(buf, start, width).copy()
    rows[np.arange(width)[None, :] >= length[:, None]] = 0
    return rows.view(np.uint64)


def _word(text: bytes) -> int:
    return int.from_bytes(text.ljust(8, b"\0")[:8], "little")


def _intern(words: np.ndarray) -> tuple[list[bytes], np.ndarray]:
    """Distinct rows of ``words`` (few expected) and each row's index into them."""
    n = words.shape[0]
    digest = words[:, 0].copy()
    for column in range(1, words.shape[1]):
        digest = (digest * _MULT) ^ words[:, column]
    ids = np.full(n, -1, dtype=np.intp)
    names: list[bytes] = []
    todo = np.arange(n)
    while todo.size:
        if len(names) >= 512:
            raise _Unsupported  # not a metrics history this path was built for
        rep = todo[0]
        same = digest[todo] == digest[rep]
        members = todo[same]
        # Exactness: a digest match must be a byte match (rows are the whole key).
        if words.shape[1] > 1 and not np.array_equal(words[members], np.broadcast_to(
                words[rep], (members.size, words.shape[1]))):
            raise _Unsupported
        ids[members] = len(names)
        names.append(words[rep].tobytes().rstrip(b"\0"))
        todo = todo[~same]
    return names, ids


_LEN_MASK = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [(1 << 64) - 1], dtype=np.uint64)


def _parse_fast(data: bytes) -> ChunkPoints:
    if b"\\" in data or b"[" in data:
        raise _Unsupported  # escapes and arrays: the exact parser's job
    buf = np.frombuffer(data, dtype=np.uint8)
    is_quote_byte = buf == ord('"')
    marks = ((buf == ord(":")) | (buf == ord(",")) | (buf == ord("{")) | (buf == ord("}"))
             | (buf == ord("\n")) | is_quote_byte)
    every = np.flatnonzero(marks)
    del marks
    quote_tok = is_quote_byte[every]
    del is_quote_byte
    quotes = every[quote_tok]
    # Quotes before each token: odd means the token sits inside a string, which only json may
    # judge. Strings stay on their line (a newline inside one is not JSONL).
    structural_tok = ~quote_tok
    quotes_before = np.cumsum(quote_tok, dtype=np.int32)[structural_tok]
    pos = every[structural_tok]
    cls = buf[pos]
    if quotes.size % 2 or np.any(quotes_before & 1):
        raise _Unsupported
    is_newline = cls == ord("\n")
    is_open = cls == ord("{")
    depth_after = np.cumsum(is_open.astype(np.int32) - (cls == ord("}")))
    if np.any(depth_after[is_newline] != 0) or (depth_after.size and depth_after.min() < 0):
        raise _Unsupported
    newlines = pos[is_newline]
    # Each non-blank line is exactly one object: "{" first, "}" last, one top-level object.
    line_starts = np.concatenate(([0], newlines[:-1] + 1))
    line_ends = newlines.copy()  # exclusive
    cr = (line_ends > line_starts) & (buf[np.maximum(line_ends - 1, 0)] == ord("\r"))
    line_ends[cr] -= 1
    nonblank = line_ends > line_starts
    if np.any(buf[line_starts[nonblank]] != ord("{")) or np.any(
            buf[line_ends[nonblank] - 1] != ord("}")):
        raise _Unsupported
    n_records = int(np.count_nonzero(nonblank))
    if int(np.count_nonzero(is_open & (depth_after == 1))) != n_records:
        raise _Unsupported
    out = ChunkPoints(records=n_records)
    colon_tok = np.flatnonzero(cls == ord(":"))
    if colon_tok.size == 0:
        if n_records:
            raise _Unsupported  # records without a step: json explains
        return out

    # Keys: the colon follows the key's closing quote, perhaps after blanks.
    colon = pos[colon_tok]
    q_before = quotes_before[colon_tok]
    if np.any(q_before < 2):
        raise _Unsupported
    key_close = quotes[q_before - 1]
    gap = colon - key_close - 1
    if gap.any():
        if gap.max() > 4:
            raise _Unsupported
        for k in range(1, int(gap.max()) + 1):
            inside = gap >= k
            if not np.all(_SPACE[buf[key_close[inside] + k]]):
                raise _Unsupported
    key_start = quotes[q_before - 2] + 1
    key_len = key_close - key_start
    depth = depth_after[colon_tok]
    line_of_colon = np.cumsum(is_newline)[colon_tok]  # newlines before it
    record = (np.cumsum(nonblank) - 1)[line_of_colon]

    # Values: skip blanks after the colon, then a string, an object or a scalar running to the
    # next token, which must then be "," or "}".
    first = colon + 1
    for _ in range(4):
        blank = _SPACE[buf[first]]
        if not blank.any():
            break
        first[blank] += 1
    lead = buf[first]
    is_str = lead == ord('"')
    is_obj = lead == ord("{")
    next_cls = cls[colon_tok + 1]
    is_scalar = ~is_str & ~is_obj
    ends_value = (next_cls == ord(",")) | (next_cls == ord("}"))
    if np.any(is_obj & (next_cls != ord("{"))) or np.any(
            is_scalar & ~(ends_value & _SCALAR_START[lead])):
        raise _Unsupported
    value_end = pos[colon_tok + 1]

    key8 = _rows(buf, key_start, 8).view(np.uint64)[:, 0] & _LEN_MASK[np.minimum(key_len, 8)]
    top = depth == 1

    def top_key(name: bytes) -> np.ndarray:
        return top & (key_len == len(name)) & (key8 == np.uint64(_word(name)))

    is_step, is_split, is_metrics = top_key(b"step"), top_key(b"split"), top_key(b"metrics")
    # A depth-2 key belongs to the last object-valued top-level key before it.
    marker = np.where(top & is_obj, np.arange(colon.size), -1)
    parent = np.maximum.accumulate(marker)
    in_metrics = (depth == 2) & (parent >= 0)
    in_metrics[in_metrics] = is_metrics[parent[in_metrics]]

    numeric = is_scalar & _NUMERIC_START[lead]
    literal = np.flatnonzero(is_scalar & ~numeric)
    if literal.size:  # null, true, false: spelled exactly (strtod-like leniency would hide "nan")
        end = pos[colon_tok[literal] + 1]
        for _ in range(4):
            blank = (end > first[literal]) & _SPACE[buf[end - 1]]
            if not blank.any():
                break
            end = end - blank
        length = end - first[literal]
        word = _rows(buf, first[literal], 8).view(np.uint64)[:, 0] & _LEN_MASK[
            np.minimum(length, 8)]
        known = np.zeros(literal.size, dtype=bool)
        for text in (b"null", b"true", b"false"):
            known |= (length == len(text)) & (word == np.uint64(_word(text)))
        if not known.all():
            raise _Unsupported
    step_tok = np.flatnonzero(is_step)
    if step_tok.size != n_records or not np.all(numeric[step_tok]):
        raise _Unsupported  # a missing, repeated or non-numeric step: json explains
    if np.any(np.diff(record[step_tok]) != 1) or (n_records and record[step_tok[0]] != 0):
        raise _Unsupported
    metrics_records = record[is_metrics]
    if metrics_records.size and np.any(np.diff(metrics_records) == 0):
        raise _Unsupported
    metric_tok = np.flatnonzero(in_metrics & numeric)
    if metric_tok.size and int(key_len[metric_tok].max()) > _MAX_KEY:
        raise _Unsupported

    wanted = np.concatenate((step_tok, metric_tok))
    values = _parse_numbers(buf, first[wanted], value_end[wanted])
    steps = values[:step_tok.size]  # one per record, in record order (checked above)
    metric_values = values[step_tok.size:]

    split_tok = np.flatnonzero(is_split)
    split_of_record = np.full(n_records, -1, dtype=np.intp)
    split_labels: list[str] = []
    if split_tok.size:
        split_records = record[split_tok]
        if not np.all(is_str[split_tok]) or np.any(np.diff(split_records) == 0):
            raise _Unsupported
        open_q = first[split_tok]
        close_q = quotes[quotes_before[colon_tok[split_tok] + 1] - 1]
        words = _words(buf, open_q + 1, close_q - open_q - 1)
        names, ids = _intern(words)
        split_labels = [name.decode("utf-8", "replace") for name in names]
        split_of_record[split_records] = ids
    if "train" not in split_labels:
        split_labels.append("train")
    # A record without a split is training (the json path agrees).
    split_of_record[split_of_record < 0] = split_labels.index("train")

    if metric_tok.size == 0:
        return out
    m_record = record[metric_tok]
    names, m_key = _intern(_words(buf, key_start[metric_tok], key_len[metric_tok]))
    n_keys = len(names)
    # A metric key repeated within a record: json keeps the last one; let it.
    if n_keys > 1 or np.any(np.diff(m_record) == 0):
        pair = m_record * n_keys + m_key
        if np.any(np.diff(pair) <= 0) and np.unique(pair).size != pair.size:
            raise _Unsupported
    group = split_of_record[m_record] * n_keys + m_key
    todo = np.arange(group.size)
    while todo.size:
        g = group[todo[0]]
        same = group[todo] == g
        members = todo[same]
        label = split_labels[int(g) // n_keys]
        metric = names[int(g) % n_keys].decode("utf-8", "replace")
        out.groups[(label, metric)] = (steps[m_record[members]], metric_values[members])
        todo = todo[~same]
    return out


_NON_FINITE = {b"NaN": math.nan, b"Infinity": math.inf, b"-Infinity": -math.inf}
_NUMBER_BYTES = b"0123456789.-+eE "


def _parse_numbers(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Parses the byte spans ``[start, end)`` (JSON numbers, NaN, Infinity) as float64."""
    if start.size == 0:
        return np.zeros(0)
    for _ in range(4):  # JSON allows blanks before the "," or "}" that ends a value
        blank = (end > start) & _SPACE[buf[np.maximum(end - 1, 0)]]
        if not blank.any():
            break
        end = end - blank
    values = np.empty(start.size)
    lead = buf[start]
    # NaN, Infinity and -Infinity (Python's JSON extension) are matched exactly: strtod would
    # also take "nan", "inf" or hex, which json rejects.
    special = (lead == ord("N")) | (lead == ord("I")) | (
        (lead == ord("-")) & (buf[np.minimum(start + 1, buf.size - 1)] == ord("I")))
    if special.any():
        index = np.flatnonzero(special)
        words = _words(buf, start[index], end[index] - start[index])
        if words.shape[1] > 2:
            raise _Unsupported
        words = np.pad(words, ((0, 0), (0, 2 - words.shape[1])))
        matched = np.zeros(index.size, dtype=bool)
        for text, number in _NON_FINITE.items():
            want = np.frombuffer(text.ljust(16, b"\0"), dtype=np.uint64)
            hit = (words[:, 0] == want[0]) & (words[:, 1] == want[1])
            values[index[hit]] = number
            matched |= hit
        if not matched.all():
            raise _Unsupported
        plain = np.flatnonzero(~special)
        start, end = start[plain], end[plain]
    else:
        plain = None
    lengths = end - start
    width = lengths + 1
    out_start = np.cumsum(width) - width
    index = np.repeat(start - out_start, width) + np.arange(int(width.sum()))
    text = buf[np.minimum(index, buf.size - 1)]
    text[out_start + lengths] = ord(" ")
    raw = text.tobytes()
    if raw.translate(None, _NUMBER_BYTES):
        raise _Unsupported
    try:
        parsed = np.fromstring(raw, dtype=np.float64, sep=" ") if start.size else np.zeros(0)
    except ValueError:
        raise _Unsupported from None
    if parsed.size != start.size:
        raise _Unsupported
    if plain is None:
        return parsed
    values[plain] = parsed
    return values


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def parse_chunk_exact(data: bytes, first_line: int = 1) -> ChunkPoints:
    """Parses whole lines with ``json``: the reference the fast path agrees with.

    Raises:
        JsonlLineError: for a line that is not JSON, or not a record with a numeric step.
    """
    steps: dict[tuple[str, str], list[float]] = {}
    values: dict[tuple[str, str], list[float]] = {}
    records = 0
    for offset, raw in enumerate(data.split(b"\n")):
        if not raw.strip():
            continue
        line = first_line + offset
        try:
            record = json.loads(raw)
        except ValueError as exc:
            reason = getattr(exc, "msg", None) or "not UTF-8 text"
            raise JsonlLineError(line, f"not JSON ({reason})") from None
        except RecursionError:
            raise JsonlLineError(line, "JSON nested too deeply") from None
        if not isinstance(record, dict):
            raise JsonlLineError(line, "not a JSON object")
        step = _number(record.get("step"))
        if step is None or math.isnan(step):
            raise JsonlLineError(line, "the record has no numeric 'step'")
        split = record.get("split", "train")
        if not isinstance(split, str):
            raise JsonlLineError(line, "'split' is not a string")
        metrics = record.get("metrics", {})
        if not isinstance(metrics, dict):
            raise JsonlLineError(line, "'metrics' is not an object")
        records += 1
        for name, value in metrics.items():
            number = _number(value)
            if number is None:
                continue  # null, strings, booleans: not a point
            steps.setdefault((split, name), []).append(step)
            values.setdefault((split, name), []).append(number)
    out = ChunkPoints(records=records)
    for key, xs in steps.items():
        out.groups[key] = (np.asarray(xs, dtype=np.float64),
                           np.asarray(values[key], dtype=np.float64))
    return out
