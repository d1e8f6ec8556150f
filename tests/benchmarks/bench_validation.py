"""Benchmark: validation throughput on a 10-million-point history (``make bench``).

Writes a JSONL history shaped like the reference trainer's (a train record per step with ``loss``
and ``lr``, a validation record every 100 steps with ``loss`` and ``accuracy``; floats written as
Python writes them, up to 17 digits) until it holds the requested number of points (metric
values), then measures, each in a fresh forked process so that peak memory is its own:

- reading alone (``load_history``),
- reading and judging (``validate`` on the path), and
- judging alone (``validate`` on the History already read).

It prints points/s for each, the ratio of read+judge time to read time, and each phase's peak
resident memory above the interpreter's baseline. The goal is >= 1 M points/s end to end with
memory bounded by the points kept (16 bytes each), not the file size.

Usage: ``python tests/benchmarks/bench_validation.py [--points N] [--keep PATH] [--check]``
(``--check`` exits 1 when end-to-end throughput is below the goal).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from trainguard.validation import load_history, validate  # noqa: E402

GOAL_POINTS_PER_S = 1_000_000
VAL_EVERY = 100


def write_history(path: Path, points: int, seed: int = 0) -> int:
    """Writes a trainer-like JSONL history with at least ``points`` metric values; returns it."""
    rng = np.random.default_rng(seed)
    per_step = 2 + 2 / VAL_EVERY
    steps = int(np.ceil(points / per_step))
    written = 0
    block = 200_000
    with open(path, "w", encoding="utf-8") as handle:
        for first in range(1, steps + 1, block):
            s = np.arange(first, min(first + block, steps + 1))
            loss = (2.3 * np.exp(-s / (steps / 5)) + 0.05
                    + rng.random(s.size) * 0.1).astype(np.float32).astype(np.float64)
            lines = []
            for step, value in zip(s.tolist(), loss.tolist(), strict=True):
                epoch = step // VAL_EVERY
                lines.append(f'{{"step":{step},"epoch":{epoch},"split":"train","time":'
                             f'{1732981000.0 + step * 0.01:.3f},"metrics":{{"loss":{value!r},'
                             f'"lr":0.001}}}}\n')
                written += 2
                if step % VAL_EVERY == 0:
                    lines.append(f'{{"step":{step},"epoch":{epoch},"split":"val","time":'
                                 f'{1732981000.0 + step * 0.01:.3f},"metrics":{{"loss":'
                                 f'{value * 1.1 + 0.02!r},"accuracy":0.9}}}}\n')
                    written += 2
            handle.write("".join(lines))
    return written


def _phase(kind: str, path: str, queue) -> None:
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if kind == "validate-history":
        history = load_history(path)
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        verdict = validate(history)
        elapsed = time.perf_counter() - start
        points = history.points
    else:
        start = time.perf_counter()
        if kind == "read":
            history = load_history(path)
            points = history.points
            verdict = None
        else:
            verdict = validate(path)
            points = verdict.history.points
        elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queue.put({"seconds": elapsed, "points": points, "peak_kib": peak, "base_kib": base,
               "headline": verdict.headline if verdict is not None else ""})


def run_phase(kind: str, path: str) -> dict:
    """Runs one phase in a forked child and returns its timings and memory."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_phase, args=(kind, path, queue))
    child.start()
    result = queue.get()
    child.join()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10_000_000)
    parser.add_argument("--keep", help="write (or reuse) the history at this path")
    parser.add_argument("--check", action="store_true", help="exit 1 below the goal")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="trainguard-bench-") as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "history.jsonl"
        if not path.exists():
            start = time.perf_counter()
            written = write_history(path, args.points)
            print(f"wrote {written:,} points ({path.stat().st_size / 2**20:.0f} MiB) in "
                  f"{time.perf_counter() - start:.1f} s")
        size_mib = path.stat().st_size / 2**20
        read = run_phase("read", str(path))
        full = run_phase("validate", str(path))
        rules = run_phase("validate-history", str(path))

    points = read["points"]

    def rate(phase: dict) -> float:
        return phase["points"] / phase["seconds"]

    def mem(phase: dict) -> str:
        extra = (phase["peak_kib"] - phase["base_kib"]) / 1024
        return f"peak RSS {phase['peak_kib'] / 1024:.0f} MiB (+{extra:.0f} MiB over baseline, " \
               f"{extra * 2**20 / points:.0f} B/point)"

    print(f"history: {points:,} points, {size_mib:.0f} MiB of JSONL")
    print(f"read alone:        {read['seconds']:6.2f} s  {rate(read) / 1e6:5.2f} M points/s  "
          f"{mem(read)}")
    print(f"read + validate:   {full['seconds']:6.2f} s  {rate(full) / 1e6:5.2f} M points/s  "
          f"{mem(full)}")
    print(f"validate (rules):  {rules['seconds']:6.2f} s  {rate(rules) / 1e6:5.2f} M points/s")
    ratio = full["seconds"] / read["seconds"]
    print(f"ratio read+validate / read alone: {ratio:.2f}")
    print(f"verdict: {full['headline']}")
    ok = rate(full) >= GOAL_POINTS_PER_S
    print(f"goal >= {GOAL_POINTS_PER_S / 1e6:.0f} M points/s end to end: "
          f"{'met' if ok else 'NOT met'} on this machine ({os.cpu_count()} CPUs)")
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
