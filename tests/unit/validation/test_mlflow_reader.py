"""MLflow's local file store (``mlruns/``): a run's metric files read as a history, with no flags.

Real runs come from the corpus (tests/fixtures/real_histories, copied byte for byte); the bad
inputs are built here, each a refusal through the CLI: exit 2 and one line that says what is wrong.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.fuzz.contract import assert_contract, run_cli
from trainguard.validation import load_history, mlflow_reader, select_series, validate

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real_histories" / "files"
LIGHTNING_RUN = (
    REAL / "dritter321__fashion-mnist/training/mlruns/737694674622074143/c09a656b6f624a72b6897ad6dcb7c122"
)
KERAS_RUN = REAL / "Bastien-OC20__mnist_fashion/models/mlruns/0/eda6f1d7bc274afb9955bbacdec0d162"
HF_RUN = (
    REAL
    / "ChallapalliHemanthsaikumar__image-classification-regression-models/notebooks/mlruns/0"
    / "f36e1500e91a4ec0a7477f8bd0f85a35"
)
NESTED_RUN = REAL / "railiavaliullina__Segmentation/train/mlruns/0/a4c1530639c6493387bbc105e45db7c0"
RELOGGED_RUN = REAL / "keimoriyama__shinra-bert/code/mlruns/3/c7e4e9fb509e4a1292e61730b21aa36a"


def run_dir(root: Path, metrics: dict[str, str | bytes], run_id: str = "abc123") -> Path:
    """An MLflow run ``root/<run_id>`` with ``meta.yaml`` and the given metric files."""
    run = root / run_id
    (run / "metrics").mkdir(parents=True)
    (run / "meta.yaml").write_text(f"run_id: {run_id}\nexperiment_id: '0'\nlifecycle_stage: active\n")
    for name, text in metrics.items():
        path = run / "metrics" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode() if isinstance(text, str) else text)
    return run


def lines(values: list[float], steps: list[int] | None = None) -> str:
    steps = list(range(len(values))) if steps is None else steps
    pairs = enumerate(zip(values, steps, strict=True))
    return "".join(f"{1700000000000 + i} {v} {s}\n" for i, (v, s) in pairs)


def refused(path: Path, *args: str) -> str:
    """The CLI's refusal of ``path``: exit 2, one line; returns it."""
    outcome = run_cli("validate", str(path), *args)
    assert_contract(outcome)
    assert outcome.exit_code == 2, outcome.output
    text = outcome.output.strip()
    assert len(text.splitlines()) == 1, text
    assert "Traceback" not in text and "unexpected error" not in text, text
    return text


# --- real runs, as a user would see them ---------------------------------------------------------


def test_a_lightning_run_reads_its_series_steps_and_splits() -> None:
    history = load_history(LIGHTNING_RUN)
    assert history.format == "mlflow"
    assert set(history.series) == {"train_loss", "val_loss", "test_loss"}  # 'epoch' is the x axis
    train, val = history.series["train_loss"], history.series["val_loss"]
    assert (train.split, val.split, history.series["test_loss"].split) == ("train", "val", "test")
    assert train.metric == val.metric == "loss"
    assert len(train) == 187 and train.steps[0] == 49 and train.steps[-1] == 9349
    assert val.steps.tolist() == [937, 1875, 2813, 3751, 4689, 5627, 6565, 7503, 8441, 9379]
    assert val.values[8] == pytest.approx(0.34111928939819336)
    assert select_series(history) == (train, val)
    assert history.notes == []


def test_a_keras_run_reads_epochs_as_steps() -> None:
    history = load_history(KERAS_RUN)
    val = history.series["val_loss"]
    assert val.steps.tolist() == list(range(50))
    assert history.series["val_accuracy"].split == "val" and history.series["accuracy"].split == "train"
    assert len(history.series["final_accuracy"]) == 1
    verdict = validate(KERAS_RUN)
    assert verdict.passed and verdict.series["format"] == "mlflow"


def test_a_hugging_face_run_leaves_out_its_timings() -> None:
    history = load_history(HF_RUN)
    assert set(history.series) == {"loss", "eval_loss", "train_loss"}
    assert history.series["eval_loss"].split == "val"
    assert any("Hugging Face" in note for note in history.notes)
    train, val = select_series(history)
    assert (train.name, val.name, len(train)) == ("loss", "eval_loss", 172)


def test_nested_names_and_a_step_before_training() -> None:
    history = load_history(NESTED_RUN)
    assert set(history.series) == {
        "train_eval/global_accuracy",
        "train_eval/mIoU",
        "valid_eval/global_accuracy",
        "valid_eval/mIoU",
    }
    assert history.series["valid_eval/mIoU"].split == "val"
    assert history.series["valid_eval/mIoU"].steps.tolist() == [-1, 0, 1, 2, 3, 4, 5]


def test_a_step_logged_twice_keeps_the_later_value() -> None:
    history = load_history(RELOGGED_RUN)
    val = history.series["validation loss"]
    assert val.steps.tolist() == [0, 1, 2, 3, 4] and val.values[0] == pytest.approx(3.6504365759588024)
    assert any("logged again" in note for note in history.notes)


# --- what a user may give ------------------------------------------------------------------------


def copy_run(tmp_path: Path, run: Path = LIGHTNING_RUN, experiment: str = "0") -> Path:
    target = tmp_path / "mlruns" / experiment / run.name
    shutil.copytree(run, target)
    (target.parent / "meta.yaml").write_text(f"experiment_id: '{experiment}'\nname: Default\n")
    return target


@pytest.mark.parametrize("given", ["run", "metrics", "experiment", "mlruns", "project"])
def test_a_run_its_metrics_its_experiment_or_mlruns(tmp_path, given) -> None:
    run = copy_run(tmp_path)
    (tmp_path / "mlruns" / ".trash" / "deleted").mkdir(parents=True)
    path = {
        "run": run,
        "metrics": run / "metrics",
        "experiment": run.parent,
        "mlruns": tmp_path / "mlruns",
        "project": tmp_path,
    }[given]
    history = load_history(path)
    assert history.format == "mlflow" and len(history.series["val_loss"]) == 10


def test_a_run_without_metrics_beside_it_is_not_counted(tmp_path) -> None:
    copy_run(tmp_path)
    run_dir(tmp_path / "mlruns" / "0", {}, run_id="paramsonly")  # an sklearn run: params, no metrics
    assert len(load_history(tmp_path / "mlruns").series["val_loss"]) == 10


def test_several_runs_are_refused_naming_them(tmp_path) -> None:
    copy_run(tmp_path)
    copy_run(tmp_path, KERAS_RUN)
    text = refused(tmp_path / "mlruns")
    assert "2 MLflow runs with metrics" in text and "give one run's directory" in text
    assert LIGHTNING_RUN.name in text and KERAS_RUN.name in text


def test_many_runs_name_five(tmp_path) -> None:
    for i in range(7):
        run_dir(tmp_path, {"loss": lines([1.0, 0.5])}, run_id=f"run{i}")
    text = refused(tmp_path)
    assert "7 MLflow runs" in text and "run4" in text and "run5" not in text and "2 more" in text


def test_runs_without_any_metric_are_refused(tmp_path) -> None:
    run_dir(tmp_path, {}, run_id="a")
    run_dir(tmp_path, {}, run_id="b")
    assert "none logged a metric" in refused(tmp_path)


def test_format_mlflow_reads_a_bare_metrics_directory(tmp_path) -> None:
    metrics = tmp_path / "copied"
    metrics.mkdir()
    (metrics / "loss").write_text(lines([2.0 / (i + 1) for i in range(10)]))
    (metrics / "val_loss").write_text(lines([2.1 / (i + 1) + 0.1 for i in range(10)]))
    history = load_history(metrics, "mlflow")
    assert history.format == "mlflow" and set(history.series) == {"loss", "val_loss"}
    outcome = run_cli("validate", str(metrics), "--format", "mlflow")
    assert_contract(outcome)
    assert outcome.exit_code in (0, 1)


def test_one_metric_file_says_to_give_the_run(tmp_path) -> None:
    run = run_dir(tmp_path, {"val_loss": lines([1.0, 0.9])})
    assert "give the run's directory" in refused(run / "metrics" / "val_loss")
    assert "give that directory" in refused(run / "metrics" / "val_loss", "--format", "mlflow")


# --- the file format -----------------------------------------------------------------------------


def test_steps_all_zero_are_put_in_logging_order(tmp_path) -> None:
    metrics = {"loss": lines([3.0, 2.0, 1.0], [0, 0, 0]), "val_loss": lines([3.0, 2.5], [0, 1])}
    run = run_dir(tmp_path, metrics)
    history = load_history(run)
    assert history.series["loss"].steps.tolist() == [0, 1, 2]
    assert history.series["loss"].values.tolist() == [3.0, 2.0, 1.0]
    assert history.series["val_loss"].steps.tolist() == [0, 1]
    assert any("'loss'" in note and "every step is 0" in note for note in history.notes)


def test_old_two_field_lines(tmp_path) -> None:
    run = run_dir(tmp_path, {"loss": "1500000000000 2.5\n1500000000100 2.0\n1500000000200 1.5\n"})
    series = load_history(run).series["loss"]
    assert series.steps.tolist() == [0, 1, 2] and series.values.tolist() == [2.5, 2.0, 1.5]


def test_nan_and_infinity_as_mlflow_writes_them(tmp_path) -> None:
    run = run_dir(tmp_path, {"loss": lines([1.0, math.nan, math.inf, -math.inf])})
    values = load_history(run).series["loss"].values
    assert values[0] == 1.0 and np.isnan(values[1]) and values[2] == math.inf and values[3] == -math.inf
    outcome = run_cli("validate", str(run))
    assert_contract(outcome)
    assert outcome.exit_code == 1 and "non_finite" in outcome.output


def test_steps_out_of_order_are_sorted_with_a_note(tmp_path) -> None:
    run = run_dir(tmp_path, {"loss": lines([1.0, 3.0, 2.0], [0, 2, 1])})
    history = load_history(run)
    assert history.series["loss"].steps.tolist() == [0, 1, 2]
    assert history.series["loss"].values.tolist() == [1.0, 2.0, 3.0]
    assert any("sorted" in note for note in history.notes)


def test_windows_line_ends_blank_lines_and_a_torn_last_line(tmp_path) -> None:
    text = "1 2.0 0\r\n\r\n2 1.5 1\r\n3 1.0 2\r\n4 0.9"
    history = load_history(run_dir(tmp_path, {"loss": text}))
    assert history.series["loss"].values.tolist() == [2.0, 1.5, 1.0]
    assert any("torn last line" in note for note in history.notes)
    assert any("1 blank line" in note for note in history.notes)


def test_a_last_line_without_its_end_but_whole_is_kept(tmp_path) -> None:
    history = load_history(run_dir(tmp_path, {"loss": "1 2.0 0\n2 1.5 1"}))
    assert history.series["loss"].values.tolist() == [2.0, 1.5] and history.notes == []


def test_a_hostile_metric_name_is_shown_escaped(tmp_path) -> None:
    curve = [2.0 / (i + 1) for i in range(10)]
    run = run_dir(tmp_path, {"\x1b[2Jloss": lines(curve), "val_loss": lines(curve)})
    outcome = run_cli("validate", str(run))
    assert_contract(outcome)
    assert "\x1b" not in outcome.output and "\\x1b[2Jloss" in outcome.output


def test_a_name_that_is_not_utf8(tmp_path) -> None:
    if os.name == "nt":
        pytest.skip("file names are UTF-16 there")
    run = run_dir(tmp_path, {"loss": lines([2.0, 1.0])})
    (run / "metrics" / os.fsdecode(b"val_\xff")).write_text(lines([2.0, 1.5]))
    assert "val_\ufffd" in load_history(run).series


# --- bad input: one refusal each, exit 2 ---------------------------------------------------------


@pytest.mark.parametrize(
    "metrics, expected",
    [
        ({}, "no metric files"),
        ({"loss": ""}, "'loss': empty"),
        ({"loss": "\n\n  \n"}, "'loss': empty"),
        ({"loss": "1 2.0 0\n2 1.5 1 7\n"}, "'loss': line 2: 4 fields"),
        ({"loss": "1 2.0 0\n2 abc 1\n"}, "line 2: the value 'abc' is not a number"),
        ({"loss": "1 2.0 0\n2 1.5 x\n"}, "line 2: the step 'x' is not an integer"),
        ({"loss": "1 2.0 0.5\n"}, "line 1: the step '0.5' is not an integer"),
        ({"loss": "t 2.0 0\n"}, "line 1: the timestamp 't' is not an integer"),
        ({"loss": f"1 2.0 {2**64}\n"}, "out of range"),
        ({"loss": "1 2.0 0\n" + "9" * 5000}, "without a line end"),
        ({"loss": b"\x00\x01\x02" * 2000}, "without a line end"),
        ({"epoch": lines([0.0, 1.0])}, "nothing to judge"),
        ({"train/loss": "1 2.0 0\n2 1,5 1\n"}, "'train/loss': line 2"),
    ],
)
def test_bad_metric_files_are_one_clear_refusal(tmp_path, metrics, expected) -> None:
    assert expected in refused(run_dir(tmp_path, metrics))


def test_a_metric_that_is_not_a_regular_file(tmp_path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    run = run_dir(tmp_path, {"loss": lines([1.0, 0.5])})
    os.mkfifo(run / "metrics" / "val_loss")
    assert "not a regular file" in refused(run)


def test_too_many_metric_files(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(mlflow_reader, "MAX_SERIES", 3)
    run = run_dir(tmp_path, {f"m{i}": lines([1.0]) for i in range(5)})
    assert "more than 3 metric files" in refused(run)


def test_metric_files_past_the_byte_bound(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(mlflow_reader, "MAX_RUN_BYTES", 1000)
    run = run_dir(tmp_path, {"loss": lines([1.0] * 40), "val_loss": lines([1.0] * 40)})
    assert "MiB of metric files" in refused(run)


def test_a_long_file_reads_in_bounded_time(tmp_path) -> None:
    n = 300_000
    values = np.linspace(2.0, 0.5, n)
    text = "".join(f"{1700000000000 + i} {v!r} {i}\n" for i, v in enumerate(values.tolist()))
    run = run_dir(tmp_path, {"loss": text, "val_loss": lines([2.0, 1.5, 1.0, 0.9, 0.8])})
    series = load_history(run).series["loss"]
    assert len(series) == n and series.values[-1] == pytest.approx(0.5)
