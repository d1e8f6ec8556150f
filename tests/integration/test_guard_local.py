"""The in-flight guard on the local backend, with the reference trainer and the examples."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests.fuzz.contract import run_cli
from tests.requires import require
from trainguard.runtime.checkpoint import CheckpointManager
from trainguard.spec import load_spec, parse_spec
from trainguard.stages import train_stage
from trainguard.validation import validate

require("torch", "sklearn")
ROOT = Path(__file__).resolve().parents[2]
TRAINER = ROOT / "containers" / "trainer" / "train.py"
PR = ("--project", "demo-project", "--region", "us-central1")


class Artifact:
    def __init__(self, path: Path) -> None:
        self.path, self.uri, self.metadata = str(path), str(path), {}


def example(name: str, *extra: str):
    """An example spec with the trainer's path made absolute (tests may run elsewhere)."""
    spec = load_spec(ROOT / "examples" / name, project="demo-project", region="us-central1")
    data = spec.to_dict()
    for pool in data["workerPoolSpecs"]:
        cs = pool["containerSpec"]
        cs["command"] = [str(TRAINER) if c.endswith("train.py") else c for c in cs["command"]]
        cs["args"] = [*cs.get("args", []), *extra]
    return parse_spec(data, project="demo-project", region="us-central1")


def last_step(history: Path) -> int:
    return max(json.loads(x)["step"] for x in history.read_text().splitlines() if x.strip())


@pytest.mark.slow
def test_the_diverging_example_stops_early_and_the_task_exits_1(tmp_path):
    spec = example("local-diverging.yaml")
    unguarded = train_stage(
        spec,
        project="demo-project",
        region="us-central1",
        output_dir=str(tmp_path / "off"),
        guard="off",
        stream=None,
    )
    assert unguarded.succeeded and not unguarded.stopped
    full = last_step(tmp_path / "off" / "history.jsonl")

    spec_file = tmp_path / "diverging.json"
    spec_file.write_text(json.dumps(spec.to_dict()))
    outcome = run_cli(
        "train", spec_file, *PR, "--output-dir", tmp_path / "on", "--json", tmp_path / "on.json"
    )
    assert outcome.exit_code == 1, outcome.output[-3000:]
    assert "class:    divergence" in outcome.output
    assert "machine-hours saved" in outcome.output and "stopping the job" in outcome.output
    data = json.loads((tmp_path / "on.json").read_text())
    assert data["state"] == "CANCELLED" and data["stopped"]["failure_class"] == "divergence"
    stopped_at = last_step(tmp_path / "on" / "history.jsonl")
    assert stopped_at < full  # fewer steps than with --guard off
    print(f"diverging example: {stopped_at} steps guarded, {full} unguarded")


@pytest.mark.slow
def test_the_overfitting_example_ends_early_with_the_best_checkpoint_as_the_model(tmp_path):
    # The pause per step gives the guard (1 s polls) time to act before the run's natural end.
    spec = example("local-overfitting.yaml", "--step-sleep=0.05")
    model = Artifact(tmp_path / "train" / "model")
    history = Artifact(tmp_path / "train" / "history")
    out = io.StringIO()
    result = train_stage(
        spec, project="demo-project", region="us-central1", model=model, history=history, stream=out
    )

    assert result.stopped["failure_class"] == "overfit" and result.stopped["success"], out.getvalue()[-3000:]
    steps = last_step(Path(history.path))
    assert steps < 180  # 60 epochs of 3 steps: stopped before the end
    verdict = validate(history.path)
    assert verdict.failure_class == "overfit"
    best = verdict.findings[0].evidence["best_step"]
    # The model is the kept checkpoint nearest the best validation step.
    kept = CheckpointManager(str(tmp_path / "train" / "checkpoints")).checkpoints()
    nearest = min(kept, key=lambda c: (abs(c.step - best), c.step))
    meta = model.metadata
    assert meta["model_source"] == "checkpoint" and meta["model_step"] == nearest.step
    assert meta["best_step"] == best and meta["model_metric"] == "val/loss"
    # One layout: the step's export where a serving container loads it, its checkpoint beside it.
    assert (Path(model.path) / "checkpoint" / "state.pt").read_bytes() == nearest.read("state.pt")
    import torch

    exported = torch.load(Path(model.path) / "model.pt", weights_only=True)
    saved = torch.load(io.BytesIO(nearest.read("state.pt")), weights_only=True)["model"]
    assert exported.keys() == saved.keys() and all(torch.equal(exported[k], saved[k]) for k in saved)
    print(f"overfitting example: stopped at step {steps}, best {best}, model = checkpoint {nearest.step}")
