"""The JSONL history reader: pyarrow reads what json reads, or hands the block to json; bad input
is named by its line; torn, empty, huge and hostile input gives a HistoryError."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from trainguard.errors import HistoryError
from trainguard.validation import collect, load_history
from trainguard.validation.jsonl_reader import LineError, parse_lines_arrow, parse_lines_json
from trainguard.validation.readers import read_jsonl_bytes


def _dump(record: dict, style: str) -> str:
    if style == "compact":
        return json.dumps(record, separators=(",", ":"))
    if style == "spaced":
        return json.dumps(record)
    return json.dumps(record, separators=(" , ", " : "))


def _random_records(rng: random.Random, n: int) -> list[dict]:
    out = []
    for step in range(1, n + 1):
        metrics: dict[str, object] = {
            "loss": rng.choice(
                [
                    rng.random() * 3,
                    rng.random() * 1e-8,
                    -rng.random(),
                    rng.randint(0, 5),
                    math.nan,
                    math.inf,
                    -math.inf,
                    1e300,
                    5e-324,
                    2**53 + 1,
                    10**30,
                ]
            )
        }
        if rng.random() < 0.5:
            metrics["accuracy"] = rng.random()
        if rng.random() < 0.1:
            metrics["note"] = rng.choice([None, "text"])
        if rng.random() < 0.1:
            metrics[f"a_rather_long_metric_name_{rng.randint(0, 3)}"] = rng.random()
        record: dict[str, object] = {
            "step": step,
            "epoch": rng.choice([step // 10, None]),
            "split": rng.choice(["train", "train", "val", "tést"]),
            "time": 1732981000.5 + step,
            "metrics": metrics,
        }
        if rng.random() < 0.1:
            del record["split"]  # defaults to train
        if rng.random() < 0.05:
            record["split"] = None  # so does null
        if rng.random() < 0.1:
            record["extra"] = {"host": "w-0", "rank": 0}
        out.append(record)
    return out


def _same(a, b) -> None:
    assert a.records == b.records and a.lines == b.lines
    assert [g[:2] for g in a.groups] == [g[:2] for g in b.groups]
    for (_, _, sa, va), (_, _, sb, vb) in zip(a.groups, b.groups, strict=True):
        np.testing.assert_array_equal(sa, sb)
        np.testing.assert_array_equal(va, vb)


@pytest.mark.parametrize("style", ["compact", "spaced", "odd"])
@pytest.mark.parametrize("seed", range(4))
def test_arrow_reads_what_json_reads(style: str, seed: int) -> None:
    rng = random.Random(seed)
    data = "".join(_dump(r, style) + "\n" for r in _random_records(rng, 300)).encode()
    fast = parse_lines_arrow(data)
    assert fast is not None, "plain records must take the pyarrow path"
    _same(fast, parse_lines_json(data))


@pytest.mark.parametrize(
    "line",
    [
        '{"step":1,"step":2,"metrics":{"loss":1.0}}',  # a repeated key: json keeps the last
        '{"step":1,"metrics":{"loss":1.0,"loss":2.0}}',
        '{"step":1,"metrics":{"loss":1e999}}',  # json: inf; pyarrow: too big
        '{"step":1,"metrics":{"loss":"1.5"}}',  # a type change within the column
        '{"step":1,"metrics":{"loss":true}}',
        '{"step":1,"metrics":{"loss":{"nested":1}}}',
        '{"step":1,"split":"tr\\"ain","metrics":{"loss":1.0}}',  # an escape
        '{"step":1,"split":"\\ud800","metrics":{"loss":1.0}}',  # a lone surrogate
        '{"step":1,"metrics":{"loss":1.0}} {"step":1,"metrics":{"loss":1.0}}',  # two on a line
        '{"step":1,"metrics":5}',
        '{"step":1,"metrics":null}',
        '{"step":"1","metrics":{"loss":1.0}}',
        '{"step":1,"split":7,"metrics":{"loss":1.0}}',
        '{"metrics":{"loss":1.0}}',
        '{"step":null,"metrics":{"loss":1.0}}',
        '{"step":NaN,"metrics":{"loss":1.0}}',
        '{"step":1,"metrics":{"loss":0x10}}',  # not JSON
        '{"step":1,"metrics":{"loss":nan}}',
        '{"step":1,"metrics":{"loss":Inf}}',  # pyarrow takes it, json does not
        '{"step":1,"metrics":{"loss":-NaN}}',
        '{"step":1,"metrics":{"loss":1.2.3}}',
        '{"step":1,"metrics":{"loss":1.0},}',
        '  {"step":1,"metrics":{"loss":1.0}}',
        '{"step":1,\r"metrics":{"loss":1.0}}',
        '{"step":1,"metrics":{"loss":1.0}}\x00',
        '{"step":1,"x":' + "[" * 20000 + "]" * 20000 + ',"metrics":{"loss":1.0}}',  # deep nesting
        "[1, 2]",
        "5",
        "garbage",
    ],
)
def test_arrow_agrees_with_json_or_steps_aside(line: str) -> None:
    data = ('{"step":0,"split":"train","metrics":{"loss":0.5}}\n' + line + "\n").encode()
    fast = parse_lines_arrow(data)
    try:
        exact = parse_lines_json(data)
    except LineError as exc:
        assert exc.line == 2
        assert fast is None, "pyarrow accepted a line json refuses"
    else:
        if fast is not None:
            _same(fast, exact)


def test_a_record_listing_its_keys_in_another_order_keeps_jsons_series_order() -> None:
    # Found by the fuzzer: the block's schema lists "acc" before "loss" (the first record has no
    # "loss"), the first train record lists "loss" first; the report lists series as json meets them.
    data = (
        b'{"step":0,"split":"val","metrics":{"acc":0.1,"val_loss":0.2}}\n'
        b'{"step":1,"split":"train","metrics":{"loss":0.3,"acc":0.4}}\n'
        b'{"step":2,"split":"train","metrics":{"acc":0.5,"loss":0.6}}\n'
    )
    fast = parse_lines_arrow(data)
    assert fast is not None
    assert [g[:2] for g in fast.groups] == [
        ("val", "acc"),
        ("val", "val_loss"),
        ("train", "loss"),
        ("train", "acc"),
    ]
    _same(fast, parse_lines_json(data))


def test_not_utf8_goes_to_json() -> None:
    data = b'{"step":1,"split":"\xff","metrics":{"loss":1.0}}\n'
    assert parse_lines_arrow(data) is None
    with pytest.raises(LineError, match="not UTF-8"):
        parse_lines_json(data)


def test_non_finite_spellings(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text(
        "".join(
            json.dumps({"step": i, "split": "train", "metrics": {"loss": v}}) + "\n"
            for i, v in enumerate([1.0, math.nan, math.inf, -math.inf, 2.0])
        )
    )
    values = load_history(path).series["train/loss"].values
    assert values[0] == 1.0 and math.isnan(values[1]) and values[2] == math.inf
    assert values[3] == -math.inf and values[4] == 2.0


def test_chunk_boundaries_do_not_matter(tmp_path, monkeypatch) -> None:
    rng = random.Random(7)
    path = tmp_path / "h.jsonl"
    path.write_text("".join(_dump(r, "compact") + "\n" for r in _random_records(rng, 400)))
    whole = load_history(path)
    monkeypatch.setattr(collect, "READ_BYTES", 97)  # lines straddle every block
    monkeypatch.setattr(collect, "CHUNK_BYTES", 50)  # and every parse chunk is one line
    pieces = load_history(path)
    assert list(whole.series) == list(pieces.series)
    for name, series in whole.series.items():
        np.testing.assert_array_equal(series.values, pieces.series[name].values)
        np.testing.assert_array_equal(series.steps, pieces.series[name].steps)


def test_torn_last_line_is_skipped_with_a_note(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text(
        '{"step":1,"split":"train","metrics":{"loss":2.0}}\n'
        '{"step":2,"split":"train","metrics":{"loss":1.5}}\n'
        '{"step":3,"split":"train","metr'
    )
    history = load_history(path)
    assert history.series["train/loss"].values.tolist() == [2.0, 1.5]
    assert any("truncated last line (line 3)" in note for note in history.notes)


def test_last_line_without_newline_is_kept(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"step":1,"metrics":{"loss":2.0}}\n{"step":2,"metrics":{"loss":1.0}}')
    assert load_history(path).series["train/loss"].values.tolist() == [2.0, 1.0]


def test_a_broken_line_mid_file_is_named(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"step":1,"metrics":{"loss":2.0}}\n{"step":2,"metr\n{"step":3,"metrics":{"loss":1.0}}\n')
    with pytest.raises(HistoryError, match=r"h\.jsonl: line 2: not JSON"):
        load_history(path)


def test_the_line_is_named_in_a_later_block(tmp_path, monkeypatch) -> None:
    path = tmp_path / "h.jsonl"
    good = '{"step":%d,"metrics":{"loss":1.0}}\n'
    path.write_text(
        "".join(good % i for i in range(1, 500))
        + '{"step":500,"metrics":{"loss":tru}}\n'
        + "".join(good % i for i in range(501, 600))
    )
    monkeypatch.setattr(collect, "READ_BYTES", 3000)
    monkeypatch.setattr(collect, "CHUNK_BYTES", 1000)
    with pytest.raises(HistoryError, match="line 500: not JSON"):
        load_history(path)


def test_two_records_on_one_line_are_an_error(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text(
        '{"step":1,"metrics":{"loss":2.0}} {"step":2,"metrics":{"loss":1.0}}\n'
        '{"step":3,"metrics":{"loss":1.0}}\n'
    )
    with pytest.raises(HistoryError, match="line 1: not JSON"):
        load_history(path)


def test_a_record_without_step_is_named(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"step":1,"metrics":{"loss":2.0}}\n{"metrics":{"loss":1.0}}\n')
    with pytest.raises(HistoryError, match="line 2: the record has no numeric 'step'"):
        load_history(path)


def test_null_split_is_train_and_null_metrics_no_points(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text(
        '{"step":1,"split":null,"metrics":{"loss":2.0}}\n'
        '{"step":2,"split":"train","metrics":null}\n'
        '{"step":3,"metrics":{"loss":1.0}}\n'
    )
    history = load_history(path)
    assert history.series["train/loss"].steps.tolist() == [1, 3]
    assert history.records == 3


def test_an_integer_past_float_range_is_infinite(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"step":1,"metrics":{"loss":1.0}}\n{"step":2,"metrics":{"loss":1%s}}\n' % ("0" * 400))
    assert load_history(path).series["train/loss"].values.tolist() == [1.0, math.inf]


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
    path.write_text("".join(json.dumps({"step": s, "metrics": {"loss": v}}) + "\n" for s, v in lines))
    history = load_history(path)
    series = history.series["train/loss"]
    assert series.steps.tolist() == [1, 2, 3, 4, 5]
    assert series.values.tolist() == [2.0, 1.8, 1.6, 1.5, 1.4]
    assert "train/loss: 2 point(s) at a step logged again with another value were replaced" in " ".join(
        history.notes
    )


def test_a_step_logged_again_with_the_same_value_is_no_restart(tmp_path) -> None:
    # Lightning logs `epoch` at one step beside its training and its validation metrics.
    path = tmp_path / "h.jsonl"
    lines = [(1, 0.0), (1, 0.0), (2, 1.0), (2, 1.0), (3, 2.0), (3, 2.0)]
    path.write_text("".join(json.dumps({"step": s, "metrics": {"epoch": v}}) + "\n" for s, v in lines))
    history = load_history(path)
    assert history.series["train/epoch"].values.tolist() == [0.0, 1.0, 2.0]
    assert not any("logged again" in note for note in history.notes)


def test_byte_order_mark_and_crlf(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(
        b'\xef\xbb\xbf{"step":1,"metrics":{"loss":2.0}}\r\n{"step":2,"metrics":{"loss":1.0}}\r\n'
    )
    assert load_history(path).series["train/loss"].values.tolist() == [2.0, 1.0]


def test_a_line_without_end_is_refused_without_reading_it_all(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(b'{"step":1,"metrics":{"loss":2.0}}\n{"step": "' + b"x" * (3 << 20))
    with pytest.raises(HistoryError, match="1 MiB without a line end"):
        load_history(path)


def test_read_jsonl_bytes_names_its_source() -> None:
    history = read_jsonl_bytes(
        b'{"step":1,"metrics":{"loss":2.0}}\n{"step":2,"metr', "gs://b/h.jsonl (from line 10)"
    )
    assert history.source == "gs://b/h.jsonl (from line 10)"
    assert history.series["train/loss"].values.tolist() == [2.0]
    with pytest.raises(HistoryError, match=r"\(from line 10\): line 1: not JSON"):
        read_jsonl_bytes(b"{oops}\n", "gs://b/h.jsonl (from line 10)")


def test_too_many_series_is_not_a_history(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(collect, "MAX_SERIES", 50)
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps({"step": i, "metrics": {f"m{i}": 1.0}}) + "\n" for i in range(60)))
    with pytest.raises(HistoryError, match="more than 50 distinct series"):
        load_history(path)


def test_overlong_names_are_left_out_with_a_note(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    long_name = "x" * 5000
    path.write_text(
        "".join(json.dumps({"step": i, "metrics": {"loss": 1.0, long_name: 2.0}}) + "\n" for i in range(3))
    )
    history = load_history(path)
    assert list(history.series) == ["train/loss"]
    assert any("ignored 1 series with names longer than" in note for note in history.notes)


def test_a_record_with_many_metrics_stays_on_the_arrow_path() -> None:
    metrics = {f"layer_{i}_grad_norm": i / 7 for i in range(300)}
    data = "".join(
        json.dumps({"step": s, "split": "train", "metrics": metrics}) + "\n" for s in range(5)
    ).encode()
    fast = parse_lines_arrow(data)
    assert fast is not None and len(fast.groups) == 300
    _same(fast, parse_lines_json(data))


@pytest.mark.parametrize("opens", ["[", '{"a":'])
def test_deep_nesting_in_a_long_line_goes_to_json(opens: str) -> None:
    closes = "]" if opens == "[" else "}"
    line = '{"step":1,"x":' + opens * 300 + "1" + closes * 300 + ',"metrics":{"loss":1.0}}'
    data = (line + "\n").encode()
    assert parse_lines_arrow(data) is None
    assert parse_lines_json(data).records == 1


@pytest.mark.parametrize("read,chunk", [(7, 5), (64, 1000), (1000, 64), (3, 1)])
def test_whole_lines_cut_only_at_line_ends(monkeypatch, read: int, chunk: int) -> None:
    monkeypatch.setattr(collect, "CHUNK_BYTES", chunk)
    rng = random.Random(read * chunk)
    data = b"".join(rng.choice([b"a", b"bb\r", b"", b"x" * 150]) + b"\n" for _ in range(300))
    data += b"torn"
    tail = collect.Tail()
    pieces = list(collect.whole_lines(collect.bytes_blocks(data, read), "h", tail))
    assert b"".join(pieces) + tail.data == data and tail.data == b"torn"
    assert all(p.endswith(b"\n") and len(p) <= max(chunk, 151) for p in pieces)


def test_an_integer_of_thousands_of_digits_reads_as_pyarrow_reads_it() -> None:
    # json refuses ints past 4300 digits (ValueError) where pyarrow reads inf: the json path
    # once said "not UTF-8 text" for such a line, which it was.
    data = b'{"step": 1' + b"0" * 5000 + b', "metrics": {"loss": 1' + b"0" * 5000 + b"}}\n"
    fast, exact = parse_lines_arrow(data), parse_lines_json(data)
    assert fast is not None
    _same(fast, exact)
    assert exact.groups[0][2].tolist() == [math.inf] and exact.groups[0][3].tolist() == [math.inf]


def test_a_line_that_is_not_utf8_says_so(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(b'{"step": 1, "metrics": {"loss": 1}, "note": "\xff\xfe"}\n')
    with pytest.raises(HistoryError, match=r"line 1: not JSON \(not UTF-8 text"):
        load_history(path)
