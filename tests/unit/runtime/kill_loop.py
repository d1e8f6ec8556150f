"""The checkpoint invariant, tested by killing: start the loop of ``kill_child.py``, SIGKILL it at
a random moment, check, restart it (it resumes and re-saves what it restored), again and again.

After every kill, *the newest complete checkpoint that existed before a save began is still
complete, unless a newer one is*: restore finds a checkpoint at least as new as the last save the
child announced done, and all its files belong to that one save, whole.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.child_env import with_repo_on_path
from trainguard.runtime.checkpoint import CheckpointManager

CHILD = Path(__file__).with_name("kill_child.py")
ROOT = Path(__file__).resolve().parents[3]


def _last(lines: list[str], word: str) -> tuple[int, int] | None:
    found = [line.split() for line in lines if line.startswith(word + " ")]
    return (int(found[-1][1]), int(found[-1][2])) if found else None


def run_one(
    directory: str, *, async_save: bool, keep_last: int, size: int, delay: float, env: dict | None = None
) -> dict:
    """Starts the child, kills it ``delay`` s after it is ready, checks the invariant; returns what
    happened (for the failure message)."""
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), directory, "1" if async_save else "0", str(keep_last), str(size)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=with_repo_on_path(**(env or {})),
        cwd=str(ROOT),
    )
    lines: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        for line in proc.stdout:
            lines.append(line.strip())
            if line.startswith("ready"):
                ready.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    if not ready.wait(120):
        proc.kill()
        raise AssertionError(f"the child never got ready: {proc.stderr.read()[-3000:]}")
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    reader.join(10)
    done = _last(lines, "done")
    began = _last(lines, "begin")
    latest = CheckpointManager(directory).restore_latest()
    seen = {
        "delay": delay,
        "done": done,
        "began": began,
        "latest": None if latest is None else latest.step,
        "stderr": proc.stderr.read()[-2000:],
    }
    assert proc.returncode == -signal.SIGKILL, seen
    ready_line = _last(lines, "ready")
    before = done or (ready_line if ready_line and ready_line[0] else None)
    if before is None:
        return seen
    assert latest is not None, f"the only checkpoint was lost: {seen}"
    files = {name: latest.read(name) for name in ("a", "b", "c")}
    tags = {name: files[name][:32].split(b":")[:2] for name in files}
    assert len({bytes(b":".join(t)) for t in tags.values()}) == 1, f"mixed saves {tags}: {seen}"
    assert len({len(v) for v in files.values()}) == 1 and len(files["a"]) >= size, seen
    number, step = int(tags["a"][0]), int(tags["a"][1])
    assert number >= before[0], f"fell back from save {before} to save {number}: {seen}"
    assert latest.step == step, seen
    return seen


def kill_loop(
    directory: str,
    kills: int,
    seed: int,
    *,
    async_save: bool,
    keep_last: int,
    size: int,
    max_delay: float = 0.5,
    env: dict | None = None,
) -> list[dict]:
    rng = random.Random(seed)
    return [
        run_one(
            directory,
            async_save=async_save,
            keep_last=keep_last,
            size=size,
            delay=rng.uniform(0.0, max_delay),
            env=env,
        )
        for _ in range(kills)
    ]
