"""``trainguard train --guard/--model`` as a user meets them: exit codes and what is printed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.fuzz.contract import assert_contract, run_cli
from trainguard.stages import train_stage

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "histories"
PR = ("--project", "demo-project", "--region", "us-central1")


def job_spec(tmp_path: Path, code: str) -> Path:
    """A local job running ``python -c code``."""
    path = tmp_path / "job.json"
    path.write_text(
        json.dumps(
            {
                "workerPoolSpecs": [
                    {
                        "machineSpec": {"machineType": "n1-standard-4"},
                        "replicaCount": 1,
                        "containerSpec": {"imageUri": "img", "command": [sys.executable, "-c", code]},
                    }
                ]
            }
        )
    )
    return path


@pytest.mark.parametrize(
    ("flag", "value", "valid"),
    [
        ("--guard", "sometimes", "off, nonfinite, fail"),
        ("--model", "newest", "last, best"),
    ],
)
def test_an_unknown_choice_is_bad_input_listing_the_valid_ones(tmp_path, flag, value, valid):
    outcome = run_cli("train", job_spec(tmp_path, "pass"), *PR, "--output-dir", tmp_path / "o", flag, value)
    assert_contract(outcome)
    assert outcome.exit_code == 2 and valid in outcome.output


def test_a_nan_stops_the_job_and_the_task_exits_1_with_class_remedy_and_hours_saved(tmp_path):
    code = (
        "import json, os, time\n"
        "h = open(os.environ['TRAINGUARD_HISTORY'], 'a')\n"
        "for s in range(1, 6):\n"
        "    h.write(json.dumps({'step': s, 'metrics': {'loss': 2.0 - s / 10}}) + '\\n')\n"
        'h.write(\'{"step": 6, "metrics": {"loss": NaN}}\\n\'); h.flush()\n'
        "time.sleep(60)\n"
    )
    outcome = run_cli(
        "train",
        job_spec(tmp_path, code),
        *PR,
        "--output-dir",
        tmp_path / "o",
        "--json",
        tmp_path / "r.json",
        "--guard",
        "nonfinite",
    )
    assert_contract(outcome, max_seconds=30)
    assert outcome.exit_code == 1
    assert "class:    non_finite" in outcome.output and "NaN at step 6" in outcome.output
    # A local run has no timeout to size what the stop saved by (no 168 hours for a laptop job).
    assert "remedy:" in outcome.output and "saved:    the rest of the run was not spent" in outcome.output
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["stopped"]["failure_class"] == "non_finite" and data["state"] == "CANCELLED"


def test_garbage_in_the_history_is_said_and_the_job_runs_to_its_end(tmp_path):
    code = (
        "import os\n"
        "open(os.environ['TRAINGUARD_HISTORY'], 'w').write('not json at all\\n')\n"
        "import time; time.sleep(2)\n"
    )
    outcome = run_cli(
        "train", job_spec(tmp_path, code), *PR, "--output-dir", tmp_path / "o", "--json", tmp_path / "r.json"
    )
    assert_contract(outcome, max_seconds=30)
    assert outcome.exit_code == 0
    assert "STOPPED GUARDING" in outcome.output and "not JSON" in outcome.output
    assert json.loads((tmp_path / "r.json").read_text())["state"] == "SUCCEEDED"


def test_a_job_without_history_gets_one_line_and_succeeds(tmp_path):
    outcome = run_cli("train", job_spec(tmp_path, "print(42)"), *PR, "--output-dir", tmp_path / "o")
    assert_contract(outcome, max_seconds=30)
    assert outcome.exit_code == 0 and outcome.output.count("the job wrote no history") == 1


class Artifact:
    def __init__(self, path: Path) -> None:
        self.path, self.uri, self.metadata = str(path), str(path), {}


def test_a_job_that_only_wrote_tensorboard_logs_is_validated_on_them(tmp_path):
    # A Keras job that never imported trainguard: its TensorBoard logs are its history.
    src = FIXTURES / "overfit" / "tb_keras"
    code = (
        "import os, shutil\n"
        f"shutil.copytree({str(src)!r}, os.environ['AIP_TENSORBOARD_LOG_DIR'], "
        "dirs_exist_ok=True)\n"
    )
    history = Artifact(tmp_path / "train" / "history")
    result = train_stage(
        str(job_spec(tmp_path, code)),
        project="demo-project",
        region="us-central1",
        output_dir=str(tmp_path / "out"),
        history=history,
        stream=None,
        guard="off",
    )
    assert result.history_format == "tensorboard" and history.metadata["format"] == "tensorboard"
    outcome = run_cli("validate", history.path)
    assert_contract(outcome)
    assert outcome.exit_code == 1 and "overfit" in outcome.output  # judged, not "no history"


def test_a_job_whose_history_path_is_a_fifo_is_not_watched_for_ever(tmp_path):
    # The guard's open() once waited for a writer for ever: `trainguard train` never returned.
    import threading

    code = "import os, time\nos.mkfifo(os.environ['TRAINGUARD_HISTORY'])\ntime.sleep(2)\n"
    box: dict = {}
    worker = threading.Thread(
        target=lambda: box.update(
            out=run_cli("train", job_spec(tmp_path, code), *PR, "--output-dir", tmp_path / "o")
        ),
        daemon=True,
    )
    worker.start()
    worker.join(60)
    if worker.is_alive():
        with open(tmp_path / "o" / "history.jsonl", "wb"):  # free the blocked open()
            pass
        worker.join(10)
        pytest.fail("train blocked on a FIFO at the history path")
    assert_contract(box["out"], max_seconds=60, allowed=(0,))
    assert "not a regular file" in box["out"].output


def test_a_job_that_left_no_weights_does_not_claim_a_model_directory(tmp_path):
    # The last line once said "model: <base>/model/" right after "model: none (...)".
    outcome = run_cli("train", job_spec(tmp_path, "print('no weights')"), *PR, "--output-dir", tmp_path / "o")
    assert_contract(outcome, max_seconds=30, allowed=(0,))
    last = outcome.stdout.strip().splitlines()[-1]
    assert "model: none" in last and str(tmp_path / "o" / "model") not in last
