"""What every reader shares: whole lines from a byte stream, and series collected within bounds.

Readers stream their input in big blocks of whole lines (:func:`whole_lines`), so memory follows
the points kept, not the file: at most one block and one unfinished line are held, and a "line"
that never ends (a binary file, a history written without newlines) is refused once it passes
:data:`MAX_LINE_BYTES`. Points go to a :class:`Collector`, which caps the number of series and the
length of their names so that hostile input cannot balloon memory or the report.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from trainguard.errors import HistoryError
from trainguard.redaction import bound, redact
from trainguard.validation.history import History, SeriesParts

__all__ = [
    "CHUNK_BYTES",
    "READ_BYTES",
    "MAX_LINE_BYTES",
    "MAX_SERIES",
    "MAX_NAME_CHARS",
    "Tail",
    "file_blocks",
    "bytes_blocks",
    "whole_lines",
    "Collector",
    "echo",
]

# One parse call's worth. pyarrow's JSON parse holds ~5x its input while it runs: 2 MiB chunks,
# a few in flight, keep a read's overhead under ~100 MiB whatever the file's size, at the CPU
# cost of 4 or 8 MiB chunks.
CHUNK_BYTES = 2 << 20
# One read: a file read, or one ranged request to Cloud Storage (few requests, one memory bound).
READ_BYTES = 8 << 20
MAX_LINE_BYTES = 1 << 20  # no history record or CSV row is this long
MAX_SERIES = 10_000  # a metrics history has tens; more is not one
MAX_NAME_CHARS = 200
_BOM = b"\xef\xbb\xbf"


def echo(text: str, limit: int = 120) -> str:
    """User text (a cell, a column name) as a message may quote it: redacted, bounded, repr'd."""
    return repr(bound(redact(text), limit))


def file_blocks(path: str | os.PathLike, size: int | None = None) -> Iterator[bytes]:
    """A file's bytes in blocks of ``size`` (default :data:`READ_BYTES`)."""
    size = size or READ_BYTES
    with open(path, "rb") as handle:
        while block := handle.read(size):
            yield block


def bytes_blocks(data: bytes, size: int | None = None) -> Iterator[bytes]:
    """Bytes already in memory, in blocks of ``size`` (default :data:`READ_BYTES`)."""
    size = size or READ_BYTES
    view = memoryview(data)
    for start in range(0, len(data), size):
        yield bytes(view[start : start + size])


@dataclass
class Tail:
    """What :func:`whole_lines` leaves: the bytes after the last line end, and whether any
    non-blank byte was seen at all (an empty file is its own error)."""

    data: bytes = b""
    saw_text: bool = False


def whole_lines(
    blocks: Iterator[bytes], source: str, tail: Tail, max_line: int = MAX_LINE_BYTES
) -> Iterator[bytes]:
    """Chunks of whole lines, each ending with a newline and about :data:`CHUNK_BYTES` long
    (longer only to finish a line); the unfinished rest goes to ``tail``.

    A UTF-8 byte-order mark at the very start is dropped.

    Raises:
        HistoryError: more than ``max_line`` bytes without a line end.
    """
    rest = b""
    first = True
    for block in blocks:
        if first:
            first = False
            block = block.removeprefix(_BOM)
        if not tail.saw_text:
            tail.saw_text = bool(block.strip())
        data = rest + block if rest else block
        end = data.rfind(b"\n") + 1
        if len(data) - end > max_line:
            size = f"{max_line >> 20} MiB" if max_line >= 1 << 20 else f"{max_line >> 10} KiB"
            raise HistoryError(
                f"{source}: more than {size} without a line end: "
                f"not a history written line by line (JSONL, CSV or an MLflow metric file)"
            )
        yield from _pieces(data, end, CHUNK_BYTES)
        rest = data[end:]
    tail.data = rest


def _pieces(data: bytes, end: int, size: int) -> Iterator[bytes]:
    """``data[:end]`` (whole lines) cut at line ends into pieces of about ``size``."""
    start = 0
    while start < end:
        cut = end
        if end - start > size:
            cut = data.rfind(b"\n", start, start + size) + 1 or data.find(b"\n", start + size) + 1
        yield data[start:cut]
        start = cut


@dataclass
class Collector:
    """Series as a reader finds them, in order of first appearance.

    Attributes:
        source: the path or URI, for messages.
        total_bytes: the input's size when known; the first batch of a series sizes its buffer
            from it (untouched capacity costs address space, not memory).
    """

    source: str
    total_bytes: int = 0
    parts: dict[str, SeriesParts] = field(default_factory=dict)
    read_bytes: int = 0
    long_names: set[str] = field(default_factory=set)

    def add(
        self,
        name: str,
        tag: str,
        split: str,
        context: str,
        steps: np.ndarray,
        values: np.ndarray,
        batch_bytes: int = 0,
    ) -> None:
        """Appends points to the series ``name`` (created on first sight).

        Raises:
            HistoryError: more than :data:`MAX_SERIES` series.
        """
        part = self.parts.get(name)
        if part is None:
            if len(name) > MAX_NAME_CHARS:
                if len(self.long_names) < MAX_SERIES:
                    self.long_names.add(name)
                return
            if len(self.parts) >= MAX_SERIES:
                raise HistoryError(
                    f"{self.source}: more than {MAX_SERIES} distinct series: not a "
                    f"training history (name the metrics you log, not per-item "
                    f"values)"
                )
            part = self.parts[name] = SeriesParts(tag, split, context)
            if batch_bytes and self.total_bytes > self.read_bytes + batch_bytes:
                density = steps.size / batch_bytes
                part.reserve(int(density * self.total_bytes * 1.25) + 1024)
        part.add(steps, values)

    def build(self, fmt: str, x_label: str, records: int, notes: list[str]) -> History:
        """The history read (see :meth:`History.build`)."""
        notes = list(notes)
        if self.long_names:
            notes.append(
                f"ignored {len(self.long_names)} series with names longer than {MAX_NAME_CHARS} characters"
            )
        return History.build(self.parts, fmt, self.source, x_label, records, notes)
