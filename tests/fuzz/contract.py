"""The contract every input people hand us must keep, checked in-process (fast enough to fuzz).

Whatever the spec, history or triage text: the CLI exits 0, 1 or 2, never prints a traceback,
keeps its message to ``MAX_OUTPUT`` characters, and answers within ``max_seconds`` of CPU (the
thread's own time: a shared, loaded machine stretches wall time, not the work a blow-up does; wall
time gets a wide bound, against waits that would never end). Memory is
bounded by the parsers' caps (alias expansion, nesting depth); tests that need a number measure it
with ``peak_memory``.
"""

from __future__ import annotations

import functools
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

import typer.main
import typer.testing
from typer.testing import CliRunner

__all__ = ["MAX_OUTPUT", "Outcome", "run_cli", "assert_contract", "peak_memory"]

MAX_OUTPUT = 20_000

# typer's CliRunner.invoke builds the whole click command tree from the app at every call (~7 ms:
# it evaluates each command's annotations; the suite makes ~450 calls). The tree depends on the
# app alone, as in a ``trainguard`` process, which builds it once; so it is built once per app.
if hasattr(typer.testing, "_get_command"):
    typer.testing._get_command = functools.cache(typer.main.get_command)


@dataclass
class Outcome:
    """What one CLI invocation did."""

    args: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str
    seconds: float
    exception: BaseException | None
    cpu_seconds: float = 0.0

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_cli(*args: object, stdin: str | bytes | None = None) -> Outcome:
    """Runs ``trainguard ARGS`` in this process and records what a user would see."""
    from trainguard.cli import app

    runner = CliRunner()
    started, cpu_started = time.perf_counter(), time.thread_time()
    result = runner.invoke(app, [str(a) for a in args], input=stdin, catch_exceptions=True)
    seconds, cpu_seconds = time.perf_counter() - started, time.thread_time() - cpu_started
    exception = result.exception if not isinstance(result.exception, SystemExit) else None
    return Outcome(
        tuple(map(str, args)),
        result.exit_code,
        result.stdout,
        getattr(result, "stderr", "") or "",
        seconds,
        exception,
        cpu_seconds,
    )


def assert_contract(
    outcome: Outcome, *, max_seconds: float = 5.0, allowed: tuple[int, ...] = (0, 1, 2), user_text: str = ""
) -> None:
    """Exit 0/1/2, no traceback, no uncaught exception, bounded output and time.

    ``user_text`` is what the user handed in: a log that quotes a traceback may have it echoed as
    evidence; only a traceback the input did not hold counts as a crash.
    """
    where = f"trainguard {' '.join(a[:60] for a in outcome.args)}"
    assert outcome.exception is None, f"{where}: uncaught {outcome.exception!r}"
    assert outcome.exit_code in allowed, f"{where}: exit {outcome.exit_code}\n{outcome.output[:2000]}"
    if "Traceback (most recent call last)" not in user_text:
        assert "Traceback (most recent call last)" not in outcome.output, f"{where}\n{outcome.output[:4000]}"
    assert len(outcome.output) <= MAX_OUTPUT, f"{where}: {len(outcome.output)} characters of output"
    assert outcome.cpu_seconds <= max_seconds, f"{where}: took {outcome.cpu_seconds:.1f} s of CPU"
    assert outcome.seconds <= max(60.0, 10 * max_seconds), f"{where}: took {outcome.seconds:.1f} s"


def peak_memory(fn: Callable[[], object]) -> tuple[object, int]:
    """(fn's result or the exception it raised, peak bytes Python allocated while it ran)."""
    tracemalloc.start()
    try:
        try:
            result: object = fn()
        except BaseException as exc:  # the caller asserts on it
            result = exc
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak
