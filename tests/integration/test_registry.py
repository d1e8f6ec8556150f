"""Registering a model: the real ModelServiceClient against a loopback Model Registry that speaks
``models:upload``'s long-running operation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.servers.model_registry import LABEL_ERROR, ModelRegistryServer
from trainguard.errors import ConfigError, EndpointUnreachable
from trainguard.registry import (
    RegistrationFailed,
    RegistrationRefused,
    model_card,
    register_model,
    upload,
)
from trainguard.validation import validate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "histories"
PROJECT, REGION = "tg-proj", "us-central1"
ARTIFACT = "gs://tg-models/runs/overfit/model/"
IMAGE = "us-central1-docker.pkg.dev/tg-proj/serving/torch-serve:1"


@pytest.fixture
def registry(monkeypatch):
    server = ModelRegistryServer({PROJECT: "123456789012"}).start()
    monkeypatch.setenv("TRAINGUARD_ENDPOINT_AIPLATFORM", server.url)
    monkeypatch.setenv("TRAINGUARD_RETRY_DEADLINE", "5s")
    monkeypatch.delenv("VERTEX_AI_PIPELINES_RUN_LABELS", raising=False)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def overfit_verdict():
    """A real run that overfit after step 81, judged for the checkpoint at step 80 that shipped:
    the overfit it escaped is a warning, and the verdict passes."""
    verdict = validate(FIXTURES / "overfit" / "history.jsonl", shipped_step=80)
    assert verdict.passed and any(f.failure_class == "overfit" for f in verdict.warnings)
    return verdict.to_dict()


MODEL = {
    "model_source": "checkpoint",
    "model_step": 80,
    "model_metric": "val/loss",
    "model_metric_value": 0.31234,
    "best_step": 81,
    "serving_files": ["model.pt"],
    "model_reason": "the kept checkpoint nearest the best validation step 81",
}


def register(card, tmp_path, **kw):
    return register_model(
        project=PROJECT,
        region=REGION,
        display_name=kw.pop("display_name", "digits-classifier"),
        artifact_uri=kw.pop("artifact_uri", ARTIFACT),
        serving_image=kw.pop("serving_image", IMAGE),
        card=card,
        gcp_resources_path=str(tmp_path / "gcp_resources"),
        poll_initial_s=0.01,
        **kw,
    )


def test_a_passing_model_is_uploaded_and_its_operation_followed_to_the_end(
    registry, overfit_verdict, tmp_path
):
    card = model_card(overfit_verdict, MODEL, run="trainguard-guarded-training-20260101")
    done = register(card, tmp_path)
    # The name Vertex gives: the project number, the model ID, version 1 (the default alias).
    assert done.model.startswith("projects/123456789012/locations/us-central1/models/")
    assert done.version_id == "1" and done.resource_name == f"{done.model}@1"
    polls = registry.calls(r"/operations/", "GET")
    assert len(polls) == registry.polls_before_done + 1  # followed until done, no further
    (stored,) = registry.versions(done.model)
    assert stored["artifactUri"] == ARTIFACT and stored["containerSpec"]["imageUri"] == IMAGE
    assert stored["versionAliases"] == ["default"] and stored["displayName"] == "digits-classifier"
    # The verdict travels with the model: passed, the warning's class, step, metric, the run.
    assert stored["labels"] == {
        "trainguard-passed": "true",
        "trainguard-warnings": "overfit",
        "trainguard-step": "80",
        "trainguard-metric": "val_loss",
        "trainguard-value": "0p3123",
        "trainguard-run": "trainguard-guarded-training-20260101",
    }
    assert "warning [overfit]" in stored["description"] and "checkpoint step 80" in stored["description"]
    assert "val/loss 0.31234" in stored["description"]
    # gcp_resources names the operation as GCPC's launcher does, so the console links it.
    resources = json.loads((tmp_path / "gcp_resources").read_text())["resources"]
    assert resources == [{"resourceType": "VertexLro", "resourceUri": f"{registry.url}/v1/{done.operation}"}]


def test_with_a_parent_model_it_becomes_the_next_version_of_that_model(registry, overfit_verdict, tmp_path):
    parent = registry.add_model(PROJECT, REGION, display_name="digits-classifier")
    card = model_card(overfit_verdict, MODEL, run="run-2")
    done = register(card, tmp_path, parent_model=parent, display_name="ignored-for-a-version")
    assert done.model == parent and done.version_id == "2"
    first, second = registry.versions(parent)
    assert second["labels"]["trainguard-run"] == "run-2" and second["displayName"] == "digits-classifier"
    assert second["versionAliases"] == [] and first["versionAliases"] == ["default"]
    # A version name is accepted too: the version goes to its model.
    again = register(card, tmp_path / "again", parent_model=f"{parent}@2")
    assert (again.model, again.version_id) == (parent, "3")


def test_a_failing_verdict_never_reaches_the_registry(registry, tmp_path):
    failed = validate(FIXTURES / "overfit" / "history.jsonl").to_dict()  # the last weights: overfit
    assert failed["passed"] is False
    with pytest.raises(RegistrationRefused, match="never registered"):
        register(model_card(failed, MODEL), tmp_path)
    assert registry.requests == []


def test_a_model_with_nothing_to_serve_or_off_cloud_storage_is_refused_before_any_call(
    registry, overfit_verdict, tmp_path
):
    with pytest.raises(RegistrationRefused, match="no serving files"):
        register(model_card(overfit_verdict, {**MODEL, "serving_files": []}), tmp_path)
    card = model_card(overfit_verdict, MODEL)
    with pytest.raises(ConfigError, match="Cloud Storage"):
        register(card, tmp_path, artifact_uri="/tmp/tg-local/train/model")
    with pytest.raises(ConfigError, match="serving_image"):
        register(card, tmp_path, serving_image="")
    with pytest.raises(ConfigError, match="projects/PROJECT/locations/REGION/models/MODEL_ID"):
        register(card, tmp_path, parent_model="digits-classifier")
    assert registry.requests == []


def test_labels_outside_vertex_rules_are_refused_by_it_and_ours_never_are(
    registry, overfit_verdict, tmp_path
):
    card = model_card(overfit_verdict, MODEL, run="My.Team/Run 2026-01-01T10:00:00 " + "x" * 80)
    done = register(card, tmp_path)  # a run name with capitals, dots, spaces, 100+ characters
    (stored,) = registry.versions(done.model)
    assert stored["labels"]["trainguard-run"].startswith("my-team-run-2026-01-01t10-00-00-xxx")
    model = {
        "display_name": "m",
        "artifact_uri": ARTIFACT,
        "container_spec": {"image_uri": IMAGE},
        "labels": {"Team": "ML"},
    }
    with pytest.raises(RegistrationFailed) as caught:
        upload(project=PROJECT, region=REGION, model=model, poll_initial_s=0.01)
    assert LABEL_ERROR[:60] in str(caught.value)


def test_an_operation_that_fails_is_named_and_no_model_is_left(registry, overfit_verdict, tmp_path):
    registry.fail_next_operation("Internal error occurred while uploading the model.", code=13)
    with pytest.raises(RegistrationFailed, match="Internal error occurred while uploading") as caught:
        register(model_card(overfit_verdict, MODEL), tmp_path)
    assert "refused the model" in str(caught.value)
    assert registry.models == {}


def test_a_refused_upload_says_what_to_do(registry, overfit_verdict, tmp_path):
    card = model_card(overfit_verdict, MODEL)
    registry.denied.add("aiplatform.models.upload")
    with pytest.raises(RegistrationFailed, match=r"roles/aiplatform.user"):
        register(card, tmp_path)
    registry.denied.clear()
    missing = f"projects/{PROJECT}/locations/{REGION}/models/404"
    with pytest.raises(RegistrationFailed, match="leave parent_model empty"):
        register(card, tmp_path, parent_model=missing)
    registry.disable()
    with pytest.raises(RegistrationFailed, match="gcloud services enable aiplatform.googleapis.com"):
        register(card, tmp_path)


def test_a_prebuilt_image_refuses_a_directory_without_its_file(monkeypatch, overfit_verdict, tmp_path):
    server = ModelRegistryServer(
        {PROJECT: "1"}, list_artifacts=lambda uri: ["model.pt", "checkpoint/state.pt"]
    )
    with server:
        monkeypatch.setenv("TRAINGUARD_ENDPOINT_AIPLATFORM", server.url)
        prebuilt = "us-docker.pkg.dev/vertex-ai/prediction/pytorch-cpu.2-4:latest"
        with pytest.raises(RegistrationFailed, match=r"expected to contain exactly one of: \[model.mar\]"):
            register(model_card(overfit_verdict, MODEL), tmp_path, serving_image=prebuilt)


def test_a_rate_limited_upload_is_sent_again_and_registers_once(registry, overfit_verdict, tmp_path):
    registry.fail(r"/models:upload$", 429, times=2)
    done = register(model_card(overfit_verdict, MODEL), tmp_path)
    assert len(registry.uploads()) == 3 and len(registry.versions(done.model)) == 1


def test_a_retried_task_follows_the_upload_it_started_instead_of_uploading_again(
    registry, overfit_verdict, tmp_path
):
    card = model_card(overfit_verdict, MODEL)
    registry.polls_before_done = 10**6  # the first try's operation never ends…
    with pytest.raises(RegistrationFailed, match="still running"):
        register_model(
            project=PROJECT,
            region=REGION,
            display_name="m",
            artifact_uri=ARTIFACT,
            serving_image=IMAGE,
            card=card,
            gcp_resources_path=str(tmp_path / "gcp_resources"),
            timeout_s=0.3,
            poll_initial_s=0.01,
        )
    registry.polls_before_done = 0  # …until the task is retried
    done = register(card, tmp_path)
    assert len(registry.uploads()) == 1 and registry.versions(done.model)[0]["versionId"] == "1"


def test_a_dead_endpoint_is_named(monkeypatch, overfit_verdict, tmp_path, dead_host):
    monkeypatch.setenv("TRAINGUARD_ENDPOINT_AIPLATFORM", f"http://{dead_host}")
    monkeypatch.setenv("TRAINGUARD_RETRY_DEADLINE", "1s")
    with pytest.raises(EndpointUnreachable, match="models:upload"):
        register(model_card(overfit_verdict, MODEL), tmp_path)
