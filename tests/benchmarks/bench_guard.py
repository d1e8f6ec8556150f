"""Benchmark: the in-flight guard's cost per poll, and how fast it stops a job (``make bench``).

1. **CPU per poll on a 10-million-point growing history.** A trainer-like JSONL history (the
   shape of ``bench_validation.py``'s) is written whole, then replayed into a "live" file: the
   guard first catches up on 99 % of it, then each poll appends the next ``--per-poll`` records
   (a job logging that many steps between two polls) and calls ``poll``. The guard's clock is
   shifted by ``--interval`` seconds per poll, as if the backend slept between polls, so its
   rationing of judgements acts as it would. Printed: CPU seconds per poll for reading (O(new
   bytes)), per judgement (O(points): ``validate`` on the whole history), how often it judged,
   the mean CPU per poll, and — side by side — what re-reading and re-judging the whole file at
   every poll costs.
2. **Delay from the first bad record written to the cancel call**, on the local backend with a
   1 s poll: a small trainer logs a healthy loss every 20 ms, then (after ``--healthy-s``)
   writes the wall time to a side file and logs an exploding loss (or NaN). A wrapper around the
   guard records each poll's time and when it returned the Stop. Printed per case: the delay in
   seconds and in polls (polls after the first bad record, the stopping one included).

Usage: ``python tests/benchmarks/bench_guard.py [--points N] [--per-poll R] [--repeats K]
[--skip-cost] [--skip-delay]``
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.benchmarks.bench_validation import write_history  # noqa: E402
from trainguard.guard import HistoryGuard, JobCost  # noqa: E402
from trainguard.launch.base import RunningJob  # noqa: E402
from trainguard.validation import validate  # noqa: E402


class ShiftedClock:
    """Real monotonic time plus the simulated sleeps between polls."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


def cost_per_poll(tmp: Path, points: int, per_poll: int, interval: float, polls: int) -> None:
    full = tmp / "full.jsonl"
    started = time.perf_counter()
    written = write_history(full, points)
    data = full.read_bytes()
    print(
        f"history: {written:,} points, {len(data) / 2**20:.0f} MiB of JSONL (written in "
        f"{time.perf_counter() - started:.1f} s)"
    )
    # Offsets of line starts near the end, to replay whole records per poll.
    cut = data.rfind(b"\n", 0, int(len(data) * 0.99)) + 1
    tail = data[cut:].splitlines(keepends=True)
    live = tmp / "history.jsonl"
    live.write_bytes(data[:cut])
    del data
    clock = ShiftedClock()
    guard = HistoryGuard("fail", cost=JobCost(8, 1), clock=clock)
    job = RunningJob("local/bench", "RUNNING", str(tmp), str(live), f"{tmp}/logs/", 60.0)
    cpu = time.process_time()
    wall = time.perf_counter()
    while guard.poll(job) is None and guard.bytes_read < cut:
        clock.offset += interval
    print(
        f"catch-up on {cut / 2**20:.0f} MiB: {time.perf_counter() - wall:.1f} s wall, "
        f"{time.process_time() - cpu:.1f} s CPU, {guard.polls} poll(s) (at most "
        f"128 MiB a poll), {guard.book.points:,} points held"
    )
    judged_before, judge_s_before = guard.judgements, guard.judge_seconds
    read_s_before = guard.read_seconds
    cpu_per_poll = []
    for i in range(polls):
        clock.offset += interval
        block = b"".join(tail[i * per_poll : (i + 1) * per_poll])
        if not block:
            break
        with open(live, "ab") as handle:
            handle.write(block)
        cpu = time.process_time()
        stop = guard.poll(job)
        cpu_per_poll.append(time.process_time() - cpu)
        if stop is not None:
            print(f"  (the guard stopped the replay: {stop.failure_class})")
            break
    n = len(cpu_per_poll)
    judgements = guard.judgements - judged_before
    judge_s = guard.judge_seconds - judge_s_before
    read_s = guard.read_seconds - read_s_before
    print(f"{n} polls of {per_poll} records ({per_poll * 2} points) each, {interval:g} s apart (simulated):")
    print(f"  read + parse per poll:  {read_s / n * 1000:7.2f} ms   (O(new bytes))")
    if judgements:
        print(
            f"  one judgement:          {judge_s / judgements:7.2f} s    "
            f"(validate on {guard.book.points:,} points)"
        )
    print(f"  judged {judgements} of {n} polls (CPU share 10 %, judgements > 0.1 s rationed)")
    print(f"  mean CPU per poll:      {statistics.mean(cpu_per_poll):7.3f} s   max {max(cpu_per_poll):.3f} s")
    cpu = time.process_time()
    verdict = validate(str(live))
    naive = time.process_time() - cpu
    print(
        f"  side by side, re-reading and re-judging the file each poll: {naive:.2f} s CPU per "
        f"poll ({verdict.history.points:,} points) = "
        f"{naive / statistics.mean(cpu_per_poll):.0f}x the guard's mean"
    )


TRAINER = textwrap.dedent("""
    import sys, time
    from trainguard.runtime import HistoryWriter, VertexEnv
    kind, healthy_s, marker = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    env = VertexEnv.from_environ()
    writer = HistoryWriter(env.history_path)
    started, step, marked = time.time(), 0, False
    while time.time() - started < 60:
        step += 1
        bad = time.time() - started >= healthy_s
        if bad and not marked:  # the wall time just before the first bad record is written
            with open(marker, "w") as f:
                f.write(repr(time.time()))
            marked = True
        if not bad:
            loss = 2.3 * 0.999 ** step + 0.3
        else:
            loss = float("nan") if kind == "nan" else 50.0 + step % 5
        writer.log(step, "train", loss=loss)
        time.sleep(0.02)
""")


class TimedGuard:
    """Records when each poll happened and when the Stop came."""

    def __init__(self, guard: HistoryGuard) -> None:
        self.guard = guard
        self.polls: list[float] = []
        self.stop_at: float | None = None

    def poll(self, job: RunningJob):
        self.polls.append(time.time())
        stop = self.guard.poll(job)
        if stop is not None and self.stop_at is None:
            self.stop_at = time.time()
        return stop


def delay(tmp: Path, kind: str, healthy_s: float, repeats: int) -> None:
    from trainguard.launch.local import LocalBackend
    from trainguard.spec import JobSpec

    script = tmp / "trainer.py"
    script.write_text(TRAINER)
    seconds, polls = [], []
    for r in range(repeats):
        out = tmp / f"{kind}-{r}"
        marker = out / "first_bad"
        out.mkdir()
        spec = JobSpec.create(
            "demo-project",
            "us-central1",
            machine_type="n1-standard-4",
            image_uri="local",
            command=["python", str(script)],
            args=[kind, str(healthy_s), str(marker)],
            display_name="bench",
        )
        backend = LocalBackend(
            output_dir=str(out),
            grace_s=2.0,
            extra_env={"PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
        if hasattr(backend, "watch_interval_s"):
            backend.watch_interval_s = 1.0
        timed = TimedGuard(HistoryGuard("fail", cost=JobCost(8, 1)))
        result = backend.run(spec, watcher=timed)
        if timed.stop_at is None or not marker.exists():
            print(f"  run {r}: no stop ({result.state})")
            continue
        bad_at = float(marker.read_text())
        seconds.append(timed.stop_at - bad_at)
        polls.append(sum(1 for t in timed.polls if t >= bad_at))
    if seconds:
        print(
            f"{kind}: first bad record -> cancel call over {len(seconds)} runs, 1 s polls: "
            f"median {statistics.median(seconds):.2f} s (max {max(seconds):.2f} s), "
            f"{statistics.median(polls):g} poll(s) (max {max(polls)})"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10_000_000)
    parser.add_argument("--per-poll", type=int, default=1000, help="records appended per poll")
    parser.add_argument("--interval", type=float, default=1.0, help="simulated poll interval")
    parser.add_argument("--polls", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--healthy-s", type=float, default=3.0)
    parser.add_argument("--skip-cost", action="store_true")
    parser.add_argument("--skip-delay", action="store_true")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="trainguard-bench-guard-"))
    try:
        if not args.skip_cost:
            cost_per_poll(tmp, args.points, args.per_poll, args.interval, args.polls)
        if not args.skip_delay:
            for kind in ("divergence", "nan"):
                delay(tmp, kind, args.healthy_s, args.repeats)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
