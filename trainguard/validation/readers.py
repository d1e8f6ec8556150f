"""Readers: a training history in any supported format, local or on Cloud Storage, to a History.

Formats:

- ``jsonl``: trainguard's runtime history (``trainguard.runtime.history``), one record a line.
  Streamed in 1 MiB chunks through a vectorised parser; a torn last line (a crash mid-write) is
  skipped with a note.
- ``keras_csv``: Keras ``CSVLogger`` (``epoch,loss,val_loss,...``), one row per epoch.
- ``lightning_csv``: Lightning ``CSVLogger``'s ``metrics.csv``: sparse rows (training and
  validation metrics on different rows) with ``step`` and ``epoch`` columns.
- ``tensorboard``: a directory of event files, e.g. Keras' ``train/`` and ``validation/`` runs,
  read with TensorBoard's own event loader; scalars written as ``simple_value`` (PyTorch's
  ``SummaryWriter``, TF1) or as scalar tensors (``tf.summary`` v2) alike.

Paths may be local or ``gs://``; a ``gs://`` TensorBoard directory is downloaded to a temporary
directory first. Unreadable input raises :class:`~trainguard.errors.HistoryError` (exit code 2)
with a message that names the file, the line or column, and what to do.
"""

from __future__ import annotations

import collections
import concurrent.futures
import csv
import io
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from trainguard.errors import ConfigError, HistoryError
from trainguard.validation._jsonl import JsonlLineError, parse_chunk, parse_chunk_exact
from trainguard.validation.history import History, SeriesParts

__all__ = ["FORMATS", "load_history", "detect_format", "read_jsonl_bytes", "CHUNK_BYTES"]

FORMATS = ("jsonl", "keras_csv", "lightning_csv", "tensorboard")
CHUNK_BYTES = 2 << 20  # amortises numpy calls; a few in flight keep memory bounded
_EVENTS_MARK = "tfevents"


def load_history(path_or_uri: str | os.PathLike, format: str | None = None) -> History:  # noqa: A002
    """Reads a training history.

    Args:
        path_or_uri: a file, a TensorBoard log directory (or one event file), local or
            ``gs://``. A directory that holds a Lightning ``metrics.csv`` or a ``history.jsonl``
            (and no event files) is read as that file.
        format: one of :data:`FORMATS`; None detects it from the name and the first bytes.

    Raises:
        ConfigError: an unknown ``format``.
        HistoryError: the input is missing, empty or malformed.
    """
    source = os.fspath(path_or_uri)
    if format is not None and format not in FORMATS:
        raise ConfigError(f"unknown history format {format!r}; use one of {', '.join(FORMATS)}")
    if source.startswith("gs://"):
        return _load_remote(source, format)
    path = Path(source)
    if not path.exists():
        raise HistoryError(f"{source}: no such file or directory")
    if path.is_dir():
        return _load_directory(path, source, format)
    fmt = format or detect_format(source, _head(path))
    if fmt == "tensorboard":
        return _read_tensorboard([path], path.parent, source)
    if fmt == "jsonl":
        return _read_jsonl_stream(_file_chunks(path), source, path.stat().st_size)
    with open(path, "rb") as handle:
        return _read_csv(handle, source, fmt)


def _head(path: Path, size: int = 4096) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(size)


def detect_format(name: str, head: bytes) -> str:
    """Names the format of a file from its name and its first bytes.

    Raises:
        HistoryError: an empty file, or one that is none of the formats.
    """
    base = name.rstrip("/").rsplit("/", 1)[-1]
    if _EVENTS_MARK in base:
        return "tensorboard"
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    if not text:
        raise HistoryError(f"{name}: the file is empty; the training wrote no history")
    if text.startswith(b"{"):
        return "jsonl"
    first_line = text.split(b"\n", 1)[0].decode("utf-8", "replace")
    columns = [c.strip().lower() for c in next(csv.reader([first_line]), [])]
    if len(columns) > 1:
        if "step" in columns:
            return "lightning_csv"
        if "epoch" in columns:
            return "keras_csv"
        raise HistoryError(
            f"{name}: a CSV without an 'epoch' or a 'step' column (columns: "
            f"{', '.join(columns)}); Keras' CSVLogger writes 'epoch', Lightning's 'step'")
    raise HistoryError(
        f"{name}: not a history in a known format (JSONL records, a Keras or Lightning CSV, or "
        f"TensorBoard event files); force one with --format")


def _load_directory(path: Path, source: str, fmt: str | None) -> History:
    events = sorted(p for p in path.rglob(f"*{_EVENTS_MARK}*") if p.is_file())
    if fmt in (None, "tensorboard") and events:
        return _read_tensorboard(events, path, source)
    for name, kind in (("metrics.csv", "lightning_csv"), ("history.jsonl", "jsonl")):
        candidates = sorted(path.rglob(name))
        if candidates and fmt in (None, kind):
            return load_history(candidates[-1], kind)
    raise HistoryError(f"{source}: a directory without TensorBoard event files, metrics.csv or "
                       f"history.jsonl")


def _load_remote(uri: str, fmt: str | None) -> History:
    from trainguard.runtime.storage import store_for  # only here: it may import google clients

    try:
        store = store_for(uri)  # no credentials on this machine surfaces here
        if fmt == "tensorboard" or (fmt is None and not _looks_like_file(uri)):
            objects = store.list(uri.rstrip("/"))
            if objects:
                return _download_tensorboard(store, uri, objects, fmt)
        data = store.read_bytes(uri)  # a single object (perhaps one event file)
    except HistoryError:
        raise
    except Exception as exc:  # the storage client's own errors: not found, forbidden, ...
        raise HistoryError(f"{uri}: cannot read ({type(exc).__name__}: {exc})") from exc
    fmt = fmt or detect_format(uri, data[:4096])
    if fmt == "jsonl":
        return read_jsonl_bytes(data, uri)
    if fmt == "tensorboard":
        with tempfile.TemporaryDirectory(prefix="trainguard-tb-") as tmp:
            local = Path(tmp) / uri.rsplit("/", 1)[-1]
            local.write_bytes(data)
            return _read_tensorboard([local], Path(tmp), uri)
    return _read_csv(io.BytesIO(data), uri, fmt)


def _looks_like_file(uri: str) -> bool:
    base = uri.rstrip("/").rsplit("/", 1)[-1]
    return not uri.endswith("/") and ("." in base or _EVENTS_MARK in base)


def _download_tensorboard(store, uri: str, objects: list[str], fmt: str | None) -> History:
    prefix = uri.rstrip("/") + "/"
    events = [o for o in objects if _EVENTS_MARK in o.rsplit("/", 1)[-1]]
    if not events:
        for name, kind in (("metrics.csv", "lightning_csv"), ("history.jsonl", "jsonl")):
            found = [o for o in objects if o.endswith("/" + name)]
            if found and fmt in (None, kind):
                return _load_remote(found[-1], kind)
        raise HistoryError(f"{uri}: no TensorBoard event files, metrics.csv or history.jsonl "
                           f"under this prefix")
    with tempfile.TemporaryDirectory(prefix="trainguard-tb-") as tmp:
        local_files = []
        for obj in events:
            relative = obj[len(prefix):] if obj.startswith(prefix) else obj.rsplit("/", 1)[-1]
            local = Path(tmp, *relative.split("/"))
            local.parent.mkdir(parents=True, exist_ok=True)
            store.download_file(obj, str(local))
            local_files.append(local)
        history = _read_tensorboard(sorted(local_files), Path(tmp), uri)
    return history


# --- JSONL -----------------------------------------------------------------------------------


def _file_chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        while True:
            block = handle.read(CHUNK_BYTES)
            if not block:
                return
            yield block


def read_jsonl_bytes(data: bytes, source: str = "<bytes>") -> History:
    """Reads JSONL history already in memory (a downloaded object)."""
    view = memoryview(data)
    return _read_jsonl_stream(
        (bytes(view[i:i + CHUNK_BYTES]) for i in range(0, len(data), CHUNK_BYTES)), source,
        len(data))


def _line_chunks(blocks: Iterator[bytes], state: dict) -> Iterator[tuple[bytes, int]]:
    """Whole-line chunks and the file line each starts at; ``state`` keeps the torn tail."""
    line, rest = 1, b""
    for block in blocks:
        state["seen_bytes"] = state["seen_bytes"] or bool(block.strip())
        data = rest + block if rest else block
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            rest = data
            continue
        chunk, rest = data[:cut], data[cut:]
        if line == 1 and chunk.startswith(b"\xef\xbb\xbf"):
            chunk = chunk[3:]
        yield chunk, line
        line += chunk.count(b"\n")
    state["rest"], state["line"] = rest, line


def _parse_in_order(chunks: Iterator[tuple[bytes, int]]):
    """(chunk, points) in file order, parsed on a few threads (numpy releases the GIL); at most
    two chunks per thread in flight, so memory stays bounded."""
    workers = max(1, min(4, os.cpu_count() or 1))
    if workers == 1:
        for chunk, line in chunks:
            yield chunk, parse_chunk(chunk, line)
        return
    window: collections.deque = collections.deque()
    with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="jsonl") as pool:
        for chunk, line in chunks:
            window.append((chunk, pool.submit(parse_chunk, chunk, line)))
            if len(window) >= 2 * workers:
                chunk_done, future = window.popleft()
                yield chunk_done, future.result()
        while window:
            chunk_done, future = window.popleft()
            yield chunk_done, future.result()


def _read_jsonl_stream(blocks: Iterator[bytes], source: str, total_bytes: int = 0) -> History:
    parts: dict[str, SeriesParts] = {}
    read_bytes = 0
    records = 0
    state = {"seen_bytes": False, "rest": b"", "line": 1}
    try:
        for chunk, points in _parse_in_order(_line_chunks(blocks, state)):
            records += points.records
            read_bytes += len(chunk)
            for (split, metric), (steps, values) in points.groups.items():
                name = f"{split}/{metric}"
                part = parts.get(name)
                if part is None:
                    part = parts[name] = SeriesParts(metric, split)
                if part.size == 0 and total_bytes > read_bytes:
                    # Size the series from its density in the first chunk it appears in.
                    part.reserve(int(steps.size * total_bytes / len(chunk) * 1.25) + 1024)
                part.add(steps, values)
    except JsonlLineError as exc:
        raise HistoryError(f"{source}: line {exc.line}: {exc.reason}; every line must be a "
                           f"history record such as "
                           f'{{"step": 1, "split": "train", "metrics": {{"loss": 0.5}}}}') \
            from None
    rest, line, seen_bytes = state["rest"], state["line"], state["seen_bytes"]
    notes = []
    if rest.strip():
        try:
            tail = parse_chunk_exact(rest, line)
        except JsonlLineError:
            notes.append(f"skipped the truncated last line (line {line}): the writer stopped "
                         f"mid-record")
        else:
            records += tail.records
            for (split, metric), (steps, values) in tail.groups.items():
                name = f"{split}/{metric}"
                parts.setdefault(name, SeriesParts(metric, split)).add(steps, values)
    if not seen_bytes:
        raise HistoryError(f"{source}: the file is empty; the training wrote no history")
    if not parts:
        raise HistoryError(f"{source}: {records} record(s) but no numeric metric values")
    return History.build(parts, "jsonl", source, "step", records, notes)


# --- CSV (Keras, Lightning) ------------------------------------------------------------------


def _read_csv(handle, source: str, fmt: str) -> History:
    x_column = "epoch" if fmt == "keras_csv" else "step"
    text = io.TextIOWrapper(handle, encoding="utf-8-sig", errors="replace", newline="")
    rows = csv.reader(text)
    try:
        header = [c.strip() for c in next(rows)]
    except StopIteration:
        raise HistoryError(f"{source}: the file is empty; the training wrote no history") from None
    except csv.Error as exc:
        raise HistoryError(f"{source}: line 1: not CSV ({exc})") from None
    lowered = [c.lower() for c in header]
    if x_column not in lowered:
        writer = "Keras' CSVLogger" if fmt == "keras_csv" else "Lightning's CSVLogger"
        raise HistoryError(f"{source}: no '{x_column}' column (columns: {', '.join(header)}); "
                           f"{writer} writes one")
    x_index = lowered.index(x_column)
    skip = {x_index} | {i for i, c in enumerate(lowered) if c in ("epoch", "step")}
    metric_index = [i for i in range(len(header)) if i not in skip and header[i]]
    if not metric_index:
        raise HistoryError(f"{source}: only the {x_column} column, no metrics")
    xs: dict[int, list[float]] = {i: [] for i in metric_index}
    ys: dict[int, list[float]] = {i: [] for i in metric_index}
    bad: dict[int, tuple[int, str]] = {}  # column -> first (line, cell) that is not a number
    records = 0
    notes: list[str] = []
    pending_short: tuple[int, int] | None = None
    try:
        for row in rows:
            line = rows.line_num
            if not row or not any(cell.strip() for cell in row):
                continue
            if [c.strip() for c in row] == header:
                continue  # a header repeated by a logger that re-opened the file
            if pending_short is not None:
                raise HistoryError(f"{source}: line {pending_short[0]}: {pending_short[1]} "
                                   f"cells where the header has {len(header)}")
            if len(row) != len(header):
                pending_short = (line, len(row))  # fine only if it is the torn last line
                continue
            x = _cell_number(row[x_index])
            if x is None or math.isnan(x):
                raise HistoryError(f"{source}: line {line}: the {x_column} cell "
                                   f"{row[x_index]!r} is not a number")
            records += 1
            for i in metric_index:
                cell = row[i].strip()
                if not cell:
                    continue  # Lightning's sparse rows
                value = _cell_number(cell)
                if value is None:
                    bad.setdefault(i, (line, cell))
                    continue
                xs[i].append(x)
                ys[i].append(value)
    except csv.Error as exc:
        raise HistoryError(f"{source}: line {rows.line_num}: not CSV ({exc})") from None
    if pending_short is not None:
        notes.append(f"skipped the truncated last line (line {pending_short[0]}: "
                     f"{pending_short[1]} of {len(header)} cells)")
    for i, (line, cell) in bad.items():
        if ys[i]:
            raise HistoryError(f"{source}: line {line}, column {header[i]!r}: {cell!r} is not a "
                               f"number")
        notes.append(f"ignored column {header[i]!r}: it holds no numbers")
    if records == 0:
        raise HistoryError(f"{source}: a header but no rows; the training logged no epoch")
    parts = {}
    for i in metric_index:
        if ys[i]:
            part = SeriesParts(header[i])
            part.add(np.asarray(xs[i]), np.asarray(ys[i]))
            parts[header[i]] = part
    x_label = "epoch" if fmt == "keras_csv" else "step"
    return History.build(parts, fmt, source, x_label, records, notes)


def _cell_number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


# --- TensorBoard -----------------------------------------------------------------------------


def _read_tensorboard(files: list[Path], root: Path, source: str) -> History:
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
        from tensorboard.util import tensor_util
    except ImportError as exc:  # tensorboard is a dependency; this says what to install
        raise HistoryError(f"{source}: reading TensorBoard logs needs the 'tensorboard' "
                           f"package ({exc})") from exc
    parts: dict[str, SeriesParts] = {}
    events = 0
    for path in files:
        run = path.parent.relative_to(root).as_posix() if path.parent != root else ""
        run = "" if run == "." else run
        try:
            for event in EventFileLoader(str(path)).Load():
                events += 1
                if not event.HasField("summary"):
                    continue
                for value in event.summary.value:
                    number = _scalar(value, tensor_util)
                    if number is None:
                        continue
                    name = f"{run}/{value.tag}" if run else value.tag
                    part = parts.get(name)
                    if part is None:
                        part = parts[name] = SeriesParts(value.tag, "", run)
                    part.add([float(event.step)], [number])
        except Exception as exc:  # a corrupt record: the proto library's own error types
            raise HistoryError(f"{source}: {path.name}: not a readable TensorBoard event file "
                               f"({type(exc).__name__}: {exc})") from exc
    if not parts:
        raise HistoryError(f"{source}: {events} TensorBoard event(s) but no scalar summaries")
    x_label = "epoch" if all(p.tag.lower().startswith("epoch_") for p in parts.values()) \
        else "step"
    return History.build(parts, "tensorboard", source, x_label, events)


def _scalar(value, tensor_util) -> float | None:
    """A summary value's number: ``simple_value``, or a one-element numeric tensor."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind != "tensor":
        return None
    try:
        array = tensor_util.make_ndarray(value.tensor)
    except Exception:  # an unsupported dtype (strings, resources): not a scalar series
        return None
    if array.size != 1 or array.dtype.kind not in "fiub":
        return None
    return float(array.reshape(-1)[0])
