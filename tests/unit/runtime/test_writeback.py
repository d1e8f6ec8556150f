"""Checkpoint files reach the disk while they are written: every range is handed to the kernel once,
in order, after it was flushed, and the file holds exactly what was written."""

from __future__ import annotations

import array
import doctest
import io
import itertools
import os
import re
import sys
import zipfile
from pathlib import Path

import pytest

from trainguard.runtime import writeback
from trainguard.runtime.storage import LocalStore
from trainguard.runtime.writeback import WritebackFile, start_writeback

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range is Linux's")


@pytest.fixture
def requests(monkeypatch):
    """Every writeback request (fd, offset, length, bytes in the file when asked), passed on."""
    if not sys.platform.startswith("linux"):
        pytest.skip("sync_file_range is Linux's")
    seen: list[tuple[int, int, int, int]] = []
    real = writeback.start_writeback

    def record(fd: int, offset: int, length: int) -> bool:
        seen.append((fd, offset, length, os.fstat(fd).st_size))
        return real(fd, offset, length)

    monkeypatch.setattr(writeback, "start_writeback", record)
    return seen


def test_the_file_holds_exactly_what_was_written_small_large_and_typed_writes(tmp_path):
    pieces = [b"a" * 10, os.urandom(5000), b"", memoryview(os.urandom(30_000)), array.array("i", range(3000))]
    path = tmp_path / "f.bin"
    with open(path, "wb") as raw:
        handle = WritebackFile(raw, every=4096)
        counts = [handle.write(piece) for piece in pieces]
        handle.flush()
        os.fsync(handle.fileno())
        assert handle.tell() == raw.tell() == sum(counts)
    expected = b"".join(bytes(p) for p in pieces)
    assert counts == [len(bytes(p)) for p in pieces]
    assert path.read_bytes() == expected


def test_an_unbuffered_file_that_takes_part_of_a_large_write_gets_the_rest(tmp_path):
    class Partial:  # a raw file whose write takes at most 3000 bytes, as os.write may
        def __init__(self, raw):
            self.raw = raw

        def write(self, data) -> int:
            return self.raw.write(bytes(data)[:3000])

        def __getattr__(self, name):
            return getattr(self.raw, name)

    data = os.urandom(50_000)
    with open(tmp_path / "f.bin", "wb", buffering=0) as raw:
        handle = WritebackFile(Partial(raw), every=4096)  # type: ignore[arg-type]
        assert handle.write(data) == len(data)
    assert (tmp_path / "f.bin").read_bytes() == data


def test_a_writer_that_seeks_back_to_patch_what_it_wrote_makes_a_valid_file(tmp_path, requests):
    # zipfile (numpy's savez, Keras checkpoints) rewrites each member's header after its data.
    members = {f"m{i}": os.urandom(10_000 + i) for i in range(5)}
    with open(tmp_path / "a.zip", "wb") as raw:
        handle = WritebackFile(raw, every=4096)
        with zipfile.ZipFile(handle, "w") as archive:  # type: ignore[arg-type]
            for name, data in members.items():
                with archive.open(name, "w", force_zip64=True) as member:
                    member.write(data)
        assert handle.tell() == raw.tell()
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:
        assert {name: archive.read(name) for name in archive.namelist()} == members
    assert requests  # and the file was written out along the way


def test_each_range_is_handed_to_the_kernel_once_in_order_after_it_was_flushed(tmp_path, requests):
    with open(tmp_path / "f.bin", "wb") as raw:
        handle = WritebackFile(raw, every=4096)
        for _ in range(50):
            handle.write(os.urandom(1000))  # small writes, as torch.save makes them
        handle.write(os.urandom(20_000))  # and one large one
    offsets = [(offset, length) for _, offset, length, _ in requests]
    assert offsets[0][0] == 0
    assert all(a + n == b for (a, n), (b, _) in itertools.pairwise(offsets)), offsets  # contiguous
    assert all(n >= 4096 for _, n in offsets)
    assert 70_000 - (offsets[-1][0] + offsets[-1][1]) < 4096  # only the tail left to the fsync
    # Each range was in the file (not in Python's buffer) when the kernel was asked to write it.
    assert all(size >= offset + length for _, offset, length, size in requests)


@linux_only
def test_the_kernel_accepts_the_request_for_a_file_and_refuses_it_for_a_pipe(tmp_path):
    with open(tmp_path / "f.bin", "wb") as raw:
        raw.write(b"x" * 10_000)
        raw.flush()
        assert start_writeback(raw.fileno(), 0, 10_000) is True
    read_end, write_end = os.pipe()
    try:
        assert start_writeback(write_end, 0, 10) is False
    finally:
        os.close(read_end)
        os.close(write_end)


@linux_only
def test_a_file_whose_system_refuses_writeback_is_written_whole_and_not_asked_again(tmp_path, monkeypatch):
    asked = []

    def refuse(fd: int, offset: int, length: int) -> bool:  # as a FUSE mount without it would
        asked.append(offset)
        return False

    monkeypatch.setattr(writeback, "start_writeback", refuse)
    data = os.urandom(10_000)
    with open(tmp_path / "f.bin", "wb") as raw:
        handle = WritebackFile(raw, every=1024)
        assert sum(handle.write(data[i : i + 1000]) for i in range(0, 10_000, 1000)) == 10_000
    assert (tmp_path / "f.bin").read_bytes() == data
    assert asked == [0]  # refused once, then left alone


def test_a_pipe_and_an_in_memory_file_are_written_whole_without_writeback(requests):
    read_end, write_end = os.pipe()
    got = bytearray()
    with os.fdopen(write_end, "wb") as raw:
        handle = WritebackFile(raw, every=1024)
        for _ in range(8):
            handle.write(b"y" * 1000)
            handle.flush()
            got += os.read(read_end, 1 << 16)
    os.close(read_end)
    assert bytes(got) == b"y" * 8000
    memory = io.BytesIO()
    handle = WritebackFile(memory, every=1024)  # type: ignore[arg-type]
    handle.writelines([b"z" * 1000] * 8)
    assert memory.getvalue() == b"z" * 8000 and handle.tell() == 8000
    assert requests == []


def test_fileno_flushes_so_an_fsync_of_it_makes_everything_written_durable(tmp_path):
    # DCP writes its .metadata with pickle.dump, then fsyncs the descriptor: the bytes must be
    # in the kernel by then, not in Python's buffer.
    with open(tmp_path / "m", "wb") as raw:
        handle = WritebackFile(raw)
        handle.write(b"m" * 1678)
        fd = handle.fileno()
        assert os.fstat(fd).st_size == 1678


@linux_only
def test_the_request_flag_is_the_systems_start_write_out_flag():
    headers = [
        p
        for p in (
            "/usr/include/x86_64-linux-gnu/bits/fcntl-linux.h",
            "/usr/include/bits/fcntl-linux.h",
            "/usr/include/aarch64-linux-gnu/bits/fcntl-linux.h",
        )
        if os.path.exists(p)
    ]
    if not headers:
        pytest.skip("no C headers here to read SYNC_FILE_RANGE_WRITE from")
    text = Path(headers[0]).read_text()
    value = re.search(r"#\s*define\s+SYNC_FILE_RANGE_WRITE\s+(\d+)", text)
    assert value and int(value.group(1)) == writeback._SYNC_FILE_RANGE_WRITE


def test_local_checkpoint_files_are_written_out_while_written(tmp_path, requests):
    data = os.urandom(3 * writeback.WRITEBACK_BYTES + 5)
    assert LocalStore().write_stream(str(tmp_path / "state.pt"), lambda h: h.write(data)) == len(data)
    assert (tmp_path / "state.pt").read_bytes() == data
    assert [(offset, length) for _, offset, length, _ in requests] == [
        (i * writeback.WRITEBACK_BYTES, writeback.WRITEBACK_BYTES) for i in range(3)
    ]


def test_the_module_example_runs():
    result = doctest.testmod(writeback)
    assert result.attempted > 0 and result.failed == 0
