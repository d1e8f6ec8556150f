"""Writes that reach the disk while they are being made, so the final ``fsync`` is short.

A checkpoint is written, then fsynced. Left alone, the kernel keeps every written page dirty in
memory until the ``fsync`` (a few hundred MB sits below its background-writeback threshold), so the
save spends its serialisation time with an idle disk and its ``fsync`` time with an idle CPU.
:class:`WritebackFile` asks the kernel to start writing each range as soon as it is written
(``sync_file_range(SYNC_FILE_RANGE_WRITE)``: asynchronous, like RocksDB's ``bytes_per_sync``), so
disk and serialisation overlap and the ``fsync`` waits for the last range only. Durability still
comes from that ``fsync``: this changes when pages are written, not whether.

On systems without ``sync_file_range`` (not Linux), or files that refuse it (some FUSE mounts,
pipes), it does nothing and writes go through unchanged.

Example::

    >>> import os, tempfile
    >>> from trainguard.runtime.writeback import WritebackFile
    >>> path = os.path.join(tempfile.mkdtemp(), "state.bin")
    >>> with open(path, "wb") as raw:
    ...     handle = WritebackFile(raw)
    ...     handle.write(b"x" * 100)
    ...     os.fsync(handle.fileno())  # fileno() flushes: the fsync covers all 100 bytes
    100
    >>> os.path.getsize(path)
    100
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import BinaryIO

__all__ = ["WritebackFile", "WRITEBACK_BYTES", "start_writeback"]

#: Written bytes between two writeback requests: large enough that the requests cost nothing,
#: small enough that the disk starts early (measured: 2, 8 and 32 MiB alike on a sharded save of
#: 200 MB per rank).
WRITEBACK_BYTES = 8 << 20

_SYNC_FILE_RANGE_WRITE = 2  # <fcntl.h>: start write-out of dirty pages not already under write-out


def _load_sync_file_range() -> Callable[[int, int, int], bool] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        function = ctypes.CDLL(None).sync_file_range  # this process's own libc: no ldconfig run
    except (ImportError, OSError, AttributeError):  # a Python without ctypes, a libc without it
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    function.restype = ctypes.c_int

    def start(fd: int, offset: int, length: int) -> bool:
        return function(fd, offset, length, _SYNC_FILE_RANGE_WRITE) == 0

    return start


_sync_file_range = _load_sync_file_range()


def start_writeback(fd: int, offset: int, length: int) -> bool:
    """Asks the kernel to start writing ``length`` bytes of ``fd`` from ``offset``; returns
    whether it accepted (``False`` where it cannot: not Linux, a pipe, a refusing FUSE mount)."""
    if _sync_file_range is None or length <= 0:
        return False
    return _sync_file_range(fd, offset, length)


class WritebackFile:
    """A binary file-object wrapper that starts the disk writing every :data:`WRITEBACK_BYTES`.

    Everything but ``write``, ``writelines`` and ``fileno`` is the wrapped file's own (``tell``,
    ``seek``: a writer such as ``zipfile`` that seeks back to patch a header just makes those pages
    dirty again). ``fileno()`` flushes first, so a caller that fsyncs the descriptor makes all it
    wrote durable: DCP fsyncs its ``.metadata`` that way with the bytes still in Python's buffer."""

    def __init__(self, handle: BinaryIO, every: int = WRITEBACK_BYTES) -> None:
        self._handle = handle
        self._every = every
        self._unrequested = 0  # bytes written since the last request
        try:
            self._started = handle.tell()  # bytes before this offset have been handed to the kernel
            self._enabled = _sync_file_range is not None
        except (OSError, AttributeError, ValueError):  # a pipe or socket: nothing to write out
            self._started, self._enabled = 0, False

    def write(self, data) -> int:
        with memoryview(data) as view:
            if view.nbytes <= self._every:
                return self._write(view)
            with view.cast("B") as octets:  # one large write (a payload): written out piece by piece
                done = 0
                while done < octets.nbytes:  # an unbuffered file may take less than it was given
                    with octets[done : done + self._every] as piece:  # released even on error
                        done += self._write(piece)
                return done

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def _write(self, view: memoryview) -> int:
        written = self._handle.write(view)
        if not written and view.nbytes:
            raise OSError(f"the file took none of {view.nbytes} bytes")
        self._unrequested += written
        if self._enabled and self._unrequested >= self._every:
            self._request()
        return written

    def _request(self) -> None:
        self._unrequested = 0
        try:
            self._handle.flush()  # the buffered tail must be in the kernel to be written out
            fd, end = self._handle.fileno(), self._handle.tell()
        except (OSError, AttributeError, ValueError):  # no descriptor (an in-memory file)
            self._enabled = False
            return
        if end > self._started:  # not after a seek back: those pages were asked for already
            self._enabled = start_writeback(fd, self._started, end - self._started)
            self._started = end

    def fileno(self) -> int:
        self._handle.flush()
        return self._handle.fileno()

    def __enter__(self) -> WritebackFile:
        return self

    def __exit__(self, *exc) -> None:
        self._handle.close()

    def __getattr__(self, name: str):
        return getattr(self._handle, name)
