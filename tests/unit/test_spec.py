"""Spec parsing: good specs load into aiplatform_v1 types; bad ones name the field and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.cloud import aiplatform_v1

from trainguard.errors import EXIT_BAD_INPUT, SpecError
from trainguard.spec import JobSpec, load_spec, parse_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
P, R = "my-project", "us-central1"


def pool(**overrides):
    base = {
        "machineSpec": {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100",
                        "acceleratorCount": 1},
        "replicaCount": 1,
        "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/t:1", "command": ["python", "t.py"]},
    }
    base.update(overrides)
    return base


@pytest.mark.parametrize("name", ["a100-spot", "l4", "tpu-v5e", "multi-worker",
                                  "local-healthy", "local-diverging", "local-overfitting"])
def test_every_example_spec_loads(name):
    spec = load_spec(EXAMPLES / f"{name}.yaml", project=P, region=R)
    job = spec.custom_job()
    assert isinstance(job, aiplatform_v1.CustomJob)
    assert job.job_spec.worker_pool_specs[0].machine_spec.machine_type


def test_a100_spot_yields_the_custom_job_vertex_receives():
    spec = load_spec(EXAMPLES / "a100-spot.yaml", project=P, region=R, display_name="run-7")
    job = spec.custom_job()
    wp = job.job_spec.worker_pool_specs[0]
    assert job.display_name == "run-7"
    assert wp.machine_spec.accelerator_type == aiplatform_v1.AcceleratorType.NVIDIA_TESLA_A100
    assert wp.machine_spec.accelerator_count == 1
    assert job.job_spec.scheduling.strategy == aiplatform_v1.Scheduling.Strategy.SPOT
    assert job.job_spec.scheduling.timeout.total_seconds() == 86400
    assert job.job_spec.base_output_directory.output_uri_prefix.startswith("gs://")
    assert spec.preemptible and spec.strategy == "SPOT"
    assert spec.pools[0].accelerators_requested == 1
    assert spec.parent == "projects/my-project/locations/us-central1"


def test_json_and_yaml_are_equivalent_and_round_trip(tmp_path):
    spec = load_spec(EXAMPLES / "multi-worker.yaml", project=P, region=R)
    as_json = tmp_path / "spec.json"
    as_json.write_text(json.dumps(spec.to_dict()))
    again = load_spec(as_json, project=P, region=R)
    assert again.to_dict() == spec.to_dict()
    assert [p.replica_count for p in again.pools] == [1, 3]


def test_a_whole_custom_job_body_is_accepted():
    body = {"displayName": "from-body", "labels": {"team": "ml"},
            "jobSpec": {"workerPoolSpecs": [pool()]}}
    spec = parse_spec(body, project=P, region=R)
    assert spec.display_name == "from-body"
    assert spec.custom_job().labels["team"] == "ml"


def test_snake_case_and_plain_second_timeouts_are_accepted():
    data = {"worker_pool_specs": [pool()], "scheduling": {"timeout": 3600, "strategy": "SPOT"}}
    spec = parse_spec(data, project=P, region=R)
    assert spec.job_spec.scheduling.timeout.total_seconds() == 3600


def test_a_pool_without_replica_count_has_one_replica():
    p = pool()
    del p["replicaCount"]
    assert parse_spec({"workerPoolSpecs": [p]}, project=P, region=R).pools[0].replica_count == 1


def test_keyword_constructor_builds_a_multi_worker_spot_job():
    spec = JobSpec.create(P, R, machine_type="g2-standard-8", image_uri="img:1",
                          accelerator_type="NVIDIA_L4", accelerator_count=1, replica_count=3,
                          command=["python", "-m", "trainer"], args=["--lr=0.1"],
                          env={"A": "1"}, spot=True, base_output_dir="gs://b/r",
                          service_account="sa@my-project.iam.gserviceaccount.com")
    assert [(p.index, p.replica_count) for p in spec.pools] == [(0, 1), (1, 2)]
    assert spec.pools[1].env == {"A": "1"}
    assert spec.strategy == "SPOT"
    assert spec.service_account.startswith("sa@")
    assert spec.custom_job().job_spec.base_output_directory.output_uri_prefix == "gs://b/r"


def test_keyword_constructor_tpu_topology():
    spec = JobSpec.create(P, R, machine_type="ct5lp-hightpu-4t", image_uri="img",
                          accelerator_type="TPU_V5_LITEPOD", accelerator_count=4,
                          tpu_topology="2x2")
    assert spec.pools[0].tpu_topology == "2x2"


BAD = [
    ("unknown top-level field (typo)", {"workerPoolSpec": [pool()]},
     "workerPoolSpec", "did you mean 'workerPoolSpecs'"),
    ("ill-typed count", {"workerPoolSpecs": [pool(machineSpec={
        "machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": "two"})]},
     "workerPoolSpecs[0].machineSpec.acceleratorCount", "whole number"),
    ("unknown accelerator", {"workerPoolSpecs": [pool(machineSpec={
        "machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_A100", "acceleratorCount": 1})]},
     "workerPoolSpecs[0].machineSpec.acceleratorType", "NVIDIA_A100_80GB"),
    ("no worker pools", {"scheduling": {"strategy": "SPOT"}}, "workerPoolSpecs", "at least one"),
    ("missing image", {"workerPoolSpecs": [pool(containerSpec={"command": ["x"]})]},
     "workerPoolSpecs[0].containerSpec.imageUri", "required"),
    ("chief with 2 replicas", {"workerPoolSpecs": [pool(replicaCount=2)]},
     "workerPoolSpecs[0].replicaCount", "workerPoolSpecs[1]"),
    ("accelerator without count", {"workerPoolSpecs": [pool(machineSpec={
        "machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100"})]},
     "workerPoolSpecs[0].machineSpec.acceleratorCount", "required"),
    ("bad strategy", {"workerPoolSpecs": [pool()], "scheduling": {"strategy": "SPOTT"}},
     "scheduling.strategy", "SPOT"),
    ("bad duration", {"workerPoolSpecs": [pool()], "scheduling": {"timeout": "2 hours"}},
     "scheduling.timeout", "3600s"),
    ("args not a list", {"workerPoolSpecs": [pool(containerSpec={"imageUri": "i", "args": "--lr=1"})]},
     "workerPoolSpecs[0].containerSpec.args", "must be a list"),
    ("env without name", {"workerPoolSpecs": [pool(containerSpec={"imageUri": "i",
                                                                  "env": [{"value": "1"}]})]},
     "workerPoolSpecs[0].containerSpec.env[0].name", "required"),
    ("negative replicas", {"workerPoolSpecs": [pool(), pool(replicaCount=-1)]},
     "workerPoolSpecs[1].replicaCount", "negative"),
    ("boolean as string", {"workerPoolSpecs": [pool()], "enableWebAccess": "yes"},
     "enableWebAccess", "true or false"),
    ("not a mapping", ["workerPoolSpecs"], "spec", "mapping"),
]


@pytest.mark.parametrize("label,data,path,hint", BAD, ids=[b[0] for b in BAD])
def test_bad_spec_names_the_field_and_the_fix(label, data, path, hint):
    with pytest.raises(SpecError) as info:
        parse_spec(data, project=P, region=R)
    assert info.value.path == path
    assert hint in str(info.value)
    assert info.value.exit_code == EXIT_BAD_INPUT


def test_several_problems_are_reported_together():
    data = {"workerPoolSpecs": [pool(machineSpec={"machineType": 5}, containerSpec=[])]}
    with pytest.raises(SpecError) as info:
        parse_spec(data, project=P, region=R)
    message = str(info.value)
    assert "2 problems" in message
    assert "workerPoolSpecs[0].machineSpec.machineType" in message
    assert "workerPoolSpecs[0].containerSpec" in message


@pytest.mark.parametrize("project,region,path", [
    ("My_Project", R, "project"), ("", R, "project"), (P, "us-central1-a", "region"), (P, "", "region"),
])
def test_bad_project_or_region(project, region, path):
    with pytest.raises(SpecError) as info:
        parse_spec({"workerPoolSpecs": [pool()]}, project=project, region=region)
    assert info.value.path == path


def test_missing_empty_and_malformed_files(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml", project=P, region=R)
    empty = tmp_path / "empty.yaml"
    empty.write_text("\n")
    with pytest.raises(SpecError, match="is empty"):
        load_spec(empty, project=P, region=R)
    broken = tmp_path / "broken.yaml"
    broken.write_text("workerPoolSpecs: [\n  - machineSpec: {machineType: x\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(broken, project=P, region=R)


def test_gcloud_style_single_mapping_for_the_worker_pools():
    text = """
workerPoolSpecs:
  machineSpec:
    machineType: n1-highmem-2
  replicaCount: 1
  containerSpec:
    imageUri: gcr.io/ucaip-test/ucaip-training-test
    args:
    - port=8500
    command:
    - start
"""
    spec = parse_spec(text, project=P, region=R)
    assert [p.machine_type for p in spec.pools] == ["n1-highmem-2"]
    assert spec.pools[0].command == ("start",)


def test_a_custom_job_body_keeps_labels_and_encryption_through_a_round_trip():
    body = {"displayName": "cmek-job", "labels": {"team": "ml"},
            "encryptionSpec": {"kmsKeyName": "projects/p/locations/us-central1/keyRings/r/"
                                             "cryptoKeys/k"},
            "jobSpec": {"workerPoolSpecs": [pool()]}}
    spec = parse_spec(body, project=P, region=R)
    job = spec.custom_job()
    assert job.encryption_spec.kms_key_name.endswith("cryptoKeys/k")
    again = parse_spec(spec.to_body(), project=P, region=R)
    assert again.custom_job() == job


@pytest.mark.parametrize("body,path,hint", [
    ({"lables": {"a": "b"}, "jobSpec": {"workerPoolSpecs": [pool()]}}, "lables", "labels"),
    ({"state": "JOB_STATE_RUNNING", "jobSpec": {"workerPoolSpecs": [pool()]}}, "state",
     "output only"),
])
def test_a_custom_job_body_with_a_typo_or_an_output_field_is_rejected(body, path, hint):
    with pytest.raises(SpecError) as info:
        parse_spec(body, project=P, region=R)
    assert info.value.path == path and hint in str(info.value)
