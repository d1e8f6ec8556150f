"""The training history: one JSON record per logged step and split, in a JSONL file.

Record shape (one line each)::

    {"step": 120, "epoch": 3, "split": "train", "time": 1732981000.5, "metrics": {"loss": 0.41}}

``split`` is ``train`` or ``val`` (any string is kept). Non-finite values are written as the JSON
extensions ``NaN``/``Infinity`` that Python's json reads back. A run that resumes from a checkpoint
at step S calls ``HistoryWriter(path, resume_step=S)``: records after S (logged before the crash,
about to be logged again) are dropped, so the file has neither duplicates nor gaps.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from trainguard.runtime.save_cost import SAVE_KEY, SAVE_SPLIT
from trainguard.runtime.storage import store_for

__all__ = ["HistoryWriter", "read_history_records", "is_save_record", "RECORD_KEYS"]

RECORD_KEYS = ("step", "epoch", "split", "time", "metrics")


def read_history_records(text: str, *, skipped: list[int] | None = None, saves: bool = False) -> list[dict]:
    """Parses JSONL text, skipping a truncated last line (a crash mid-write).

    Args:
        text: the history.
        skipped: when given, lines that are not a record (corrupt JSON, not an object, no integer
            ``step``) are skipped and their 1-based numbers appended here; otherwise a corrupt line
            other than the last raises ``ValueError``.
        saves: keep the checkpoint saves' measures (split ``checkpoint``, no ``metrics``: see
            :mod:`~trainguard.runtime.save_cost`); by default only the metric records come back.
    """
    records = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if skipped is not None and not _is_record(record):
                raise ValueError("not a history record")
            if saves or not is_save_record(record):
                records.append(record)
        except ValueError:
            if index == len(lines) - 1:
                break  # A torn final line: the writer died mid-append.
            if skipped is None:
                raise
            skipped.append(index + 1)
    return records


def is_save_record(record: object) -> bool:
    """Whether ``record`` is a checkpoint save's measure rather than metrics."""
    return (
        isinstance(record, dict)
        and record.get("split") == SAVE_SPLIT
        and isinstance(record.get(SAVE_KEY), dict)
    )


def _is_record(record: object) -> bool:
    if not isinstance(record, dict):
        return False
    step = record.get("step")
    return isinstance(step, int) and not isinstance(step, bool)


class HistoryWriter:
    """Appends history records; survives restarts without duplicating or losing records.

    Local and FUSE paths are appended to and flushed per record. ``gs://`` objects cannot be
    appended to, so they are rewritten whole on ``flush()`` (call it at each checkpoint) and on
    ``close()``.

    Args:
        path: a local path or ``gs://`` URI.
        resume_step: the step of the checkpoint the run resumed from; None for a fresh run, which
            starts a new file.
        enabled: False on non-chief workers, which then write nothing.
    """

    def __init__(self, path: str, resume_step: int | None = None, enabled: bool = True) -> None:
        self.path = path
        self.enabled = enabled
        self._remote = path.startswith("gs://")
        self._records: list[dict] = []
        self._handle = None
        self._planned = 0
        if not enabled:
            return
        store = store_for(path)
        existing: list[dict] = []
        if resume_step is not None and store.exists(path):
            # A damaged line must not stop the run from resuming: keep every good record, drop the
            # rest, and say so (validation reads the rewritten file).
            skipped: list[int] = []
            text = store.read_bytes(path).decode("utf-8", errors="replace")
            existing = read_history_records(text, skipped=skipped, saves=True)
            existing = [r for r in existing if r["step"] <= resume_step]
            if skipped:
                shown = ", ".join(map(str, skipped[:10])) + (" …" if len(skipped) > 10 else "")
                print(
                    f"trainguard: history {path}: dropped {len(skipped)} unreadable line(s) "
                    f"(line {shown}); kept {len(existing)} record(s) up to step {resume_step}",
                    file=sys.stderr,
                    flush=True,
                )
        self._records = existing
        payload = "".join(self._line(r) for r in existing).encode("utf-8")
        store.write_bytes(path, payload)
        if not self._remote:
            self._handle = open(Path(path), "a", encoding="utf-8")  # noqa: SIM115

    @staticmethod
    def _line(record: dict) -> str:
        return json.dumps(record, allow_nan=True, separators=(",", ":")) + "\n"

    def log(self, step: int, split: str = "train", epoch: int | None = None, **metrics: float) -> None:
        """Records ``metrics`` for ``step`` and ``split``."""
        if not self.enabled:
            return
        # NaN/Inf are kept on purpose: they are what validation looks for.
        clean = {key: float(value) for key, value in metrics.items()}
        record = {
            "step": int(step),
            "epoch": epoch,
            "split": split,
            "time": round(time.time(), 3),
            "metrics": clean,
        }
        if self._planned:
            record["planned_steps"], self._planned = self._planned, 0
        self._records.append(record)
        if self._handle is not None:
            self._handle.write(self._line(record))
            self._handle.flush()

    def record(self, record: dict) -> None:
        """Appends a record as it is (a checkpoint save's measure: no ``metrics``)."""
        if not self.enabled:
            return
        self._records.append(dict(record))
        if self._handle is not None:
            self._handle.write(self._line(record))
            self._handle.flush()

    def plan(self, total_steps: int) -> None:
        """Declares the run's total number of steps: the next record carries
        ``"planned_steps": N``, by which the in-flight guard sizes what stopping the run saves."""
        if self.enabled and total_steps > 0:
            self._planned = int(total_steps)

    @property
    def records(self) -> list[dict]:
        """Every record of this run so far, including those kept from before a resume."""
        return list(self._records)

    def flush(self) -> None:
        """Makes the records durable (rewrites the object on ``gs://``)."""
        if not self.enabled:
            return
        if self._remote:
            store_for(self.path).write_bytes(
                self.path, "".join(self._line(r) for r in self._records).encode("utf-8")
            )
        elif self._handle is not None:
            self._handle.flush()

    def close(self) -> None:
        """Flushes and closes."""
        self.flush()
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
