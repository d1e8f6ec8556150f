"""``make demo``: the guarded pipeline end to end in the KFP local runner, no cloud account needed.

1. A healthy run: preflight passes; the first launch meets an (injected) stockout in us-central1
   and train falls back to us-east4 at once; there the reference trainer trains (with one injected
   Spot-style preemption it survives); validation passes.
2. The same trainer with a learning rate far too high: the pipeline fails, naming the failure class,
   the evidence and the first remedy.
3. Preflight alone on the example Vertex spec (A100 on Spot): the offline checks.

A person sees one line per task as it starts and ends, then each run's verdict; every task's full
log is written under the run's artifacts (``<run>/logs/<task>.log``). ``--verbose`` prints all of
the runner's output instead. Run it from the repository root (it uses ``examples/`` and
``containers/trainer/train.py``).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from trainguard.errors import TrainguardError
from trainguard.pipelines.local_runner import LocalOutcome, run_local
from trainguard.pipelines.task_logs import TaskReporter
from trainguard.spec import load_spec, parse_spec

PROJECT, REGION = "demo-project", "us-central1"


def _local_spec(path: Path, trainer: Path, display_name: str, extra_args: tuple[str, ...] = ()):
    """The example spec with the trainer's path made absolute (the runner's cwd may differ)."""
    spec = load_spec(path, project=PROJECT, region=REGION, display_name=display_name)
    data = spec.to_dict()
    for pool in data["workerPoolSpecs"]:
        cs = pool["containerSpec"]
        cs["command"] = [str(trainer) if c.endswith("train.py") else c for c in cs["command"]]
        cs["args"] = [*cs.get("args", []), *extra_args]
    return parse_spec(data, project=PROJECT, region=REGION, display_name=display_name)


def _show(outcome: LocalOutcome, extra: list[str] | None = None) -> None:
    for line in [*outcome.brief(), *(extra or [])]:
        print(f"  {line}", flush=True)
    if outcome.log_dir is not None:
        print(f"  task logs: {os.path.relpath(outcome.log_dir)}/", flush=True)


def _fallback_line(outcome: LocalOutcome) -> str:
    """``fell back: us-central1 [capacity] → us-east4 (launched 70 ms later), which trained``."""
    recorded = outcome.read_json("train", "attempts") or {}
    attempts = recorded.get("attempts", [])
    if len(attempts) < 2:
        return "no fallback was needed"
    gaps = recorded.get("relaunch_gaps_s", [0.0])
    path = " → ".join(
        f"{a['region']}" + (f" [{a['failure_class']}]" if a["failure_class"] else "") for a in attempts
    )
    return f"fell back: {path} (launched {gaps[0] * 1000:.0f} ms later), which trained"


def _cost_line(outcome: LocalOutcome) -> str:
    """What the train task said the run cost (a local run: ``cost: $0 (local: …)``)."""
    cost = (outcome.read_json("train", "attempts") or {}).get("cost") or {}
    return str(cost.get("headline") or "cost: not recorded")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    verbose = "--verbose" in args
    base = Path(".").resolve()
    trainer = base / "containers" / "trainer" / "train.py"
    examples = base / "examples"
    if not trainer.is_file():
        print(f"make demo: run from the repository root ({trainer} not found)", file=sys.stderr)
        return 2
    pipeline_root = str(base / ".tg-local")
    report = None if verbose else TaskReporter(indent="  ")
    started = time.monotonic()
    results: list[tuple[str, bool, bool]] = []
    print("trainguard demo: the guarded pipeline in the KFP local runner (no cloud account)", flush=True)
    try:
        print(
            "\n1/3 guarded_training, healthy config: a stockout in us-central1 (falls back to "
            "us-east4), one Spot-style preemption",
            flush=True,
        )
        # A short pause per step stretches training to ~10 s, so the preemption at 6 s lands in
        # the middle of it (start-up takes 2-4 s here), not before or after.
        healthy = _local_spec(
            examples / "local-healthy.yaml", trainer, "demo-healthy", ("--step-sleep=0.03",)
        )
        outcome = run_local(
            "guarded_training",
            healthy,
            pipeline_root=pipeline_root,
            preempt_after="6s",
            on_event=report,
            fallbacks="region=us-east4",
            inject="stockout@0",
        )
        restarts = outcome.metadata("train", "model").get("restarts", 0)
        fell_back = _fallback_line(outcome)
        cost = _cost_line(outcome)
        _show(
            outcome,
            [
                fell_back,
                f"training survived {restarts} preemption(s), resuming from its newest checkpoint",
                cost,
            ],
        )
        results.append(("healthy run passes", outcome.succeeded, True))
        results.append(("the stockout fell back to us-east4", "→ us-east4" in fell_back, True))
        results.append(("the preemption landed during training", restarts >= 1, True))
        results.append(("a local run costs nothing ($0, local)", cost.startswith("cost: $0 (local"), True))

        print("\n2/3 guarded_training, learning rate far too high", flush=True)
        diverging = _local_spec(examples / "local-diverging.yaml", trainer, "demo-diverging")
        outcome = run_local("guarded_training", diverging, pipeline_root=pipeline_root, on_event=report)
        brief = outcome.brief()
        _show(outcome, [] if any("cost:" in line for line in brief) else [_cost_line(outcome)])
        results.append(("diverging run is stopped", outcome.succeeded, False))

        print("\n3/3 preflight_only on examples/a100-spot.yaml (offline checks)", flush=True)
        a100 = load_spec(
            examples / "a100-spot.yaml", project=PROJECT, region=REGION, display_name="demo-a100-spot"
        )
        outcome = run_local(
            "preflight_only",
            a100,
            backend="vertex",
            pipeline_root=pipeline_root,
            only="compat",
            on_event=report,
        )
        checks = (outcome.read_json("preflight", "report_json") or {}).get("results", [])
        _show(outcome, [f"{r['status']:<7} {r['check']}: {r['title']}" for r in checks])
        results.append(("A100 Spot preflight passes", outcome.succeeded, True))
    except TrainguardError as exc:
        print(f"make demo: {exc}", file=sys.stderr)
        return exc.exit_code

    ok = all(got == expected for _, got, expected in results)
    print(
        f"\ndemo {'finished as expected' if ok else 'did NOT go as expected'} in "
        f"{time.monotonic() - started:.0f} s:",
        flush=True,
    )
    for label, got, expected in results:
        print(f"  {'ok ' if got == expected else 'UNEXPECTED'} {label}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
