"""Readers: Keras and Lightning CSV, TensorBoard event files, directories and gs:// URIs."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import socket
from pathlib import Path

import numpy as np
import pytest

from trainguard.errors import ConfigError, HistoryError
from trainguard.runtime import storage
from trainguard.validation import load_history, select_series, validate
from trainguard.validation.csv_reader import _Irregular, read_csv_arrow, read_csv_exact

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "histories"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- Keras CSV ---------------------------------------------------------------------------------


def test_keras_csv_reads_epochs_and_splits(tmp_path) -> None:
    path = write(
        tmp_path,
        "log.csv",
        "epoch,accuracy,loss,val_accuracy,val_loss\n"
        "0,0.5,2.0,0.6,1.9\n1,0.7,1.5,0.7,1.6\n2,0.8,nan,0.75,inf\n",
    )
    history = load_history(path)
    assert history.format == "keras_csv" and history.x_label == "epoch"
    train, val = select_series(history)
    assert (train.name, val.name) == ("loss", "val_loss")
    assert train.steps.tolist() == [0, 1, 2]
    assert math.isnan(train.values[2]) and val.values[2] == math.inf
    assert history.series["val_accuracy"].split == "val"


def test_non_numeric_cell_names_line_and_column(tmp_path) -> None:
    path = write(tmp_path, "log.csv", "epoch,loss,val_loss\n0,2.0,1.9\n1,oops,1.6\n2,1.0,1.4\n")
    with pytest.raises(HistoryError, match=r"line 3, column 'loss': 'oops' is not a number"):
        load_history(path)


def test_a_text_column_is_ignored_with_a_note(tmp_path) -> None:
    path = write(tmp_path, "log.csv", "epoch,loss,phase\n0,2.0,warmup\n1,1.5,main\n")
    history = load_history(path)
    assert "phase" not in history.series
    assert any("ignored column 'phase'" in note for note in history.notes)


def test_truncated_last_row_is_skipped(tmp_path) -> None:
    path = write(tmp_path, "log.csv", "epoch,loss,val_loss\n0,2.0,1.9\n1,1.5,1.6\n2,1.")
    history = load_history(path)
    assert history.series["loss"].values.tolist() == [2.0, 1.5]
    assert any("truncated last line (line 4" in note for note in history.notes)


def test_short_row_mid_file_is_an_error(tmp_path) -> None:
    path = write(tmp_path, "log.csv", "epoch,loss,val_loss\n0,2.0\n1,1.5,1.6\n")
    with pytest.raises(HistoryError, match="line 2: 2 cells where the header has 3"):
        load_history(path)


@pytest.mark.parametrize(
    "text, by",
    [
        # pd.DataFrame(history.history).to_csv(path, index=False): the columns, a row per epoch
        ("accuracy,loss,val_accuracy,val_loss\n0.5,2.0,0.4,1.9\n0.6,1.5,0.5,1.6\n0.7,1.2,0.6,1.4\n", "rows"),
        # ... and to_csv's default: pandas' index as an unnamed first column
        (",loss,val_loss,acc,val_acc\n0,2.0,1.9,0.5,0.4\n1,1.5,1.6,0.6,0.5\n2,1.2,1.4,0.7,0.6\n", "index"),
    ],
)
def test_a_keras_history_without_an_epoch_column_is_read_by_row(tmp_path, text: str, by: str) -> None:
    path = write(tmp_path, "training_history.csv", text)
    history = load_history(path)  # no flags
    assert history.format == "keras_csv"
    assert history.series["val_loss"].steps.tolist() == [0.0, 1.0, 2.0]
    assert history.series["loss"].values.tolist() == [2.0, 1.5, 1.2]
    word = "by the unnamed index column" if by == "index" else "in the order of the rows"
    assert any("no 'epoch' column" in note and word in note for note in history.notes)
    # The csv module (a quoted cell sends a file to it) reads it the same way.
    quoted = text.replace("1.5", '"1.5"')
    exact = read_csv_exact(iter([quoted.encode()]), str(path), "keras_csv")
    assert (exact.notes, exact.records) == (history.notes, history.records)
    for name, series in history.series.items():
        np.testing.assert_array_equal(series.steps, exact.series[name].steps)
        np.testing.assert_array_equal(series.values, exact.series[name].values)


def test_a_csv_with_no_epoch_step_or_loss_is_refused(tmp_path) -> None:
    # A results table (one row per model) is no history: nothing in it names a loss.
    path = write(tmp_path, "log.csv", "Model,RMSE,MAE\nforest,4.7,3.8\nxgboost,4.6,3.7\n")
    with pytest.raises(HistoryError, match="without an 'epoch' or a 'step' column, nor a loss"):
        load_history(path)
    with pytest.raises(HistoryError, match="no 'step' column"):
        load_history(write(tmp_path, "metrics.csv", "loss,val_loss\n2.0,1.9\n"), format="lightning_csv")


def test_header_only(tmp_path) -> None:
    path = write(tmp_path, "log.csv", "epoch,loss,val_loss\n")
    with pytest.raises(HistoryError, match="a header but no rows"):
        load_history(path)


def test_repeated_header_is_skipped(tmp_path) -> None:
    path = write(tmp_path, "log.csv", "epoch,loss\n0,2.0\nepoch,loss\n1,1.0\n")
    assert load_history(path).series["loss"].values.tolist() == [2.0, 1.0]


def _csv_cells(rng: random.Random) -> str:
    return rng.choice(
        [
            repr(rng.random()),
            repr(-rng.random() * 1e-9),
            str(rng.randint(0, 9)),
            "nan",
            "NaN",
            "inf",
            "-inf",
            "Infinity",
            "1e300",
            "5e-324",
            "1E5",
            " 0.5",
            "",
            "",
            "9007199254740993",
            "0.30000000000000004",
        ]
    )


@pytest.mark.parametrize("fmt", ["keras_csv", "lightning_csv"])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_arrow_csv_reads_what_the_csv_module_reads(fmt: str, seed: int, ending: str) -> None:
    rng = random.Random(seed)
    header = (
        ["epoch", "loss", "val_loss", "lr"]
        if fmt == "keras_csv"
        else ["epoch", "step", "train_loss_step", "val_loss", "val_acc"]
    )
    rows = []
    for i in range(400):
        x = [str(i)] if fmt == "keras_csv" else [str(i // 50), str(i * 7)]
        rows.append(",".join(x + [_csv_cells(rng) for _ in header[len(x) :]]))
    text = ending.join([",".join(header), *rows]) + rng.choice([ending, "", ending + ending])
    data = text.encode()
    fast = read_csv_arrow(iter([data]), "log.csv", fmt)
    exact = read_csv_exact(iter([data]), "log.csv", fmt)
    assert list(fast.series) == list(exact.series)
    assert (fast.records, fast.notes) == (exact.records, exact.notes)
    for name, series in exact.series.items():
        np.testing.assert_array_equal(series.steps, fast.series[name].steps)
        np.testing.assert_array_equal(series.values, fast.series[name].values)


@pytest.mark.parametrize(
    "blocks",
    [
        # val_loss holds its first value only in the last line, which has no line end
        [b"epoch,loss,val_loss,accuracy\n0,0.5,,0.1\n1,0.4,0.45,0.2"],
        # ... or only in a later batch: validation after a long first epoch
        [
            b"epoch,loss,val_loss,accuracy\n" + b"".join(b"%d,0.5,,0.1\n" % i for i in range(50)),
            b"50,0.4,0.45,0.2\n",
        ],
    ],
)
def test_arrow_csv_keeps_the_header_s_order_of_series(blocks: list[bytes]) -> None:
    fast = read_csv_arrow(iter(blocks), "log.csv", "keras_csv")
    assert list(fast.series) == ["loss", "val_loss", "accuracy"]
    assert list(fast.series) == list(read_csv_exact(iter(blocks), "log.csv", "keras_csv").series)


@pytest.mark.parametrize(
    "text",
    [
        'epoch,loss\n0,"1.5"\n1,2.0\n',  # quoted
        "epoch,loss\n0,1.5\repoch,loss\n1,2.0\n",  # a bare carriage return
        "epoch,loss\n0,nan(1)\n",  # float() refuses what strtod takes
        "epoch,loss\n0,1_000\n",  # float() takes what pyarrow refuses
        "epoch,loss\n0,1.5\nepoch,loss\n1,2.0\n",  # a repeated header
        "epoch,loss\n0,1.5\n,\n1,2.0\n",  # a row of empty cells
        "epoch,loss,loss\n0,1.5,2.5\n",  # two columns, one name
        "epoch,loss,phase\n0,1.5,warmup\n",  # a text column
        "epoch,loss\n0,1.5\n1\n",  # a short last row with its line end
    ],
)
def test_irregular_csv_is_read_by_the_csv_module(tmp_path, text: str) -> None:
    path = write(tmp_path, "log.csv", text)
    with pytest.raises(_Irregular):
        read_csv_arrow(iter([text.encode()]), str(path), "keras_csv")

    def outcome(read) -> tuple:
        try:
            history = read()
        except HistoryError as exc:
            return ("error", str(exc))
        return ("read", list(history.series), history.notes, history.points)

    exact = outcome(lambda: read_csv_exact(iter([text.encode()]), str(path), "keras_csv"))
    assert outcome(lambda: load_history(path)) == exact


# --- CSV layouts: separators, a title line ------------------------------------------------------

KERAS_ROWS = [["epoch", "loss", "val_loss"], ["0", "1.2", "1.3"], ["1", "0.9", "1.1"], ["2", "0.7", "1.0"]]


def _joined(sep: str, rows: list[list[str]] = KERAS_ROWS) -> str:
    return "".join(sep.join(row) + "\n" for row in rows)


@pytest.mark.parametrize(
    ("sep", "said"), [(";", "cells separated by ';'"), ("\t", "cells separated by tabs")]
)
def test_a_keras_log_with_another_separator_reads_as_the_comma_one(tmp_path, sep: str, said: str) -> None:
    # Keras' CSVLogger(separator=";") and pandas' to_csv(sep="\t") write these.
    comma = load_history(write(tmp_path, "a.csv", _joined(",")))
    other = load_history(write(tmp_path, "b.csv", _joined(sep)))
    assert other.format == "keras_csv" and said in other.notes
    assert list(other.series) == list(comma.series) == ["loss", "val_loss"]
    for name, series in comma.series.items():
        assert other.series[name].values.tolist() == series.values.tolist()
        assert other.series[name].steps.tolist() == series.steps.tolist()


def test_a_pandas_history_with_semicolons_and_no_epoch_column_is_read(tmp_path) -> None:
    text = ";loss;val_loss\n0;1.2;1.3\n1;0.9;1.1\n2;0.7;1.0\n"  # to_csv(sep=";"), index included
    history = load_history(write(tmp_path, "history.csv", text))
    assert history.series["val_loss"].steps.tolist() == [0, 1, 2]
    assert history.series["val_loss"].values.tolist() == [1.3, 1.1, 1.0]


def test_a_title_line_above_the_header_is_skipped_with_a_note(tmp_path) -> None:
    path = write(tmp_path, "model_history_log.csv", "model_history_log\n" + _joined(";"))
    history = load_history(path)
    assert history.records == 3 and history.series["loss"].values.tolist() == [1.2, 0.9, 0.7]
    assert history.notes[0] == "skipped line 1, 'model_history_log': a title above the header"
    # Lines keep their numbers in messages: the bad cell is on the file's fifth line.
    bad = write(tmp_path, "bad.csv", "run 7\n" + _joined(",", [*KERAS_ROWS[:3], ["2", "oops", "1.0"]]))
    with pytest.raises(HistoryError, match=r"line 5, column 'loss': 'oops' is not a number"):
        load_history(bad)


@pytest.mark.parametrize(
    "text",
    [
        "loss\n0.5\n0.4\n",  # one column: its name is no title
        "7\nepoch,loss\n0,0.5\n",  # a number above the header is not a title: refused
    ],
)
def test_a_first_line_is_a_title_only_when_it_reads_as_one(tmp_path, text: str) -> None:
    path = write(tmp_path, "log.csv", text)
    try:
        history = load_history(path, "keras_csv")
    except HistoryError as exc:
        assert "a title above" not in str(exc)
        return
    assert not any("a title above" in note for note in history.notes)


def test_an_empty_extra_cell_in_every_row_is_dropped_not_shifted_into_the_next_column() -> None:
    # Real Flair loss.tsv logs: 19 header cells, 20 in every row (an empty one after TRAIN_LOSS);
    # another puts it after DEV_LOSS. Read as written, every later value sits under the wrong name.
    real = FIXTURES.parent / "real_histories" / "files"
    flair = load_history(real / "ostjen__mood-dj" / "loss.tsv")
    assert "rows hold one cell more than the header, an empty one after 'TRAIN_LOSS': dropped" in flair.notes
    assert flair.series["DEV_LOSS"].values[0] == pytest.approx(0.01357106864452362)
    assert flair.series["DEV_PRECISION"].values[0] == pytest.approx(0.7966)
    other = load_history(real / "Doutrope__textdigger-webapp" / "model" / "loss.tsv")
    assert other.series["DEV_LOSS"].values[0] == pytest.approx(15.851984024047852)
    assert other.series["DEV_ACCURACY"].values[0] == pytest.approx(0.9562)


def test_a_decimal_comma_is_refused_with_what_to_do(tmp_path) -> None:
    # A spreadsheet in a German or French locale: to_csv(sep=";", decimal=",").
    path = write(tmp_path, "log.csv", "epoch;loss;val_loss\n0;1,2;1,3\n1;0,9;1,1\n")
    for fmt in (None, "keras_csv"):
        with pytest.raises(
            HistoryError, match=r"line 2: '1,2' is a number with a decimal comma.*decimal='\.'"
        ):
            load_history(path, fmt)


@pytest.mark.parametrize("title", ["", "model_history_log\n"])
@pytest.mark.parametrize("sep", [";", "\t"])
@pytest.mark.parametrize("fmt", ["keras_csv", "lightning_csv"])
def test_arrow_reads_other_layouts_as_the_csv_module(title: str, sep: str, fmt: str) -> None:
    rng = random.Random(7)
    header = ["epoch", "loss", "val_loss"] if fmt == "keras_csv" else ["epoch", "step", "loss", "val_loss"]
    rows = [header]
    for i in range(300):
        x = [str(i)] if fmt == "keras_csv" else [str(i // 30), str(i * 3)]
        rows.append(x + [_csv_cells(rng) for _ in header[len(x) :]])
    data = (title + _joined(sep, rows)).encode()
    fast = read_csv_arrow(iter([data]), "log.csv", fmt)
    exact = read_csv_exact(iter([data]), "log.csv", fmt)
    assert (fast.records, fast.notes) == (exact.records, exact.notes)
    assert list(fast.series) == list(exact.series) and len(fast.series) == len(header) - len(x)
    for name, series in exact.series.items():
        np.testing.assert_array_equal(series.values, fast.series[name].values)


# --- Lightning CSV -----------------------------------------------------------------------------


def test_lightning_sparse_rows(tmp_path) -> None:
    path = write(
        tmp_path,
        "metrics.csv",
        "epoch,step,train_loss_epoch,train_loss_step,val_loss\n"
        "0,49,,2.1,\n0,99,,1.8,\n0,107,,,1.7\n0,107,1.95,,\n"
        "1,149,,1.5,\n1,199,,1.4,\n1,215,,,1.45\n1,215,1.45,,\n",
    )
    history = load_history(path)
    assert history.format == "lightning_csv"
    train, val = select_series(history)
    assert train.name == "train_loss_step" and train.granularity == "step"
    assert train.steps.tolist() == [49, 99, 149, 199]
    assert val.name == "val_loss" and val.steps.tolist() == [107, 215]
    # Asking for the per-epoch series by its name works too.
    train, _ = select_series(history, train_metric="train_loss_epoch")
    assert train.values.tolist() == [1.95, 1.45]


def test_a_directory_with_a_lightning_log(tmp_path) -> None:
    run = tmp_path / "lightning_logs" / "version_0"
    run.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "overfit" / "metrics.csv", run / "metrics.csv")
    verdict = validate(tmp_path)
    assert verdict.series["format"] == "lightning_csv"
    assert verdict.failure_class == "overfit"


# --- TensorBoard -------------------------------------------------------------------------------


def test_keras_tensorboard_tensors_pair_epoch_series() -> None:
    history = load_history(FIXTURES / "healthy" / "tb_keras")
    train, val = select_series(history)
    assert (train.name, val.name) == ("train/epoch_loss", "validation/epoch_loss")
    assert train.granularity == val.granularity == "epoch"
    # The per-iteration evaluation series is read but not mistaken for the validation loss.
    assert "validation/evaluation_loss_vs_iterations" in history.series
    keras = load_history(FIXTURES / "healthy" / "keras_log.csv")
    np.testing.assert_allclose(val.values, keras.series["val_loss"].values, rtol=1e-6)


def test_torch_tensorboard_simple_values_match_the_jsonl() -> None:
    tb = load_history(FIXTURES / "nan" / "tb_torch")
    jsonl = load_history(FIXTURES / "nan" / "history.jsonl")
    a, b = tb.series["train/loss"], jsonl.series["train/loss"]
    np.testing.assert_array_equal(a.steps, b.steps)
    finite = np.isfinite(b.values) & (np.abs(b.values) < 3e38)  # float32 in the event file
    np.testing.assert_allclose(a.values[finite], b.values[finite], rtol=1e-6)
    assert np.isnan(a.values[~np.isfinite(b.values)]).all()


def test_a_single_event_file(tmp_path) -> None:
    event = next((FIXTURES / "healthy" / "tb_torch").iterdir())
    history = load_history(event)
    assert history.format == "tensorboard" and "val/loss" in history.series


def test_tensorboard_directory_without_scalars(tmp_path) -> None:
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    EventFileWriter(str(tmp_path)).close()  # only the file_version event
    with pytest.raises(HistoryError, match="no scalar summaries"):
        load_history(tmp_path)


def test_a_crafted_tensor_shape_is_not_expanded(tmp_path) -> None:
    from tensorboard.compat.proto import (
        event_pb2,
        summary_pb2,
        tensor_pb2,
        tensor_shape_pb2,
        types_pb2,
    )
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    from tests.fuzz.contract import peak_memory

    def value(tag: str, dims: list[int]) -> summary_pb2.Summary.Value:
        shape = tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims]
        )
        return summary_pb2.Summary.Value(
            tag=tag,
            tensor=tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=shape, float_val=[0.5]),
        )

    writer = EventFileWriter(str(tmp_path))
    for step in (1, 2):
        # One float_val with a shape of 10**8 elements: make_ndarray would fill all (400 MB).
        writer.add_event(
            event_pb2.Event(
                step=step,
                summary=summary_pb2.Summary(
                    value=[value("bomb", [10**8]), value("loss", []), value("acc", [1, 1])]
                ),
            )
        )
    writer.close()
    history, peak = peak_memory(lambda: load_history(tmp_path))
    assert sorted(history.series) == ["acc", "loss"]
    assert history.series["loss"].values.tolist() == [0.5, 0.5]
    assert peak < 32 * 2**20


def test_corrupt_event_file_is_a_history_error(tmp_path) -> None:
    (tmp_path / "events.out.tfevents.1.host").write_bytes(b"\x00" * 40)
    with pytest.raises(HistoryError):
        load_history(tmp_path)


# --- paths, formats, metrics -------------------------------------------------------------------


def test_missing_path(tmp_path) -> None:
    with pytest.raises(HistoryError, match="no such file or directory"):
        load_history(tmp_path / "nope.jsonl")


def test_a_fifo_is_refused_at_once(tmp_path) -> None:
    fifo = tmp_path / "history.jsonl"
    os.mkfifo(fifo)  # opening it would wait for a writer forever
    with pytest.raises(HistoryError, match="a FIFO .named pipe., not a regular file"):
        load_history(fifo)
    with pytest.raises(HistoryError, match="FIFO"):
        load_history(fifo, format="jsonl")


def test_a_device_and_a_socket_are_refused(tmp_path) -> None:
    with pytest.raises(HistoryError, match="a device, not a regular file"):
        load_history("/dev/zero")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "s.csv"))
        with pytest.raises(HistoryError, match="a socket, not a regular file"):
            load_history(tmp_path / "s.csv")


def test_a_fifo_named_like_a_history_in_a_directory_is_refused(tmp_path) -> None:
    os.mkfifo(tmp_path / "metrics.csv")
    with pytest.raises(HistoryError, match="FIFO"):
        load_history(tmp_path)


def test_an_unreadable_file_is_a_history_error(tmp_path) -> None:
    path = write(tmp_path, "h.jsonl", '{"step":1,"metrics":{"loss":1}}\n')
    path.chmod(0)
    if os.access(path, os.R_OK):
        pytest.skip("running as a user who reads everything (root)")
    with pytest.raises(HistoryError, match="cannot read"):
        load_history(path)


@pytest.mark.parametrize(
    "head",
    [b"epoch,lo\rss\n0,1\n", b"a\rb,c\n", b"\r\n\r", b"x,\x00y\n", b'"a,b\n', b"epoch,loss\r0,1.5\r1,1.0\r"],
)
def test_carriage_returns_and_nul_bytes_in_the_first_line(tmp_path, head: bytes) -> None:
    path = tmp_path / "log.csv"
    path.write_bytes(head)
    try:
        history = load_history(path)
    except HistoryError:
        return
    assert history.points  # a bare-CR file is still CSV to the csv module


def test_random_binary_is_a_history_error(tmp_path) -> None:
    rng = random.Random(3)
    for i in range(40):
        path = tmp_path / f"blob{i}.csv"
        path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000))))
        with pytest.raises(HistoryError):
            load_history(path)


@pytest.mark.parametrize("name", ["history.jsonl.gz", "log.csv", "metrics"])
def test_a_compressed_or_binary_file_is_named_binary(tmp_path, name) -> None:
    import gzip

    path = tmp_path / name
    path.write_bytes(gzip.compress(b"epoch,loss\n0,1.5\n1,1.0\n" * 50))
    with pytest.raises(HistoryError, match=r"binary data .*not compressed"):
        load_history(path)


def test_unknown_format(tmp_path) -> None:
    with pytest.raises(ConfigError, match="unknown history format 'parquet'"):
        load_history(FIXTURES / "healthy" / "history.jsonl", format="parquet")


def test_neither_format(tmp_path) -> None:
    with pytest.raises(HistoryError, match="not a history in a known format"):
        load_history(write(tmp_path, "notes.txt", "hello\n"))


def test_empty_directory(tmp_path) -> None:
    with pytest.raises(HistoryError, match="without TensorBoard event files"):
        load_history(tmp_path)


def test_unknown_metric_lists_what_is_there() -> None:
    with pytest.raises(ConfigError, match=r"'val_top5' is not in .* the history has: .*val/loss"):
        validate(FIXTURES / "healthy" / "history.jsonl", val_metric="val_top5")


def test_no_loss_at_all(tmp_path) -> None:
    path = write(tmp_path, "log.csv", "epoch,accuracy,val_accuracy\n0,0.5,0.4\n1,0.6,0.5\n")
    with pytest.raises(HistoryError, match="use mode max.*accuracy, val_accuracy"):
        validate(path)
    assert validate(path, mode="max").series["val"]["name"] == "val_accuracy"


class _BucketStore(storage.LocalStore):
    """``gs://bucket/...`` served from a local directory: the storage seam, not a client mock."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _local(self, uri: str) -> str:
        return str(self.root / uri[len("gs://") :])

    def read_bytes(self, uri: str) -> bytes:
        return super().read_bytes(self._local(uri))

    def download_file(self, uri: str, local_path: str) -> None:
        super().download_file(self._local(uri), local_path)

    def list(self, prefix: str) -> list[str]:
        return ["gs://" + str(Path(p).relative_to(self.root)) for p in super().list(self._local(prefix))]


@pytest.fixture
def bucket(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "gcs"
    (root / "bucket").mkdir(parents=True)
    monkeypatch.setattr(storage, "store_for", lambda uri: _BucketStore(root))
    return root / "bucket"


def test_gs_jsonl(bucket) -> None:
    shutil.copyfile(FIXTURES / "overfit" / "history.jsonl", bucket / "history.jsonl")
    verdict = validate("gs://bucket/history.jsonl")
    assert verdict.failure_class == "overfit"
    assert verdict.series["source"] == "gs://bucket/history.jsonl"


def test_gs_tensorboard_directory(bucket) -> None:
    shutil.copytree(FIXTURES / "explode" / "tb_keras", bucket / "logs")
    verdict = validate("gs://bucket/logs")
    assert verdict.series["format"] == "tensorboard"
    assert verdict.failure_class == "divergence"


def _dvclive_overfit(project: Path) -> Path:
    """A DVCLive run under ``project`` whose eval/loss rises while train/loss falls; its metric
    directory."""
    metrics = project / "dvclive" / "plots" / "metrics"
    (metrics / "train").mkdir(parents=True)
    (metrics / "eval").mkdir()
    (metrics / "train" / "loss.tsv").write_text(
        "step\tloss\n" + "".join(f"{i}\t{1 / (i + 1)}\n" for i in range(12))
    )
    (metrics / "eval" / "loss.tsv").write_text(
        "step\tloss\n" + "".join(f"{i}\t{0.2 + i / 10}\n" for i in range(12))
    )
    return metrics


def test_gs_dvclive_run(bucket) -> None:
    _dvclive_overfit(bucket / "exp")
    verdict = validate("gs://bucket/exp")
    assert verdict.series["format"] == "dvclive" and verdict.series["val"]["name"] == "eval/loss"
    assert verdict.failure_class == "overfit"
    with pytest.raises(HistoryError, match="--format dvclive reads a DVCLive run's prefix"):
        load_history("gs://bucket/exp/dvclive/plots/metrics/train/loss.tsv", "dvclive")
    with pytest.raises(HistoryError, match="no DVCLive metrics"):
        load_history("gs://bucket/exp/dvclive/plots/metrics/train", "dvclive")


def test_a_gs_dvclive_metrics_directory_reads_as_the_local_one(bucket) -> None:
    # Found in review: a prefix that is a run's plots/metrics was downloaded flat and found no run.
    metrics = _dvclive_overfit(bucket / "exp")
    assert sorted(load_history(metrics).series) == ["eval/loss", "train/loss"]
    assert sorted(load_history("gs://bucket/exp/dvclive/plots/metrics").series) == ["eval/loss", "train/loss"]


def test_gs_mlflow_run(bucket) -> None:
    # A Vertex AI job logging to file:///gcs/<bucket>/mlruns leaves the file store on Cloud Storage.
    real = FIXTURES.parent / "real_histories" / "files"
    run = next((real / "dritter321__fashion-mnist").rglob("meta.yaml")).parent
    shutil.copytree(run, bucket / "mlruns" / "0" / run.name)
    local = validate(run)
    remote = validate("gs://bucket/mlruns")
    assert remote.series["format"] == "mlflow" and remote.passed == local.passed
    assert (remote.series["train"], remote.series["val"]) == (local.series["train"], local.series["val"])
    other = next((real / "Bastien-OC20__mnist_fashion").rglob("meta.yaml")).parent
    shutil.copytree(other, bucket / "mlruns" / "0" / other.name)
    with pytest.raises(HistoryError, match="2 MLflow runs"):
        load_history("gs://bucket/mlruns")
    with pytest.raises(HistoryError, match="--format mlflow reads an MLflow run's prefix"):
        load_history(f"gs://bucket/mlruns/0/{run.name}/meta.yaml", "mlflow")


def test_gs_missing_object(bucket) -> None:
    with pytest.raises(HistoryError, match="gs://bucket/none.jsonl: cannot read"):
        load_history("gs://bucket/none.jsonl")


def test_messages_and_notes_stay_short_with_many_series(tmp_path) -> None:
    import json

    path = tmp_path / "h.jsonl"
    names = [f"metric_number_{i:04d}_with_a_long_name" for i in range(2000)]
    # Every series logs step 2 before step 1: each gets a re-ordering note.
    path.write_text(
        "".join(json.dumps({"step": s, "metrics": dict.fromkeys(names, 1.0)}) + "\n" for s in (2, 1))
    )
    history = load_history(path)
    assert len(history.series) == 2000 and len(history.notes) == 11
    assert "1990 more series" in history.notes[-1]
    with pytest.raises(ConfigError) as info:
        validate(path, val_metric="nope")
    assert len(str(info.value)) < 4000 and "(2000 series)" in str(info.value)


# --- names that are credentials ------------------------------------------------------------------

_TOKEN = "ya29.a0AfB_seriesSECRET"
_DB_URL = "postgres://bob:hunter2pw@db.example.com/x"
_AWS = "AKIAABCDEFGHIJKLMNOP"


def _secret_named(tmp_path: Path, fmt: str) -> Path:
    if fmt == "jsonl":
        lines = []
        for s in range(1, 41):
            lines.append(
                json.dumps(
                    {"step": s, "split": "train", "metrics": {"loss": 1 / s, _TOKEN: 1.0, _DB_URL: 2.0}}
                )
            )
            if s % 4 == 0:
                lines.append(json.dumps({"step": s, "split": "val", "metrics": {"loss": 1.1 / s, _AWS: 3.0}}))
        return write(tmp_path, "h.jsonl", "\n".join(lines) + "\n")
    rows = "".join(f"{i},{1 / (i + 1)},{1.1 / (i + 1)},1,2\n" for i in range(20))
    return write(tmp_path, "log.csv", f"epoch,loss,val_loss,{_TOKEN},{_AWS}\n{rows}")


@pytest.mark.parametrize("fmt", ["jsonl", "keras_csv"])
def test_a_series_named_like_a_credential_never_reaches_a_report(tmp_path, fmt) -> None:
    # A token logged as a metric key, a database URL as a column: the report, the JSON verdict
    # and every message derived from the name (lower-cased, re-joined) must not carry it.
    from trainguard.stages import validate_stage

    verdict = validate_stage(
        str(_secret_named(tmp_path, fmt)),
        raise_on_fail=False,
        json_path=str(tmp_path / "v.json"),
        markdown_path=str(tmp_path / "v.md"),
    )
    written = (tmp_path / "v.json").read_text() + (tmp_path / "v.md").read_text()
    for text in (written, str(verdict.history.describe())):
        for secret in ("seriesSECRET", "seriessecret", "hunter2pw", "ABCDEFGHIJKLMNOP", "abcdefghijklmnop"):
            assert secret not in text
    assert "[REDACTED]" in written


def test_a_split_named_like_a_credential_is_redacted_in_the_message(tmp_path) -> None:
    path = write(
        tmp_path,
        "h.jsonl",
        "".join(
            json.dumps({"step": s, "split": "https://u:pw0SECRET@x.com", "metrics": {"loss": 1 / s}}) + "\n"
            for s in range(1, 20)
        ),
    )
    with pytest.raises(HistoryError) as caught:
        validate(path)
    assert "pw0SECRET" not in str(caught.value) and "[REDACTED]" in str(caught.value)


def test_two_secrets_that_redact_alike_stay_two_series(tmp_path) -> None:
    path = write(
        tmp_path,
        "h.jsonl",
        "".join(
            json.dumps(
                {
                    "step": s,
                    "split": "train",
                    "metrics": {"loss": 1 / s, "ghp_" + "a" * 36: 1.0, "ghp_" + "b" * 36: 2.0},
                }
            )
            + "\n"
            for s in range(1, 20)
        ),
    )
    history = load_history(path)
    assert sorted(history.series) == ["train/[REDACTED]", "train/[REDACTED] #2", "train/loss"]


@pytest.mark.parametrize("name", ["keras_log.csv", "metrics.csv"])
def test_a_csv_with_more_columns_than_series_allowed_is_refused_from_its_header(tmp_path, name) -> None:
    # 200,000 columns in a 1.9 MB file once took 1.1 GB and 2.8 s to be refused.
    from tests.fuzz.contract import peak_memory

    x = "epoch" if name == "keras_log.csv" else "step"
    columns = ",".join(f"c{i}" for i in range(200_000))
    path = write(tmp_path, name, f"{x},{columns}\n" + ("1," + ",".join("1" * 200_000) + "\n") * 3)
    error, peak = peak_memory(lambda: load_history(path))
    assert isinstance(error, HistoryError) and "200000 metric columns" in str(error)
    assert peak < 128 * 2**20  # the header's cells; every row's too was 200 MB (RSS 1.1 GB)


@pytest.mark.parametrize("value", [12345, None, 1.5, ["a.jsonl"]])
def test_a_history_that_is_not_a_path_is_bad_input_not_a_type_error(value) -> None:
    with pytest.raises(ConfigError, match="must be a path or a gs:// URI"):
        validate(value)


@pytest.mark.parametrize("value", ["", "  ", b""])
def test_an_empty_history_path_says_none_was_given(value) -> None:
    # '' once read the current directory: ": a directory without TensorBoard event files...".
    with pytest.raises(ConfigError, match="no history given"):
        validate(value)


def test_a_history_path_given_as_bytes_is_read(tmp_path) -> None:
    path = write(
        tmp_path,
        "h.jsonl",
        "".join(
            json.dumps({"step": s, "split": "train", "metrics": {"loss": 1 / s}}) + "\n" for s in range(1, 20)
        ),
    )
    assert load_history(bytes(path)).series["train/loss"].values.size == 19


# --- Git LFS pointers ----------------------------------------------------------------------------

# The pointer a clone without `git lfs pull` holds in place of the file: the example of the Git LFS
# specification (git-lfs/git-lfs, docs/spec.md). Hugging Face Hub keeps runs/*tfevents* this way.
_LFS = (
    "version https://git-lfs.github.com/spec/v1\n"
    "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
    "size 12345\n"
)


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("runs/Jan01_host/events.out.tfevents.1700000000.host.1.0", None),
        ("history.csv", None),
        ("history.csv", "keras_csv"),
        ("trainer_state.json", "hf_trainer_state"),
    ],
)
def test_a_git_lfs_pointer_is_named_as_such(tmp_path, name: str, fmt: str | None) -> None:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_LFS)
    given = tmp_path / "runs" if name.startswith("runs/") else path
    with pytest.raises(HistoryError, match=r"a Git LFS pointer, not the file itself.*git lfs pull"):
        load_history(given, fmt)


def test_gs_git_lfs_pointer(bucket) -> None:
    (bucket / "history.jsonl").write_text(_LFS)
    with pytest.raises(HistoryError, match="a Git LFS pointer"):
        load_history("gs://bucket/history.jsonl", "jsonl")
