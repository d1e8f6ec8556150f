"""Compiled pipelines and components: tasks, their order, images and parameter names."""

import os
import subprocess
import sys

import pytest
import yaml
from kfp import components as kfp_components

from trainguard import __version__


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    from trainguard.pipelines.compile import compile_all

    out = tmp_path_factory.mktemp("compiled")
    paths = compile_all(out)
    return out, {p.name: p for p in paths}


def load(path):
    return yaml.safe_load(path.read_text())


def test_compile_writes_both_pipelines_and_each_component(compiled):
    _, paths = compiled
    assert {
        "guarded_training.yaml",
        "preflight_only.yaml",
        "preflight.yaml",
        "train.yaml",
        "validate.yaml",
    } <= set(paths)


def test_guarded_training_runs_preflight_then_train_then_validate(compiled):
    _, paths = compiled
    spec = load(paths["guarded_training.yaml"])
    tasks = spec["root"]["dag"]["tasks"]
    assert set(tasks) == {"preflight", "train", "validate"}
    assert tasks["train"]["dependentTasks"] == ["preflight"]
    assert tasks["validate"]["dependentTasks"] == ["train"]
    history_in = tasks["validate"]["inputs"]["artifacts"]["history"]["taskOutputArtifact"]
    assert history_in == {"outputArtifactKey": "history", "producerTask": "train"}
    # Preflight and training must re-run every time: a cached "pass" proves nothing today.
    assert tasks["preflight"]["cachingOptions"] == {}
    assert tasks["train"]["cachingOptions"] == {}


def test_pipeline_parameters(compiled):
    _, paths = compiled
    params = load(paths["guarded_training.yaml"])["root"]["inputDefinitions"]["parameters"]
    assert {
        "job_spec",
        "project",
        "region",
        "display_name",
        "backend",
        "output_dir",
        "preflight_fail_on",
        "preempt_after",
        "validate_fail_on",
    } <= set(params)
    assert params["job_spec"]["parameterType"] == "STRUCT"
    assert params["backend"]["defaultValue"] == "vertex"
    only = load(paths["preflight_only.yaml"])["root"]["dag"]["tasks"]
    assert set(only) == {"preflight"}


def test_every_executor_uses_the_versioned_components_image(compiled):
    _, paths = compiled
    executors = load(paths["guarded_training.yaml"])["deploymentSpec"]["executors"]
    images = {e["container"]["image"] for e in executors.values()}
    assert images == {f"trainguard/components:{__version__}"}
    # The image carries kfp and trainguard: nothing is pip-installed at run time.
    for e in executors.values():
        assert "pip install" not in " ".join(e["container"]["command"])


def test_train_publishes_gcp_resources_model_and_history(compiled):
    _, paths = compiled
    component = load(paths["train.yaml"])
    outputs = component["root"]["outputDefinitions"]
    assert "gcp_resources" in outputs["parameters"]
    assert outputs["artifacts"]["model"]["artifactType"]["schemaTitle"] == "system.Model"
    assert {"history", "diagnosis"} <= set(outputs["artifacts"])


def test_validate_returns_a_branchable_verdict(compiled):
    _, paths = compiled
    outputs = load(paths["validate.yaml"])["root"]["outputDefinitions"]
    assert outputs["parameters"]["Output"]["parameterType"] == "BOOLEAN"
    assert outputs["artifacts"]["metrics"]["artifactType"]["schemaTitle"] == "system.Metrics"
    assert outputs["artifacts"]["curves"]["artifactType"]["schemaTitle"] == "system.HTML"


@pytest.mark.parametrize("name", ["preflight.yaml", "train.yaml", "validate.yaml"])
def test_component_yaml_loads_back(compiled, name):
    _, paths = compiled
    component = kfp_components.load_component_from_file(str(paths[name]))
    assert component.component_spec.name == name.removesuffix(".yaml")


def test_the_image_can_be_overridden_when_compiling(tmp_path):
    env = {**os.environ, "TRAINGUARD_COMPONENT_IMAGE": "us-docker.pkg.dev/p/r/comp:9"}
    subprocess.run(
        [sys.executable, "-m", "trainguard.cli", "compile", "--output-dir", str(tmp_path)],
        check=True,
        env=env,
        capture_output=True,
    )
    text = (tmp_path / "guarded_training.yaml").read_text()
    assert "us-docker.pkg.dev/p/r/comp:9" in text and "trainguard/components:" not in text
    out = tmp_path / "flag"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "trainguard.cli",
            "compile",
            "--output-dir",
            str(out),
            "--image",
            "eu.gcr.io/x/y:1",
        ],
        check=True,
        capture_output=True,
    )
    assert "eu.gcr.io/x/y:1" in (out / "components" / "train.yaml").read_text()


def test_a_user_pipeline_composes_the_components(tmp_path):
    from kfp import compiler, dsl

    from trainguard.components import preflight, train, validate

    @dsl.pipeline(name="my-team-pipeline")
    def mine(job_spec: dict, project: str, region: str):
        checked = preflight(job_spec=job_spec, project=project, region=region)
        trained = train(job_spec=job_spec, project=project, region=region).after(checked)
        judged = validate(history=trained.outputs["history"], fail_pipeline=False)
        with dsl.If(judged.outputs["Output"] == True):  # noqa: E712 - KFP condition syntax
            preflight(job_spec=job_spec, project=project, region=region)

    compiler.Compiler().compile(mine, str(tmp_path / "mine.yaml"))
    spec = yaml.safe_load((tmp_path / "mine.yaml").read_text())
    dag = spec["root"]["dag"]["tasks"]
    # The gated step sits in a condition branch that runs only when validate's output is true,
    # and it comes after validate; train waits for preflight.
    branch = next(t for name, t in dag.items() if name.startswith("condition"))
    condition = branch["triggerPolicy"]["condition"]
    assert "validate" in condition and "Output" in condition and "true" in condition
    assert "validate" in branch["dependentTasks"]
    assert dag["train"]["dependentTasks"] == ["preflight"]
    inner = spec["components"][branch["componentRef"]["name"]]["dag"]["tasks"]
    assert [t["componentRef"]["name"] for t in inner.values()] == ["comp-preflight-2"]


def test_validate_gates_and_thresholds_reach_the_component(compiled):
    _, paths = compiled
    spec = load(paths["guarded_training.yaml"])
    params = spec["root"]["inputDefinitions"]["parameters"]
    assert params["validate_gate_at"]["defaultValue"] == "best"
    inputs = spec["root"]["dag"]["tasks"]["validate"]["inputs"]["parameters"]
    for name, source in (
        ("thresholds", "validate_thresholds"),
        ("gates", "validate_gates"),
        ("gate_at", "validate_gate_at"),
    ):
        assert inputs[name]["componentInputParameter"] == source
    component = load(paths["validate.yaml"])["root"]["inputDefinitions"]["parameters"]
    assert {"thresholds", "gates", "gate_at", "directions"} <= set(component)
