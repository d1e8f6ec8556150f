"""TensorBoard event files followed as they grow, named as the readers name them."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from trainguard.errors import HistoryError
from trainguard.guard.events import EventDirTail, EventRecords
from trainguard.validation import load_history

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "histories"


def grow(src_files: list[Path], src_root: Path, dst_root: Path, piece: int):
    """Copies event files piece by piece, yielding after each piece (a writer mid-record)."""
    data = {f: f.read_bytes() for f in src_files}
    offsets = dict.fromkeys(src_files, 0)
    while any(offsets[f] < len(data[f]) for f in src_files):
        for f in src_files:
            target = dst_root / f.relative_to(src_root)
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "ab") as handle:
                handle.write(data[f][offsets[f] : offsets[f] + piece])
            offsets[f] += piece
        yield


@pytest.mark.parametrize("layout", ["tb_keras", "tb_torch"])
def test_followed_event_files_give_the_series_the_reader_gives(tmp_path, layout):
    src = FIXTURES / "overfit" / layout
    files = sorted(p for p in src.rglob("*tfevents*"))
    tail = EventDirTail(str(tmp_path / "logs"))
    added, present = tail.read()
    assert added.points == 0 and not present  # no directory yet: nothing, not an error
    for _ in grow(files, src, tmp_path / "logs", piece=97):
        tail.read()
    followed = tail.book.history("tensorboard", "logs")
    whole = load_history(src)
    assert set(followed.series) == set(whole.series)
    for name, series in whole.series.items():
        got = followed.series[name]
        np.testing.assert_array_equal(got.steps, series.steps)
        np.testing.assert_allclose(got.values, series.values)
        assert (got.split, got.metric) == (series.split, series.metric)


def test_a_corrupt_event_file_is_garbage(tmp_path):
    records = EventRecords("events.out.tfevents.1")
    with pytest.raises(HistoryError, match="checksum"):
        records.feed(b"this is not a tfrecord at all, just text\n")


def test_a_record_cut_mid_way_waits_for_its_end(tmp_path):
    src = next((FIXTURES / "nan" / "tb_torch").glob("*tfevents*"))
    data = src.read_bytes()
    records = EventRecords(src.name)
    first = records.feed(data[:30])
    rest = records.feed(data[30:])
    assert len(first) + len(rest) == records.records > 1


def test_a_new_event_file_after_a_restart_is_followed_too(tmp_path):
    src = FIXTURES / "healthy" / "tb_torch"
    (event,) = src.glob("*tfevents*")
    logs = tmp_path / "logs"
    logs.mkdir()
    tail = EventDirTail(str(logs))
    shutil.copy(event, logs / event.name)
    first, _ = tail.read()
    shutil.copy(event, logs / (event.name + ".restart"))  # the restarted run logs again
    second, present = tail.read()
    assert present and first.points == second.points > 0
    assert tail.files == 2


def test_a_tag_named_like_a_credential_is_followed_redacted(tmp_path):
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path / "logs" / "train"))
    for step in range(1, 6):
        writer.add_event(
            event_pb2.Event(
                step=step,
                summary=summary_pb2.Summary(
                    value=[
                        summary_pb2.Summary.Value(tag="loss", simple_value=1 / step),
                        summary_pb2.Summary.Value(tag="ghp_" + "s" * 36, simple_value=1.0),
                    ]
                ),
            )
        )
    writer.close()
    tail = EventDirTail(str(tmp_path / "logs"))
    tail.read()
    names = sorted(tail.book.history("tensorboard", "logs").series)
    assert names == ["train/[REDACTED]", "train/loss"]
