"""Helpers shared by the framework guard tests: crafted checkpoints, history comparison, and the
two ways a run is interrupted (an exception, a SIGTERM)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from trainguard.runtime.history import read_history_records


def history(path: Path) -> list[tuple]:
    """The records of a JSONL history without their wall-clock times."""
    return [(r["step"], r["split"], r["epoch"], r["metrics"]) for r in read_history_records(path.read_text())]


def commit(step_dir: Path, files: dict[str, bytes]) -> None:
    """A checkpoint as the manager writes it: the files, then ``COMMIT`` naming them."""
    step_dir.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (step_dir / name).write_bytes(data)
    step = int(step_dir.name.split("-")[1])
    marker = {
        "step": step,
        "files": sorted(files),
        "sizes": {k: len(v) for k, v in files.items()},
        "metrics": {},
        "created": 0.0,
    }
    (step_dir / "COMMIT").write_text(json.dumps(marker))


class Evil:
    """Unpickling this makes a directory: proof that loading ran code from the file."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def crash() -> None:
    """A failure mid-step: the run dies with an exception, as when the VM goes away."""
    raise RuntimeError("the VM went away")


def sigterm_self() -> None:
    """What Vertex does at a Spot reclaim, delivered to this process."""
    os.kill(os.getpid(), signal.SIGTERM)
