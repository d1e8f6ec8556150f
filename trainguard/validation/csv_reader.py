"""Keras' and Lightning's ``CSVLogger`` files, read with pyarrow's CSV reader in batches.

- ``keras_csv``: ``epoch,loss,val_loss,...``, one row per epoch. A Keras history saved with
  pandas (``pd.DataFrame(history.history).to_csv(...)``) has no ``epoch`` column: each row is one
  epoch, numbered from 0 (by pandas' unnamed index column when it wrote one, as ``to_csv`` does by
  default; by the row's place when it did not, ``index=False``), with a note.
- ``lightning_csv``: ``metrics.csv``, sparse rows (training and validation metrics on different
  rows) with ``step`` and ``epoch`` columns.

Ultralytics' ``results.csv`` is a ``keras_csv`` (an ``epoch`` column); what its column names mean
comes from :mod:`~trainguard.validation.dialects`. Keras' ``CSVLogger(append=True)`` appends every
``fit()`` call to one file, each starting again at epoch 0: when the epoch goes back, the rows
before belong to an earlier run and only the last run is kept, with a note (a curve merged from
several runs is one no run produced).

The separator (``,``, or the ``;`` or tab that Keras' ``CSVLogger(separator=...)`` and pandas'
``to_csv(sep=...)`` write) and a title line above the header are found by
:mod:`~trainguard.validation.csv_layout`, with a note; a decimal comma is refused.

What a file means: the header names the columns (case-insensitive ``epoch`` for Keras, ``step``
for Lightning is the x axis; other ``epoch``/``step`` columns are not metrics). Each row's x cell
must be a number (not NaN); an empty metric cell is no point (Lightning's sparse rows); numbers
are read as Python's ``float`` reads them (``nan``, ``inf`` included). Blank rows and a repeated
header (a logger that re-opened the file) are skipped, and so is a torn last row (too few cells),
with a note. A column without a single number is ignored with a note; a non-number in a numeric
column, a short row mid-file or a NaN step is an error naming the line.

How it is read: whole lines in blocks, only the x and metric columns converted, by
``pyarrow.csv`` as float64. pyarrow is trusted only where it reads exactly what ``float`` reads;
a file with quotes, bare carriage returns, parentheses (``nan(…)``), a repeated header, a cell
pyarrow cannot convert, or any irregular row is read again from the start with the ``csv``
module, which also writes the messages.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from trainguard.errors import HistoryError
from trainguard.validation.collect import MAX_SERIES, Collector, Tail, echo, whole_lines
from trainguard.validation.csv_layout import Layout, sniff
from trainguard.validation.dialects import column_meaning
from trainguard.validation.history import History

__all__ = ["read_csv", "read_csv_arrow", "read_csv_exact", "Columns", "header_columns"]

_WRITER = {"keras_csv": "Keras' CSVLogger", "lightning_csv": "Lightning's CSVLogger"}
_SHOWN_COLUMNS = 30


class _Irregular(Exception):
    """The file is outside what the pyarrow path proves exact: the csv module reads it."""


@dataclass(frozen=True)
class Columns:
    """The header, understood.

    Attributes:
        header: the column names, stripped.
        x: the x column's index; None when the row's place is the x (a Keras history with no
            ``epoch`` column: the first row is epoch 0).
        metrics: the metric columns' indices.
        x_name: ``epoch`` or ``step``.
        meaning: column -> (name to interpret, split) where a dialect says (Ultralytics).
        layout: the separator and the title line above the header (:mod:`csv_layout`).
    """

    header: list[str]
    x: int | None
    metrics: list[int]
    x_name: str
    meaning: dict[str, tuple[str, str]]
    notes: tuple[str, ...] = ()
    layout: Layout = Layout()

    def add(self, collector: Collector, name: str, x: np.ndarray, y: np.ndarray, size: int = 0) -> None:
        """Adds a column's points under its name, interpreted as the dialect says."""
        tag, split = self.meaning.get(name, (name, ""))
        collector.add(name, tag, split, "", x, y, size)


@dataclass
class Runs:
    """Where the x column went back (Keras' appended ``fit()`` runs): only the last run is kept.

    Attributes:
        restarts: how many times the epoch went back.
        first_x: the last run's first epoch.
        records: rows of the last run so far.
    """

    restarts: int = 0
    last_x: float = -math.inf
    first_x: float = math.nan
    records: int = 0

    def note(self, x_name: str) -> list[str]:
        if not self.restarts:
            return []
        return [
            f"{self.restarts + 1} training runs appended to this file (the {x_name} column starts "
            f"again {self.restarts} time{'s' if self.restarts > 1 else ''}); only the last run is "
            f"judged ({self.records} rows from {x_name} {_plain_number(self.first_x)})"
        ]


def _plain_number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _column_list(header: list[str]) -> str:
    shown = ", ".join(echo(c, 40)[1:-1] for c in header[:_SHOWN_COLUMNS])
    more = f", … ({len(header)} columns)" if len(header) > _SHOWN_COLUMNS else ""
    return shown + more


def header_columns(header: list[str], source: str, fmt: str) -> Columns:
    """Finds the x and metric columns.

    Raises:
        HistoryError: no x column, or nothing but it.
    """
    x_name = "epoch" if fmt == "keras_csv" else "step"
    lowered = [c.lower() for c in header]
    x: int | None
    notes: tuple[str, ...] = ()
    if x_name in lowered:
        x = lowered.index(x_name)
    elif fmt == "keras_csv":
        # history.history saved by pandas: one row per epoch and no epoch column; the unnamed
        # first column is pandas' index (0, 1, ...) when to_csv wrote one (its default).
        x = 0 if len(header) > 1 and not header[0] else None
        notes = (
            "no 'epoch' column: each row is one epoch, numbered from 0 "
            + ("by the unnamed index column" if x == 0 else "in the order of the rows")
            + " (a Keras history saved with pandas' to_csv)",
        )
    else:
        raise HistoryError(
            f"{source}: no '{x_name}' column (columns: {_column_list(header)}); {_WRITER[fmt]} writes one"
        )
    skip = {i for i, c in enumerate(lowered) if c in ("epoch", "step")} | ({x} if x is not None else set())
    metrics = [i for i in range(len(header)) if i not in skip and header[i]]
    if not metrics:
        raise HistoryError(f"{source}: only the {x_name} column, no metrics")
    if len(metrics) > MAX_SERIES:  # refused from the header, before a row is parsed
        raise HistoryError(
            f"{source}: {len(metrics)} metric columns, more than {MAX_SERIES} "
            f"distinct series: not a training history (name the metrics you log, "
            f"not per-item values)"
        )
    return Columns(header, x, metrics, x_name, column_meaning(header), notes)


def read_csv(
    open_blocks: Callable[[], Iterator[bytes]], source: str, fmt: str, total_bytes: int = 0
) -> History:
    """Reads a Keras or Lightning CSV log.

    Args:
        open_blocks: gives the input's bytes in blocks, from the start, each time it is called.
        source: the path or URI, for messages.
        fmt: ``keras_csv`` or ``lightning_csv``.
        total_bytes: the input's size when known.

    Raises:
        HistoryError: the file is empty or malformed (the message names the line and column).
    """
    try:
        return read_csv_arrow(open_blocks(), source, fmt, total_bytes)
    except _Irregular:
        return read_csv_exact(open_blocks(), source, fmt)


# --- pyarrow ----------------------------------------------------------------------------------


def read_csv_arrow(blocks: Iterator[bytes], source: str, fmt: str, total_bytes: int = 0) -> History:
    """The pyarrow path alone.

    Raises:
        _Irregular: anything but plain rows of numbers (the caller reads with the csv module).
    """
    tail = Tail()
    collector = Collector(source, total_bytes)
    columns: Columns | None = None
    runs = Runs() if fmt == "keras_csv" else None
    records, lines = 0, 0
    for chunk in whole_lines(blocks, source, tail):
        body = chunk
        if columns is None:
            layout = _arrow_layout(chunk, source)
            lines = layout.header_line
            head = chunk.split(b"\n", lines)
            columns = replace(_arrow_header(head[lines - 1], source, fmt, layout.separator), layout=layout)
            body = head[lines] if len(head) > lines else b""
        records += _arrow_rows(body, columns, collector, runs, records)
        lines += body.count(b"\n")
        collector.read_bytes += len(chunk)
    if columns is None:
        raise _Irregular  # a header without a line end, or nothing
    notes: list[str] = []
    if tail.data.strip():
        records += _arrow_tail(tail.data, columns, collector, lines + 1, notes, runs, records)
    if records == 0:
        raise _Irregular  # the csv module says what is wrong
    if runs is not None:
        notes = runs.note(columns.x_name) + notes
    notes = [*columns.layout.notes(), *columns.notes, *notes]
    # The series in the header's order, as the csv path gives them: a column's first value can come
    # in a later batch than another's (validation after a long first epoch), or in the last line.
    rank = {columns.header[i]: k for k, i in enumerate(columns.metrics)}
    collector.parts = dict(sorted(collector.parts.items(), key=lambda item: rank[item[0]]))
    return collector.build(fmt, columns.x_name, records, notes)


def _plain(data: bytes) -> bool:
    """No quoting, no bare carriage return, no ``nan(...)``: what pyarrow and float agree on."""
    if data.find(b'"') >= 0 or data.find(b"(") >= 0:
        return False
    return data.find(b"\r") < 0 or data.count(b"\r") == data.count(b"\r\n")


def _arrow_layout(chunk: bytes, source: str) -> Layout:
    """The layout from the first chunk's lines, as the csv path sees it from the same lines."""
    lines = chunk.split(b"\n", 3)[:3]
    if not _plain(b"\n".join(lines) + b"\n"):
        raise _Irregular
    try:
        layout = sniff([line.decode("utf-8", "replace") for line in lines], source)
    except HistoryError:
        raise _Irregular from None
    if chunk.count(b"\n") < layout.lines_used:
        raise _Irregular  # the csv path sees a line this chunk does not hold, and may decide otherwise
    if layout.extra is not None:
        raise _Irregular  # rows one cell wider than the header: the csv path drops the extra one
    return layout


def _arrow_header(line: bytes, source: str, fmt: str, separator: str) -> Columns:
    if not _plain(line + b"\n"):
        raise _Irregular
    header = [c.strip() for c in line.decode("utf-8", "replace").rstrip("\r").split(separator)]
    try:
        columns = header_columns(header, source, fmt)
    except HistoryError:
        raise _Irregular from None
    if len(set(header)) != len(header):
        raise _Irregular  # the csv path keeps the last of two same-named columns
    return columns


def _arrow_rows(body: bytes, columns: Columns, collector: Collector, runs: Runs | None, before: int) -> int:
    """Adds a block's rows; ``before``: the rows read until it (the x of a row-numbered file)."""
    if not body.strip():
        return 0
    if not _plain(body):
        raise _Irregular
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    names = [f"c{i}" for i in range(len(columns.header))]
    keep = [*([columns.x] if columns.x is not None else []), *columns.metrics]
    convert = pa_csv.ConvertOptions(
        column_types={names[i]: pa.float64() for i in keep},
        include_columns=[names[i] for i in keep],
        null_values=[""],
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )
    try:
        table = pa_csv.read_csv(
            pa.BufferReader(body),
            read_options=pa_csv.ReadOptions(column_names=names),
            parse_options=pa_csv.ParseOptions(delimiter=columns.layout.separator),
            convert_options=convert,
            memory_pool=pa.system_memory_pool(),
        )
    except (pa.ArrowException, ValueError):  # a short row, a cell that is not a number, ...
        raise _Irregular from None
    if columns.x is None:
        if any(table.column(names[i]).null_count for i in columns.metrics):
            raise _Irregular  # a blank row is no epoch: the csv path skips it
        x = np.arange(before, before + table.num_rows, dtype=np.float64)
    else:
        x_column = table.column(names[columns.x])
        if x_column.null_count:
            raise _Irregular  # a row of empty cells: the csv path decides
        x = np.asarray(x_column.to_numpy(), dtype=np.float64)
        if np.isnan(x).any():
            raise _Irregular
    start = _last_run_start(x, runs, collector)
    for i in columns.metrics:
        column = table.column(names[i])
        values = np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)[start:]
        if column.null_count:
            valid = column.is_valid().to_numpy(zero_copy_only=False)[start:]
            _add(columns, collector, columns.header[i], x[start:][valid], values[valid], len(body))
        else:
            _add(columns, collector, columns.header[i], x[start:], values, len(body))
    return table.num_rows


def _last_run_start(x: np.ndarray, runs: Runs | None, collector: Collector) -> int:
    """The first row of the last run in this block (0 when none starts in it); the points of
    earlier runs already collected are dropped."""
    if runs is None or x.size == 0:
        return 0
    back = np.flatnonzero(np.diff(np.concatenate(([runs.last_x], x))) < 0)
    start = 0
    if back.size:
        runs.restarts += int(back.size)
        start = int(back[-1])
        collector.parts.clear()
        runs.first_x = float(x[start])
        runs.records = 0
    elif math.isnan(runs.first_x):
        runs.first_x = float(x[0])
    runs.records += int(x.size - start)
    runs.last_x = float(x[-1])
    return start


def _add(columns: Columns, collector: Collector, name: str, x: np.ndarray, y: np.ndarray, size: int) -> None:
    if y.size:
        columns.add(collector, name, x, y, size)


def _arrow_tail(
    data: bytes,
    columns: Columns,
    collector: Collector,
    line: int,
    notes: list[str],
    runs: Runs | None,
    before: int,
) -> int:
    """The last line, without a line end: a whole row, or a torn one to skip."""
    if not _plain(data + b"\n"):
        raise _Irregular
    cells = data.decode("utf-8", "replace").split(columns.layout.separator)
    if len(cells) != len(columns.header):
        notes.append(_skipped_last(line, len(cells), len(columns.header)))
        return 0
    if [c.strip() for c in cells] == columns.header:
        raise _Irregular
    if columns.x is None:
        if not all(cells[i].strip() for i in columns.metrics):
            raise _Irregular
        x: float | None = float(before)
    else:
        if not cells[columns.x].strip():
            raise _Irregular
        x = _cell_number(cells[columns.x])
    if x is None or math.isnan(x):
        raise _Irregular
    values = [(i, _cell_number(cells[i].strip())) for i in columns.metrics if cells[i].strip()]
    if any(value is None for _, value in values):
        raise _Irregular
    _last_run_start(np.array([x]), runs, collector)
    for i, value in values:
        _add(columns, collector, columns.header[i], np.array([x]), np.array([value]), 0)
    return 1


# --- the csv module: any file, and the messages -----------------------------------------------


def _text_lines(blocks: Iterator[bytes], source: str) -> Iterator[str]:
    """Lines as ``open(..., newline="")`` splits them (``\\n``, ``\\r\\n``, a bare ``\\r``),
    decoded leniently, never longer than a line may be."""
    tail = Tail()
    for chunk in whole_lines(blocks, source, tail):
        yield from io.StringIO(chunk.decode("utf-8", "replace"), newline="")
    if tail.data:
        yield from io.StringIO(tail.data.decode("utf-8", "replace"), newline="")


def read_csv_exact(blocks: Iterator[bytes], source: str, fmt: str) -> History:
    """Reads with the ``csv`` module: every file, slower; the messages name line and column.

    Raises:
        HistoryError: the file is empty or malformed.
    """
    lines = _text_lines(blocks, source)
    first = list(itertools.islice(lines, 3))
    layout = sniff(first, source)
    rows = csv.reader(itertools.chain(first, lines), delimiter=layout.separator)
    try:
        return _read_rows(rows, source, fmt, layout)
    except csv.Error as exc:
        raise HistoryError(f"{source}: line {rows.line_num}: not CSV ({exc})") from None


def _read_rows(rows, source: str, fmt: str, layout: Layout) -> History:
    try:
        if layout.title is not None:
            next(rows)
        header = [c.strip() for c in next(rows)]
    except StopIteration:
        raise HistoryError(f"{source}: the file is empty; the training wrote no history") from None
    columns = replace(header_columns(header, source, fmt), layout=layout)
    state = _RowState(columns, source, Runs() if fmt == "keras_csv" else None)
    for row in rows:
        state.row(row, rows.line_num)
    return state.finish(fmt)


class _RowState:
    """Rows read so far, the first bad cell of each column, a short row waiting to be judged."""

    def __init__(self, columns: Columns, source: str, runs: Runs | None = None) -> None:
        self.columns = columns
        self.source = source
        self.runs = runs
        self.xs: dict[int, list[float]] = {i: [] for i in columns.metrics}
        self.ys: dict[int, list[float]] = {i: [] for i in columns.metrics}
        self.bad: dict[int, tuple[int, str]] = {}  # column -> first (line, cell) not a number
        self.records = 0
        self.pending_short: tuple[int, int] | None = None

    def row(self, row: list[str], line: int) -> None:
        header = self.columns.header
        if not row or not any(cell.strip() for cell in row):
            return
        if [c.strip() for c in row] == header:
            return  # a header repeated by a logger that re-opened the file
        if self.pending_short is not None:
            raise HistoryError(
                f"{self.source}: line {self.pending_short[0]}: "
                f"{self.pending_short[1]} cells where the header has {len(header)}"
            )
        extra = self.columns.layout.extra
        if extra is not None and len(row) == len(header) + 1 and not row[extra].strip():
            row = row[:extra] + row[extra + 1 :]  # the writer's extra empty cell (Layout.extra)
        if len(row) != len(header):
            self.pending_short = (line, len(row))  # fine only if it is the torn last line
            return
        x: float | None
        if self.columns.x is None:  # the row's place is its epoch
            x_cell, x = "", float(self.records)
        else:
            x_cell = row[self.columns.x]
            x = _cell_number(x_cell)
        if x is None or math.isnan(x):
            raise HistoryError(
                f"{self.source}: line {line}: the {self.columns.x_name} cell "
                f"{echo(x_cell, 60)} is not a number"
            )
        self.records += 1
        if self.runs is not None:
            self._follow_runs(x)
        for i in self.columns.metrics:
            cell = row[i].strip()
            if not cell:
                continue  # Lightning's sparse rows
            value = _cell_number(cell)
            if value is None:
                self.bad.setdefault(i, (line, cell))
                continue
            self.xs[i].append(x)
            self.ys[i].append(value)

    def _follow_runs(self, x: float) -> None:
        """A row whose epoch goes back starts another appended run: forget the earlier one."""
        runs = self.runs
        assert runs is not None
        if x < runs.last_x:
            runs.restarts += 1
            runs.first_x, runs.records = x, 0
            for i in self.columns.metrics:
                self.xs[i].clear()
                self.ys[i].clear()
            self.bad.clear()
        elif math.isnan(runs.first_x):
            runs.first_x = x
        runs.records += 1
        runs.last_x = x

    def finish(self, fmt: str) -> History:
        header = self.columns.header
        notes = [
            *self.columns.layout.notes(),
            *self.columns.notes,
            *(self.runs.note(self.columns.x_name) if self.runs is not None else []),
        ]
        if self.pending_short is not None:
            notes.append(_skipped_last(self.pending_short[0], self.pending_short[1], len(header)))
        for i, (line, cell) in self.bad.items():
            if self.ys[i]:
                raise HistoryError(
                    f"{self.source}: line {line}, column {echo(header[i], 60)}: "
                    f"{echo(cell, 60)} is not a number"
                )
            notes.append(f"ignored column {echo(header[i], 60)}: it holds no numbers")
        if self.records == 0:
            raise HistoryError(
                f"{self.source}: a header but no rows; the training logged no {self.columns.x_name}"
            )
        collector = Collector(self.source)
        # Of two columns with one name, the later one is the series (as a dict would have it).
        chosen = {header[i]: i for i in self.columns.metrics if self.ys[i]}
        for name, i in chosen.items():
            self.columns.add(collector, name, np.asarray(self.xs[i]), np.asarray(self.ys[i]))
        return collector.build(fmt, self.columns.x_name, self.records, notes)


def _skipped_last(line: int, cells: int, wanted: int) -> str:
    """The note for a last line of the wrong width: torn (fewer cells) or malformed (more)."""
    if cells < wanted:
        return f"skipped the truncated last line (line {line}: {cells} of {wanted} cells)"
    return f"skipped the last line (line {line}: {cells} cells where the header has {wanted})"


def _cell_number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None
