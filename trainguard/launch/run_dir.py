"""Which directory a training run writes to: its own, never another run's.

An output directory is reused all the time — the examples, a fixed ``baseOutputDirectory`` in a
spec, a pipeline submitted again. A run that writes where another one wrote would read that run's
history (the in-flight guard judged the old curve) and resume its checkpoints (a fixed learning
rate resumed the diverged weights). So each run has an identity (``run_id``) and a directory that
holds only it:

- the directory the user named (the *root*), when no other run holds it — the first run there
  keeps the plain layout (``<root>/model/``, ``checkpoints/``, ``logs/``, ``history.jsonl``);
- else ``<root>/runs/<run_id>/``, beside the earlier run's outputs, said in one line.

A run holds a directory when its marker (``trainguard-run.json``: run id, start time, display
name) is there, or — for outputs written before markers existed, or by a job that never used
trainguard — when it has a history or files under ``checkpoints/``, ``model/`` or ``logs/``. A marker
with no outputs beside it (a run that never started) holds nothing.

The same ``run_id`` finds the same directory again, so what is one run resumes: Vertex's own
restarts and preemptions (same job, same environment), an attempt of the same pipeline task
(the pipelines pass the pipeline job's name), a fallback to another region. A new run resumes
another one only when asked (``resume``: the newest run under the root).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from trainguard.errors import ConfigError
from trainguard.runtime.env import HISTORY_FILENAME
from trainguard.runtime.storage import FileStore, join, store_for

__all__ = ["MARKER", "RUNS_DIR", "RunInfo", "RunDir", "claim", "new_run_id", "check_run_id", "task_run_id"]

MARKER = "trainguard-run.json"
RUNS_DIR = "runs"
# What a job writes under its base directory (Vertex's environment contract, and our history).
_OUTPUT_DIRS = ("checkpoints", "model", "logs")
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def new_run_id(now: float | None = None) -> str:
    """A fresh, sortable run id: ``run-20261201-201500-3fa2``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"run-{stamp}-{uuid.uuid4().hex[:4]}"


def check_run_id(run_id: str, flag: str = "--run-id") -> str:
    """``run_id`` if it is one path segment of letters, digits, ``.``, ``_`` and ``-``.

    Raises:
        ConfigError: anything else (a ``/`` or ``..`` would reach outside the output directory).
    """
    if not _RUN_ID.fullmatch(run_id) or run_id in {".", ".."} or ".." in run_id:
        raise ConfigError(
            f"{flag} {run_id!r}: a run id is 1-128 letters, digits, '.', '_' or '-', starting with "
            "a letter or digit (for example run-2026-12-01 or my-experiment-3)"
        )
    return run_id


def task_run_id(output_uri: str) -> str:
    """The run id of a pipeline task that was given none: ``task-<hash of its output URI>``,
    the same for every attempt of that task, different for every other task and pipeline run."""
    import hashlib

    return f"task-{hashlib.sha1(output_uri.encode()).hexdigest()[:12]}"


@dataclass(frozen=True)
class RunInfo:
    """A run found in a directory.

    Attributes:
        run_id: its id ('' for outputs with no marker).
        base: the directory it wrote to.
        started: when it started (ISO 8601, UTC; '' when unknown).
        display_name: the job's display name ('' when unknown).
    """

    run_id: str
    base: str
    started: str = ""
    display_name: str = ""

    def describe(self) -> str:
        """``run run-… (my-job, started 2026-12-01T20:15:00Z)`` or ``an earlier run``."""
        if not self.run_id:
            return "the outputs of an earlier job (no trainguard-run.json)"
        about = ", ".join(
            filter(None, [self.display_name, f"started {self.started}" if self.started else ""])
        )
        return f"run {self.run_id}" + (f" ({about})" if about else "")


@dataclass(frozen=True)
class RunDir:
    """Where one run writes, and why there.

    Attributes:
        run_id: this run's id.
        root: the directory the user named.
        base: this run's base output directory (``root``, or ``root/runs/<run_id>``).
        resumed: this run continues a run that wrote to ``base`` before.
        displaced_by: the run that holds ``root`` when ``base`` is not ``root``.
    """

    run_id: str
    root: str
    base: str
    resumed: bool = False
    displaced_by: RunInfo | None = None

    def message(self) -> str:
        """One line for people: where this run writes, and what it did not touch."""
        if self.resumed:
            return f"run {self.run_id}: continuing the run in {self.base} (its history and checkpoints)"
        if self.displaced_by is not None:
            return (
                f"run {self.run_id}: {self.root} holds {self.displaced_by.describe()}; this run "
                f"writes beside it, to {self.base}, and reads nothing of it (to continue that run "
                "instead: --resume, or resume=True on the train component)"
            )
        return f"run {self.run_id}: outputs in {self.base}"


def _marker(store: FileStore, base: str) -> RunInfo | None:
    """The run whose marker is in ``base`` (None: no marker, or one that is not ours to trust)."""
    path = join(base, MARKER)
    if not store.exists(path):
        return None
    try:
        data = json.loads(store.read_bytes(path))
    except (OSError, ValueError):
        return None  # unreadable or not JSON: counted as outputs with no marker
    if not isinstance(data, dict) or not isinstance(data.get("run_id"), str):
        return None
    return RunInfo(str(data["run_id"]), base, str(data.get("started", "")), str(data.get("display_name", "")))


def _has_outputs(store: FileStore, base: str) -> bool:
    """A history, or any file under checkpoints/, model/ or logs/."""
    if store.exists(join(base, HISTORY_FILENAME)):
        return True
    return any(store.any_under(join(base, sub)) for sub in _OUTPUT_DIRS)


def _holder(store: FileStore, base: str) -> RunInfo | None:
    """The run that holds ``base``, if any (see the module docstring)."""
    if not _has_outputs(store, base):
        return None
    return _marker(store, base) or RunInfo("", base)


def _runs(store: FileStore, root: str) -> list[RunInfo]:
    """Every run with outputs under ``root`` (root itself and ``root/runs/*``)."""
    found = [r for r in [_holder(store, root)] if r is not None]
    for name in store.child_dirs(join(root, RUNS_DIR)):
        held = _holder(store, join(root, RUNS_DIR, name))
        if held is not None:
            found.append(held)
    return found


def _write_marker(store: FileStore, base: str, run_id: str, display_name: str) -> None:
    now = time.time()
    started = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
    body = {"run_id": run_id, "started": started, "display_name": display_name}
    try:
        if not base.startswith("gs://"):
            Path(base).mkdir(parents=True, exist_ok=True)
        store.write_bytes(join(base, MARKER), (json.dumps(body, indent=2) + "\n").encode())
    except OSError as exc:
        raise ConfigError(
            f"cannot create the output directory {base}: {exc.strerror or exc}; choose a "
            "writable --output-dir (or baseOutputDirectory)"
        ) from None


def claim(
    root: str,
    *,
    run_id: str = "",
    resume: bool = False,
    display_name: str = "",
    store: FileStore | None = None,
    say=None,
) -> RunDir:
    """Chooses (and marks) the directory of one run under ``root``.

    Args:
        root: the output directory the user named (local path, ``/gcs/…`` or ``gs://…``).
        run_id: this run's id; the same id finds its own directory again. '' makes a new one.
        resume: continue the newest run under ``root`` (its id and directory) instead of
            starting one; with nothing there to continue, a new run starts (said through ``say``).
        display_name: recorded in the marker.
        store: the storage to use (default: the one that serves ``root``, 10 s deadline).
        say: called with a line for people when ``resume`` finds nothing to continue.

    Raises:
        ConfigError: an invalid ``run_id``, or a marker that cannot be written.
    """
    root = root.rstrip("/") or "/"
    store = store or store_for(root, deadline_s=10.0)
    if run_id:
        check_run_id(run_id)
    if resume and not run_id:
        runs = _runs(store, root)
        if runs:
            newest = max(runs, key=lambda r: (r.started, r.base != root))
            if not newest.run_id:  # outputs with no marker: adopt them under a new id
                newest = RunInfo(new_run_id(), newest.base)
                _write_marker(store, newest.base, newest.run_id, display_name)
            return RunDir(newest.run_id, root, newest.base, resumed=True)
        if say is not None:
            say(f"--resume: {root} holds no earlier run to continue; starting a new one")
    run_id = run_id or new_run_id()
    holder = _holder(store, root)
    if holder is None or holder.run_id == run_id:
        resumed = holder is not None
        if not resumed:
            _write_marker(store, root, run_id, display_name)
        return RunDir(run_id, root, root, resumed=resumed)
    base = join(root, RUNS_DIR, run_id)
    own = _holder(store, base)
    if own is not None and own.run_id == run_id:
        return RunDir(run_id, root, base, resumed=True, displaced_by=holder)
    _write_marker(store, base, run_id, display_name)
    return RunDir(run_id, root, base, displaced_by=holder)
