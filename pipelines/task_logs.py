"""One log file per task, and one line per task start and end for the person watching.

The KFP local runner writes everything — its own log lines, each component's streamed output, the
executor's JSON — to ``sys.stdout``. :class:`TaskLogSplitter` stands in for ``sys.stdout`` while a
pipeline runs: every line goes, without colour codes, to the log file of the task that printed it
(``<task>.log``; lines before the first task to ``pipeline.log``), and ``on_event`` hears when a
task starts and when it ends with its status, which is all a person needs to see go by. Lines
are redacted (``trainguard.redaction``) before they are filed.
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from trainguard.redaction import redact

__all__ = ["RedactingStream", "TaskEvent", "TaskLogSplitter", "TaskReporter", "strip_ansi"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_START = re.compile(r"Executing task '([\w.-]+)'")
_END = re.compile(r"Task '([\w.-]+)' finished with status (\w+)")
# What a person watching wants to see go by without opening the task's log: the launcher's lines
# about the job's life (preemptions, restarts, the guard's stop, a run directory reused).
_NOTABLE = re.compile(
    r"\[trainguard\] ((?:preempting|killing) the job.*|.*; restarting the job.*|guard: stopping the job.*"
    r"|early stop:.*|run \S+: \S+ holds .*|run \S+: continuing .*|(?:Ctrl-C|SIGTERM): stopping the workers.*)"
)
_NOTE_CHARS = 240


def strip_ansi(text: str) -> str:
    """``text`` without terminal colour codes."""
    return _ANSI.sub("", text)


@dataclass(frozen=True)
class TaskEvent:
    """A task started (``status`` ''), ended (``SUCCESS`` / ``FAILURE``), or said something a
    person should see (``NOTE``, with ``text``)."""

    task: str
    status: str
    seconds: float
    log_path: Path
    text: str = ""


class TaskLogSplitter(io.TextIOBase):
    """A text stream that files each line under the task that printed it.

    Args:
        directory: where ``<task>.log`` files go (created).
        on_event: called on each task start and end.
    """

    def __init__(self, directory: Path, on_event: Callable[[TaskEvent], None]) -> None:
        super().__init__()
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._on_event = on_event
        self._partial = ""
        self._task = ""
        self._started = 0.0
        self._handle: TextIO = open(self.directory / "pipeline.log", "a", encoding="utf-8")  # noqa: SIM115

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        data = self._partial + text
        *lines, self._partial = data.split("\n")
        for line in lines:
            self._line(strip_ansi(line))
        return len(text)

    def flush(self) -> None:
        if not self._handle.closed:
            self._handle.flush()

    @property
    def task(self) -> str:
        """The task whose lines are being filed now ('' before the first)."""
        return self._task

    def log_path(self, task: str) -> Path:
        """Where ``task``'s log goes."""
        return self.directory / f"{task}.log"

    def _line(self, line: str) -> None:
        start = _START.search(line)
        if start:
            self._switch(start.group(1))
            self._started = time.monotonic()
            self._on_event(TaskEvent(self._task, "", 0.0, self.log_path(self._task)))
        # The executor's JSON echoes the job spec (env values, args): a token there must not
        # land in a log file the summary points people to.
        self._handle.write(redact(line) + "\n")
        note = _NOTABLE.search(line) if self._task else None
        if note:
            text = redact(note.group(1))
            if text.startswith("guard: stopping the job: "):  # the class; the summary says the rest
                text = "guard: stopping the job: " + text.split(": ", 2)[2].split(":", 1)[0]
            text = text if len(text) <= _NOTE_CHARS else text[: _NOTE_CHARS - 1] + "…"
            self._on_event(TaskEvent(self._task, "NOTE", 0.0, self.log_path(self._task), text))
        end = _END.search(line)
        if end and end.group(1) == self._task:
            self._handle.flush()
            self._on_event(
                TaskEvent(
                    self._task, end.group(2), time.monotonic() - self._started, self.log_path(self._task)
                )
            )

    def _switch(self, task: str) -> None:
        self._handle.close()
        self._task = task
        self._handle = open(self.log_path(task), "a", encoding="utf-8")  # noqa: SIM115

    def close(self) -> None:
        if self._partial:
            self._line(strip_ansi(self._partial))
            self._partial = ""
        if not self._handle.closed:
            self._handle.close()
        super().close()


class TaskReporter:
    """Prints one line per task start and end: a spinner in a terminal, plain lines in a log.

    Args:
        stream: where the lines go (default ``sys.stdout`` at creation).
        indent: prefix of every line.
    """

    def __init__(self, stream: TextIO | None = None, indent: str = "  ") -> None:
        import sys

        from rich.console import Console

        self._console = Console(file=stream or sys.stdout, highlight=False, soft_wrap=True)
        self._indent = indent
        self._status = None

    def __call__(self, event: TaskEvent) -> None:
        if event.status == "NOTE":
            self._console.print(f"{self._indent}{event.task}: {event.text}", markup=False)
            return
        if not event.status:
            if self._console.is_terminal:
                self._status = self._console.status(f"{self._indent}{event.task} running…")
                self._status.start()
            else:
                self._console.print(f"{self._indent}{event.task}: started", markup=False)
            return
        if self._status is not None:
            self._status.stop()
            self._status = None
        mark = "passed" if event.status == "SUCCESS" else "FAILED"
        self._console.print(f"{self._indent}{event.task}: {mark} in {event.seconds:.1f} s", markup=False)


class RedactingStream(io.TextIOBase):
    """A text stream that passes whole lines on to ``target``, each through the redaction table
    (``trainguard run --verbose``: the executor prints the job spec, env values included)."""

    def __init__(self, target: TextIO) -> None:
        super().__init__()
        self._target = target
        self._partial = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self._target.write(redact(line) + "\n")
        return len(text)

    def flush(self) -> None:
        self._target.flush()

    def close(self) -> None:
        if self._partial:
            self._target.write(redact(self._partial))
            self._partial = ""
        self.flush()
        super().close()
