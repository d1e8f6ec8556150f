"""Benchmark: validation throughput and memory on a 10-million-point history (``make bench``).

Writes a JSONL history shaped like the reference trainer's (a train record per step with ``loss``
and ``lr``, a validation record every 100 steps with ``loss`` and ``accuracy``; floats written as
Python writes them, up to 17 digits) until it holds the requested number of points (metric
values), and a Keras ``CSVLogger``-shaped CSV with as many points. Then measures, each phase in a
fresh interpreter so that its peak memory is its own:

- reading the JSONL alone (``load_history``), reading and judging it (``validate`` on the path),
  judging alone (``validate`` on the History already read), reading the CSV alone;
- the same reads with the readers of ``--baseline`` (default: the hand-written parser this round
  replaced), taken from git, side by side in the same run.

For each phase: wall seconds, points/s, CPU seconds (all threads), peak resident memory above the
interpreter's baseline (numpy and pyarrow already imported), split into the points kept (16 bytes
each) and the rest, and pyarrow's memory pools' peak. The goal is >= 3 M points/s end to end
with memory bounded by the points kept (~160 MB here) plus a constant, not by the file size
(~560 MiB). The machine is shared: the load average is printed before and after; compare ratios
and CPU seconds measured in one run.

Usage: ``python tests/benchmarks/bench_validation.py [--points N] [--keep DIR] [--baseline REV|none]
[--check]`` (``--check`` exits 1 when end-to-end throughput is below the goal).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT))  # for tests.git_tree; appended, so a phase's PYTHONPATH still picks trainguard

from tests.git_tree import trainguard_at  # noqa: E402

GOAL_POINTS_PER_S = 3_000_000
VAL_EVERY = 100
# The commit whose readers are the hand-written JSONL parser and csv-module readers.
BASELINE_REV = "93bba95"


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
            loss = (
                (2.3 * np.exp(-s / (steps / 5)) + 0.05 + rng.random(s.size) * 0.1)
                .astype(np.float32)
                .astype(np.float64)
            )
            lines = []
            for step, value in zip(s.tolist(), loss.tolist(), strict=True):
                epoch = step // VAL_EVERY
                lines.append(
                    f'{{"step":{step},"epoch":{epoch},"split":"train","time":'
                    f'{1732981000.0 + step * 0.01:.3f},"metrics":{{"loss":{value!r},'
                    f'"lr":0.001}}}}\n'
                )
                written += 2
                if step % VAL_EVERY == 0:
                    lines.append(
                        f'{{"step":{step},"epoch":{epoch},"split":"val","time":'
                        f'{1732981000.0 + step * 0.01:.3f},"metrics":{{"loss":'
                        f'{value * 1.1 + 0.02!r},"accuracy":0.9}}}}\n'
                    )
                    written += 2
            handle.write("".join(lines))
    return written


def write_csv(path: Path, points: int, seed: int = 1) -> int:
    """Writes a Keras CSVLogger-like log (epoch,accuracy,loss,val_accuracy,val_loss) with at least
    ``points`` values; returns it."""
    rng = np.random.default_rng(seed)
    rows = int(np.ceil(points / 4))
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("epoch,accuracy,loss,val_accuracy,val_loss\n")
        for first in range(0, rows, 200_000):
            e = np.arange(first, min(first + 200_000, rows))
            loss = (2.3 * np.exp(-e / (rows / 5)) + rng.random(e.size) * 0.1).tolist()
            acc = (1 - np.exp(-e / (rows / 5)) * 0.9).tolist()
            handle.write(
                "".join(
                    f"{i},{a!r},{x!r},{a * 0.97!r},{x * 1.1!r}\n"
                    for i, a, x in zip(e.tolist(), acc, loss, strict=True)
                )
            )
    return rows * 4


# --- one phase, in a child interpreter ---------------------------------------------------------


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child(kind: str, path: str) -> dict:
    """Runs one phase in this (fresh) process and returns its measurements."""
    import pyarrow as pa
    import pyarrow.csv  # noqa: F401 - imported before the baseline is taken, like numpy
    import pyarrow.json  # noqa: F401

    from trainguard.validation import load_history, validate

    history = load_history(path) if kind == "judge" else None
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cpu, start = _cpu_s(), time.perf_counter()
    verdict = None
    if kind == "judge":
        verdict = validate(history)
    elif kind == "read+judge":
        verdict = validate(path)
        history = verdict.history
    else:
        history = load_history(path)
    seconds, cpu = time.perf_counter() - start, _cpu_s() - cpu
    return {
        "seconds": seconds,
        "cpu_s": cpu,
        "points": history.points,
        "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "base_kib": base,
        "pool_peak": max(
            pa.default_memory_pool().max_memory() or 0, pa.system_memory_pool().max_memory() or 0
        ),
        "headline": verdict.headline if verdict is not None else "",
        "code": str(Path(sys.modules["trainguard"].__file__).parents[1]),
    }


def run_phase(kind: str, path: Path, code: Path) -> dict:
    """Runs one phase in a fresh interpreter that imports trainguard from ``code``."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(path)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        cwd=code,
    )
    if out.returncode != 0:
        raise RuntimeError(f"phase {kind} with {code} failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if Path(result["code"]).resolve() != code.resolve():
        raise RuntimeError(f"phase {kind} imported trainguard from {result['code']}, not {code}")
    return result


def baseline_code(rev: str, into: Path) -> Path | None:
    """``trainguard/`` as it was at ``rev`` (from git), or None when git cannot give it."""
    try:
        return trainguard_at(rev, into)
    except subprocess.CalledProcessError as exc:
        print(f"baseline {rev}: not available ({exc.stderr.decode().strip()[:200]})")
        return None


# --- report -----------------------------------------------------------------------------------


def _line(label: str, phase: dict, file_mib: float) -> str:
    rate = phase["points"] / phase["seconds"]
    extra = (phase["peak_kib"] - phase["base_kib"]) / 1024
    kept = phase["points"] * 16 / 2**20
    return (
        f"{label:38} {phase['seconds']:6.2f} s {rate / 1e6:5.2f} M points/s  "
        f"cpu {phase['cpu_s']:5.2f} s  peak RSS +{extra:4.0f} MiB = points {kept:.0f} + "
        f"{extra - kept:4.0f} MiB (file {file_mib:.0f} MiB; arrow pools peak "
        f"{phase['pool_peak'] / 2**20:.0f} MiB)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10_000_000)
    parser.add_argument("--keep", help="write (or reuse) the inputs in this directory")
    parser.add_argument("--baseline", default=BASELINE_REV, help="git revision, or 'none'")
    parser.add_argument("--check", action="store_true", help="exit 1 below the goal")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0

    with tempfile.TemporaryDirectory(prefix="trainguard-bench-") as tmp:
        where = Path(args.keep) if args.keep else Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        jsonl, csv = where / f"history-{args.points}.jsonl", where / f"keras-{args.points}.csv"
        for path, writer in ((jsonl, write_history), (csv, write_csv)):
            if not path.exists():
                start = time.perf_counter()
                written = writer(path, args.points)
                print(
                    f"wrote {written:,} points to {path.name} ({path.stat().st_size / 2**20:.0f} "
                    f"MiB) in {time.perf_counter() - start:.1f} s"
                )
        mib = {p: p.stat().st_size / 2**20 for p in (jsonl, csv)}
        print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
        new: dict[str, dict] = {}
        new["read"] = run_phase("read", jsonl, ROOT)
        new["read+judge"] = run_phase("read+judge", jsonl, ROOT)
        new["judge"] = run_phase("judge", jsonl, ROOT)
        new["csv"] = run_phase("read", csv, ROOT)
        old = {}
        code = baseline_code(args.baseline, Path(tmp) / "baseline") if args.baseline != "none" else None
        if code is not None:
            old["read"] = run_phase("read", jsonl, code)
            old["read+judge"] = run_phase("read+judge", jsonl, code)
            old["csv"] = run_phase("read", csv, code)
        print(f"load average after: {os.getloadavg()[0]:.2f}")

    print(
        f"JSONL: {new['read']['points']:,} points, {mib[jsonl]:.0f} MiB; "
        f"CSV: {new['csv']['points']:,} points, {mib[csv]:.0f} MiB"
    )
    print(_line("pyarrow readers, JSONL read", new["read"], mib[jsonl]))
    print(_line("pyarrow readers, JSONL read+validate", new["read+judge"], mib[jsonl]))
    print(_line("validate alone (rules)", new["judge"], mib[jsonl]))
    print(_line("pyarrow readers, Keras CSV read", new["csv"], mib[csv]))
    for kind, label in (
        ("read", "JSONL read"),
        ("read+judge", "JSONL read+validate"),
        ("csv", "Keras CSV read"),
    ):
        if kind in old:
            print(
                _line(
                    f"baseline {args.baseline}, {label}", old[kind], mib[csv] if kind == "csv" else mib[jsonl]
                )
            )
    for kind in ("read", "read+judge", "csv"):
        if kind in old:
            print(f"speed-up {kind}: {old[kind]['seconds'] / new[kind]['seconds']:.2f}x")
    print(f"verdict: {new['read+judge']['headline']}")
    rate = new["read+judge"]["points"] / new["read+judge"]["seconds"]
    ok = rate >= GOAL_POINTS_PER_S
    print(
        f"goal >= {GOAL_POINTS_PER_S / 1e6:.0f} M points/s end to end: "
        f"{'met' if ok else 'NOT met'} ({rate / 1e6:.2f} M points/s)"
    )
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
