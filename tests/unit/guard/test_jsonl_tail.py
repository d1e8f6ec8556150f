"""The JSONL history parsed as it grows: half lines wait, garbage is an error, plans are read."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from trainguard.errors import HistoryError
from trainguard.guard.jsonl import MAX_LINE_BYTES, JsonlTail
from trainguard.validation import load_history

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "histories"


def line(step, split="train", **metrics) -> bytes:
    return (
        json.dumps({"step": step, "split": split, "metrics": metrics}, allow_nan=True, separators=(",", ":"))
        + "\n"
    ).encode()


@pytest.mark.parametrize("cut", [1, 7, 64, 333, 4096])
def test_fed_in_arbitrary_pieces_it_reads_what_the_reader_reads_whole(cut):
    data = (FIXTURES / "overfit" / "history.jsonl").read_bytes()
    tail = JsonlTail("h")
    for i in range(0, len(data), cut):
        tail.feed(data[i : i + cut])
    followed = tail.book.history("jsonl", "h")
    whole = load_history(FIXTURES / "overfit" / "history.jsonl")
    assert set(followed.series) == set(whole.series)
    for name, series in whole.series.items():
        np.testing.assert_array_equal(followed.series[name].steps, series.steps)
        np.testing.assert_array_equal(followed.series[name].values, series.values)
        assert followed.series[name].split == series.split
    assert tail.lines == data.count(b"\n") and tail.pending_bytes == 0


def test_a_half_written_last_line_waits_for_its_end():
    tail = JsonlTail("h")
    record = line(10, loss=float("nan"))
    added = tail.feed(line(5, loss=1.0) + record[:20])
    assert added.points == 1 and not added.non_finite and tail.pending_bytes == 20
    added = tail.feed(record[20:])
    assert added.points == 1 and added.non_finite
    assert math.isnan(tail.book.history("jsonl", "h").series["train/loss"].values[-1])


def test_garbage_is_an_error_naming_where():
    tail = JsonlTail("gs://b/h.jsonl")
    tail.feed(line(1, loss=1.0) + line(2, loss=0.9))
    with pytest.raises(HistoryError, match=r"gs://b/h.jsonl \(from line 3\).*not JSON"):
        tail.feed(b"\x00\x01 binary junk\n")


def test_a_line_that_never_ends_is_garbage():
    tail = JsonlTail("h")
    with pytest.raises(HistoryError, match="without a line end"):
        tail.feed(b"{" + b"x" * (MAX_LINE_BYTES + 1))


def test_records_without_metrics_and_the_plan_record_are_not_garbage():
    tail = JsonlTail("h")
    added = tail.feed(json.dumps({"step": 0, "split": "plan", "planned_steps": 30000}).encode() + b"\n")
    assert added.points == 0 and tail.planned_steps == 30000
    tail.feed(
        line(1, loss=2.0) + b'{"step": 2, "split": "train", "planned_steps": 40000, '
        b'"metrics": {"loss": 1.5}}\n'
    )
    assert tail.planned_steps == 40000 and tail.book.points == 2


def test_a_torn_last_line_at_the_end_of_the_job_is_dropped_with_a_note():
    tail = JsonlTail("h")
    tail.feed(line(1, loss=1.0) + b'{"step": 2, "spl')
    tail.feed(b"", final=True)
    assert tail.book.points == 1 and "truncated last line" in tail.book.notes[0]


def test_reset_forgets_everything():
    tail = JsonlTail("h")
    tail.feed(line(1, loss=1.0) + b'{"st')
    tail.reset()
    assert tail.book.points == 0 and tail.lines == 0 and tail.pending_bytes == 0
