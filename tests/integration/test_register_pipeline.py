"""guarded_training end to end in the KFP local runner, registering into a loopback Model
Registry: only a model that passed reaches it, with its verdict; the model on gs:// (the storage
emulator) in the one layout."""

from __future__ import annotations

import io
import json

import pytest

from tests.servers.model_registry import ModelRegistryServer
from trainguard.runtime.storage import store_for

pytest.importorskip("kfp")
IMAGE = "us-central1-docker.pkg.dev/demo-project/serving/digits:1"


@pytest.fixture
def cloud(emulator, monkeypatch):
    """Cloud Storage (the emulator) and the Model Registry (loopback), as the tasks see them."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.url)
    emulator.create_bucket("tg-models")
    server = ModelRegistryServer({"demo-project": "123456789012"}, polls_before_done=1).start()
    monkeypatch.setenv("TRAINGUARD_ENDPOINT_AIPLATFORM", server.url)
    monkeypatch.delenv("VERTEX_AI_PIPELINES_RUN_LABELS", raising=False)
    yield server
    server.stop()


@pytest.mark.slow
def test_a_model_that_passed_with_a_warning_is_registered_with_its_verdict(cloud, tmp_path):
    pytest.importorskip("torch")
    import torch

    from tests.integration.test_guard_local import example
    from trainguard.pipelines.local_runner import run_local

    parent = cloud.add_model("demo-project", "us-central1", display_name="digits")
    # The guard ends the overfitting run early; the best checkpoint ships and validate warns.
    outcome = run_local(
        "guarded_training",
        example("local-overfitting.yaml", "--step-sleep=0.05"),
        pipeline_root=str(tmp_path),
        output_dir="gs://tg-models/runs/overfit",
        serving_image=IMAGE,
        parent_model=parent,
    )
    assert outcome.succeeded, outcome.message[-3000:]
    model = outcome.metadata("train", "model")
    assert model["model_source"] == "checkpoint" and model["serving_files"] == ["model.pt"]
    assert model["model_step"] < 180  # 60 epochs of 3 steps: the guard stopped it before the end
    verdict = outcome.read_json("validate", "verdict")
    # Success with a finding: the verdict still says overfit, as a warning naming the shipped step.
    (finding,) = [f for f in verdict["findings"] if f["failure_class"] == "overfit"]
    assert verdict["passed"] and finding["severity"] == "warn"
    assert f"checkpoint at step {model['model_step']}" in finding["message"]
    (upload,) = cloud.uploads()
    first, second = cloud.versions(parent)
    assert second["versionId"] == "2" and second["containerSpec"]["imageUri"] == IMAGE
    labels = second["labels"]
    assert labels["trainguard-passed"] == "true" and labels["trainguard-warnings"] == "overfit"
    assert labels["trainguard-step"] == str(model["model_step"]) and labels["trainguard-metric"] == "val_loss"
    assert labels["trainguard-run"].startswith("trainguard-guarded-training")
    assert f"checkpoint step {model['model_step']}" in second["description"]
    # What the registry points at is the one layout: the step's export, loadable, its checkpoint.
    uri = second["artifactUri"]
    assert uri.startswith("gs://tg-models/runs/overfit/") and uri.endswith("/model/")
    store = store_for(uri)
    weights = torch.load(io.BytesIO(store.read_bytes(f"{uri}model.pt")), weights_only=True)
    assert weights and all(isinstance(v, torch.Tensor) for v in weights.values())
    assert store.exists(f"{uri}checkpoint/state.pt")
    # The register task's outputs: the version as GCPC's VertexModel, the operation for the console.
    registered = outcome.metadata("register", "model")
    assert registered["resourceName"] == f"{parent}@2"
    resources = json.loads(outcome.artifact("register", "gcp_resources").read_text())
    assert resources["resources"][0]["resourceType"] == "VertexLro"


@pytest.mark.slow
def test_a_failing_verdict_never_reaches_the_registry(cloud, tmp_path):
    pytest.importorskip("torch")
    from tests.integration.test_guard_local import example
    from trainguard.pipelines.local_runner import run_local

    outcome = run_local(
        "guarded_training",
        example("local-diverging.yaml", "--epochs=4"),
        pipeline_root=str(tmp_path),
        output_dir="gs://tg-models/runs/diverging",
        serving_image=IMAGE,
        guard="off",  # validate's verdict is what is tested, not the in-flight guard
    )
    assert not outcome.succeeded and outcome.failed_task == "validate"
    assert cloud.requests == []
