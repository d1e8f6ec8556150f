"""Each run writes to a directory of its own; the same run id finds its directory again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainguard.errors import ConfigError
from trainguard.launch.run_dir import MARKER, claim, new_run_id, task_run_id

ROOT = Path(__file__).resolve().parents[3]


def leave_outputs(base: Path, kind: str = "checkpoint") -> None:
    if kind == "history":
        (base / "history.jsonl").write_text('{"step": 1, "split": "train", "loss": 1.0}\n')
    else:
        (base / "checkpoints" / "step-000000010").mkdir(parents=True)
        (base / "checkpoints" / "step-000000010" / "COMMIT").write_text("{}")


def test_the_first_run_in_a_new_directory_keeps_the_plain_layout(tmp_path):
    run = claim(str(tmp_path / "out"), display_name="my-job")
    assert run.base == str(tmp_path / "out") and not run.resumed and run.displaced_by is None
    marker = json.loads((tmp_path / "out" / MARKER).read_text())
    assert marker["run_id"] == run.run_id and marker["display_name"] == "my-job"
    assert marker["started"].endswith("Z")


@pytest.mark.parametrize("kind", ["checkpoint", "history"])
def test_a_second_run_goes_beside_the_first_and_says_so(tmp_path, kind):
    first = claim(str(tmp_path))
    leave_outputs(tmp_path, kind)
    second = claim(str(tmp_path))
    assert second.base == str(tmp_path / "runs" / second.run_id)
    assert second.displaced_by is not None and second.displaced_by.run_id == first.run_id
    assert not second.resumed
    line = second.message()
    assert first.run_id in line and second.base in line and "--resume" in line
    assert not (Path(second.base) / "checkpoints").exists()  # nothing of the first is copied or read


def test_the_same_run_id_continues_its_own_run_wherever_it_is(tmp_path):
    first = claim(str(tmp_path), run_id="pipeline-job-1")
    leave_outputs(tmp_path)
    again = claim(str(tmp_path), run_id="pipeline-job-1")
    assert again.base == str(tmp_path) and again.resumed
    other = claim(str(tmp_path), run_id="pipeline-job-2")
    leave_outputs(Path(other.base), "history")
    other_again = claim(str(tmp_path), run_id="pipeline-job-2")
    assert other_again.base == other.base and other_again.resumed
    assert first.run_id == "pipeline-job-1"


def test_resume_continues_the_newest_run(tmp_path):
    claim(str(tmp_path))
    leave_outputs(tmp_path)
    newer = claim(str(tmp_path))
    leave_outputs(Path(newer.base), "history")
    resumed = claim(str(tmp_path), resume=True)
    assert resumed.base == newer.base and resumed.run_id == newer.run_id and resumed.resumed
    assert "continuing" in resumed.message()


def test_resume_adopts_outputs_that_no_trainguard_run_marked(tmp_path):
    leave_outputs(tmp_path)  # an earlier version of trainguard, or a job that never used it
    assert claim(str(tmp_path)).displaced_by.run_id == ""
    adopted = claim(str(tmp_path), resume=True)
    assert adopted.base == str(tmp_path) and adopted.resumed
    assert json.loads((tmp_path / MARKER).read_text())["run_id"] == adopted.run_id


def test_resume_with_nothing_to_continue_starts_a_run_and_says_so(tmp_path):
    said = []
    run = claim(str(tmp_path / "empty"), resume=True, say=said.append)
    assert run.base == str(tmp_path / "empty") and not run.resumed
    assert said and "holds no earlier run to continue" in said[0]


def test_a_run_that_never_wrote_anything_holds_nothing(tmp_path):
    claim(str(tmp_path))  # marked, then the job never started
    second = claim(str(tmp_path))
    assert second.base == str(tmp_path) and second.displaced_by is None


def test_unrelated_files_in_the_directory_do_not_make_it_a_run(tmp_path):
    (tmp_path / "README.txt").write_text("my notes")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.csv").write_text("1,2\n")
    assert claim(str(tmp_path)).base == str(tmp_path)


def test_checkpoints_behind_a_symlinked_checkpoint_directory_count(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    leave_outputs(elsewhere)
    root = tmp_path / "root"
    root.mkdir()
    (root / "checkpoints").symlink_to(elsewhere / "checkpoints")
    # The user put the checkpoints elsewhere; a job writing to root would resume from them.
    assert claim(str(root)).base != str(root)


@pytest.mark.parametrize("bad", ["../escape", "a/b", "..", "", "-leading", "x" * 200, "a..b", "sp ace"])
def test_a_run_id_that_could_leave_the_directory_is_refused(tmp_path, bad):
    if bad == "":
        assert claim(str(tmp_path), run_id=bad).run_id  # empty: a new id is made
        return
    with pytest.raises(ConfigError, match="a run id is 1-128 letters"):
        claim(str(tmp_path), run_id=bad)


def test_new_run_ids_sort_by_time_and_differ(tmp_path):
    a, b = new_run_id(1_000_000_000), new_run_id(1_000_000_001)
    assert a < b and a.startswith("run-20010909-")
    assert new_run_id(5) != new_run_id(5)


def test_a_pipeline_tasks_id_is_the_same_for_its_attempts_and_differs_across_runs():
    uri = "gs://root/123/guarded-training-20261201/train_-42/model"
    assert task_run_id(uri) == task_run_id(uri)
    assert task_run_id(uri) != task_run_id(uri.replace("20261201", "20261202"))


def test_an_unwritable_directory_is_bad_input(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="cannot create the output directory"):
        claim(str(tmp_path / "file" / "out"))


# -- the user's walk: a run that diverged, then the fixed one in the same --output-dir --------


def train(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainguard.cli", "train", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.slow
def test_the_run_after_a_diverged_one_starts_fresh_and_resume_continues_it(tmp_path):
    trainer = ROOT / "containers" / "trainer" / "train.py"
    common = (
        "workerPoolSpecs:\n- machineSpec: {machineType: n1-standard-4}\n  replicaCount: 1\n"
        f"  containerSpec:\n    imageUri: img\n    command: [python, {trainer}]\n"
    )
    diverging = tmp_path / "diverging.yaml"
    diverging.write_text(
        common
        + "    args: [--epochs=6, --optimizer=sgd, --activation=tanh, --lr=3.0, --checkpoint-every=20]\n"
    )
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(common + "    args: [--epochs=2, --lr=0.001, --checkpoint-every=20]\n")
    out = tmp_path / "out"

    first = train(str(diverging), "--output-dir", str(out), cwd=tmp_path)
    assert first.returncode == 1 and "class:    divergence" in first.stderr, first.stdout[-2000:]

    second = train(str(fixed), "--output-dir", str(out), cwd=tmp_path)
    assert second.returncode == 0, (second.stdout + second.stderr)[-3000:]
    assert "holds run run-" in second.stdout and "writes beside it" in second.stdout
    assert "Resumed" not in second.stdout and "resuming from step" not in second.stdout.lower()
    [run_dir] = (out / "runs").iterdir()
    records = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    assert min(r["step"] for r in records) <= 5  # from the start (it logs every 5), not a diverged step
    # The first run's outputs are untouched.
    assert (out / "history.jsonl").exists() and any((out / "checkpoints").iterdir())

    third = train(str(fixed), "--output-dir", str(out), "--resume", "--guard", "off", cwd=tmp_path)
    assert third.returncode == 0, (third.stdout + third.stderr)[-3000:]
    assert f"run {run_dir.name}: continuing the run in {run_dir}" in third.stdout
