"""HistoryWriter: JSONL that survives restarts without duplicates or gaps."""

from __future__ import annotations

import json
import math

from trainguard.runtime.history import HistoryWriter, read_history_records


def steps(path):
    return [(r["step"], r["split"]) for r in read_history_records(path.read_text())]


def test_records_are_written_per_line_with_nan_kept(tmp_path):
    path = tmp_path / "h.jsonl"
    with HistoryWriter(str(path)) as h:
        h.log(1, "train", epoch=0, loss=2.0)
        h.log(1, "val", epoch=0, loss=float("nan"), accuracy=0.1)
    records = read_history_records(path.read_text())
    assert records[0]["metrics"] == {"loss": 2.0}
    assert math.isnan(records[1]["metrics"]["loss"])


def test_resume_drops_records_after_the_checkpoint(tmp_path):
    path = tmp_path / "h.jsonl"
    h = HistoryWriter(str(path))
    for s in range(1, 8):
        h.log(s, loss=1.0 / s)
    h.close()  # crashed after step 7; the checkpoint was at step 5
    h = HistoryWriter(str(path), resume_step=5)
    for s in range(6, 9):
        h.log(s, loss=1.0 / s)
    h.close()
    assert [s for s, _ in steps(path)] == list(range(1, 9))


def test_a_fresh_run_starts_a_new_file(tmp_path):
    path = tmp_path / "h.jsonl"
    HistoryWriter(str(path)).log(1, loss=1.0)
    HistoryWriter(str(path)).close()
    assert path.read_text() == ""


def test_a_torn_last_line_is_skipped_on_resume(tmp_path):
    path = tmp_path / "h.jsonl"
    good = json.dumps({"step": 1, "split": "train", "metrics": {"loss": 1.0}})
    path.write_text(good + "\n" + '{"step": 2, "spl')
    h = HistoryWriter(str(path), resume_step=10)
    h.log(2, loss=0.5)
    h.close()
    assert steps(path) == [(1, "train"), (2, "train")]


def test_disabled_writer_on_non_chief_writes_nothing(tmp_path):
    path = tmp_path / "h.jsonl"
    HistoryWriter(str(path), enabled=False).log(1, loss=1.0)
    assert not path.exists()


def test_a_corrupt_line_in_the_middle_does_not_stop_a_resume(tmp_path, capsys):
    path = tmp_path / "h.jsonl"
    h = HistoryWriter(str(path))
    for s in range(1, 7):
        h.log(s, loss=1.0 / s)
    h.close()
    lines = path.read_text().splitlines()
    lines[2] = '{"step": 3, "split": "tr\x00\xff garbage'  # a torn write, then the run went on
    lines.insert(4, "[1, 2, 3]")  # valid JSON, not a record
    path.write_text("\n".join(lines) + "\n")
    h = HistoryWriter(str(path), resume_step=5)
    h.log(6, loss=0.1)
    h.close()
    assert [s for s, _ in steps(path)] == [1, 2, 4, 5, 6]
    assert "dropped 2 unreadable line(s) (line 3, 5)" in capsys.readouterr().err


def test_the_planned_steps_ride_on_the_next_record_once(tmp_path):
    from trainguard.guard.jsonl import PLANNED_STEPS_KEY

    path = tmp_path / "h.jsonl"
    with HistoryWriter(str(path)) as h:
        h.plan(300)
        h.log(5, "train", loss=2.0)
        h.log(10, "train", loss=1.9)
    first, second = read_history_records(path.read_text())
    assert first[PLANNED_STEPS_KEY] == 300 and first["metrics"] == {"loss": 2.0}
    assert PLANNED_STEPS_KEY not in second
