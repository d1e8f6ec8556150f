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
        "machineSpec": {
            "machineType": "a2-highgpu-1g",
            "acceleratorType": "NVIDIA_TESLA_A100",
            "acceleratorCount": 1,
        },
        "replicaCount": 1,
        "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/t:1", "command": ["python", "t.py"]},
    }
    base.update(overrides)
    return base


@pytest.mark.parametrize(
    "name",
    ["a100-spot", "l4", "tpu-v5e", "multi-worker", "local-healthy", "local-diverging", "local-overfitting"],
)
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
    body = {"displayName": "from-body", "labels": {"team": "ml"}, "jobSpec": {"workerPoolSpecs": [pool()]}}
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
    spec = JobSpec.create(
        P,
        R,
        machine_type="g2-standard-8",
        image_uri="img:1",
        accelerator_type="NVIDIA_L4",
        accelerator_count=1,
        replica_count=3,
        command=["python", "-m", "trainer"],
        args=["--lr=0.1"],
        env={"A": "1"},
        spot=True,
        base_output_dir="gs://b/r",
        service_account="sa@my-project.iam.gserviceaccount.com",
    )
    assert [(p.index, p.replica_count) for p in spec.pools] == [(0, 1), (1, 2)]
    assert spec.pools[1].env == {"A": "1"}
    assert spec.strategy == "SPOT"
    assert spec.service_account.startswith("sa@")
    assert spec.custom_job().job_spec.base_output_directory.output_uri_prefix == "gs://b/r"


def test_keyword_constructor_tpu_topology():
    spec = JobSpec.create(
        P,
        R,
        machine_type="ct5lp-hightpu-4t",
        image_uri="img",
        accelerator_type="TPU_V5_LITEPOD",
        accelerator_count=4,
        tpu_topology="2x2",
    )
    assert spec.pools[0].tpu_topology == "2x2"


BAD = [
    (
        "unknown top-level field (typo)",
        {"workerPoolSpec": [pool()]},
        "workerPoolSpec",
        "did you mean 'workerPoolSpecs'",
    ),
    (
        "ill-typed count",
        {
            "workerPoolSpecs": [
                pool(
                    machineSpec={
                        "machineType": "a2-highgpu-1g",
                        "acceleratorType": "NVIDIA_TESLA_A100",
                        "acceleratorCount": "two",
                    }
                )
            ]
        },
        "workerPoolSpecs[0].machineSpec.acceleratorCount",
        "whole number",
    ),
    (
        "unknown accelerator",
        {
            "workerPoolSpecs": [
                pool(
                    machineSpec={
                        "machineType": "a2-highgpu-1g",
                        "acceleratorType": "NVIDIA_A100",
                        "acceleratorCount": 1,
                    }
                )
            ]
        },
        "workerPoolSpecs[0].machineSpec.acceleratorType",
        "NVIDIA_A100_80GB",
    ),
    ("no worker pools", {"scheduling": {"strategy": "SPOT"}}, "workerPoolSpecs", "at least one"),
    (
        "missing image",
        {"workerPoolSpecs": [pool(containerSpec={"command": ["x"]})]},
        "workerPoolSpecs[0].containerSpec.imageUri",
        "required",
    ),
    (
        "chief with 2 replicas",
        {"workerPoolSpecs": [pool(replicaCount=2)]},
        "workerPoolSpecs[0].replicaCount",
        "workerPoolSpecs[1]",
    ),
    (
        "accelerator without count",
        {
            "workerPoolSpecs": [
                pool(machineSpec={"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100"})
            ]
        },
        "workerPoolSpecs[0].machineSpec.acceleratorCount",
        "required",
    ),
    (
        "bad strategy",
        {"workerPoolSpecs": [pool()], "scheduling": {"strategy": "SPOTT"}},
        "scheduling.strategy",
        "SPOT",
    ),
    (
        "bad duration",
        {"workerPoolSpecs": [pool()], "scheduling": {"timeout": "2 hours"}},
        "scheduling.timeout",
        "3600s",
    ),
    (
        "args a mapping",
        {"workerPoolSpecs": [pool(containerSpec={"imageUri": "i", "args": {"lr": 1}})]},
        "workerPoolSpecs[0].containerSpec.args",
        "must be a list",
    ),
    (
        "env without name",
        {"workerPoolSpecs": [pool(containerSpec={"imageUri": "i", "env": [{"value": "1"}]})]},
        "workerPoolSpecs[0].containerSpec.env[0].name",
        "required",
    ),
    (
        "negative replicas",
        {"workerPoolSpecs": [pool(), pool(replicaCount=-1)]},
        "workerPoolSpecs[1].replicaCount",
        "negative",
    ),
    (
        "boolean as string",
        {"workerPoolSpecs": [pool()], "enableWebAccess": "yes"},
        "enableWebAccess",
        "true or false",
    ),
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


@pytest.mark.parametrize(
    "project,region,path",
    [
        ("My_Project", R, "project"),
        ("", R, "project"),
        (P, "us-central1-a", "region"),
        (P, "", "region"),
    ],
)
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
    body = {
        "displayName": "cmek-job",
        "labels": {"team": "ml"},
        "encryptionSpec": {"kmsKeyName": "projects/p/locations/us-central1/keyRings/r/cryptoKeys/k"},
        "jobSpec": {"workerPoolSpecs": [pool()]},
    }
    spec = parse_spec(body, project=P, region=R)
    job = spec.custom_job()
    assert job.encryption_spec.kms_key_name.endswith("cryptoKeys/k")
    again = parse_spec(spec.to_body(), project=P, region=R)
    assert again.custom_job() == job


@pytest.mark.parametrize(
    "body,path,hint",
    [
        ({"lables": {"a": "b"}, "jobSpec": {"workerPoolSpecs": [pool()]}}, "lables", "labels"),
        ({"state": "JOB_STATE_RUNNING", "jobSpec": {"workerPoolSpecs": [pool()]}}, "state", "output only"),
    ],
)
def test_a_custom_job_body_with_a_typo_or_an_output_field_is_rejected(body, path, hint):
    with pytest.raises(SpecError) as info:
        parse_spec(body, project=P, region=R)
    assert info.value.path == path and hint in str(info.value)


@pytest.mark.parametrize(
    "key,flag",
    [("displayName", "--display-name"), ("display_name", "--display-name"), ("labels", "--labels")],
)
def test_a_custom_job_field_beside_the_spec_says_where_it_belongs(key, flag):
    # a --config file holds a CustomJobSpec; displayName/labels are the CustomJob's (gcloud
    # takes them as flags), so the refusal names the flag rather than listing the spec's fields
    with pytest.raises(SpecError) as info:
        parse_spec(
            {key: {"a": "b"} if key == "labels" else "x", "workerPoolSpecs": [pool()]}, project=P, region=R
        )
    assert info.value.path == key
    assert f"give it as {flag}" in str(info.value) and "under jobSpec" in str(info.value)
    assert "CustomJobSpec has:" not in str(info.value)


# --- hostile and careless specs: one clear message, exit 2, nothing unbounded ---------------------

from tests.fuzz.contract import assert_contract, peak_memory, run_cli  # noqa: E402
from trainguard import safe_yaml  # noqa: E402

BOMB = """x-a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
x-b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
x-c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
x-d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
x-e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
x-f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
x-g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
x-h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
workerPoolSpecs:
- machineSpec: {machineType: n1-standard-4}
  containerSpec: {imageUri: img, args: [*h,*h,*h,*h,*h,*h,*h,*h,*h]}
"""


def test_a_yaml_alias_bomb_is_refused_before_it_expands():
    result, peak = peak_memory(lambda: parse_spec(BOMB, project=P, region=R))

    assert isinstance(result, SpecError)
    assert "expands to more than" in str(result) and "aliases" in str(result)
    assert len(str(result)) < 1000
    assert peak < 20_000_000  # bytes; the expansion would be billions of values


def test_aliases_that_stay_small_are_fine():
    text = """
x-image: &image us-docker.pkg.dev/p/r/t:1
x-machine: &machine {machineType: n1-standard-4}
workerPoolSpecs:
- {machineSpec: *machine, containerSpec: {imageUri: *image}}
- {machineSpec: *machine, replicaCount: 2, containerSpec: {imageUri: *image}}
"""
    spec = parse_spec(
        {k: v for k, v in safe_yaml.load(text, "t").items() if not k.startswith("x-")}, project=P, region=R
    )
    assert [p.replica_count for p in spec.pools] == [1, 2]


@pytest.mark.parametrize(
    "text",
    [
        "workerPoolSpecs: " + "[" * 500 + "]" * 500,
        '{"workerPoolSpecs": ' + "[" * 500 + "]" * 500 + "}",
        "a:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 300)),
    ],
)
def test_a_spec_nested_hundreds_deep_names_the_cap_not_a_recursion_error(text):
    with pytest.raises(SpecError, match="nests more than 64 levels"):
        parse_spec(text, project=P, region=R)


def test_a_mapping_nested_hundreds_deep_from_python_is_refused_too():
    data: dict = {"workerPoolSpecs": [pool()]}
    deep = data
    for _ in range(3000):
        deep["labels"] = {}
        deep = deep["labels"]
    with pytest.raises(SpecError, match="nests more than"):
        parse_spec(data, project=P, region=R)


def test_a_shared_subtree_counts_every_time_it_appears():
    leaf = ["x"] * 1000
    data = {"workerPoolSpecs": [pool(containerSpec={"imageUri": "i", "args": [leaf] * 1000})]}
    with pytest.raises(SpecError, match="expands to more than"):
        parse_spec(data, project=P, region=R)


def test_a_huge_wrong_typed_value_is_echoed_short():
    value = "n" * 5_000_000
    data = {"workerPoolSpecs": [pool(replicaCount=value)]}
    with pytest.raises(SpecError) as info:
        parse_spec(data, project=P, region=R)

    assert info.value.path == "workerPoolSpecs[0].replicaCount"
    assert "whole number" in str(info.value)
    assert len(str(info.value)) < 500


def test_a_secret_in_a_wrong_typed_value_is_redacted_in_the_message():
    data = {"workerPoolSpecs": [pool()], "serviceAccount": {"token": "ya29.a0AfB_byDx9Kq3LzSECRET"}}
    with pytest.raises(SpecError) as info:
        parse_spec(data, project=P, region=R)

    assert "must be a string" in str(info.value)
    assert "SECRET" not in str(info.value) and "ya29" not in str(info.value)


@pytest.mark.parametrize("padding", ["", "x" * 300])  # a short key (its shown form is kept) and a long one
def test_a_secret_shaped_key_is_redacted_in_every_path_that_names_it(padding):
    key = f"ya29.a0AfB_byDx9Kq3LzSECRET{padding}"
    data = {"workerPoolSpecs": [pool(), {**pool(replicaCount=2), key: 1}], key: {"a": 1}}
    for _ in range(2):  # the second parse finds the key's shown form already made
        with pytest.raises(SpecError) as info:
            parse_spec(data, project=P, region=R)
        message = str(info.value)
        assert "2 problems" in message and message.count("[REDACTED]") >= 2
        assert "SECRET" not in message and "ya29" not in message and "SECRET" not in info.value.path


def test_hundreds_of_problems_are_counted_not_all_listed():
    data = {"workerPoolSpecs": [pool()], **{f"field{i}": 1 for i in range(500)}}
    with pytest.raises(SpecError) as info:
        parse_spec(data, project=P, region=R)

    assert "500 problems" in str(info.value) and "and 480 more" in str(info.value)
    assert len(str(info.value)) < 20_000


@pytest.mark.parametrize("count", [2**31, 2**40, "99999999999999999999999999999999999999999999"])
def test_an_out_of_range_accelerator_count_keeps_its_path(count):
    data = {
        "workerPoolSpecs": [
            pool(
                machineSpec={
                    "machineType": "a2-highgpu-1g",
                    "acceleratorType": "NVIDIA_TESLA_A100",
                    "acceleratorCount": count,
                }
            )
        ]
    }
    with pytest.raises(SpecError) as info:
        parse_spec(data, project=P, region=R)

    assert info.value.path == "workerPoolSpecs[0].machineSpec.acceleratorCount"
    assert "out of range" in str(info.value)


def test_a_huge_integer_in_yaml_is_bad_input_not_a_crash():
    text = "workerPoolSpecs:\n- machineSpec: {machineType: n1, acceleratorCount: " + "9" * 5000 + "}\n"
    with pytest.raises(SpecError):
        parse_spec(text, project=P, region=R)


@pytest.mark.parametrize(
    "field,value",
    [
        ("timeout", "-3600s"),
        ("timeout", -5),
        ("timeout", "-0.5s"),
        ("maxWaitDuration", "-60s"),
        ("maxWaitDuration", -1.5),
    ],
)
def test_a_negative_duration_is_an_error_naming_the_field(field, value):
    data = {"workerPoolSpecs": [pool()], "scheduling": {field: value}}
    with pytest.raises(SpecError) as info:
        parse_spec(data, project=P, region=R)

    assert info.value.path == f"scheduling.{field}"
    assert "must not be negative" in str(info.value)


@pytest.mark.parametrize("value", [float("inf"), float("nan"), "99999999999999s", 1e300])
def test_a_duration_out_of_protobufs_range_is_an_error_naming_the_field(value):
    with pytest.raises(SpecError) as info:
        parse_spec({"workerPoolSpecs": [pool()], "scheduling": {"timeout": value}}, project=P, region=R)
    assert info.value.path == "scheduling.timeout"


@pytest.mark.parametrize("value,seconds", [(" 3600s ", 3600), (90.5, 90.5), ("0s", 0)])
def test_durations_people_write_are_accepted(value, seconds):
    spec = parse_spec({"workerPoolSpecs": [pool()], "scheduling": {"timeout": value}}, project=P, region=R)
    assert spec.job_spec.scheduling.timeout.total_seconds() == seconds


def test_snake_case_keys_are_normalised_everywhere_once():
    data = {
        "worker_pool_specs": [
            {
                "machine_spec": {
                    "machine_type": "g2-standard-8",
                    "accelerator_type": "NVIDIA_L4",
                    "accelerator_count": 1,
                },
                "container_spec": {"image_uri": "img"},
            }
        ],
        "base_output_directory": {"output_uri_prefix": "gs://b/r"},
    }
    spec = parse_spec(data, project=P, region=R)

    assert spec.pools[0].accelerator_type == "NVIDIA_L4"
    assert spec.base_output_dir == "gs://b/r"


def test_a_field_given_in_both_spellings_is_an_error_naming_both():
    data = {"workerPoolSpecs": [pool()], "worker_pool_specs": [pool()]}
    with pytest.raises(SpecError, match=r"given twice \(as workerPoolSpecs and worker_pool_specs\)"):
        parse_spec(data, project=P, region=R)
    data = {"worker_pool_specs": [pool()], "workerPoolSpecs": [pool()]}
    with pytest.raises(SpecError, match=r"\(as worker_pool_specs and workerPoolSpecs\)"):
        parse_spec(data, project=P, region=R)


def test_a_scalar_for_a_repeated_string_is_a_one_item_list_as_gcloud_decodes_it():
    text = """
workerPoolSpecs:
  machineSpec: {machineType: n1-standard-4}
  pythonPackageSpec:
    executorImageUri: us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-12.py310:latest
    packageUris: gs://bucket/trainer-0.1.tar.gz
    pythonModule: trainer.task
    args: --epochs=3
"""
    spec = parse_spec(text, project=P, region=R)
    pps = spec.job_spec.worker_pool_specs[0].python_package_spec
    assert list(pps.package_uris) == ["gs://bucket/trainer-0.1.tar.gz"]
    assert spec.pools[0].args == ("--epochs=3",)


def test_gcpc_empty_defaults_count_as_unset():
    """GCPC's CustomTrainingJobOp sends every field, empty ones included, on every job."""
    body = {
        "display_name": "add-numbers",
        "job_spec": {
            "worker_pool_specs": [
                {
                    "machine_spec": {"machine_type": "n1-standard-4"},
                    "replica_count": 1.0,
                    "container_spec": {"image_uri": "python:3.11", "command": ["echo"], "args": ["foo"]},
                }
            ],
            "scheduling": {"timeout": "604800s", "restart_job_on_worker_restart": False},
            "service_account": "",
            "tensorboard": "",
            "enable_web_access": False,
            "network": "",
            "reserved_ip_ranges": [],
            "base_output_directory": {"output_uri_prefix": ""},
        },
        "labels": {},
        "encryption_spec": {"kms_key_name": ""},
    }
    spec = parse_spec(body, project=P, region=R)
    assert spec.base_output_dir == "" and spec.service_account == "" and spec.kms_key_name == ""
    assert "baseOutputDirectory" not in spec.to_dict()


def test_a_missing_snake_case_field_is_named_in_camel_case():
    data = {"worker_pool_specs": [{"machine_spec": {"machine_type": "n1"}}]}
    with pytest.raises(SpecError) as info:
        parse_spec(data, project=P, region=R)
    assert info.value.path == "workerPoolSpecs[0].containerSpec"


def test_a_directory_or_a_fifo_as_the_spec_file_is_bad_input(tmp_path):
    import os

    with pytest.raises(SpecError, match="not a regular file"):
        load_spec(tmp_path, project=P, region=R)
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)
    with pytest.raises(SpecError, match="not a regular file"):
        load_spec(fifo, project=P, region=R)


@pytest.mark.parametrize("command", ["preflight", "train"])
def test_hostile_specs_exit_2_through_the_cli(tmp_path, command):
    deep = tmp_path / "deep.json"
    deep.write_text('{"workerPoolSpecs": ' + "[" * 600 + "]" * 600 + "}")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    negative = tmp_path / "negative.yaml"
    negative.write_text(
        "workerPoolSpecs:\n- machineSpec: {machineType: n1-standard-4}\n"
        "  containerSpec: {imageUri: img}\nscheduling: {timeout: -30s}\n"
    )
    for path, needle in (
        (deep, "nests more than"),
        (bomb, "expands to more than"),
        (negative, "scheduling.timeout"),
    ):
        outcome = run_cli(command, path, "--project", P, "--region", R)
        assert_contract(outcome)
        assert outcome.exit_code == 2 and needle in outcome.stderr


def test_importing_the_spec_does_not_import_every_aiplatform_client():
    import subprocess
    import sys

    code = (
        "import sys, trainguard.spec as s\n"
        "print(any(m.startswith('google.cloud.aiplatform_v1.services') for m in sys.modules))\n"
        "from google.cloud import aiplatform_v1\n"
        "print(aiplatform_v1.CustomJob is s.CustomJob, aiplatform_v1.JobServiceClient.__name__)\n"
        "from google.cloud.aiplatform_v1.types import custom_job\n"
        "print(custom_job.CustomJobSpec is s.CustomJobSpec)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert out.stdout.split() == ["False", "True", "JobServiceClient", "True"]


def test_a_spec_built_before_aiplatform_is_imported_is_a_real_custom_job():
    spec = parse_spec({"workerPoolSpecs": [pool()]}, project=P, region=R)
    assert isinstance(spec.custom_job(), aiplatform_v1.CustomJob)
    assert aiplatform_v1.CustomJob.pb(spec.custom_job()).SerializeToString()


def test_more_than_four_worker_pools_is_bad_input_with_a_short_message():
    # Vertex AI has four pool roles; 5000 pools once made preflight print 500 KB of PASS lines.
    with pytest.raises(SpecError) as info:
        parse_spec({"workerPoolSpecs": [pool()] + [pool(replicaCount=2)] * 4999}, project=P, region=R)
    assert info.value.path == "workerPoolSpecs" and "at most 4" in str(info.value)
    assert len(str(info.value)) < 500
    assert (
        len(parse_spec({"workerPoolSpecs": [pool()] + [pool(replicaCount=2)] * 3}, project=P, region=R).pools)
        == 4
    )


@pytest.mark.parametrize(
    "text",
    [
        "workerPoolSpecs: []\nserviceAccount: a@p.iam.gserviceaccount.com\n"
        "serviceAccount: b@p.iam.gserviceaccount.com\n",
        '{"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4", '
        '"machineType": "a2-highgpu-1g"}}]}',
    ],
)
def test_a_key_given_twice_is_bad_input_not_a_silent_last_wins(text):
    with pytest.raises(SpecError, match="appears twice in one mapping"):
        parse_spec(text, project=P, region=R)


def test_equal_keys_in_different_mappings_and_merge_keys_are_fine():
    text = (
        "workerPoolSpecs:\n- machineSpec: {machineType: n1-standard-4}\n"
        "  containerSpec: {imageUri: img, env: [{name: A, value: '1'}, {name: B, value: '1'}]}\n"
        "- machineSpec: {machineType: n1-standard-4}\n  replicaCount: 2\n"
        "  containerSpec: {imageUri: img}\n"
    )
    assert len(parse_spec(text, project=P, region=R).pools) == 2
    from trainguard import safe_yaml

    assert safe_yaml.load("x: &x {a: 1}\ny: {<<: *x, a: 2}\n", "t")["y"] == {"a": 2}
    assert safe_yaml.load('1: a\n"1": b\n', "t") == {1: "a", "1": "b"}


@pytest.mark.parametrize(
    "data,needle",
    [
        (b"\xff\xfe" + "workerPoolSpecs: []".encode("utf-16-le"), "UTF-16 text, not UTF-8"),
        (bytes(range(256)), "not UTF-8 text (byte 0x80"),
    ],
)
def test_a_spec_that_is_not_utf8_says_so_and_what_to_do(tmp_path, data, needle):
    path = tmp_path / "spec.yaml"
    path.write_bytes(data)
    with pytest.raises(SpecError, match="save the YAML or JSON spec as UTF-8") as info:
        load_spec(path, project=P, region=R)
    assert needle in str(info.value)


def test_broken_yaml_is_one_line_naming_where_it_broke(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("workerPoolSpecs:\n  - machineSpec: {machineType: n1-standard-4\n")
    with pytest.raises(SpecError) as info:
        load_spec(bad, project="my-project", region="us-central1")
    message = str(info.value)
    assert "\n" not in message
    assert "line 3, column 1: did not find expected ',' or '}'" in message


@pytest.mark.parametrize(
    ("machine", "takes"),
    [
        ("a2-highgpu-1g", "(a2-highgpu-1g takes NVIDIA_TESLA_A100)"),
        ("a2-ultragpu-1g", "(a2-ultragpu-1g takes NVIDIA_A100_80GB)"),
    ],
)
def test_an_accelerator_name_that_is_no_name_gets_the_one_its_machine_takes(machine, takes):
    data = {
        "workerPoolSpecs": [
            {
                "machineSpec": {
                    "machineType": machine,
                    "acceleratorType": "NVIDIA_A100",
                    "acceleratorCount": 1,
                },
                "replicaCount": 1,
                "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/t:1"},
            }
        ]
    }
    with pytest.raises(SpecError) as info:
        parse_spec(data, project="my-project", region="us-central1")
    assert takes in str(info.value) and "did you mean NVIDIA_A100_80GB" not in str(info.value)


# Real typos from the spec corpus (tests/fixtures/specs): s204431/mlops-CAPTCHA wrote NVIDIA_T4,
# iasonrap/mlops31 NVIDIA_TESLA_L4; plain similarity pointed the first at NVIDIA_L4, another GPU.
@pytest.mark.parametrize(
    "typed,meant",
    [("NVIDIA_T4", "NVIDIA_TESLA_T4"), ("NVIDIA_TESLA_L4", "NVIDIA_L4"), ("NVIDIA_H100", "NVIDIA_H100_80GB")],
)
def test_an_accelerator_named_with_or_without_tesla_suggests_the_gpu_meant(typed, meant):
    machine = {"machineType": "n1-standard-8", "acceleratorType": typed, "acceleratorCount": 1}
    with pytest.raises(SpecError) as info:
        parse_spec({"workerPoolSpecs": [pool(machineSpec=machine)]}, project=P, region=R)
    assert f"did you mean {meant}?" in str(info.value)


def test_an_unknown_key_is_not_matched_to_a_field_the_mapping_already_sets():
    # jchavezar/vertex-ai-samples e2e/test.py: 'accelerator': 1 beside 'accelerator_type'
    machine = {"machine_type": "n1-standard-8", "accelerator_type": "NVIDIA_TESLA_T4", "accelerator": 1}
    with pytest.raises(SpecError) as info:
        parse_spec({"worker_pool_specs": [pool(machineSpec=machine)]}, project=P, region=R)
    assert info.value.path == "workerPoolSpecs[0].machineSpec.accelerator"
    assert "did you mean 'acceleratorCount'?" in str(info.value)


def test_an_ai_platform_legacy_config_is_named_as_such_with_the_migration_guide():
    # daangn/article-classifier and formigone/ml-engine config_gpu.yaml (spec corpus)
    text = "trainingInput:\n  scaleTier: CUSTOM\n  masterType: standard_p100\n  workerCount: 1\n"
    with pytest.raises(SpecError) as info:
        parse_spec(text, project=P, region=R, source="config_gpu.yaml")
    assert info.value.path == "trainingInput"
    assert "AI Platform Training's (legacy) job config" in str(info.value)
    assert "workerPoolSpecs" in str(info.value) and "migrating-to-vertex-ai" in str(info.value)
    assert info.value.exit_code == EXIT_BAD_INPUT
