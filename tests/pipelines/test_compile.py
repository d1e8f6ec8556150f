"""Compiled pipelines and components: tasks, their order, images and parameter names."""

import os
import subprocess
import sys

import pytest
import yaml
from kfp import components as kfp_components

from tests.once import built_once
from trainguard import __version__

IMAGE = f"us-central1-docker.pkg.dev/my-project/ml/trainguard/components:{__version__}"


def compile_cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "trainguard.cli", "compile", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
    )


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """One ``trainguard compile`` for the run, whichever worker asks first (the tests only read it)."""

    def build(out):
        proc = compile_cli("--output-dir", str(out), "--image", IMAGE)
        assert proc.returncode == 0, proc.stderr
        (out / "stdout.txt").write_text(proc.stdout)

    out = built_once(tmp_path_factory, "compiled", build)
    stdout = (out / "stdout.txt").read_text()
    paths = [out / line.removeprefix("wrote ").split("/")[-1] for line in stdout.splitlines()]
    paths = [p if p.exists() else out / "components" / p.name for p in paths]
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
        "register.yaml",
    } <= set(paths)


def test_guarded_training_runs_preflight_then_train_then_validate(compiled):
    _, paths = compiled
    spec = load(paths["guarded_training.yaml"])
    tasks = spec["root"]["dag"]["tasks"]
    assert set(tasks) == {"preflight", "train", "validate", "condition-1"}
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


def test_every_executor_uses_the_components_image_given(compiled):
    _, paths = compiled
    executors = load(paths["guarded_training.yaml"])["deploymentSpec"]["executors"]
    images = {e["container"]["image"] for e in executors.values()}
    assert images == {IMAGE}
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


def test_the_pipeline_budget_reaches_preflight_and_train_whose_metrics_carry_the_cost(compiled):
    _, paths = compiled
    tasks = load(paths["guarded_training.yaml"])["root"]["dag"]["tasks"]
    for task in ("preflight", "train"):
        given = tasks[task]["inputs"]["parameters"]["budget"]
        assert given == {"componentInputParameter": "budget"}, task
    outputs = load(paths["train.yaml"])["root"]["outputDefinitions"]["artifacts"]
    assert outputs["metrics"]["artifactType"]["schemaTitle"] == "system.Metrics"


def test_validate_returns_a_branchable_verdict(compiled):
    _, paths = compiled
    outputs = load(paths["validate.yaml"])["root"]["outputDefinitions"]
    assert outputs["parameters"]["Output"]["parameterType"] == "BOOLEAN"
    assert outputs["artifacts"]["metrics"]["artifactType"]["schemaTitle"] == "system.Metrics"
    assert outputs["artifacts"]["curves"]["artifactType"]["schemaTitle"] == "system.HTML"


@pytest.mark.parametrize("name", ["preflight.yaml", "train.yaml", "validate.yaml", "register.yaml"])
def test_component_yaml_loads_back(compiled, name):
    _, paths = compiled
    component = kfp_components.load_component_from_file(str(paths[name]))
    assert component.component_spec.name == name.removesuffix(".yaml")


def test_the_image_can_be_overridden_when_compiling(tmp_path):
    env = {**os.environ, "TRAINGUARD_COMPONENT_IMAGE": "us-docker.pkg.dev/p/r/comp:9"}  # the env alone
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


def test_without_an_image_nothing_is_compiled_and_the_fix_is_named(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRAINGUARD_COMPONENT_IMAGE"}
    proc = subprocess.run(
        [sys.executable, "-m", "trainguard.cli", "compile", "--output-dir", str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert "trainguard publishes none" in proc.stderr and "--image" in proc.stderr
    assert "make images REGISTRY=" in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("image", ["trainguard/components:0.1.0", "ubuntu", "myorg/tools:1"])
def test_an_image_with_no_registry_is_refused_it_would_come_from_docker_hub(tmp_path, image):
    proc = compile_cli("--output-dir", str(tmp_path), "--image", image)
    assert proc.returncode == 2
    assert "names no registry" in proc.stderr and "Docker Hub" in proc.stderr
    assert f"us-central1-docker.pkg.dev/PROJECT/REPO/{image}" in proc.stderr
    assert not (tmp_path / "guarded_training.yaml").exists()


@pytest.mark.parametrize(
    "image",
    ["docker.io/myorg/components:1", "localhost:5000/c:1", "europe-docker.pkg.dev/p/r/c@sha256:" + "a" * 64],
)
def test_an_image_that_names_its_registry_compiles(tmp_path, image):
    proc = compile_cli("--output-dir", str(tmp_path), "--image", image)
    assert proc.returncode == 0, proc.stderr
    assert image in (tmp_path / "guarded_training.yaml").read_text()


def test_a_pipeline_compiled_by_kfp_itself_without_an_image_cannot_pull_anyone_elses(tmp_path):
    # A user who compiles with kfp's own Compiler, bypassing trainguard's check, gets an image
    # under .invalid (RFC 2606: never resolves): the pull fails and the name says why.
    code = (
        "from kfp import compiler;"
        "from trainguard.pipelines import PIPELINES;"
        f"compiler.Compiler().compile(PIPELINES['guarded_training'], {str(tmp_path / 'p.yaml')!r})"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRAINGUARD_COMPONENT_IMAGE"}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    executors = load(tmp_path / "p.yaml")["deploymentSpec"]["executors"]
    images = {e["container"]["image"] for e in executors.values()}
    assert images == {f"trainguard-components-image-not-set.invalid/trainguard/components:{__version__}"}


def test_the_train_task_runs_as_the_pipeline_jobs_own_run(compiled):
    _, paths = compiled
    spec = load(paths["guarded_training.yaml"])
    inputs = spec["root"]["dag"]["tasks"]["train"]["inputs"]["parameters"]
    assert inputs["run_id"]["runtimeValue"]["constant"] == "{{$.pipeline_job_name}}"
    assert inputs["resume"]["componentInputParameter"] == "resume"
    assert spec["root"]["inputDefinitions"]["parameters"]["resume"]["defaultValue"] is False


def test_register_runs_only_when_validation_passed_and_a_serving_image_is_given(compiled):
    _, paths = compiled
    spec = load(paths["guarded_training.yaml"])
    root = spec["root"]
    params = root["inputDefinitions"]["parameters"]
    assert params["serving_image"]["defaultValue"] == "" and params["parent_model"]["defaultValue"] == ""
    assert "model_display_name" in params
    # Outer branch: validate's boolean output; inner branch: a serving image; then register.
    (outer_name,) = [n for n in root["dag"]["tasks"] if n.startswith("condition")]
    outer = root["dag"]["tasks"][outer_name]
    assert (
        outer["triggerPolicy"]["condition"]
        == "inputs.parameter_values['pipelinechannel--validate-Output'] == true"
    )
    assert "validate" in outer["dependentTasks"]
    inner_tasks = spec["components"][outer["componentRef"]["name"]]["dag"]["tasks"]
    (inner,) = inner_tasks.values()
    assert (
        inner["triggerPolicy"]["condition"]
        == "inputs.parameter_values['pipelinechannel--serving_image'] != ''"
    )
    register = spec["components"][inner["componentRef"]["name"]]["dag"]["tasks"]["register"]
    assert register["cachingOptions"] == {}
    artifacts = register["inputs"]["artifacts"]
    # Lineage: the registered model's task takes the model, the verdict and the history.
    assert artifacts["serving_model"]["componentInputArtifact"] == "pipelinechannel--train-serving_model"
    assert artifacts["verdict"]["componentInputArtifact"] == "pipelinechannel--validate-verdict"
    assert artifacts["history"]["componentInputArtifact"] == "pipelinechannel--train-history"
    # The image reaches train, which names it as the serving model's container.
    train_inputs = root["dag"]["tasks"]["train"]["inputs"]["parameters"]
    assert train_inputs["serving_image"] == {"componentInputParameter": "serving_image"}


def test_train_outputs_a_model_gcpc_model_upload_op_takes(compiled, tmp_path):
    from google_cloud_pipeline_components.v1.model import ModelUploadOp
    from kfp import compiler, dsl

    _, paths = compiled
    outputs = load(paths["train.yaml"])["root"]["outputDefinitions"]["artifacts"]
    assert outputs["serving_model"]["artifactType"]["schemaTitle"] == "google.UnmanagedContainerModel"
    register = load(paths["register.yaml"])["root"]
    assert (
        register["outputDefinitions"]["artifacts"]["model"]["artifactType"]["schemaTitle"]
        == "google.VertexModel"
    )

    from trainguard.components import train, validate

    @dsl.pipeline(name="with-gcpc")
    def mine(job_spec: dict, project: str, region: str):
        trained = train(job_spec=job_spec, project=project, region=region, serving_image="img")
        judged = validate(history=trained.outputs["history"], fail_pipeline=False)
        with dsl.If(judged.outputs["Output"] == True):  # noqa: E712 - KFP condition syntax
            ModelUploadOp(
                project=project,
                location=region,
                display_name="m",
                unmanaged_container_model=trained.outputs["serving_model"],
            )

    compiler.Compiler().compile(mine, str(tmp_path / "mine.yaml"))  # model's system.Model would not
    assert "google.UnmanagedContainerModel" in (tmp_path / "mine.yaml").read_text()
