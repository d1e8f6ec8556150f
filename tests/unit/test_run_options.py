"""`trainguard run` takes what the pipelines take, checked before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainguard.errors import ConfigError
from trainguard.run_options import PARAMETERS, RunOptions

ROOT = Path(__file__).resolve().parents[2]


def test_each_option_becomes_the_pipelines_parameter():
    got = RunOptions(
        gate=("val_accuracy>=0.9", "val_loss<=0.3@last"),
        threshold=("overfit_patience=5",),
        direction=("dice=max",),
        only="compat,quota",
        guard="nonfinite",
        model="last",
        max_queued="45m",
        resume=True,
    ).parameters()
    assert got == {
        "validate_gates": "val_accuracy>=0.9,val_loss<=0.3@last",
        "validate_thresholds": "overfit_patience=5",
        "validate_directions": "dice=max",
        "preflight_checks": "compat,quota",
        "guard": "nonfinite",
        "model_choice": "last",
        "max_queued": "45m",
        "resume": True,
    }
    assert RunOptions(pipeline="preflight_only", only="compat", fail_on="warn").parameters() == {
        "only": "compat",
        "fail_on": "warn",
    }


def test_every_parameter_named_exists_in_its_pipeline():
    from trainguard.pipelines import PIPELINES

    for option, targets in PARAMETERS.items():
        for pipeline, parameter in targets.items():
            inputs = PIPELINES[pipeline].component_spec.inputs
            assert parameter in inputs, (option, pipeline, parameter)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        (
            {"pipeline": "preflight_only", "gate": ("val_loss<1",)},
            "--gate applies to --pipeline guarded_training",
        ),
        ({"pipeline": "nope"}, "use one of guarded_training, preflight_only"),
        ({"only": "compt"}, "compt is not a check family"),
        ({"guard": "sometimes"}, "--guard 'sometimes' is not one of"),
        ({"threshold": ("overfit_patiense=3",)}, "overfit_patiense (did you mean overfit_patience?)"),
        ({"gate": ("val_accuracy=>0.9",)}, "val_accuracy=>0.9"),
        ({"direction": ("dice=maximum",)}, "--direction dice=maximum: 'maximum' is not one of: min, max"),
        ({"max_queued": "forever"}, "--max-queued"),
    ],
)
def test_a_bad_option_is_refused_at_construction(kwargs, needle):
    with pytest.raises(ConfigError) as info:
        RunOptions(**kwargs)
    assert needle in str(info.value)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainguard.cli", "run", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_preflight_only_on_a_vertex_spec_checks_it_as_vertex_would_run_it(tmp_path):
    proc = run(
        "examples/a100-spot.yaml", "--pipeline", "preflight_only", "--only", "compat",
        "-p", "my-project", "-r", "us-central1", "--pipeline-root", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pipeline preflight_only: SUCCEEDED" in proc.stdout
    assert "/app/train.py" not in proc.stdout  # not judged as a local command


@pytest.mark.slow
def test_a_gate_given_to_run_fails_the_pipeline_at_validate(tmp_path):
    proc = run(
        "examples/local-overfitting.yaml", "--gate", "val/accuracy>=0.999", "--guard", "nonfinite",
        "--pipeline-root", str(tmp_path),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    assert "FAILED at task 'validate'" in proc.stdout and "failure class: gate" in proc.stdout
    assert "val/accuracy >= 0.999 missed" in proc.stdout


def test_budget_goes_to_both_pipelines_and_a_negative_one_is_refused():
    assert RunOptions(budget=250.0).parameters() == {"budget": 250.0}
    assert RunOptions(pipeline="preflight_only", budget=250.0).parameters() == {"budget": 250.0}
    assert RunOptions().parameters() == {}  # 0: no budget, the pipelines' default
    with pytest.raises(ConfigError, match="--budget must be an amount of US dollars"):
        RunOptions(budget=-1.0)
