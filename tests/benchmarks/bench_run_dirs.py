"""Benchmark: the run-directory readers (MLflow's file store, DVCLive) against the Keras CSV reader
on the same points (``make bench``).

Writes one run three ways, the same metric values in each: an MLflow run (``metrics/<name>``, a
``<timestamp> <value> <step>`` line per point), a DVCLive run (``plots/metrics/<split>/<name>.tsv``,
``step<TAB>value``) and a Keras ``CSVLogger`` file (one row per step, a column per metric). Two
shapes: few long series (2 metrics x N steps, a per-step training log) and many short ones (40
metrics x N/20 steps, a per-epoch log of many metrics). Each read runs in a fresh interpreter
(its own peak memory) and is timed in CPU seconds; the figure to compare is each reader's points/s
as a share of the CSV reader's on the same shape, measured side by side in one run (the machine
is shared). Goal: each run-directory reader reads >= 0.5 M points/s of CPU time on every shape, with
peak memory above the interpreter's under 4x the points kept (16 bytes a point) plus 64 MiB.

Usage: ``python tests/benchmarks/bench_run_dirs.py [--points N] [--check]`` (``--check`` exits 1
when a goal is missed).
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
# A floor, not a boast: a 100,000-step run of 5 metrics (500,000 points) reads within a second.
GOAL_POINTS_PER_CPU_S = 500_000
MEMORY_FACTOR, MEMORY_SLACK_MIB = 4, 64


def write_run(root: Path, metrics: int, steps: int, seed: int = 0) -> dict[str, Path]:
    """The same values as an MLflow run, a DVCLive run and a Keras CSV under ``root``."""
    rng = np.random.default_rng(seed)
    names = [("train" if i % 2 == 0 else "val", f"m{i // 2}_loss") for i in range(metrics)]
    values = 1.0 / (np.arange(steps)[None, :] + 1.0) + rng.random((metrics, steps)) * 1e-3
    step_text = [str(s) for s in range(steps)]
    mlflow = root / "mlruns" / "0" / "run"
    (mlflow / "metrics").mkdir(parents=True)
    (mlflow / "meta.yaml").write_text("run_id: run\nexperiment_id: '0'\n")
    for (split, name), row in zip(names, values, strict=True):
        metric = f"{name}" if split == "train" else f"val_{name}"
        cells = [repr(float(v)) for v in row]
        with open(mlflow / "metrics" / metric, "w") as f:
            f.writelines(f"{1700000000000 + s} {c} {s}\n" for s, c in enumerate(cells))
        tsv = root / "dvc" / "dvclive" / "plots" / "metrics" / split / f"{name}.tsv"
        tsv.parent.mkdir(parents=True, exist_ok=True)
        with open(tsv, "w") as f:
            f.write(f"step\t{name}\n")
            f.writelines(f"{s}\t{c}\n" for s, c in zip(step_text, cells, strict=True))
    header = ["epoch"] + [n if s == "train" else f"val_{n}" for s, n in names]
    csv = root / "keras.csv"
    with open(csv, "w") as f:
        f.write(",".join(header) + "\n")
        for s in range(steps):
            f.write(",".join([step_text[s], *(repr(float(v)) for v in values[:, s])]) + "\n")
    return {"mlflow": mlflow, "dvclive": root / "dvc", "keras_csv": csv}


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def child(path: str) -> dict:
    """One read in this fresh process; the peak is the resident high-water mark during it (reset
    first through /proc/self/clear_refs, so the imports' own peak does not hide it)."""
    import pyarrow.csv  # noqa: F401 - imported before the baseline is taken

    from trainguard.validation import load_history

    Path("/proc/self/clear_refs").write_text("5")
    base = _status_kib("VmRSS")
    cpu, start = _cpu_s(), time.perf_counter()
    history = load_history(path)
    return {
        "seconds": time.perf_counter() - start,
        "cpu_s": _cpu_s() - cpu,
        "points": history.points,
        "series": len(history.series),
        "peak_mib": (_status_kib("VmHWM") - base) / 1024,
    }


def measure(path: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(path)], env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"reading {path} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2_000_000)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--child")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    shapes = {"2 series x N steps": (2, args.points // 2), "40 series x N/40 steps": (40, args.points // 40)}
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    missed = []
    for label, (metrics, steps) in shapes.items():
        with tempfile.TemporaryDirectory(prefix="tg-bench-runs-") as tmp:
            paths = write_run(Path(tmp), metrics, steps)
            results = {kind: measure(path) for kind, path in paths.items()}
        csv_rate = results["keras_csv"]["points"] / max(results["keras_csv"]["cpu_s"], 1e-9)
        print(f"== {label}: {metrics * steps:,} points")
        for kind, r in results.items():
            rate = r["points"] / max(r["cpu_s"], 1e-9)
            kept_mib = r["points"] * 16 / 2**20
            print(
                f"  {kind:10s} {r['seconds']:6.2f} s  cpu {r['cpu_s']:6.2f} s  {rate / 1e6:6.2f} M points/s "
                f"({rate / csv_rate:5.2f}x the CSV reader)  peak +{r['peak_mib']:5.0f} MiB "
                f"(points {kept_mib:4.0f} MiB)  {r['series']} series"
            )
            if kind != "keras_csv":
                if rate < GOAL_POINTS_PER_CPU_S:
                    missed.append(f"{kind} on {label}: {rate / 1e6:.2f} M points/s")
                if r["peak_mib"] > MEMORY_FACTOR * kept_mib + MEMORY_SLACK_MIB:
                    missed.append(f"{kind} on {label}: peak +{r['peak_mib']:.0f} MiB")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(
        f"goal: >= {GOAL_POINTS_PER_CPU_S / 1e6:.1f} M points/s of CPU, memory within "
        f"{MEMORY_FACTOR}x the points + {MEMORY_SLACK_MIB} MiB: "
        + ("met" if not missed else f"NOT met ({missed})")
    )
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
