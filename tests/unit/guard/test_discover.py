"""The history output is whatever history the job wrote, so validate works on any job."""

from __future__ import annotations

import shutil
from pathlib import Path

from trainguard.guard.discover import find_history, publish_history
from trainguard.validation import load_history, validate

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "histories"


def find(base: Path):
    return find_history(
        history_path=f"{base}/history.jsonl", tensorboard_dir=f"{base}/logs/", base_output_dir=str(base)
    )


def test_our_jsonl_comes_first(tmp_path):
    shutil.copy(FIXTURES / "healthy" / "history.jsonl", tmp_path / "history.jsonl")
    shutil.copytree(FIXTURES / "healthy" / "tb_keras", tmp_path / "logs")
    found = find(tmp_path)
    assert found.format == "jsonl" and found.uri.endswith("history.jsonl")


def test_an_empty_jsonl_gives_way_to_tensorboard_events_and_they_validate(tmp_path):
    (tmp_path / "history.jsonl").write_bytes(b"")
    shutil.copytree(FIXTURES / "overfit" / "tb_keras", tmp_path / "logs")
    found = find(tmp_path)
    assert found.format == "tensorboard" and len(found.files) == 2
    meta = publish_history(found, str(tmp_path / "out" / "history"))
    assert meta["format"] == "tensorboard"
    published = tmp_path / "out" / "history"
    assert {p.parent.name for p in published.rglob("*tfevents*")} == {"train", "validation"}
    verdict = validate(str(published))
    assert verdict.failure_class == "overfit"  # the same verdict as on the job's own logs
    assert verdict.failure_class == validate(FIXTURES / "overfit" / "tb_keras").failure_class


def test_event_files_elsewhere_under_the_output_dir_are_found(tmp_path):
    shutil.copytree(FIXTURES / "explode" / "tb_torch", tmp_path / "model" / "runs")
    found = find(tmp_path)
    assert found.format == "tensorboard" and found.uri == str(tmp_path / "model" / "runs")


def test_keras_and_lightning_csv_logs_are_found(tmp_path):
    keras = tmp_path / "keras"
    (keras / "model").mkdir(parents=True)
    shutil.copy(FIXTURES / "nan" / "keras_log.csv", keras / "model" / "training.log")
    found = find(keras)
    assert (found.format, Path(found.uri).name) == ("keras_csv", "training.log")
    meta = publish_history(found, str(tmp_path / "k-out"))
    assert meta["format"] == "keras_csv"
    assert load_history(tmp_path / "k-out").format == "keras_csv"

    lightning = tmp_path / "lightning"
    for version in ("version_0", "version_1"):
        (lightning / "lightning_logs" / version).mkdir(parents=True)
        shutil.copy(
            FIXTURES / "overfit" / "metrics.csv", lightning / "lightning_logs" / version / "metrics.csv"
        )
    found = find(lightning)
    assert found.format == "lightning_csv" and "version_1" in found.uri


def test_checkpoints_are_not_searched_and_nothing_found_publishes_an_empty_file(tmp_path):
    (tmp_path / "checkpoints" / "step-000000010").mkdir(parents=True)
    shutil.copy(FIXTURES / "nan" / "keras_log.csv", tmp_path / "checkpoints" / "step-000000010" / "log.csv")
    assert find(tmp_path) is None
    meta = publish_history(None, str(tmp_path / "out"))
    assert (tmp_path / "out").read_bytes() == b"" and meta["note"] == "the job wrote no history"
