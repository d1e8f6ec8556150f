"""Benchmark: how soon a fallback launches, and how soon a hung job is stopped (``make bench``).

1. **From a refusal or a timeout to the next create**, on the Vertex test server with the real
   ``aiplatform_v1`` client: the job's region refuses it (429 over a quota limit), stocks out
   (the job ends FAILED) or holds it QUEUED past ``--max-queued`` (it is cancelled); the
   launcher's attempt loop (:mod:`trainguard.launch.attempts`) creates it in the next region.
   Polls run on a fake clock; the gap is real time measured at the server, from its answer that
   ended the attempt (the refusal, the poll that showed FAILED, the last poll of the cancel) to
   the next create's arrival. Side by side: one plain create round trip on the same server, so
   the gap reads as a number of API calls.
2. **From the last history record to the stop of a hung job**: on the local backend (real time,
   a small trainer that freezes after 1 s, ``--hang-after 2s``, the guard polling every 1 s) the
   record's own timestamp to the checkpoint its SIGTERM handler saved; on Vertex (fake clock,
   ``--hang-after 10m``, RUNNING polls every 15 s) the silence the guard measured when it asked
   for the cancel.

Usage: ``python tests/benchmarks/bench_fallback.py [--repeats K]``
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import socket
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.fake_time import FakeTime
from tests.servers.vertex_jobs import Scenario, VertexJobsServer  # noqa: E402
from trainguard.launch.alternatives import parse_fallbacks  # noqa: E402
from trainguard.launch.attempts import AttemptPlan, run_attempts  # noqa: E402
from trainguard.launch.vertex import VertexBackend  # noqa: E402
from trainguard.spec import JobSpec  # noqa: E402

L4 = "aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus"


def spec() -> JobSpec:
    return JobSpec.create(
        "my-project",
        "us-central1",
        machine_type="g2-standard-8",
        accelerator_type="NVIDIA_L4",
        accelerator_count=1,
        image_uri="us-docker.pkg.dev/my-project/t/trainer:1",
        base_output_dir="gs://bucket/runs/r1",
        display_name="bench",
    )


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def one_fallback(case: str) -> tuple[float, float]:
    """(seconds from the attempt's end to the next create, seconds of one create round trip)."""
    with VertexJobsServer() as server:
        os.environ["TRAINGUARD_ENDPOINT_AIPLATFORM"] = server.url
        fake = FakeTime()
        server.clock = fake.clock
        if case == "quota refusal (429)":
            server.set_quota(L4, 0, "NVIDIA_L4", region="us-central1")
        elif case == "stockout (FAILED)":
            server.in_region("us-central1", Scenario.stockout("us-central1"))
        else:
            server.in_region("us-central1", Scenario.stuck_queued())
        plan = AttemptPlan(spec(), parse_fallbacks("region=us-east4"))
        run_attempts(
            plan,
            backend_for=lambda first: VertexBackend(
                clock=fake.clock,
                sleep=fake.sleep,
                resume_prior=first,
                max_queued_s=1200,
                stream=io.StringIO(),
            ),
            watcher_for=lambda s: None,
        )
        ordered = server.requests
        east = next(r for r in ordered if r.verb == "create" and "/us-east4/" in r.path)
        ended = max(
            r.answered_at for r in ordered if "/us-central1/" in r.path and r.answered_at <= east.received_at
        )
        trip = [r for r in ordered if r.verb == "create"][-1]
        return east.received_at - ended, trip.answered_at - trip.received_at


def fallbacks(repeats: int) -> None:
    os.environ["TRAINGUARD_ENDPOINT_LOGGING"] = f"http://127.0.0.1:{closed_port()}"
    os.environ["TRAINGUARD_ENDPOINT_CLOUDQUOTAS"] = f"http://127.0.0.1:{closed_port()}"
    print("from the end of an attempt to the next create (real time, at the server):")
    for case in ("quota refusal (429)", "stockout (FAILED)", "QUEUED past --max-queued (cancelled)"):
        one_fallback(case)  # warm: imports, the first connection
        gaps, trips = zip(*(one_fallback(case) for _ in range(repeats)), strict=True)
        print(
            f"  {case:<38} median {statistics.median(gaps) * 1000:6.1f} ms, max {max(gaps) * 1000:6.1f} ms"
            f"  (a create round trip: {statistics.median(trips) * 1000:.1f} ms; "
            f"{statistics.median(gaps) / max(statistics.median(trips), 1e-6):.0f}×)"
        )


WORKER = """
import json, os, signal, sys, time
ckpt = os.path.join(os.environ["AIP_CHECKPOINT_DIR"], "step")
step = 0
def save(*_):
    open(ckpt, "w").write(str(step)); sys.exit(143)
signal.signal(signal.SIGTERM, save)
with open(os.environ["TRAINGUARD_HISTORY"], "a") as out:
    while step < 1000:
        step += 1
        out.write(json.dumps({"step": step, "split": "train", "time": time.time(),
                              "metrics": {"loss": 1.0 / step}}) + "\\n")
        out.flush()
        time.sleep(0.05)
"""


def local_hang(repeats: int, limit: float = 2.0) -> None:
    from trainguard.errors import TrainingFailed
    from trainguard.stages import train_stage

    delays = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            worker = Path(tmp, "worker.py")
            worker.write_text(WORKER)
            job = JobSpec.create(
                "my-project",
                "us-central1",
                machine_type="n1-standard-4",
                image_uri="i",
                command=[sys.executable, str(worker)],
                base_output_dir=str(Path(tmp, "out")),
            )
            with contextlib.suppress(TrainingFailed):  # it is meant to fail: hang, not retried
                train_stage(
                    job,
                    project="my-project",
                    region="us-central1",
                    stream=None,
                    inject="hang@1s",
                    hang_after=f"{limit}s",
                    retries="none",
                )
            lines = Path(tmp, "out", "history.jsonl").read_text().splitlines()
            last = json.loads(lines[-1])["time"]
            delays.append(os.path.getmtime(Path(tmp, "out", "checkpoints", "step")) - last)
    print(
        f"  local: last record → stop: median {statistics.median(delays):.2f} s, max {max(delays):.2f} s "
        f"(--hang-after {limit:g}s; the guard polls every 1 s)"
    )


def vertex_hang(limit: float = 600.0) -> None:
    from trainguard.guard import HistoryGuard
    from trainguard.guard.hang import HangPolicy

    with tempfile.TemporaryDirectory() as tmp, VertexJobsServer() as server:
        os.environ["TRAINGUARD_ENDPOINT_AIPLATFORM"] = server.url
        history = Path(tmp, "history.jsonl")
        fake = FakeTime()
        server.script(Scenario.runs_forever())

        def grow(name: str, n: int) -> None:
            if n <= 8:
                with history.open("a") as out:
                    out.write(json.dumps({"step": n, "split": "train", "metrics": {"loss": 1 / n}}) + "\n")

        server.on_running = grow
        job = spec()
        guard = HistoryGuard.for_spec(job, "fail", hang=HangPolicy(after_s=limit), clock=fake.clock)
        env = {"TRAINGUARD_HISTORY": str(history)}  # a local file stands in for the gs:// object
        backend = VertexBackend(clock=fake.clock, sleep=fake.sleep, stream=io.StringIO(), extra_env=env)
        result = backend.run(job.with_base_output_dir(""), watcher=guard)
        silent = result.stopped["details"]["hang"]["silent_s"]
        print(
            f"  vertex: last record → cancel request: {silent:.0f} s of job time (--hang-after "
            f"{limit:g}s; RUNNING polls every {backend.watch_interval_s:g} s): {result.failure_class}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    fallbacks(args.repeats)
    print("from the last history record to the stop of a hung job:")
    local_hang(max(1, args.repeats // 2))
    vertex_hang()
    return 0


if __name__ == "__main__":
    sys.exit(main())
