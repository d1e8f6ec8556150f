"""Following a growing local file: only new bytes per read, rewrites detected, bounded reads."""

from __future__ import annotations

import os

import pytest

from trainguard.guard.follow import ANCHOR_BYTES, LocalFollower


def test_a_missing_file_is_none_and_each_read_returns_only_what_was_added(tmp_path):
    path = tmp_path / "history.jsonl"
    follower = LocalFollower(str(path))
    assert follower.read_new() is None
    path.write_bytes(b"first line\n")
    chunk = follower.read_new()
    assert (chunk.data, chunk.start, chunk.restarted) == (b"first line\n", 0, False)
    assert follower.read_new().data == b""  # nothing new: nothing read
    with open(path, "ab") as handle:
        handle.write(b"second li")
    chunk = follower.read_new()
    assert (chunk.data, chunk.start, chunk.restarted) == (b"second li", 11, False)


def test_cost_per_read_is_the_new_bytes_plus_a_small_anchor(tmp_path):
    path = tmp_path / "h"
    follower = LocalFollower(str(path))
    path.write_bytes(b"")
    total = 0
    for i in range(200):
        block = (f"{i:05d}" * 40 + "\n").encode()
        total += len(block)
        with open(path, "ab") as handle:
            handle.write(block)
        assert follower.read_new().data == block
    # Re-reading the file each time would be ~200 x 20 KB; following is the file once + anchors.
    assert follower.bytes_read <= total + 200 * ANCHOR_BYTES
    assert follower.offset == total == os.path.getsize(path)


def test_a_rewritten_file_is_read_again_from_its_start(tmp_path):
    path = tmp_path / "h"
    follower = LocalFollower(str(path))
    path.write_bytes(b"a" * 100 + b"\n")
    follower.read_new()
    # HistoryWriter on resume: the same head, a different tail, then longer than before.
    path.write_bytes(b"a" * 60 + b"\n" + b"b" * 80 + b"\n")
    chunk = follower.read_new()
    assert chunk.restarted and chunk.start == 0 and chunk.data == path.read_bytes()
    # Shorter than what was read: also a rewrite.
    path.write_bytes(b"c\n")
    chunk = follower.read_new()
    assert chunk.restarted and chunk.data == b"c\n"


def test_a_rewrite_that_keeps_the_prefix_is_plain_growth(tmp_path):
    # A gs:// HistoryWriter flush rewrites the whole object with the same lines plus new ones.
    path = tmp_path / "h"
    follower = LocalFollower(str(path))
    path.write_bytes(b"line 1\n")
    follower.read_new()
    path.write_bytes(b"line 1\nline 2\n")
    chunk = follower.read_new()
    assert (chunk.data, chunk.restarted) == (b"line 2\n", False)


def test_a_large_backlog_is_caught_up_over_several_reads(tmp_path):
    path = tmp_path / "h"
    path.write_bytes(b"x" * 1000)
    follower = LocalFollower(str(path), max_read=300)
    sizes = []
    while (chunk := follower.read_new()).data:
        sizes.append(len(chunk.data))
    assert max(sizes) <= 300 and sum(sizes) == 1000


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_history_path_that_is_no_regular_file_is_refused_without_blocking(tmp_path, kind):
    # A job that made its history path a FIFO once froze the launcher's poll loop in open():
    # the job ran on unwatched and `trainguard train` never returned.
    import os
    import threading

    from trainguard.guard.follow import FollowError, LocalFollower

    path = tmp_path / "history.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    box: dict = {}

    def poll() -> None:
        try:
            box["chunk"] = LocalFollower(str(path)).read_new()
        except FollowError as exc:
            box["error"] = exc

    worker = threading.Thread(target=poll, daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():
        with open(path, "wb"):  # frees the blocked open() so the suite goes on
            pass
        pytest.fail("reading the history blocked on a FIFO")
    assert "not a regular file" in str(box.get("error")) and not box["error"].transient
