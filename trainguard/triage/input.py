"""The input: a text, a process's raw output, a stream or a file, read as blocks of lines.

Any size is read in blocks of :data:`BLOCK_BYTES` (memory stays bounded), line ends made ``\\n``
(``\\r\\n`` and a progress bar's lone ``\\r`` alike), and classified by one scan and one decision.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from typing import BinaryIO

from trainguard.triage.decide import Diagnosis, decide
from trainguard.triage.scan import scan

__all__ = ["BLOCK_BYTES", "blocks", "classify", "classify_stream", "classify_file"]

# The prefilter reads a block some twenty times (one regex per first byte): a block that
# stays in the CPU's cache is read faster (tests/benchmarks/bench_triage.py, 20 MB step-record
# log: 140 MB/s in blocks of 4 MiB, 196 MB/s in blocks of 1 MiB), and a scan that has to leave
# out signatures that have all their hits (scan.Table.subset) gets there sooner.
BLOCK_BYTES = 1 << 20
# A line longer than this is read in pieces of this size (each piece numbered as a line).
_MAX_LINE_BYTES = 8 << 20


def classify(text: str | bytes) -> Diagnosis:
    """Names the failure class of a job from its error message and/or the tail of its logs.

    Args:
        text: the job's error message, its log tail, or both concatenated (bytes are decoded
            as UTF-8, undecodable bytes as U+FFFD).

    Returns:
        The diagnosis: the root-cause class, the evidence line, the class's first remedy and
        trap, a confidence and the reason. Text with no known failure signature, such as a
        healthy training log, is ``unknown`` with a confidence below 0.3.
    """
    if isinstance(text, bytes | bytearray):  # a process's raw output: read like a log file
        return classify_stream(io.BytesIO(text))
    # surrogatepass: any str round-trips, so the evidence is the caller's text exactly.
    data = (text or "").encode("utf-8", "surrogatepass")
    return decide(scan(blocks(io.BytesIO(data)), errors="surrogatepass"))


def classify_stream(stream: BinaryIO) -> Diagnosis:
    """Like :func:`classify`, for a binary stream of any size (a log file, stdin), read once.

    Memory stays bounded: the stream is read in blocks of ``BLOCK_BYTES``; undecodable bytes
    read as U+FFFD.
    """
    return decide(scan(blocks(stream), errors="replace"))


def classify_file(path: str | os.PathLike[str]) -> Diagnosis:
    """Like :func:`classify`, for a log file of any size (streamed, see :func:`classify_stream`).

    Raises:
        OSError: the file cannot be opened or read.
    """
    with open(path, "rb") as stream:
        return classify_stream(stream)


def blocks(stream: BinaryIO) -> Iterator[bytes]:
    """Whole lines, ``\\r\\n`` and ``\\r`` turned into ``\\n``, each block ending with one."""
    pending = b""
    while True:
        chunk = stream.read(BLOCK_BYTES)
        if not chunk:
            break
        data = pending + chunk
        cut = data.rfind(b"\n") + 1
        if cut == 0 and len(data) >= _MAX_LINE_BYTES:
            # One very long line: a lone \r is a line end too; else cut it (not inside a \r\n).
            cut = data.rfind(b"\r", 0, len(data) - 1) + 1 or len(data) - (data[-1:] == b"\r")
        pending, data = data[cut:], data[:cut]
        if data:
            yield _lf(data)
    if pending:
        yield _lf(pending)


def _lf(data: bytes) -> bytes:
    """Line ends made ``\\n``, one at the end guaranteed."""
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return data if data.endswith(b"\n") else data + b"\n"
