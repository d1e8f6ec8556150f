"""A hostile and a careless user at the command line: every flag, wrong values, secrets pasted in.

Each case is something a person typed (or a script passed) that once broke the contract of
tests/fuzz/contract.py: a credential echoed back, a message of 100 KB, a hang, a traceback, a
pipeline that ran before its bad flag was noticed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fuzz.contract import assert_contract, run_cli

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "a100-spot.yaml"
SECRET = "ya29.a0AfB_qaSECRETtoken"


def history(path: Path, steps: int = 60) -> Path:
    """A healthy JSONL history (train every step, val every 5)."""
    with path.open("w") as out:
        for s in range(1, steps + 1):
            out.write(json.dumps({"step": s, "split": "train", "metrics": {"loss": 2 / s**0.5}}) + "\n")
            if s % 5 == 0:
                out.write(
                    json.dumps(
                        {"step": s, "split": "val", "metrics": {"loss": 2.2 / s**0.5, "accuracy": 0.5}}
                    )
                    + "\n"
                )
    return path


@pytest.mark.parametrize(
    "flags",
    [
        ("--val-metric", SECRET),
        ("--train-metric", SECRET),
        ("--gate", f"{SECRET}>=0.5"),
        ("--threshold", f"{SECRET}=1"),
        ("--fail-on", f"overfit,{SECRET}"),
        ("--format", SECRET),
        ("--mode", SECRET),
    ],
    ids=lambda f: f[0],
)
def test_a_secret_pasted_into_a_validate_flag_is_never_echoed(tmp_path, flags):
    outcome = run_cli("validate", history(tmp_path / "h.jsonl"), *flags)
    assert_contract(outcome, allowed=(2,))
    assert "qaSECRET" not in outcome.output and "[REDACTED]" in outcome.output


@pytest.mark.parametrize(
    "flags",
    [("--guard", SECRET), ("--model", SECRET), ("--max-queued", SECRET), ("--preempt-after", SECRET)],
    ids=lambda f: f[0],
)
def test_a_secret_pasted_into_a_train_flag_is_never_echoed(tmp_path, flags):
    outcome = run_cli("train", SPEC, "--output-dir", tmp_path / "out", *flags)
    assert_contract(outcome, allowed=(2,))
    assert "qaSECRET" not in outcome.output


def test_a_secret_pasted_as_the_pipeline_name_is_never_echoed():
    outcome = run_cli("run", SPEC, "--pipeline", SECRET)
    assert_contract(outcome, allowed=(2,))
    assert "qaSECRET" not in outcome.output


@pytest.mark.parametrize("flag", ["--train-metric", "--val-metric", "--gate", "--direction"])
def test_a_huge_flag_value_gets_a_short_answer(tmp_path, flag):
    value = "m" * 200_000 + (">=1" if flag == "--gate" else "=max" if flag == "--direction" else "")
    outcome = run_cli("validate", history(tmp_path / "h.jsonl"), flag, value)
    assert_contract(outcome, allowed=(0, 2))
    assert len(outcome.output) < 12_000


# --- output paths ----------------------------------------------------------------------------


def _bounded(args: tuple, fifo: Path, seconds: float = 20.0):
    """run_cli(*args) in a thread; should it block on the FIFO, opening it for reading frees it
    (so a regression fails the test instead of hanging the suite)."""
    import os
    import threading

    box: dict = {}
    worker = threading.Thread(target=lambda: box.update(outcome=run_cli(*args)), daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        worker.join(seconds)
        os.close(fd)
        pytest.fail(f"trainguard {' '.join(map(str, args))[:200]} waited on a FIFO nobody reads")
    return box["outcome"]


@pytest.mark.parametrize(
    "command,flag",
    [
        ("preflight", "--json"),
        ("preflight", "--markdown"),
        ("validate", "--json"),
        ("validate", "--markdown"),
        ("validate", "--html"),
        ("validate", "--plot"),
        ("triage", "--json"),
    ],
)
def test_an_output_fifo_that_nothing_reads_is_bad_input_not_a_hang(tmp_path, command, flag):
    import os

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    first = {
        "preflight": (SPEC, "-p", "my-project", "-r", "us-central1", "--only", "compat"),
        "validate": (history(tmp_path / "h.jsonl"),),
        "triage": ("--text", "CUDA out of memory"),
    }[command]
    outcome = _bounded((command, *first, flag, fifo), fifo)
    assert_contract(outcome, allowed=(2,))
    assert "FIFO" in outcome.stderr and "nothing is reading" in outcome.stderr


def test_an_output_fifo_with_a_reader_is_written(tmp_path):
    import os
    import threading

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()  # blocks in open() until the CLI opens the write end
    outcome = _bounded(("validate", history(tmp_path / "h.jsonl"), "--json", fifo), fifo)
    reader.join(10)
    assert_contract(outcome, allowed=(0,))
    assert json.loads(got[0])["passed"] is True


def test_train_refuses_an_unwritable_json_path_before_the_job_runs(tmp_path):
    marker = tmp_path / "ran"
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "workerPoolSpecs:\n- machineSpec: {machineType: n1-standard-4}\n"
        "  containerSpec: {imageUri: img, command: [python, -c, "
        f"\"open(r'{marker}', 'w').write('x')\"]}}\n"
    )
    (tmp_path / "a-dir").mkdir()
    for target in (tmp_path / "a-dir", SPEC / "under-a-file.json"):
        outcome = run_cli("train", spec, "--output-dir", tmp_path / "out", "--guard", "off", "--json", target)
        assert_contract(outcome, allowed=(2,))
        assert "--json" in outcome.stderr and not marker.exists()


def test_run_refuses_a_bad_preempt_after_before_the_pipeline_runs(tmp_path):
    outcome = run_cli(
        "run",
        ROOT / "examples" / "local-healthy.yaml",
        "--preempt-after",
        "soon",
        "--pipeline-root",
        tmp_path / "root",
    )
    assert_contract(outcome, allowed=(2,))
    assert "--preempt-after" in outcome.stderr and not (tmp_path / "root").exists()


def test_compile_into_a_path_that_is_a_file_is_bad_input(tmp_path):
    (tmp_path / "guarded_training.yaml").mkdir()  # a directory where a YAML file goes
    for target in (SPEC, tmp_path):
        outcome = run_cli("compile", "--output-dir", target, "--image", "us-docker.pkg.dev/p/r/c:1")
        assert_contract(outcome, max_seconds=30, allowed=(2,))
        assert "--output-dir" in outcome.stderr


# --- text that would drive the terminal ----------------------------------------------------------

ESCAPES = "\x1b[1A\x1b[2K\rPASSED\x1b]0;owned\x07\u202e"


def _raw_control(text: str) -> bool:
    return any(c in text for c in "\x1b\r\x07\u202e")


def test_a_series_name_cannot_drive_the_terminal(tmp_path):
    # A metric named with ESC sequences once went raw into the verdict: it could erase the line
    # that said FAILED and write PASSED over it.
    path = tmp_path / "h.jsonl"
    path.write_text(
        "".join(
            json.dumps({"step": s, "split": "train", "metrics": {"loss": 1 / s, f"x{ESCAPES}": 1.0}}) + "\n"
            for s in range(1, 30)
        )
    )
    outcome = run_cli("validate", path, "--markdown", tmp_path / "r.md", "--json", tmp_path / "r.json")
    assert_contract(outcome, allowed=(0,))
    assert "\\x1b[1A" in outcome.stdout
    for text in (
        outcome.output,
        (tmp_path / "r.md").read_text(),
        json.loads((tmp_path / "r.json").read_text()).__repr__(),
    ):
        assert not _raw_control(text)


@pytest.mark.parametrize(
    "args",
    [
        ("validate", "MISSING", "--val-metric", ESCAPES),
        ("triage", "--text", f"RuntimeError: CUDA out of memory {ESCAPES}"),
        ("train", SPEC, "--guard", ESCAPES),
    ],
)
def test_flags_and_logs_cannot_drive_the_terminal(tmp_path, args):
    args = tuple(history(tmp_path / "h.jsonl") if a == "MISSING" else a for a in args)
    outcome = run_cli(*args)
    assert_contract(outcome)
    assert not _raw_control(outcome.output), outcome.output


def test_a_spec_value_in_preflight_evidence_cannot_drive_the_terminal(tmp_path):
    spec = tmp_path / "s.yaml"
    # YAML's double-quoted \e is ESC, \r a carriage return.
    spec.write_text(
        SPEC.read_text().replace("machineType: a2-highgpu-1g", 'machineType: "a2-highgpu-1g\\e[2J\\rPASS"')
    )
    outcome = run_cli(
        "preflight",
        spec,
        "-p",
        "my-project",
        "-r",
        "us-central1",
        "--only",
        "compat",
        "--json",
        tmp_path / "r.json",
    )
    assert_contract(outcome)
    assert not _raw_control(outcome.output)
