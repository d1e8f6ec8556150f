"""trainguard's JSONL history (``trainguard.runtime.history``), read with pyarrow in batches.

One record a line::

    {"step": 120, "epoch": 3, "split": "train", "time": 1732981000.5, "metrics": {"loss": 0.41}}

What a record means: ``step`` must be a number (not NaN); ``split`` a string, train when missing
or null; ``metrics`` an object (none when missing or null), whose numeric values are the points
(``NaN``/``Infinity``/``-Infinity``, Python's JSON extensions, are kept; null, booleans, strings
and nested values are not points). A checkpoint save's measure (split ``checkpoint``, a ``save``
object: :mod:`~trainguard.runtime.save_cost`) is kept whole in ``History.saves`` (the newest
:data:`MAX_SAVES`). Other keys are ignored. A torn last line (the writer died
mid-record) is skipped with a note; any other line that is not such a record is an error naming
its line.

How it is read: whole lines in chunks of :data:`~trainguard.validation.collect.CHUNK_BYTES`, each
parsed by ``pyarrow.json`` (C++, on every core) into columns; only ``step``, ``split`` and the
numeric ``metrics`` fields are kept. pyarrow is trusted only where it provably reads what ``json``
reads: a block with a line that is not exactly one object, a type that changes within a column, a
NaN/Infinity spelling ``json`` refuses, a line long enough to nest deeply (pyarrow's parser
recurses), bytes that are not UTF-8, or a record that breaks a rule above is parsed again line by
line with ``json``, which also names the bad line.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from trainguard.errors import HistoryError
from trainguard.validation.collect import MAX_LINE_BYTES, Collector, Tail, whole_lines
from trainguard.validation.history import History

__all__ = ["read_jsonl", "parse_lines", "parse_lines_arrow", "parse_lines_json", "Batch", "LineError"]

# pyarrow's JSON parser recurses per nesting level and overflows a thread's stack (near 15,000
# levels with 8 MiB stacks, fewer with smaller ones): a line longer than SHORT_LINE_BYTES goes to
# pyarrow only with at most MAX_OPENS brackets, and none longer than FAST_LINE_BYTES.
SHORT_LINE_BYTES = 512
MAX_OPENS = 256
FAST_LINE_BYTES = 256 << 10
EXAMPLE = '{"step": 1, "split": "train", "metrics": {"loss": 0.5}}'
MAX_SAVES = 10_000  # save records kept (the newest): a run saves hundreds of times, not millions
_SAVE = b'"save"'
_MAX_WORKERS = 4  # parse threads; memory grows with them (a parse holds ~5x its chunk)


class LineError(ValueError):
    """A line that is not a history record; ``line`` counts from 1 within the parsed block."""

    def __init__(self, line: int, reason: str) -> None:
        self.line = line
        self.reason = reason
        super().__init__(f"line {line}: {reason}")


@dataclass
class Batch:
    """The points of a block of lines.

    Attributes:
        records: history records read.
        lines: line ends in the block.
        groups: (split, metric, steps, values), each in file order, ordered by first appearance.
        saves: the checkpoint saves' records, in file order.
    """

    records: int = 0
    lines: int = 0
    groups: list[tuple[str, str, np.ndarray, np.ndarray]] = field(default_factory=list)
    saves: list[dict] = field(default_factory=list)


def read_jsonl(blocks: Iterator[bytes], source: str, total_bytes: int = 0) -> History:
    """Reads a JSONL history from byte blocks (a file's, or bytes in memory).

    Raises:
        HistoryError: an empty input, a line that is not a history record (named), no points.
    """
    tail = Tail()
    collector = Collector(source, total_bytes)
    saves: collections.deque[dict] = collections.deque(maxlen=MAX_SAVES)
    records, line, saved = 0, 1, 0
    try:
        for chunk, batch in _parsed_in_order(whole_lines(blocks, source, tail)):
            records += _collect(collector, batch, len(chunk))
            line += batch.lines
            saves.extend(batch.saves)
            saved += len(batch.saves)
    except LineError as exc:
        raise HistoryError(
            f"{source}: line {line + exc.line - 1}: {exc.reason}; every line must "
            f"be a history record such as {EXAMPLE}"
        ) from None
    notes: list[str] = []
    if tail.data.strip():
        try:
            records += _collect(collector, parse_lines_json(tail.data), 0)
        except LineError:
            notes.append(f"skipped the truncated last line (line {line}): the writer stopped mid-record")
    if not tail.saw_text:
        raise HistoryError(f"{source}: the file is empty; the training wrote no history")
    if not collector.parts:
        raise HistoryError(f"{source}: {records} record(s) but no numeric metric values")
    if saved > len(saves):
        notes.append(f"{saved} checkpoint saves recorded; the newest {len(saves)} are summed up")
    history = collector.build("jsonl", "step", records, notes)
    history.saves = list(saves)
    return history


def _collect(collector: Collector, batch: Batch, size: int) -> int:
    for split, metric, steps, values in batch.groups:
        collector.add(f"{split}/{metric}", metric, split, "", steps, values, size)
    collector.read_bytes += size
    return batch.records


def _parsed_in_order(chunks: Iterator[bytes]) -> Iterator[tuple[bytes, Batch]]:
    """(chunk, batch) in file order, chunks parsed on a thread per core (pyarrow releases the
    GIL; one single-threaded parse per chunk keeps the cores busier than pyarrow's own threads
    on chunks this small), at most one more chunk in flight than threads: bounded memory."""
    first = next(chunks, None)
    second = next(chunks, None) if first is not None else None
    if second is None:  # one chunk (a small file, a guard's appended lines): no thread
        if first is not None:
            yield first, parse_lines(first)
        return
    workers = max(1, min(_MAX_WORKERS, os.cpu_count() or 1))
    window: collections.deque = collections.deque()
    with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="jsonl") as pool:
        for chunk in itertools.chain((first, second), chunks):
            assert chunk is not None  # both heads were checked above
            window.append((chunk, pool.submit(parse_lines, chunk)))
            if len(window) > workers:
                done, future = window.popleft()
                yield done, future.result()
        while window:
            done, future = window.popleft()
            yield done, future.result()


def parse_lines(data: bytes) -> Batch:
    """Parses whole lines of JSONL history: with pyarrow where that is exact, else with json.

    Raises:
        LineError: a line that is not a history record.
    """
    fast = parse_lines_arrow(data)
    return fast if fast is not None else parse_lines_json(data)


# --- pyarrow ----------------------------------------------------------------------------------


def parse_lines_arrow(data: bytes) -> Batch | None:
    """The block's points read by pyarrow, or None when only json can say what the block holds.

    ``data`` holds whole lines and ends with a newline.
    """
    layout = _simple_layout(data)
    if layout is None or not _plain_text(data):
        return None
    import pyarrow as pa
    import pyarrow.json as pa_json

    try:
        # The system allocator hands a parse's scratch back at once; pyarrow's default pool
        # keeps it, which adds tens of MiB to a read that should cost only its points.
        options = pa_json.ReadOptions(use_threads=False, block_size=max(1 << 20, len(data)))
        table = pa_json.read_json(
            pa.BufferReader(data), read_options=options, memory_pool=pa.system_memory_pool()
        )
    except (pa.ArrowException, ValueError):  # not JSON, a type change in a column, ...
        return None
    lines, starts, ends = layout
    records = int(starts.size)
    if table.num_rows != records:  # two objects on one line, or one over two lines
        return None
    steps = _steps(table)
    labels_codes = _splits(table)
    metrics = _metric_columns(table)
    if steps is None or labels_codes is None or metrics is None:
        return None
    groups = _groups(steps, *labels_codes, metrics, lambda row: data[starts[row] : ends[row]])
    batch = Batch(records, lines, groups)
    if _SAVE in data and "save" in table.column_names:
        rows = np.flatnonzero(table.column("save").is_valid().to_numpy(zero_copy_only=False))
        batch.saves = _save_records(b"\n".join(data[starts[r] : ends[r]] for r in rows.tolist()))
    return batch


def _save_records(lines: bytes) -> list[dict]:
    """The checkpoint saves' records among ``lines`` (already known to be JSON objects), read by
    the runtime's own reader."""
    from trainguard.runtime.history import is_save_record, read_history_records

    return [r for r in read_history_records(lines.decode("utf-8"), saves=True) if is_save_record(r)]


def _simple_layout(data: bytes) -> tuple[int, np.ndarray, np.ndarray] | None:
    """(lines, each record's start, each record's end) when every non-blank line is one short
    ``{...}`` (CRLF allowed)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(buf == ord("\n"))
    if ends.size == 0 or ends[-1] != buf.size - 1:
        return None
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    length = ends - starts
    if int(length.max()) > SHORT_LINE_BYTES and not _shallow(data, starts, ends, length):
        return None
    crlf = (length > 0) & (buf[ends - 1] == ord("\r"))
    length -= crlf
    text = length > 0
    if not text.all():
        starts, ends, crlf = starts[text], ends[text], crlf[text]
    if np.any(buf[starts] != ord("{")) or np.any(buf[ends - 1 - crlf] != ord("}")):
        return None
    return int(text.size), starts, ends


def _shallow(data: bytes, starts: np.ndarray, ends: np.ndarray, length: np.ndarray) -> bool:
    """Whether every long line is short enough, with few enough brackets, for pyarrow."""
    long = np.flatnonzero(length > SHORT_LINE_BYTES)
    if long.size > 1000 or int(length[long].max()) > FAST_LINE_BYTES:
        return False  # many long lines: json is as fast, and this check would not be
    for start, end in zip(starts[long].tolist(), ends[long].tolist(), strict=True):
        if data.count(b"{", start, end) + data.count(b"[", start, end) > MAX_OPENS:
            return False
    return True


def _plain_text(data: bytes) -> bool:
    """UTF-8, and no NaN/Infinity spelling that pyarrow accepts and json refuses."""
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return False
    # memchr first: most histories have no capital N or I at all.
    if data.find(b"N") >= 0 and data.find(b"-NaN") >= 0:
        return False
    if data.find(b"I") >= 0 and data.find(b"Inf") >= 0:
        return data.count(b"Inf") == data.count(b"Infinity")  # "Inf", "-Inf": json says no
    return True


def _is_number(kind) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(kind) or pa.types.is_floating(kind)


def _as_float(array) -> np.ndarray:
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.float64)


def _steps(table) -> np.ndarray | None:
    if "step" not in table.column_names:
        return None
    column = table.column("step")
    if not _is_number(column.type) or column.null_count:
        return None
    steps = _as_float(column)
    return None if np.isnan(steps).any() else steps


def _splits(table) -> tuple[list[str], np.ndarray | None] | None:
    """(split labels in order of appearance, each row's label index or None when all train)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "split" not in table.column_names:
        return ["train"], None
    column = table.column("split")
    if pa.types.is_null(column.type):
        return ["train"], None
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return None
    if column.null_count:
        column = pc.fill_null(column, "train")
    encoded = column.combine_chunks().dictionary_encode()
    labels = encoded.dictionary.to_pylist()
    if len(labels) == 1:
        return labels, None
    return labels, encoded.indices.to_numpy(zero_copy_only=False)


def _metric_columns(table) -> list[tuple[str, np.ndarray, np.ndarray | None]] | None:
    """(name, values, valid rows or None when all are) for each numeric field of ``metrics``."""
    import pyarrow as pa

    if "metrics" not in table.column_names:
        return []
    column = table.column("metrics")
    if pa.types.is_null(column.type):
        return []
    if not pa.types.is_struct(column.type):
        return None
    struct = column.combine_chunks()
    out = []
    for index, child in enumerate(struct.flatten()):  # flatten applies the records' own nulls
        if not _is_number(child.type) or child.null_count == len(child):
            continue  # booleans, strings, nested values: not points
        valid = None
        if child.null_count:
            valid = child.is_valid().to_numpy(zero_copy_only=False)
        out.append((struct.type.field(index).name, _as_float(child), valid))
    return out


def _groups(
    steps: np.ndarray,
    labels: list[str],
    codes: np.ndarray | None,
    metrics: list[tuple[str, np.ndarray, np.ndarray | None]],
    line: Callable[[int], bytes],
) -> list:
    by_label = [None] * len(labels) if codes is None else [codes == k for k in range(len(labels))]
    found = []
    for order, (name, values, valid) in enumerate(metrics):
        for label, rows in zip(labels, by_label, strict=True):
            mask = valid if rows is None else (rows if valid is None else rows & valid)
            if mask is None:
                found.append((0, order, label, name, steps, values))
                continue
            index = np.flatnonzero(mask)
            if index.size:
                found.append((int(index[0]), order, label, name, steps[index], values[index]))
    found.sort(key=lambda item: item[:2])
    return [(label, name, s, v) for _, _, label, name, s, v in _as_json_meets_them(found, line)]


def _as_json_meets_them(found: list, line: Callable[[int], bytes]) -> list:
    """``found`` (sorted by first record, then the schema's field order) in the order json meets
    the points: by first record, then by the key's place in that record. The schema lists fields
    as the block first met them, so a record that lists its keys in another order than the
    records before it (``"loss"`` after ``"acc"`` there, before it here) is read once more, by
    json, for its key order."""
    out: list = []
    for _, same_row in itertools.groupby(found, key=lambda item: item[0]):
        items = list(same_row)
        if len(items) > 1:
            keys = {name: place for place, name in enumerate(json.loads(line(items[0][0]))["metrics"])}
            items.sort(key=lambda item: keys.get(item[3], len(keys)))
        out.extend(items)
    return out


# --- json: the reference, and what names a bad line -------------------------------------------


def parse_lines_json(data: bytes) -> Batch:
    """Parses lines with ``json``, one at a time: exact, slower, and it names a bad line.

    Raises:
        LineError: for a line that is not a history record.
    """
    points: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    saves: list[dict] = []
    records = 0
    for offset, raw in enumerate(data.split(b"\n")):
        if not raw.strip():
            continue
        step, split, metrics = _record(raw, offset + 1)
        records += 1
        if not metrics and _SAVE in raw:
            saves.extend(_save_records(raw))
        for name, value in metrics.items():
            number = _number(value)
            if number is None:
                continue  # null, strings, booleans, nested values: not a point
            xs, ys = points.setdefault((split, _text(name)), ([], []))
            xs.append(step)
            ys.append(number)
    batch = Batch(records, data.count(b"\n"), saves=saves)
    for (split, name), (xs, ys) in points.items():
        batch.groups.append((split, name, np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)))
    return batch


def _record(raw: bytes, line: int) -> tuple[float, str, dict]:
    if len(raw) > MAX_LINE_BYTES:
        raise LineError(line, f"longer than {MAX_LINE_BYTES >> 20} MiB")
    try:
        record = json.loads(raw)
    except UnicodeDecodeError:
        raise LineError(line, "not JSON (not UTF-8 text)") from None
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise LineError(line, f"not JSON ({exc.msg})") from None
        # An integer past Python's 4300-digit limit: read as a float (inf), as pyarrow reads it.
        record = json.loads(raw, parse_int=float)
    except RecursionError:
        raise LineError(line, "JSON nested too deeply") from None
    if not isinstance(record, dict):
        raise LineError(line, "not a JSON object")
    step = _number(record.get("step"))
    if step is None or math.isnan(step):
        raise LineError(line, "the record has no numeric 'step'")
    split = record.get("split")
    if split is None:
        split = "train"
    elif not isinstance(split, str):
        raise LineError(line, "'split' is not a string")
    metrics = record.get("metrics")
    if metrics is None:
        metrics = {}
    elif not isinstance(metrics, dict):
        raise LineError(line, "'metrics' is not an object")
    return step, _text(split), metrics


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:  # an integer literal past float range, as 1e999 reads: infinite
        return math.inf if value > 0 else -math.inf


def _text(name: str) -> str:
    """``name`` printable: json keeps lone surrogates (``"\\ud800"``) that no output can encode."""
    if name.isascii():
        return name
    return name.encode("utf-8", "replace").decode("utf-8")
