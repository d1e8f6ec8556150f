"""Ctrl-C: a save first, exit 130, named as an interruption (not a preemption), logs kept —
for the runtime run directly, for `trainguard train --local` and for `trainguard run`.

Each test starts the command in its own session and sends SIGINT to the whole process group once
the trainer has logged an epoch, as a terminal does on Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.child_env import with_repo_on_path
from tests.requires import require

require("torch")
ROOT = Path(__file__).resolve().parents[2]
TRAINER = ROOT / "containers" / "trainer" / "train.py"
ARGS = ["--epochs=30", "--checkpoint-every=1000", "--step-sleep=0.02"]


def ctrl_c_after(
    argv: list[str], cwd: Path, marker: str, timeout: float = 180, ready=None
) -> tuple[int, str]:
    """Runs ``argv`` in a new session, Ctrl-C's its group once ``marker`` shows in its output
    (or ``ready()`` says so)."""
    out = cwd / "out.log"
    with open(out, "w") as handle:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=with_repo_on_path(),
            # A terminal's foreground job gets Ctrl-C; a suite started in the background of a
            # non-interactive shell inherits SIGINT ignored (POSIX), and Python then keeps it so.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.monotonic() + timeout
        ready = ready or (lambda: marker in out.read_text())
        while not ready() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proc.poll() is None, out.read_text()[-3000:]
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=120)
    return code, out.read_text()


def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(
        "workerPoolSpecs:\n- machineSpec: {machineType: n1-standard-4}\n  replicaCount: 1\n"
        f"  containerSpec: {{imageUri: img, command: [python, '{TRAINER}'], args: {json.dumps(ARGS)}}}\n"
    )
    return path


def newest_step(checkpoints: Path) -> int:
    return max(int(p.parent.name.split("-")[1]) for p in checkpoints.glob("step-*/COMMIT"))


@pytest.mark.slow
def test_ctrl_c_on_the_trainer_itself_saves_the_running_step_and_exits_130(tmp_path):
    env_out = tmp_path / "run"
    code, output = ctrl_c_after(
        [sys.executable, str(TRAINER), *ARGS, f"--output-dir={env_out}"], tmp_path, "epoch 1 step"
    )
    assert code == 130, output[-2000:]
    assert "interrupted (Ctrl-C): saved step" in output and "Traceback" not in output
    assert newest_step(env_out / "checkpoints") > 0  # no periodic save was due: this is Ctrl-C's


@pytest.mark.slow
def test_ctrl_c_on_train_local_is_an_interruption_with_exit_130_after_the_workers_saved(tmp_path):
    code, output = ctrl_c_after(
        [sys.executable, "-m", "trainguard.cli", "train", str(spec_file(tmp_path)), "--output-dir", "out"],
        tmp_path,
        "epoch 1 step",
    )
    assert code == 130, output[-3000:]
    assert "trainguard: interrupted:" in output and "interrupted by Ctrl-C" in output
    # Ctrl-C is named an interruption, never a preemption (the save-cost line may still say
    # whether a preemption save would fit the notice).
    after = output.split("Ctrl-C: stopping")[-1]
    assert "class:" not in output and "preempted" not in after and "class: preemption" not in after
    assert "saved step" in output and "--resume" in output
    assert newest_step(tmp_path / "out" / "checkpoints") > 0


@pytest.mark.slow
def test_ctrl_c_on_run_keeps_the_task_logs_and_exits_130(tmp_path):
    code, output = ctrl_c_after(
        [sys.executable, "-m", "trainguard.cli", "run", str(spec_file(tmp_path)), "--pipeline-root", "root"],
        tmp_path,
        "",
        ready=lambda: any(
            '"val"' in p.read_text() for p in (tmp_path / "root").glob("*/train/history.jsonl")
        ),
    )
    assert code == 130, output[-3000:]
    assert "INTERRUPTED (Ctrl-C) during task 'train'" in output
    [logs] = (tmp_path / "root").glob("*/logs")
    train_log = (logs / "train.log").read_text()
    assert "Ctrl-C: stopping the workers" in train_log and "saved step" in train_log
