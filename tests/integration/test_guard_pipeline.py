"""The guard's parameters reach the train component, and a pipeline run fails at train."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("kfp")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("compiled")
    image = "us-central1-docker.pkg.dev/p/ml/trainguard/components:1"
    subprocess.run(
        [sys.executable, "-m", "trainguard.cli", "compile", "--output-dir", str(out), "--image", image],
        check=True,
        capture_output=True,
    )
    return {p.name: yaml.safe_load(p.read_text()) for p in out.rglob("*.yaml")}


def test_guard_and_model_choice_are_parameters_of_train_and_of_the_pipeline(compiled):
    train = compiled["train.yaml"]["root"]["inputDefinitions"]["parameters"]
    assert train["guard"]["defaultValue"] == "fail"
    assert train["model_choice"]["defaultValue"] == "best"
    pipeline = compiled["guarded_training.yaml"]["root"]
    params = pipeline["inputDefinitions"]["parameters"]
    assert params["guard"]["defaultValue"] == "fail"
    assert params["model_choice"]["defaultValue"] == "best"
    inputs = pipeline["dag"]["tasks"]["train"]["inputs"]["parameters"]
    assert inputs["guard"] == {"componentInputParameter": "guard"}
    assert inputs["model_choice"] == {"componentInputParameter": "model_choice"}
    # validate learns which checkpoint shipped, so an overfit that model escaped only warns.
    shipped = pipeline["dag"]["tasks"]["validate"]["inputs"]["parameters"]["shipped_step"]
    assert shipped["taskOutputParameter"] == {"outputParameterKey": "Output", "producerTask": "train"}


@pytest.mark.slow
def test_the_diverging_example_fails_the_pipeline_at_train_with_the_class_and_hours_saved(tmp_path):
    pytest.importorskip("torch")
    from tests.integration.test_guard_local import example
    from trainguard.pipelines.local_runner import run_local

    outcome = run_local("guarded_training", example("local-diverging.yaml"), pipeline_root=str(tmp_path))
    assert not outcome.succeeded and outcome.failed_task == "train"
    detail = outcome.failure_detail()
    assert "`divergence`" in detail and "machine-hours saved" in detail
    assert "learning rate" in detail
    history = Path(outcome.artifact("train", "history"))
    assert history.read_text().count("\n") < 60  # stopped long before the 12 epochs' ~70 lines


# The same pipeline on the same example, registering the model too, runs in make test-slow with every
# assertion below: tests/integration/test_register_pipeline.py::
# test_a_model_that_passed_with_a_warning_is_registered_with_its_verdict (one run, ~9 s of CPU, fewer).
@pytest.mark.long
def test_an_early_stop_on_overfit_ships_the_best_checkpoint_and_the_pipeline_passes(tmp_path):
    pytest.importorskip("torch")
    from tests.integration.test_guard_local import example
    from trainguard.pipelines.local_runner import run_local

    # The pause per step gives the guard (1 s polls) time to act before the run's natural end.
    outcome = run_local(
        "guarded_training",
        example("local-overfitting.yaml", "--step-sleep=0.05"),
        pipeline_root=str(tmp_path),
    )
    assert outcome.succeeded, outcome.message
    model = outcome.metadata("train", "model")
    assert model["model_source"] == "checkpoint" and model["model_step"] < 180
    verdict = outcome.read_json("validate", "verdict")
    # Success with a finding: the verdict still says overfit, as a warning naming the shipped step.
    (finding,) = [f for f in verdict["findings"] if f["failure_class"] == "overfit"]
    assert verdict["passed"] and finding["severity"] == "warn"
    assert f"checkpoint at step {model['model_step']}" in finding["message"]
