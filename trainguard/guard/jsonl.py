"""trainguard's JSONL history, parsed as it grows: whole lines now, a half-written last line later.

New bytes are split at their last newline; the whole lines go through the one JSONL reader,
:func:`trainguard.validation.readers.read_jsonl_bytes`, and the rest waits for the next poll (a
writer caught mid-line is normal). A line that is not a history record is *garbage*:
:class:`~trainguard.errors.HistoryError`, which the guard turns into "stopped guarding".

Planned steps: a record may carry a top-level ``"planned_steps": N`` (the run's total number of
steps), e.g. ``{"step": 0, "split": "plan", "planned_steps": 30000}``; the latest one seen wins.
The guard uses it to say how much of the run a stop saved.
"""

from __future__ import annotations

import json
import math

from trainguard.errors import HistoryError
from trainguard.guard.book import Added, SeriesBook
from trainguard.runtime.history import is_save_record
from trainguard.runtime.save_cost import SAVE_KEY
from trainguard.validation.readers import read_jsonl_bytes

__all__ = ["JsonlTail", "PLANNED_STEPS_KEY", "MAX_LINE_BYTES"]

PLANNED_STEPS_KEY = "planned_steps"
# A "line" longer than this with no newline is not a history record being written.
MAX_LINE_BYTES = 1 << 20
_PLANNED = f'"{PLANNED_STEPS_KEY}"'.encode()
_SAVE = f'"{SAVE_KEY}"'.encode()


class JsonlTail:
    """Accumulates a JSONL history from successive byte chunks.

    Attributes:
        book: the series so far.
        lines: whole lines consumed.
        planned_steps: the latest ``planned_steps`` a record declared, or None.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.book = SeriesBook()
        self.lines = 0
        self.planned_steps: int | None = None
        self.saves: list[dict] = []  # the checkpoint saves' measures (trainguard.runtime.save_cost)
        self._pending = b""

    def reset(self) -> None:
        """Forgets everything: the file was rewritten and is read again from its start."""
        self.book.clear()
        self.lines = 0
        self.planned_steps = None
        self.saves = []
        self._pending = b""

    @property
    def pending_bytes(self) -> int:
        """Bytes of a line not yet finished."""
        return len(self._pending)

    def feed(self, data: bytes, final: bool = False) -> Added:
        """Parses the whole lines that ``data`` completes.

        Args:
            data: bytes that follow what was fed before.
            final: the writer is done: an unfinished last line is dropped with a note.

        Raises:
            HistoryError: a line that is not a history record, or a "line" with no end in sight.
        """
        buf = self._pending + data if self._pending else data
        cut = buf.rfind(b"\n") + 1
        whole, self._pending = buf[:cut], buf[cut:]
        count = whole.count(b"\n")
        if len(self._pending) > MAX_LINE_BYTES:
            raise HistoryError(
                f"{self.source}: {len(self._pending)} bytes after line "
                f"{self.lines + count} without a line end: not a JSONL history"
            )
        if final and self._pending.strip():
            self.book.notes.append(
                f"skipped the truncated last line (line "
                f"{self.lines + count + 1}): the writer stopped mid-record"
            )
            self._pending = b""
        added = self._parse(whole) if whole.strip() else Added()
        self.lines += count
        return added

    def _parse(self, whole: bytes) -> Added:
        if _PLANNED in whole:
            self._read_plan(whole)
        if _SAVE in whole:
            self._read_saves(whole)
        where = f"{self.source} (from line {self.lines + 1})"
        try:
            history = read_jsonl_bytes(whole, where)
        except HistoryError:
            if _records_without_metrics(whole):
                return Added()  # e.g. only a plan record so far: nothing to judge yet
            raise
        self.book.records += history.records
        added = Added()
        for s in history.series.values():
            added.merge(self.book.add(s.name, s.split, s.metric, s.granularity, s.steps, s.values))
        return added

    def _read_plan(self, whole: bytes) -> None:
        start = 0
        while (hit := whole.find(_PLANNED, start)) >= 0:
            line_start = whole.rfind(b"\n", 0, hit) + 1
            line_end = whole.find(b"\n", hit)
            start = line_end + 1
            try:
                value = json.loads(whole[line_start:line_end]).get(PLANNED_STEPS_KEY)
            except (ValueError, AttributeError):
                continue  # the reader reports a broken line with its number
            if (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and math.isfinite(value)
                and value >= 1
            ):
                self.planned_steps = int(value)

    def _read_saves(self, whole: bytes) -> None:
        for raw in whole.split(b"\n"):
            if _SAVE not in raw:
                continue
            try:
                record = json.loads(raw)
            except ValueError:
                continue  # the reader reports a broken line with its number
            if is_save_record(record):
                self.saves.append(record)


def _records_without_metrics(whole: bytes) -> bool:
    """True when every line is a record with a numeric step (and none has a numeric metric)."""
    for raw in whole.split(b"\n"):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError:
            return False
        step = record.get("step") if isinstance(record, dict) else None
        if isinstance(step, bool) or not isinstance(step, int | float):
            return False
    return True
