"""``make demo``: the guarded pipeline end to end in the KFP local runner, no cloud account needed.

1. A healthy run: preflight passes, the reference trainer trains (with one injected Spot-style
   preemption it survives), validation passes.
2. The same trainer with a learning rate far too high: the pipeline fails at ``validate`` and the
   failure class and first remedy are shown.
3. Preflight alone on the example Vertex spec (A100 on Spot): the offline checks.

Run it from the repository root (it uses ``examples/`` and ``containers/trainer/train.py``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from trainguard.errors import TrainguardError
from trainguard.pipelines.local import LocalOutcome, run_local
from trainguard.spec import load_spec, parse_spec

PROJECT, REGION = "demo-project", "us-central1"


def _banner(text: str) -> None:
    print(f"\n{'=' * 100}\n{text}\n{'=' * 100}", flush=True)


def _local_spec(path: Path, trainer: Path, display_name: str, extra_args: tuple[str, ...] = ()):
    """The example spec with the trainer's path made absolute (the runner's cwd may differ)."""
    spec = load_spec(path, project=PROJECT, region=REGION, display_name=display_name)
    data = spec.to_dict()
    for pool in data["workerPoolSpecs"]:
        cs = pool["containerSpec"]
        cs["command"] = [str(trainer) if c.endswith("train.py") else c for c in cs["command"]]
        cs["args"] = [*cs.get("args", []), *extra_args]
    return parse_spec(data, project=PROJECT, region=REGION, display_name=display_name)


def main(root: str = ".") -> int:
    base = Path(root).resolve()
    trainer = base / "containers" / "trainer" / "train.py"
    examples = base / "examples"
    if not trainer.is_file():
        print(f"make demo: run from the repository root ({trainer} not found)", file=sys.stderr)
        return 2
    pipeline_root = base / ".tg-local"
    started = time.monotonic()
    outcomes: list[tuple[str, LocalOutcome, bool]] = []
    try:
        _banner("1/3  guarded_training on a healthy config (local backend, one injected preemption)")
        # A short pause per step stretches training to ~10 s, so the preemption at 6 s lands in
        # the middle of it (start-up takes 2-4 s here), not before or after.
        healthy = _local_spec(examples / "local-healthy.yaml", trainer, "demo-healthy",
                              ("--step-sleep=0.03",))
        outcome = run_local("guarded_training", healthy, pipeline_root=str(pipeline_root),
                            preempt_after="6s")
        outcomes.append(("healthy run", outcome, True))
        restarts = outcome.metadata("train", "model").get("restarts", 0)
        print(f"healthy run: training survived {restarts} preemption(s), resuming from its "
              "newest checkpoint", flush=True)
        if outcome.succeeded and restarts < 1:
            print("make demo: the injected preemption did not land during training",
                  file=sys.stderr)
            outcomes.append(("preemption injected", outcome, False))

        _banner("2/3  guarded_training with a learning rate high enough to diverge")
        diverging = _local_spec(examples / "local-diverging.yaml", trainer, "demo-diverging")
        outcome = run_local("guarded_training", diverging, pipeline_root=str(pipeline_root))
        outcomes.append(("diverging run", outcome, False))

        _banner("3/3  preflight_only on examples/a100-spot.yaml (offline checks; no cloud account)")
        a100 = load_spec(examples / "a100-spot.yaml", project=PROJECT, region=REGION,
                         display_name="demo-a100-spot")
        outcome = run_local("preflight_only", a100, backend="vertex",
                            pipeline_root=str(pipeline_root), only="compat")
        outcomes.append(("A100 Spot preflight", outcome, True))
        report = outcome.artifact("preflight", "report")
        if report is not None:
            print(report.read_text())
    except TrainguardError as exc:
        print(f"make demo: {exc}", file=sys.stderr)
        return exc.exit_code

    _banner(f"demo summary ({time.monotonic() - started:.0f} s)")
    ok = True
    for label, outcome, expected in outcomes:
        as_expected = outcome.succeeded == expected
        ok &= as_expected
        mark = "as expected" if as_expected else "UNEXPECTED"
        print(f"--- {label}: {'passed' if outcome.succeeded else 'failed'} ({mark})")
        print(outcome.summary())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
