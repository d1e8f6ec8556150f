"""The Vertex backend's pure parts: the request it builds, gcp_resources, URLs, options."""

from __future__ import annotations

import json

import pytest
from google.cloud import aiplatform_v1

from trainguard.errors import ConfigError
from trainguard.launch.gcp_resources import read_gcp_resources, resource_uri, write_gcp_resources
from trainguard.launch.vertex import VertexBackend
from trainguard.launch.vertex_api import LAUNCH_ID_LABEL, console_url, state_name
from trainguard.retry import Backoff
from trainguard.spec import JobSpec, parse_spec

NAME = "projects/123456789012/locations/europe-west4/customJobs/8412345678901234567"


def spec(**kw) -> JobSpec:
    args = dict(
        machine_type="g2-standard-8",
        image_uri="img:1",
        accelerator_type="NVIDIA_L4",
        accelerator_count=1,
        replica_count=2,
        env={"A": "pool"},
        base_output_dir="gs://b/run/",
    )
    args.update(kw)
    return JobSpec.create("my-project", "europe-west4", **args)


def env_of(pool) -> dict[str, str]:
    return {e.name: e.value for e in pool.container_spec.env}


def test_urls():
    assert console_url("my-project", "europe-west4", NAME) == (
        "https://console.cloud.google.com/vertex-ai/locations/europe-west4/training/"
        "8412345678901234567/cpu?project=my-project"
    )
    assert resource_uri(NAME) == f"https://europe-west4-aiplatform.googleapis.com/v1/{NAME}"


def test_state_names():
    assert state_name(aiplatform_v1.JobState.JOB_STATE_RUNNING) == "RUNNING"
    assert state_name(9) == "EXPIRED"


def test_gcp_resources_round_trip(tmp_path):
    path = tmp_path / "deep" / "gcp_resources"
    write_gcp_resources(path, NAME)
    assert json.loads(path.read_text()) == {
        "resources": [{"resourceType": "CustomJob", "resourceUri": resource_uri(NAME)}]
    }
    assert read_gcp_resources(path) == NAME
    assert [p.name for p in path.parent.iterdir()] == ["gcp_resources"]  # no temp file left


def test_no_or_empty_gcp_resources_means_no_earlier_job(tmp_path):
    assert read_gcp_resources(tmp_path / "missing") is None
    (tmp_path / "empty").write_text("\n")
    assert read_gcp_resources(tmp_path / "empty") is None


@pytest.mark.parametrize(
    "text, match",
    [
        ("not json", "not GcpResources JSON"),
        (json.dumps({"resources": []}), "names 0 CustomJobs"),
        (
            json.dumps(
                {"resources": [{"resourceType": "BatchPredictionJob", "resourceUri": resource_uri(NAME)}]}
            ),
            "names 0 CustomJobs",
        ),
        (
            json.dumps({"resources": [{"resourceType": "CustomJob", "resourceUri": resource_uri(NAME)}] * 2}),
            "names 2 CustomJobs",
        ),
        (
            json.dumps(
                {
                    "resources": [
                        {"resourceType": "CustomJob", "resourceUri": "https://example.com/v1/" + NAME}
                    ]
                }
            ),
            "is not a CustomJob URI",
        ),
    ],
)
def test_a_malformed_gcp_resources_says_what_to_do(tmp_path, text, match):
    path = tmp_path / "gcp_resources"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match) as err:
        read_gcp_resources(path)
    assert "delete it" in str(err.value) or "CustomJob URI" in str(err.value)


def test_build_job_adds_env_to_every_pool_and_keeps_the_spec_unchanged():
    s = spec()
    backend = VertexBackend(extra_env={"EXTRA": "x", "A": "extra"})
    job = backend.build_job(s, launch_id="abc")
    for pool in job.job_spec.worker_pool_specs:
        assert env_of(pool) == {
            "A": "pool",
            "TRAINGUARD_HISTORY": "gs://b/run/history.jsonl",
            "EXTRA": "x",
        }  # the pool's own A wins
    assert job.labels[LAUNCH_ID_LABEL] == "abc"
    assert job.display_name == s.display_name
    # the spec is not changed: building twice gives the same env, not doubled entries
    assert env_of(s.job_spec.worker_pool_specs[0]) == {"A": "pool"}
    again = backend.build_job(s)
    assert len(again.job_spec.worker_pool_specs[0].container_spec.env) == 3
    assert LAUNCH_ID_LABEL not in again.labels


def test_extra_env_can_replace_the_history_path():
    job = VertexBackend(extra_env={"TRAINGUARD_HISTORY": "gs://b/other.jsonl"}).build_job(spec())
    assert env_of(job.job_spec.worker_pool_specs[0])["TRAINGUARD_HISTORY"] == "gs://b/other.jsonl"


def test_output_dir_fills_in_a_missing_base_output_directory():
    s = spec(base_output_dir=None)
    backend = VertexBackend(output_dir="gs://b/fallback")
    assert backend.base_dir(s) == "gs://b/fallback"
    job = backend.build_job(s)
    assert job.job_spec.base_output_directory.output_uri_prefix == "gs://b/fallback"
    assert VertexBackend().base_dir(s) == ""
    assert "TRAINGUARD_HISTORY" not in env_of(VertexBackend().build_job(s).job_spec.worker_pool_specs[0])
    # the spec's own directory wins over output_dir
    assert backend.base_dir(spec()) == "gs://b/run"


def test_python_package_pools_get_the_env_too():
    s = parse_spec(
        {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "pythonPackageSpec": {
                        "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/pytorch:1",
                        "packageUris": ["gs://b/trainer.tar.gz"],
                        "pythonModule": "trainer.task",
                    },
                }
            ],
            "baseOutputDirectory": {"outputUriPrefix": "gs://b/run"},
        },
        project="my-project",
        region="us-central1",
    )
    job = VertexBackend().build_job(s)
    pool = job.job_spec.worker_pool_specs[0]
    assert {e.name: e.value for e in pool.python_package_spec.env} == {
        "TRAINGUARD_HISTORY": "gs://b/run/history.jsonl"
    }
    assert "container_spec" not in pool  # no containerSpec appears next to pythonPackageSpec


def test_max_wait_duration_stays_with_flex_start():
    s = parse_spec(
        {
            "workerPoolSpecs": [
                {"machineSpec": {"machineType": "n1-standard-4"}, "containerSpec": {"imageUri": "img:1"}}
            ],
            "scheduling": {"strategy": "FLEX_START", "maxWaitDuration": "600s"},
        },
        project="my-project",
        region="us-central1",
    )
    job = VertexBackend().build_job(s)
    assert job.job_spec.scheduling.max_wait_duration.total_seconds() == 600


def test_backoff_grows_to_the_cap_and_resets():
    b = Backoff(2.0, 1.5, 10.0)
    assert [b() for _ in range(6)] == [2.0, 3.0, 4.5, 6.75, 10.0, 10.0]
    b.reset()
    assert b() == 2.0


@pytest.mark.parametrize(
    "kw",
    [
        {"poll_initial_s": 0},
        {"poll_initial_s": 5, "poll_max_s": 1},
        {"poll_factor": 0.5},
        {"max_queued_s": -1},
        {"watch_interval_s": 0},
        {"output_dir": "/tmp/out"},
    ],
)
def test_bad_options_are_config_errors(kw):
    with pytest.raises(ConfigError):
        VertexBackend(**kw)


def test_the_history_path_is_what_the_chief_is_told():
    assert VertexBackend().history_path(spec()) == "gs://b/run/history.jsonl"
    assert (
        VertexBackend(extra_env={"TRAINGUARD_HISTORY": "gs://b/x.jsonl"}).history_path(spec())
        == "gs://b/x.jsonl"
    )
    own = spec(env={"TRAINGUARD_HISTORY": "gs://b/own.jsonl"})
    assert (
        VertexBackend(extra_env={"TRAINGUARD_HISTORY": "gs://b/x.jsonl"}).history_path(own)
        == "gs://b/own.jsonl"
    )
    assert VertexBackend().history_path(spec(base_output_dir=None)) == ""


@pytest.mark.parametrize("kind", ["fifo", "directory", "huge"])
def test_a_gcp_resources_path_that_is_no_small_file_is_bad_input_at_once(tmp_path, kind):
    # A FIFO there once blocked `train --vertex --gcp-resources` for ever before any call.
    import os
    import threading

    path = tmp_path / "gcp_resources"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(b" " * (2 << 20))
    box: dict = {}

    def read() -> None:
        try:
            box["name"] = read_gcp_resources(path)
        except ConfigError as exc:
            box["error"] = exc

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():
        with open(path, "wb"):  # free the blocked read
            pass
        pytest.fail("reading gcp_resources blocked")
    assert "gcp_resources file" in str(box.get("error"))
