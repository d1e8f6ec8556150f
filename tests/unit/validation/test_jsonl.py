"""The JSONL history reader: the vectorised path agrees with json, and bad input is named."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from trainguard.errors import HistoryError
from trainguard.validation import _jsonl, load_history, readers
from trainguard.validation._jsonl import parse_chunk_exact, parse_chunk_fast


def _dump(record: dict, style: str) -> str:
    if style == "compact":
        return json.dumps(record, separators=(",", ":"))
    if style == "spaced":
        return json.dumps(record)
    return json.dumps(record, separators=(" , ", " : "))


def _random_records(rng: random.Random, n: int) -> list[dict]:
    out = []
    for step in range(1, n + 1):
        metrics: dict[str, object] = {"loss": rng.choice([
            rng.random() * 3, rng.random() * 1e-8, -rng.random(), rng.randint(0, 5),
            math.nan, math.inf, -math.inf, 1e300, 5e-324])}
        if rng.random() < 0.5:
            metrics["accuracy"] = rng.random()
        if rng.random() < 0.1:
            metrics["note"] = rng.choice([None, True, "text", {"nested": 1}])
        if rng.random() < 0.1:
            metrics[f"a_rather_long_metric_name_{rng.randint(0, 3)}"] = rng.random()
        record: dict[str, object] = {"step": step, "epoch": rng.choice([step // 10, None]),
                                     "split": rng.choice(["train", "train", "val", "test"]),
                                     "time": 1732981000.5 + step, "metrics": metrics}
        if rng.random() < 0.1:
            del record["split"]  # defaults to train
        if rng.random() < 0.1:
            record["extra"] = {"host": "w-0", "rank": 0}
        out.append(record)
    return out


def _same(a, b) -> None:
    assert a.records == b.records
    assert set(a.groups) == set(b.groups)
    for key in a.groups:
        np.testing.assert_array_equal(a.groups[key][0], b.groups[key][0])
        np.testing.assert_array_equal(a.groups[key][1], b.groups[key][1])


@pytest.mark.parametrize("style", ["compact", "spaced", "odd"])
@pytest.mark.parametrize("seed", range(4))
def test_fast_path_reads_what_json_reads(style: str, seed: int) -> None:
    rng = random.Random(seed)
    text = "".join(_dump(r, style) + "\n" for r in _random_records(rng, 300))
    data = text.encode()
    fast = parse_chunk_fast(data)
    assert fast is not None, "plain records must take the vectorised path"
    _same(fast, parse_chunk_exact(data))


@pytest.mark.parametrize("line", [
    '{"step":1,"split":"tr\\"ain","metrics":{"loss":1.0}}',  # an escape
    '{"step":1,"split":"train","metrics":{"loss":[1.0]}}',  # an array
    '{"step":1,"split":"a:b,c{d}","metrics":{"loss":1.0}}',  # structure inside a string
    '{"step":1,"step":2,"metrics":{"loss":1.0}}',  # a repeated key: json keeps the last
    '{"step":1,"metrics":{"loss":1.0,"loss":2.0}}',
    '{"step":1,"metrics":{"loss":0x10}}',  # not JSON
    '{"step":1,"metrics":{"loss":nan}}',
    '{"step":1,"metrics":{"loss":1.2.3}}',
    '{"step":null,"metrics":{"loss":1.0}}',
    '[1, 2]',
    'garbage',
])
def test_anything_unusual_goes_to_json(line: str) -> None:
    data = ('{"step":0,"split":"train","metrics":{"loss":0.5}}\n' + line + "\n").encode()
    assert parse_chunk_fast(data) is None
    try:
        exact = parse_chunk_exact(data)
    except _jsonl.JsonlLineError as exc:
        assert exc.line == 2
    else:
        assert exact.records == 2


def test_non_finite_spellings(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text("".join(
        json.dumps({"step": i, "split": "train", "metrics": {"loss": v}}) + "\n"
        for i, v in enumerate([1.0, math.nan, math.inf, -math.inf, 2.0])))
    values = load_history(path).series["train/loss"].values
    assert values[0] == 1.0 and math.isnan(values[1]) and values[2] == math.inf
    assert values[3] == -math.inf and values[4] == 2.0


def test_chunk_boundaries_do_not_matter(tmp_path, monkeypatch) -> None:
    rng = random.Random(7)
    path = tmp_path / "h.jsonl"
    path.write_text("".join(_dump(r, "compact") + "\n" for r in _random_records(rng, 400)))
    whole = load_history(path)
    monkeypatch.setattr(readers, "CHUNK_BYTES", 97)  # lines straddle every chunk
    pieces = load_history(path)
    assert whole.series.keys() == pieces.series.keys()
    for name, series in whole.series.items():
        np.testing.assert_array_equal(series.values, pieces.series[name].values)
        np.testing.assert_array_equal(series.steps, pieces.series[name].steps)


def test_torn_last_line_is_skipped_with_a_note(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"step":1,"split":"train","metrics":{"loss":2.0}}\n'
                    '{"step":2,"split":"train","metrics":{"loss":1.5}}\n'
                    '{"step":3,"split":"train","metr')
    history = load_history(path)
    assert history.series["train/loss"].values.tolist() == [2.0, 1.5]
    assert any("truncated last line (line 3)" in note for note in history.notes)


def test_last_line_without_newline_is_kept(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"step":1,"metrics":{"loss":2.0}}\n{"step":2,"metrics":{"loss":1.0}}')
    assert load_history(path).series["train/loss"].values.tolist() == [2.0, 1.0]


def test_a_broken_line_mid_file_is_named(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"step":1,"metrics":{"loss":2.0}}\n{"step":2,"metr\n'
                    '{"step":3,"metrics":{"loss":1.0}}\n')
    with pytest.raises(HistoryError, match=r"h\.jsonl: line 2: not JSON"):
        load_history(path)


def test_a_record_without_step_is_named(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"step":1,"metrics":{"loss":2.0}}\n{"metrics":{"loss":1.0}}\n')
    with pytest.raises(HistoryError, match="line 2: the record has no numeric 'step'"):
        load_history(path)


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_empty_file(tmp_path, text: str) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text(text)
    with pytest.raises(HistoryError, match="empty"):
        load_history(path, format="jsonl")


def test_records_without_metrics(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"step":1,"metrics":{}}\n{"step":2}\n')
    with pytest.raises(HistoryError, match="2 record.* no numeric metric"):
        load_history(path)


def test_relogged_steps_keep_the_later_value(tmp_path) -> None:
    # A run restarted from step 2 without truncating its history logs steps 3-4 again.
    path = tmp_path / "h.jsonl"
    lines = [(1, 2.0), (2, 1.8), (3, 9.9), (4, 9.9), (3, 1.6), (4, 1.5), (5, 1.4)]
    path.write_text("".join(json.dumps({"step": s, "metrics": {"loss": v}}) + "\n"
                            for s, v in lines))
    history = load_history(path)
    series = history.series["train/loss"]
    assert series.steps.tolist() == [1, 2, 3, 4, 5]
    assert series.values.tolist() == [2.0, 1.8, 1.6, 1.5, 1.4]
    assert any("logged again" in note for note in history.notes)


def test_byte_order_mark_and_crlf(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"step":1,"metrics":{"loss":2.0}}\r\n'
                     b'{"step":2,"metrics":{"loss":1.0}}\r\n')
    assert load_history(path).series["train/loss"].values.tolist() == [2.0, 1.0]
