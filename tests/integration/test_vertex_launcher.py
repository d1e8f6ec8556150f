"""The Vertex backend against the CustomJob test server, through the real aiplatform_v1 client."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import signal
import threading
from pathlib import Path

import pytest
from google.cloud import aiplatform_v1
from google.protobuf import json_format
from google_cloud_pipeline_components.proto import gcp_resources_pb2

from tests.fake_time import FakeTime
from tests.fuzz.contract import assert_contract, run_cli
from tests.servers import vertex_jobs
from tests.servers.vertex_jobs import Scenario, VertexJobsServer
from trainguard.errors import ConfigError, SpecError, TransientError, UserError
from trainguard.launch.base import RunningJob, Stop, diagnose_result
from trainguard.launch.gcp_resources import write_gcp_resources
from trainguard.launch.vertex import VertexBackend
from trainguard.launch.vertex_api import LAUNCH_ID_LABEL
from trainguard.spec import JobSpec, load_spec, parse_spec

vertex_server = vertex_jobs.vertex_server  # the fixture: a server, with the endpoint override set

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROJECT, REGION = "my-project", "us-central1"
A100 = aiplatform_v1.AcceleratorType.NVIDIA_TESLA_A100.value
TPU_V5E = aiplatform_v1.AcceleratorType.TPU_V5_LITEPOD.value
SPOT = aiplatform_v1.Scheduling.Strategy.SPOT.value
FLEX_START = aiplatform_v1.Scheduling.Strategy.FLEX_START.value


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


def backend(fake_time: FakeTime, **kw) -> VertexBackend:
    kw.setdefault("stream", io.StringIO())
    return VertexBackend(clock=fake_time.clock, sleep=fake_time.sleep, **kw)


def a100_spec(**kw) -> JobSpec:
    args = dict(
        machine_type="a2-highgpu-1g",
        image_uri="us-docker.pkg.dev/my-project/t/trainer:1",
        accelerator_type="NVIDIA_TESLA_A100",
        accelerator_count=1,
        spot=True,
        base_output_dir="gs://bucket/runs/r1",
        command=["python", "/app/train.py"],
        env={"LR": "0.1"},
        display_name="guarded",
    )
    args.update(kw)
    return JobSpec.create(PROJECT, REGION, **args)


def only_job_id(server: VertexJobsServer) -> str:
    (job_id,) = server.jobs
    return job_id


# --- the happy path and what arrives ------------------------------------------------------------


def test_creates_the_job_polls_with_backoff_and_succeeds(vertex_server, fake_time, tmp_path):
    vertex_server.script(Scenario.succeeds(queued=2, pending=2, running=6))
    out = io.StringIO()
    gcp_resources = tmp_path / "outputs" / "gcp_resources"
    result = backend(
        fake_time, gcp_resources_path=str(gcp_resources), stream=out, extra_env={"EXTRA": "1"}
    ).run(a100_spec())

    assert result.succeeded and result.error == ""
    job_id = only_job_id(vertex_server)
    assert result.job_name == f"projects/123456789012/locations/{REGION}/customJobs/{job_id}"
    assert result.model_dir == "gs://bucket/runs/r1/model/"
    assert result.checkpoint_dir == "gs://bucket/runs/r1/checkpoints/"
    assert result.history_path == "gs://bucket/runs/r1/history.jsonl"
    assert result.console_url == (
        f"https://console.cloud.google.com/vertex-ai/locations/{REGION}"
        f"/training/{job_id}/cpu?project={PROJECT}"
    )

    (create,) = vertex_server.calls("create")
    assert create.path == f"/v1/projects/{PROJECT}/locations/{REGION}/customJobs"
    assert create.query["$alt"] == ["json;enum-encoding=int"]
    body = create.body
    assert body["displayName"] == "guarded"
    pool = body["jobSpec"]["workerPoolSpecs"][0]
    assert pool["machineSpec"] == {
        "machineType": "a2-highgpu-1g",
        "acceleratorType": A100,
        "acceleratorCount": 1,
    }
    assert pool["replicaCount"] == "1"  # int64 travels as a string
    assert pool["containerSpec"]["command"] == ["python", "/app/train.py"]
    assert pool["containerSpec"]["env"] == [
        {"name": "LR", "value": "0.1"},
        {"name": "TRAINGUARD_HISTORY", "value": "gs://bucket/runs/r1/history.jsonl"},
        # A Spot job's SIGTERM save has 30 s: the runtime says at the first save whether it fits.
        {"name": "TRAINGUARD_PREEMPTION_NOTICE", "value": "30"},
        {"name": "EXTRA", "value": "1"},
    ]
    assert body["jobSpec"]["scheduling"] == {"strategy": SPOT}
    assert body["jobSpec"]["baseOutputDirectory"] == {"outputUriPrefix": "gs://bucket/runs/r1"}
    assert re.fullmatch(r"[0-9a-f]{32}", body["labels"][LAUNCH_ID_LABEL])

    assert vertex_server.states_seen(job_id) == ["QUEUED", "PENDING", "RUNNING", "SUCCEEDED"]
    # 2 s growing x1.5 within a state, back to 2 s after each change.
    assert fake_time.sleeps == [2, 3, 2, 3, 2, 3, 4.5, 6.75, 10.125, 15.1875]
    log = out.getvalue()
    for state in ("QUEUED", "PENDING → RUNNING", "RUNNING → SUCCEEDED"):
        assert state in log
    assert result.console_url in log

    # gcp_resources: GCPC's proto JSON, readable the way GCPC's launcher reads it.
    text = gcp_resources.read_text()
    resources = json_format.Parse(text, gcp_resources_pb2.GcpResources())
    (resource,) = resources.resources
    assert resource.resource_type == "CustomJob"
    prefix = f"https://{REGION}-aiplatform.googleapis.com/v1/"
    assert resource.resource_uri == prefix + result.job_name
    assert re.findall(f"{prefix}(.*)", resource.resource_uri) == [result.job_name]
    assert json.loads(text) == {
        "resources": [{"resourceType": "CustomJob", "resourceUri": prefix + result.job_name}]
    }


def test_every_spec_field_reaches_vertex(vertex_server, fake_time):
    data = {
        "displayName": "everything",
        "labels": {"team": "ml"},
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {
                        "machineType": "ct5lp-hightpu-8t",
                        "acceleratorType": "TPU_V5_LITEPOD",
                        "acceleratorCount": 8,
                        "tpuTopology": "2x4",
                    },
                    "replicaCount": 1,
                    "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/jax:1", "args": ["--steps=10"]},
                },
                {
                    "machineSpec": {
                        "machineType": "ct5lp-hightpu-8t",
                        "acceleratorType": "TPU_V5_LITEPOD",
                        "acceleratorCount": 8,
                        "tpuTopology": "2x4",
                    },
                    "replicaCount": 3,
                    "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/jax:1"},
                },
                {},
                {
                    "machineSpec": {"machineType": "n1-highcpu-16"},
                    "replicaCount": 2,
                    "containerSpec": {
                        "imageUri": "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
                    },
                },
            ],
            "scheduling": {
                "strategy": "FLEX_START",
                "maxWaitDuration": "1800s",
                "restartJobOnWorkerRestart": True,
                "timeout": "7200s",
            },
            "baseOutputDirectory": {"outputUriPrefix": "gs://bucket/runs/tpu"},
            "serviceAccount": "trainer@my-project.iam.gserviceaccount.com",
            "network": "projects/123456789012/global/networks/training",
            "tensorboard": f"projects/{PROJECT}/locations/{REGION}/tensorboards/42",
            "enableWebAccess": True,
        },
    }
    spec = parse_spec(data, project=PROJECT, region=REGION)
    result = backend(fake_time).run(spec)
    assert result.succeeded
    body = vertex_server.calls("create")[0].body
    assert body["displayName"] == "everything"
    assert body["labels"]["team"] == "ml"
    js = body["jobSpec"]
    chief, workers, placeholder, reducer = js["workerPoolSpecs"]
    assert chief["machineSpec"] == {
        "machineType": "ct5lp-hightpu-8t",
        "acceleratorType": TPU_V5E,
        "acceleratorCount": 8,
        "tpuTopology": "2x4",
    }
    assert chief["containerSpec"]["args"] == ["--steps=10"]
    assert workers["replicaCount"] == "3"
    assert placeholder == {}  # an empty pool keeps its place and stays empty
    assert reducer["machineSpec"] == {"machineType": "n1-highcpu-16"}
    assert reducer["replicaCount"] == "2"
    assert js["scheduling"] == {
        "strategy": FLEX_START,
        "maxWaitDuration": "1800s",
        "restartJobOnWorkerRestart": True,
        "timeout": "7200s",
    }
    assert js["serviceAccount"] == "trainer@my-project.iam.gserviceaccount.com"
    assert js["network"] == "projects/123456789012/global/networks/training"
    assert js["tensorboard"] == f"projects/{PROJECT}/locations/{REGION}/tensorboards/42"
    assert js["enableWebAccess"] is True
    for pool in (chief, workers, reducer):
        assert {"name": "TRAINGUARD_HISTORY", "value": "gs://bucket/runs/tpu/history.jsonl"} in pool[
            "containerSpec"
        ]["env"]
    job = next(iter(vertex_server.jobs.values()))
    assert job.web_access_uris  # Vertex answered with the web-access URIs


@pytest.mark.parametrize("example", ["a100-spot.yaml", "multi-worker.yaml", "tpu-v5e.yaml", "l4.yaml"])
def test_the_examples_are_accepted_as_sent(vertex_server, fake_time, example):
    spec = load_spec(EXAMPLES / example, project=PROJECT, region=REGION)
    # A spec without baseOutputDirectory (tpu-v5e.yaml, also run locally) gets it from --output-dir.
    fallback = "" if spec.base_output_dir else "gs://bucket/runs/example"
    assert backend(fake_time, output_dir=fallback).run(spec).succeeded
    sent = vertex_server.calls("create")[0].body["jobSpec"]
    expected = spec.to_dict()
    for got, want in zip(sent["workerPoolSpecs"], expected["workerPoolSpecs"], strict=True):
        want_env = want.get("containerSpec", {}).get("env", [])
        assert got["containerSpec"]["env"][: len(want_env)] == want_env
        assert got["machineSpec"]["machineType"] == want["machineSpec"]["machineType"]
        assert got["machineSpec"].get("acceleratorCount") == want["machineSpec"].get("acceleratorCount")
        acc = want["machineSpec"].get("acceleratorType")
        assert got["machineSpec"].get("acceleratorType") == (
            aiplatform_v1.AcceleratorType[acc].value if acc else None
        )
    assert sent["baseOutputDirectory"] == expected.get("baseOutputDirectory", {"outputUriPrefix": fallback})


def test_pipeline_system_labels_and_output_dir_are_added(vertex_server, fake_time, monkeypatch):
    monkeypatch.setenv(
        "VERTEX_AI_PIPELINES_RUN_LABELS",
        json.dumps({"vertex-ai-pipelines-run-billing-id": "987", "team": "system"}),
    )
    spec = dataclasses.replace(
        JobSpec.create(
            PROJECT,
            REGION,
            machine_type="g2-standard-8",
            image_uri="img:1",
            accelerator_type="NVIDIA_L4",
            accelerator_count=1,
        ),
        labels={"team": "ml"},
    )
    result = backend(fake_time, output_dir="gs://bucket/fallback/").run(spec)
    body = vertex_server.calls("create")[0].body
    assert body["labels"]["vertex-ai-pipelines-run-billing-id"] == "987"
    assert body["labels"]["team"] == "ml"  # the user's label wins, as in GCPC
    assert body["jobSpec"]["baseOutputDirectory"] == {"outputUriPrefix": "gs://bucket/fallback"}
    assert result.model_dir == "gs://bucket/fallback/model/"


def test_max_wait_duration_is_dropped_unless_flex_start(vertex_server, fake_time):
    spec = parse_spec(
        {
            "workerPoolSpecs": [
                {"machineSpec": {"machineType": "n1-standard-4"}, "containerSpec": {"imageUri": "img:1"}}
            ],
            "scheduling": {"strategy": "SPOT", "maxWaitDuration": "600s"},
        },
        project=PROJECT,
        region=REGION,
    )
    out = io.StringIO()
    backend(fake_time, stream=out).run(spec)
    assert vertex_server.calls("create")[0].body["jobSpec"]["scheduling"] == {"strategy": SPOT}
    assert "maxWaitDuration" in out.getvalue()
    assert spec.job_spec.scheduling.max_wait_duration  # the spec itself is untouched


# --- failures -----------------------------------------------------------------------------------


def test_failed_job_returns_its_error_message(vertex_server, fake_time):
    message = (
        "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: "
        "Error. To find out more about why your job exited please check the logs: "
        "https://console.cloud.google.com/logs/viewer?project=123456789012&resource=ml_job"
    )
    vertex_server.script(Scenario.fails(message))
    result = backend(fake_time).run(a100_spec())
    assert result.state == "FAILED"
    assert not result.succeeded
    assert result.error == message
    assert result.checkpoint_dir == "gs://bucket/runs/r1/checkpoints/"


def test_bad_request_on_create_is_a_spec_error_with_the_server_message(vertex_server, fake_time):
    spec = a100_spec(base_output_dir="/tmp/not-gcs")
    with pytest.raises(SpecError) as err:
        backend(fake_time).run(spec)
    assert isinstance(err.value, UserError) and err.value.exit_code == 2
    assert "Vertex AI rejected the CustomJob" in str(err.value)
    assert "Output URI prefix must be a Cloud Storage path" in str(err.value)
    # Vertex names it job_spec.base_output_directory.output_uri_prefix; the spec file spells it so:
    assert err.value.path == "baseOutputDirectory.outputUriPrefix"
    assert "Vertex names it job_spec.base_output_directory.output_uri_prefix" in str(err.value)
    assert vertex_server.calls("get") == []


def test_scripted_400_with_field_violation(vertex_server, fake_time):
    vertex_server.fail_next(
        1,
        400,
        "create",
        message='Machine type "a2-highgpu-1g" is not supported in region us-west1.',
        details=[
            {
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [
                    {
                        "field": "job_spec.worker_pool_specs[0].machine_spec.machine_type",
                        "description": "unsupported",
                    }
                ],
            }
        ],
    )
    with pytest.raises(SpecError, match="is not supported in region") as err:
        backend(fake_time).run(a100_spec())
    assert err.value.path == "workerPoolSpecs[0].machineSpec.machineType"
    assert len(vertex_server.calls("create")) == 1  # a 400 is never retried


def test_a_400_that_names_the_field_only_in_its_message_still_gets_the_path(vertex_server, fake_time):
    # What Vertex sent in prefect-archive/prefect-gcp#175: the field is in the message alone.
    vertex_server.fail_next(
        1,
        400,
        "create",
        message="List of found errors:\t1.Field: job_spec.worker_pool_specs[0].machine_spec."
        "accelerator_type; Message: Both `accelerator_type` and `accelerator_count` should be "
        "specified or none. \t",
    )
    with pytest.raises(SpecError) as err:
        backend(fake_time).run(a100_spec())
    assert err.value.path == "workerPoolSpecs[0].machineSpec.acceleratorType"
    assert str(err.value).startswith("workerPoolSpecs[0].machineSpec.acceleratorType: Vertex AI rejected")
    assert "should be specified or none" in str(err.value)


def test_tensorboard_without_a_service_account_is_refused_with_the_field(vertex_server, fake_time):
    spec = parse_spec(
        {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": 1,
                    "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/trainer:1"},
                }
            ],
            "tensorboard": f"projects/{PROJECT}/locations/{REGION}/tensorboards/42",
            "baseOutputDirectory": {"outputUriPrefix": "gs://bucket/runs/tb"},
        },
        project=PROJECT,
        region=REGION,
        display_name="tb",
    )
    with pytest.raises(SpecError) as err:
        backend(fake_time).run(spec)
    assert err.value.path == "serviceAccount"
    assert "must be specified when uploading to TensorBoard" in str(err.value)


def test_permission_denied_on_create_names_what_is_missing(vertex_server, fake_time):
    vertex_server.fail_next(1, 403, "create")
    with pytest.raises(UserError, match="iam.serviceAccounts.actAs"):
        backend(fake_time).run(a100_spec())


# --- transient errors ---------------------------------------------------------------------------


def test_503_429_and_dropped_connections_while_polling_are_retried(vertex_server, fake_time):
    vertex_server.fail_next(2, 503, "get")
    vertex_server.fail_next(1, 429, "get")
    vertex_server.drop_next(1, "get")
    out = io.StringIO()
    result = backend(fake_time, stream=out).run(a100_spec())
    assert result.succeeded
    gets = vertex_server.calls("get")
    assert len(gets) == 4 + 4  # four failed, then the scenario's four answers
    log = out.getvalue()
    assert "ServiceUnavailable" in log and "TooManyRequests" in log and "ConnectionError" in log
    assert len(vertex_server.jobs) == 1


def test_vertex_unreachable_for_too_long_raises_transient_and_leaves_the_job(
    vertex_server, fake_time, tmp_path
):
    vertex_server.fail_next(10_000, 503, "get")
    gcp_resources = tmp_path / "gcp_resources"
    with pytest.raises(TransientError, match="kept failing"):
        backend(fake_time, gcp_resources_path=str(gcp_resources), max_transient_s=300).run(a100_spec())
    assert vertex_server.calls("cancel") == []  # a retry of the component resumes it
    assert gcp_resources.exists()
    assert sum(fake_time.sleeps) <= 300 + 60


def test_503_on_create_is_retried_without_a_second_job(vertex_server, fake_time):
    vertex_server.fail_next(2, 503, "create")
    result = backend(fake_time).run(a100_spec())
    assert result.succeeded
    assert len(vertex_server.calls("create")) == 3
    assert len(vertex_server.calls("list")) == 2  # looked for a landed create before each retry
    assert len(vertex_server.jobs) == 1


def test_a_create_whose_answer_is_lost_is_adopted_not_doubled(vertex_server, fake_time):
    vertex_server.drop_next(1, "create", after_handling=True)
    result = backend(fake_time).run(a100_spec())
    assert result.succeeded
    assert len(vertex_server.calls("create")) == 1
    (listed,) = vertex_server.calls("list")
    assert listed.query["filter"][0].startswith(f'labels.{LAUNCH_ID_LABEL}="')
    assert len(vertex_server.jobs) == 1
    assert result.job_name.endswith(only_job_id(vertex_server))


# --- quota-short jobs ---------------------------------------------------------------------------


def test_a_job_stuck_in_queued_is_cancelled_and_reported_as_quota(vertex_server, fake_time):
    vertex_server.script(Scenario.stuck_queued())
    result = backend(fake_time, max_queued_s=600).run(a100_spec())
    assert result.state == "CANCELLED"
    assert result.error == (
        "stayed QUEUED for 600 s: likely accelerator quota in us-central1; run trainguard preflight"
    )
    assert len(vertex_server.calls("cancel")) == 1
    assert vertex_server.state_of(only_job_id(vertex_server)) == "CANCELLED"
    assert 600 <= fake_time.now - 1000 <= 600 + 25


def test_the_queued_timer_counts_only_queued_time(vertex_server, fake_time):
    vertex_server.script(Scenario(steps=(("QUEUED", 5), ("RUNNING", 30)), final="SUCCEEDED"))
    result = backend(fake_time, max_queued_s=30, poll_max_s=10).run(a100_spec())
    assert result.succeeded  # ≈ 16 s queued, then 30 polls RUNNING (> 30 s): not a quota problem
    assert fake_time.now - 1000 > 30 * 2


# --- cancellation -------------------------------------------------------------------------------


def test_sigterm_cancels_the_job_and_waits_for_cancelled(vertex_server, fake_time, tmp_path):
    vertex_server.script(Scenario.runs_forever())
    gcp_resources = tmp_path / "gcp_resources"
    out = io.StringIO()

    def terminate_once_running():
        jobs = vertex_server.jobs
        if (
            jobs
            and vertex_server.state_of(next(iter(jobs))) == "RUNNING"
            and not vertex_server.calls("cancel")
        ):
            signal.raise_signal(signal.SIGTERM)  # what KFP sends when the run is cancelled

    fake_time.hook = terminate_once_running
    before = signal.getsignal(signal.SIGTERM)
    result = backend(fake_time, gcp_resources_path=str(gcp_resources), stream=out).run(a100_spec())

    assert result.state == "CANCELLED"
    assert "SIGTERM" in result.error
    job_id = only_job_id(vertex_server)
    (cancel,) = vertex_server.calls("cancel")
    assert cancel.path.endswith(f"/customJobs/{job_id}:cancel")
    assert cancel.body == {}
    assert vertex_server.states_seen(job_id)[-2:] == ["CANCELLING", "CANCELLED"]
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is restored
    assert "cancelling" in out.getvalue()


def test_sigterm_sent_to_the_process_from_a_timer_thread_cancels_the_job(vertex_server):
    vertex_server.script(Scenario.runs_forever())
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:  # real time here: real sleeps of 20-50 ms between polls
        result = VertexBackend(poll_initial_s=0.02, poll_max_s=0.05, cancel_wait_s=5).run(a100_spec())
    finally:
        timer.cancel()
    assert result.state == "CANCELLED"
    assert len(vertex_server.calls("cancel")) == 1
    assert vertex_server.state_of(only_job_id(vertex_server)) == "CANCELLED"


def test_keyboard_interrupt_cancels_the_job(vertex_server, fake_time):
    vertex_server.script(Scenario.runs_forever())

    def interrupt():
        if len(vertex_server.calls("get")) == 3 and not vertex_server.calls("cancel"):
            raise KeyboardInterrupt

    fake_time.hook = interrupt
    result = backend(fake_time).run(a100_spec())
    assert result.state == "CANCELLED"
    assert "KeyboardInterrupt" in result.error
    assert len(vertex_server.calls("cancel")) == 1


def test_a_job_slow_to_cancel_is_reported_as_cancelling(vertex_server, fake_time):
    scenario = Scenario.runs_forever()
    scenario.cancelling_gets = 10_000
    vertex_server.script(scenario)

    def interrupt():
        if vertex_server.calls("get") and not vertex_server.calls("cancel"):
            raise KeyboardInterrupt

    fake_time.hook = interrupt
    result = backend(fake_time, cancel_wait_s=10).run(a100_spec())
    assert result.state == "CANCELLING"
    assert "had not reached CANCELLED" in result.error


# --- resuming an earlier attempt ----------------------------------------------------------------


def test_resumes_the_job_named_in_gcp_resources_without_creating_another(vertex_server, fake_time, tmp_path):
    name = vertex_server.add_job(Scenario((("RUNNING", 3),), "SUCCEEDED"))
    gcp_resources = tmp_path / "gcp_resources"
    write_gcp_resources(gcp_resources, name)
    out = io.StringIO()
    result = backend(fake_time, gcp_resources_path=str(gcp_resources), stream=out).run(a100_spec())
    assert result.succeeded
    assert result.job_name == name
    assert vertex_server.calls("create") == []
    assert "resuming" in out.getvalue()


def test_an_empty_gcp_resources_file_means_a_first_attempt(vertex_server, fake_time, tmp_path):
    gcp_resources = tmp_path / "gcp_resources"
    gcp_resources.write_text("")  # KFP creates output files empty
    result = backend(fake_time, gcp_resources_path=str(gcp_resources)).run(a100_spec())
    assert result.succeeded
    assert len(vertex_server.calls("create")) == 1
    assert result.job_name in gcp_resources.read_text()


def test_a_failed_earlier_job_is_relaunched_and_gcp_resources_rewritten(vertex_server, fake_time, tmp_path):
    old = vertex_server.add_job(state="FAILED")
    gcp_resources = tmp_path / "gcp_resources"
    write_gcp_resources(gcp_resources, old)
    result = backend(fake_time, gcp_resources_path=str(gcp_resources)).run(a100_spec())
    assert result.succeeded
    assert result.job_name != old
    assert len(vertex_server.calls("create")) == 1
    assert result.job_name in gcp_resources.read_text()


def test_without_relaunch_a_failed_earlier_job_is_reported_again(vertex_server, fake_time, tmp_path):
    old = vertex_server.add_job(state="FAILED")
    gcp_resources = tmp_path / "gcp_resources"
    write_gcp_resources(gcp_resources, old)
    result = backend(fake_time, gcp_resources_path=str(gcp_resources), relaunch_failed=False).run(a100_spec())
    assert result.state == "FAILED"
    assert "non-zero status of 1" in result.error
    assert vertex_server.calls("create") == []


def test_a_vanished_earlier_job_is_replaced(vertex_server, fake_time, tmp_path):
    gcp_resources = tmp_path / "gcp_resources"
    write_gcp_resources(gcp_resources, f"projects/123456789012/locations/{REGION}/customJobs/404")
    result = backend(fake_time, gcp_resources_path=str(gcp_resources)).run(a100_spec())
    assert result.succeeded
    assert len(vertex_server.calls("create")) == 1


def test_sigterm_while_resuming_cancels_the_earlier_job(vertex_server, fake_time, tmp_path):
    name = vertex_server.add_job(state="RUNNING")
    gcp_resources = tmp_path / "gcp_resources"
    write_gcp_resources(gcp_resources, name)
    vertex_server.fail_next(1, 503, "get")
    fake_time.hook = lambda: (
        signal.raise_signal(signal.SIGTERM) if not vertex_server.calls("cancel") else None
    )
    result = backend(fake_time, gcp_resources_path=str(gcp_resources)).run(a100_spec())
    assert result.state == "CANCELLED"
    assert vertex_server.calls("cancel")[0].path.endswith(name.rsplit("/", 1)[1] + ":cancel")
    assert vertex_server.calls("create") == []


def test_gcp_resources_from_another_region_is_refused(vertex_server, fake_time, tmp_path):
    gcp_resources = tmp_path / "gcp_resources"
    write_gcp_resources(gcp_resources, "projects/123456789012/locations/europe-west4/customJobs/1")
    with pytest.raises(ConfigError, match="europe-west4.*us-central1"):
        backend(fake_time, gcp_resources_path=str(gcp_resources)).run(a100_spec())
    assert vertex_server.requests == []


def test_sigterm_during_a_failed_create_leaves_nothing_behind(vertex_server, fake_time):
    vertex_server.fail_next(1, 503, "create")
    fake_time.hook = lambda: signal.raise_signal(signal.SIGTERM)
    result = backend(fake_time).run(a100_spec())
    assert result.state == "CANCELLED"
    assert "before the job was created" in result.error
    assert vertex_server.jobs == {}
    assert vertex_server.calls("cancel") == []


def test_sigterm_during_create_cancels_a_job_that_landed(vertex_server, fake_time):
    vertex_server.script(Scenario.runs_forever())
    vertex_server.drop_next(1, "create", after_handling=True)  # created, but the answer is lost
    vertex_server.fail_next(1, 503, "list")  # the lookup backs off, and SIGTERM comes then
    fake_time.hook = lambda: (
        signal.raise_signal(signal.SIGTERM) if not vertex_server.calls("cancel") else None
    )
    result = backend(fake_time).run(a100_spec())
    assert result.state == "CANCELLED"
    job_id = only_job_id(vertex_server)
    assert result.job_name.endswith(job_id)
    assert vertex_server.state_of(job_id) == "CANCELLED"


def test_429_on_create_is_retried_without_a_lookup(vertex_server, fake_time):
    vertex_server.fail_next(1, 429, "create")  # a rate limit: RATE_LIMIT_EXCEEDED, CRUD per minute
    assert backend(fake_time).run(a100_spec()).succeeded
    assert len(vertex_server.calls("create")) == 2
    assert vertex_server.calls("list") == []


# --- a create over a quota limit (issue 28) --------------------------------------------------------

L4 = "aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus"


def l4_spec(count: int = 8, replicas: int = 1) -> JobSpec:
    machine = {1: "g2-standard-12", 2: "g2-standard-24", 4: "g2-standard-48", 8: "g2-standard-96"}[count]
    return JobSpec.create(
        PROJECT,
        REGION,
        machine_type=machine,
        accelerator_type="NVIDIA_L4",
        accelerator_count=count,
        replica_count=replicas,
        image_uri="us-docker.pkg.dev/my-project/t/trainer:1",
        base_output_dir="gs://bucket/runs/l4",
        display_name="l4",
    )


def test_a_create_over_the_quota_limit_is_named_quota_at_once_with_the_fix(
    vertex_server, fake_time, monkeypatch, tmp_path
):
    from tests.servers.quotas import QuotasServer

    vertex_server.set_quota(L4, 4, "NVIDIA_L4")
    with QuotasServer(PROJECT) as quotas:
        quotas.set_limit(L4, 4, region=REGION)
        monkeypatch.setenv("TRAINGUARD_ENDPOINT_CLOUDQUOTAS", quotas.url)
        out = io.StringIO()
        gcp_resources = tmp_path / "gcp_resources"
        result = backend(fake_time, stream=out, gcp_resources_path=str(gcp_resources)).run(l4_spec(8))
    assert (result.state, result.failure_class, result.job_name) == ("FAILED", "quota", "")
    assert len(vertex_server.calls("create")) == 1  # not retried: waiting cannot raise a limit
    assert fake_time.sleeps == [] and vertex_server.jobs == {}
    assert not gcp_resources.exists()  # no job to name
    assert f"The following quota metrics exceed quota limits: {L4}" in result.error
    assert "the job asks for 8 (workerPoolSpecs[0])" in result.error
    assert (
        "gcloud quotas preferences create --service=aiplatform.googleapis.com --project=my-project "
        "--quota-id=CustomModelTrainingNvidiaL4GpusPerProjectPerRegion --preferred-value=8 "
        "--dimensions=region=us-central1"
    ) in result.error
    assert "retrying" not in out.getvalue()
    diagnosis = diagnose_result(result)
    assert diagnosis.failure_class == "quota"


def test_without_cloud_quotas_the_fix_looks_the_quota_id_up_itself(vertex_server, fake_time):
    vertex_server.set_quota(L4, 0, "NVIDIA_L4")  # the fixture points Cloud Quotas at a dead port
    result = backend(fake_time).run(l4_spec(1))
    assert result.failure_class == "quota"
    assert (
        "--quota-id=$(gcloud quotas info list --service=aiplatform.googleapis.com --project=my-project "
        f'--filter="metric={L4}" --format="value(quotaId)") --preferred-value=1'
    ) in result.error


def test_spot_counts_against_the_preemptible_metric_only(vertex_server, fake_time):
    vertex_server.set_quota(L4, 0, "NVIDIA_L4")  # on-demand L4: none; Spot is another metric
    spec = JobSpec.create(
        PROJECT,
        REGION,
        machine_type="g2-standard-12",
        accelerator_type="NVIDIA_L4",
        accelerator_count=1,
        image_uri="us-docker.pkg.dev/my-project/t/trainer:1",
        spot=True,
        base_output_dir="gs://bucket/runs/l4",
        display_name="l4-spot",
    )
    assert backend(fake_time).run(spec).succeeded


def test_within_the_limit_but_held_by_other_jobs_it_waits_queued(vertex_server, fake_time):
    vertex_server.set_quota(L4, 8, "NVIDIA_L4", in_use=4)  # the limit fits 8; 4 are taken
    result = backend(fake_time, max_queued_s=600).run(l4_spec(8))
    assert len(vertex_server.calls("create")) == 1  # accepted
    assert (result.state, result.failure_class) == ("CANCELLED", "quota")
    assert result.error.startswith("stayed QUEUED for 600 s: likely accelerator quota in us-central1")
    assert vertex_server.states_seen(only_job_id(vertex_server)) == ["QUEUED", "CANCELLING", "CANCELLED"]


def test_a_job_waiting_for_quota_runs_once_the_other_jobs_free_it(vertex_server, fake_time):
    vertex_server.set_quota(L4, 8, "NVIDIA_L4", in_use=4)
    polls = iter(range(1000))
    fake_time.hook = lambda: next(polls) == 5 and vertex_server.set_in_use(L4, 0)
    result = backend(fake_time).run(l4_spec(8))
    assert result.succeeded
    assert vertex_server.states_seen(only_job_id(vertex_server))[:2] == ["QUEUED", "PENDING"]


def test_a_project_display_name_given_as_the_id_is_named_as_such(vertex_server, fake_time):
    # GoogleCloudPlatform/training-data-analyst#1811: 403 CONSUMER_INVALID, not a missing role
    vertex_server.fail_next(
        1,
        403,
        "create",
        message="Permission denied on resource project My First Project.",
        details=[
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "CONSUMER_INVALID",
                "domain": "googleapis.com",
                "metadata": {"consumer": "projects/My First Project", "service": "aiplatform.googleapis.com"},
            }
        ],
    )
    with pytest.raises(ConfigError, match="--project must be the project ID") as err:
        backend(fake_time).run(a100_spec())
    assert "roles/" not in str(err.value)


def test_a_disabled_vertex_api_is_enable_it_not_a_role(vertex_server, fake_time):
    vertex_server.disable(consumer="123456789012")
    with pytest.raises(ConfigError) as err:
        backend(fake_time).run(a100_spec())
    text = str(err.value)
    assert "the Vertex AI API is not enabled" in text and "SERVICE_DISABLED" in text
    assert "gcloud services enable aiplatform.googleapis.com --project=123456789012" in text
    assert "roles/aiplatform.user" not in text
    assert len(vertex_server.calls("create")) == 1


# --- the queue limit follows the strategy (Flex-start) -------------------------------------------


def flex_spec(max_wait: str | None = None) -> JobSpec:
    scheduling = {"strategy": "FLEX_START"}
    if max_wait is not None:
        scheduling["maxWaitDuration"] = max_wait
    return parse_spec(
        {
            "workerPoolSpecs": [
                {
                    "machineSpec": {
                        "machineType": "a3-highgpu-8g",
                        "acceleratorType": "NVIDIA_H100_80GB",
                        "acceleratorCount": 8,
                    },
                    "replicaCount": 1,
                    "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/trainer:1"},
                }
            ],
            "scheduling": scheduling,
            "baseOutputDirectory": {"outputUriPrefix": "gs://bucket/runs/flex"},
        },
        project=PROJECT,
        region=REGION,
        display_name="flex",
    )


def test_a_flex_start_wait_longer_than_30_minutes_is_not_cancelled(vertex_server, fake_time):
    vertex_server.clock = fake_time.clock  # the server's Flex-start wait runs on the same clock
    vertex_server.script(Scenario.waits_for_capacity(capacity_after_s=3 * 3600))
    result = backend(fake_time, poll_max_s=600).run(flex_spec())
    assert result.succeeded
    assert vertex_server.calls("cancel") == []
    job_id = only_job_id(vertex_server)
    assert vertex_server.states_seen(job_id) == ["QUEUED", "PENDING", "RUNNING", "SUCCEEDED"]
    assert fake_time.now - 1000 >= 3 * 3600  # it waited its 3 h for capacity
    sent = vertex_server.calls("create")[0].body["jobSpec"]["scheduling"]
    assert sent == {"strategy": FLEX_START}  # Vertex's own default wait (24 h) applies


def test_a_flex_start_wait_is_cancelled_after_max_wait_duration_and_margin_as_capacity(
    vertex_server, fake_time
):
    vertex_server.clock = fake_time.clock
    # A Vertex that does not end the wait itself: trainguard's margin is the backstop.
    vertex_server.script(Scenario.waits_for_capacity(expired_state=None))
    out = io.StringIO()
    result = backend(fake_time, poll_max_s=600, stream=out).run(flex_spec("3600s"))
    assert result.state == "CANCELLED"
    assert result.failure_class == "capacity"
    assert result.error.startswith(
        "Flex-start (DWS) found no free accelerators in us-central1 within maxWaitDuration 1h + 15m margin"
    )
    assert len(vertex_server.calls("cancel")) == 1
    assert vertex_server.state_of(only_job_id(vertex_server)) == "CANCELLED"
    assert 3600 + 900 <= fake_time.now - 1000 <= 3600 + 900 + 60
    assert "cancelling the job if it is still QUEUED after maxWaitDuration 1h + 15m margin" in out.getvalue()
    assert diagnose_result(result).failure_class == "capacity"


@pytest.mark.parametrize("ended", ["FAILED", "EXPIRED"])
def test_vertex_ending_a_flex_start_wait_is_named_capacity(vertex_server, fake_time, ended):
    vertex_server.clock = fake_time.clock
    vertex_server.script(Scenario.waits_for_capacity(expired_state=ended))
    result = backend(fake_time, poll_max_s=300).run(flex_spec("1800s"))
    assert result.state == ended
    assert result.failure_class == "capacity"
    assert "Vertex ended the wait" in result.error and "not quota" in result.error
    assert vertex_server.calls("cancel") == []  # Vertex ended it: nothing to cancel
    diagnosis = diagnose_result(result)
    assert diagnosis.failure_class == "capacity"
    assert "maxWaitDuration" in diagnosis.remedy


def test_a_flex_start_job_that_fails_after_it_ran_is_not_a_capacity_problem(vertex_server, fake_time):
    vertex_server.clock = fake_time.clock
    scenario = Scenario.waits_for_capacity(capacity_after_s=7200)
    scenario.final, scenario.error_message = (
        "FAILED",
        "The replica workerpool0-0 exited with a non-zero status of 1.",
    )
    vertex_server.script(scenario)
    result = backend(fake_time, poll_max_s=600, log_tail_lines=0).run(flex_spec())
    assert result.state == "FAILED" and result.failure_class == ""


def test_max_wait_duration_zero_waits_as_long_as_it_takes(vertex_server, fake_time):
    vertex_server.clock = fake_time.clock
    vertex_server.script(Scenario.waits_for_capacity(capacity_after_s=72 * 3600))
    out = io.StringIO()
    result = backend(fake_time, poll_max_s=3600, stream=out).run(flex_spec("0s"))
    assert result.succeeded
    assert vertex_server.calls("cancel") == []
    assert "never cancelled for waiting" in out.getvalue()


def test_max_queued_overrides_a_flex_start_wait_and_it_is_still_capacity(vertex_server, fake_time):
    vertex_server.clock = fake_time.clock
    vertex_server.script(Scenario.waits_for_capacity())
    result = backend(fake_time, max_queued_s=45 * 60).run(flex_spec())
    assert result.state == "CANCELLED" and result.failure_class == "capacity"
    assert "within the --max-queued limit of 45m" in result.error
    assert 2700 <= fake_time.now - 1000 <= 2700 + 25


def test_a_standard_job_queued_too_long_stays_quota(vertex_server, fake_time):
    vertex_server.script(Scenario.stuck_queued())
    result = backend(fake_time).run(a100_spec(spot=False))
    assert result.state == "CANCELLED" and result.failure_class == "quota"
    assert result.error.startswith("stayed QUEUED for 1800 s")
    assert 1800 <= fake_time.now - 1000 <= 1800 + 25  # the 30 min default
    assert diagnose_result(result).failure_class == "quota"


# --- the in-flight watcher ----------------------------------------------------------------------


class ScriptedWatcher:
    """Records what it is shown; answers a Stop at the ``stop_at``-th poll of a RUNNING job."""

    def __init__(
        self, server: VertexJobsServer, stop_at: int | None = None, stop: Stop | None = None
    ) -> None:
        self.server = server
        self.stop_at = stop_at
        self.stop = stop or Stop(
            "divergence",
            "val_loss 4.1e7 at step 300 (best 0.41 at step 120)",
            "lower the learning rate",
            details={"step": 300},
        )
        self.seen: list[RunningJob] = []
        self.gets_at_stop: int | None = None

    def poll(self, job: RunningJob) -> Stop | None:
        self.seen.append(job)
        running = [j for j in self.seen if j.state == "RUNNING"]
        if job.state == "RUNNING" and len(running) == self.stop_at:
            self.gets_at_stop = len(self.server.calls("get"))
            return self.stop
        return None


def test_a_stop_cancels_the_job_within_two_polls_and_says_why(vertex_server, fake_time):
    vertex_server.script(Scenario.runs_forever())
    watcher = ScriptedWatcher(vertex_server, stop_at=3)
    out = io.StringIO()
    result = backend(fake_time, stream=out).run(a100_spec(), watcher=watcher)

    assert result.state == "CANCELLED"
    assert result.stopped == watcher.stop.to_dict()
    assert result.failure_class == "divergence"
    assert result.error.startswith("stopped by the trainguard guard [divergence]: val_loss 4.1e7")
    (cancel,) = vertex_server.calls("cancel")
    requests = vertex_server.requests
    gets_before_cancel = sum(1 for r in requests[: requests.index(cancel)] if r.verb == "get")
    assert gets_before_cancel - watcher.gets_at_stop <= 2  # within two polls (here: none)
    assert vertex_server.states_seen(only_job_id(vertex_server))[-2:] == ["CANCELLING", "CANCELLED"]
    assert "in-flight guard asked to stop it [divergence]" in out.getvalue()
    diagnosis = diagnose_result(result)
    assert (diagnosis.failure_class, diagnosis.remedy) == ("divergence", "lower the learning rate")


def test_the_watcher_sees_every_poll_of_the_job_until_it_ends(vertex_server, fake_time):
    vertex_server.script(Scenario.succeeds(queued=2, pending=1, running=3))
    watcher = ScriptedWatcher(vertex_server)
    result = backend(fake_time).run(a100_spec(), watcher=watcher)
    assert result.succeeded and result.stopped == {} and vertex_server.calls("cancel") == []
    # Once per answer while the job had not ended: the create's, then each get's.
    assert [j.state for j in watcher.seen] == ["QUEUED", "QUEUED", "PENDING", "RUNNING", "RUNNING", "RUNNING"]
    job = watcher.seen[-1]
    assert job.job_name == result.job_name
    assert job.base_output_dir == "gs://bucket/runs/r1"
    assert job.history_path == "gs://bucket/runs/r1/history.jsonl"
    assert job.tensorboard_dir == "gs://bucket/runs/r1/logs/"
    assert all(j.elapsed_s == 0 for j in watcher.seen if j.state != "RUNNING")
    running = [j.elapsed_s for j in watcher.seen if j.state == "RUNNING"]
    assert running[0] < 1 and running == sorted(running) and running[-1] > running[0]


def test_with_a_watcher_a_running_job_is_polled_at_least_every_watch_interval(vertex_server, fake_time):
    vertex_server.script(Scenario((("RUNNING", 40),), "SUCCEEDED"))
    backend(fake_time, watch_interval_s=10).run(a100_spec(), watcher=ScriptedWatcher(vertex_server))
    assert max(fake_time.sleeps) == 10
    fake_time.sleeps.clear()
    vertex_server.script(Scenario((("RUNNING", 40),), "SUCCEEDED"))
    backend(fake_time, watch_interval_s=10).run(a100_spec())
    assert max(fake_time.sleeps) == 60  # unguarded, the backoff grows to poll_max_s


def test_a_watcher_that_raises_is_reported_once_and_the_job_runs_on(vertex_server, fake_time):
    vertex_server.script(Scenario.succeeds(running=5))

    class Broken:
        calls = 0

        def poll(self, job):
            Broken.calls += 1
            raise KeyError("val_loss")

    out = io.StringIO()
    result = backend(fake_time, stream=out).run(a100_spec(), watcher=Broken())
    assert result.succeeded and result.stopped == {} and result.failure_class == ""
    assert Broken.calls == 1
    assert vertex_server.calls("cancel") == []
    lines = [line for line in out.getvalue().splitlines() if "stopped guarding" in line]
    assert lines == [
        "[trainguard] the in-flight guard stopped guarding (KeyError: 'val_loss'); "
        "the job runs on unguarded and validate still judges its history afterwards"
    ]


def test_an_overfit_early_stop_is_recorded_as_a_success_finding(vertex_server, fake_time):
    vertex_server.script(Scenario.runs_forever())
    stop = Stop(
        "overfit", "val_loss rose for 5 evaluations after step 800", "keep the best model", success=True
    )
    result = backend(fake_time).run(a100_spec(), watcher=ScriptedWatcher(vertex_server, 1, stop))
    assert result.state == "CANCELLED"
    assert result.stopped["success"] is True
    assert result.error.startswith("ended early by the trainguard guard [overfit]")


def test_sigterm_while_waiting_for_a_guard_cancel_keeps_the_guards_reason(vertex_server, fake_time):
    scenario = Scenario.runs_forever()
    scenario.cancelling_gets = 10
    vertex_server.script(scenario)
    fake_time.hook = lambda: signal.raise_signal(signal.SIGTERM) if vertex_server.calls("cancel") else None
    result = backend(fake_time).run(a100_spec(), watcher=ScriptedWatcher(vertex_server, 1))
    assert len(vertex_server.calls("cancel")) == 1  # asked once; the SIGTERM only ends the wait
    assert result.state == "CANCELLING"
    assert result.failure_class == "divergence" and result.stopped["failure_class"] == "divergence"
    assert result.error.startswith("stopped by the trainguard guard [divergence]")


# --- what is echoed of the job's text ----------------------------------------------------------


def test_a_token_in_the_jobs_error_is_redacted_everywhere(vertex_server, fake_time):
    secret = "ya29.a0AfH6SMBx-secret-token-value"
    vertex_server.script(
        Scenario.fails(
            f"Failed to fetch https://storage.googleapis.com/b/o?"
            f"X-Goog-Signature=abc123def&access_token={secret}: 403 " + "x" * 50_000
        )
    )
    out = io.StringIO()
    result = backend(fake_time, stream=out, log_tail_lines=0).run(a100_spec())
    assert result.state == "FAILED"
    assert secret not in result.error and "abc123def" not in result.error
    assert "[REDACTED]" in result.error
    assert len(result.error) <= 4_000
    assert secret not in out.getvalue()


# --- trainguard train --max-queued, end to end (real time: the limit is 1 s) ------------------


def write_spec(tmp_path: Path, strategy: str) -> Path:
    path = tmp_path / f"{strategy.lower()}.yaml"
    path.write_text(
        "workerPoolSpecs:\n"
        "  - machineSpec: {machineType: a2-highgpu-1g, acceleratorType: NVIDIA_TESLA_A100, "
        "acceleratorCount: 1}\n"
        "    replicaCount: 1\n"
        "    containerSpec: {imageUri: us-docker.pkg.dev/my-project/t/trainer:1}\n"
        f"scheduling: {{strategy: {strategy}}}\n"
        "baseOutputDirectory: {outputUriPrefix: gs://bucket/runs/cli}\n"
    )
    return path


@pytest.mark.parametrize("strategy, cls", [("STANDARD", "quota"), ("FLEX_START", "capacity")])
def test_train_max_queued_cancels_a_waiting_job_and_names_the_class(vertex_server, tmp_path, strategy, cls):
    vertex_server.script(
        Scenario.waits_for_capacity() if strategy == "FLEX_START" else Scenario.stuck_queued()
    )
    outcome = run_cli(
        "train",
        write_spec(tmp_path, strategy),
        "--vertex",
        "--project",
        PROJECT,
        "--region",
        REGION,
        "--max-queued",
        "1s",
        "--json",
        tmp_path / "r.json",
    )
    assert_contract(outcome, max_seconds=60, allowed=(1,))
    assert f"class:    {cls}" in outcome.output
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["state"] == "CANCELLED" and data["failure_class"] == cls
    assert data["diagnosis"]["failure_class"] == cls
    assert len(vertex_server.calls("cancel")) == 1


def test_train_names_a_quota_refusal_at_create_quota_and_exits_1(vertex_server, tmp_path):
    vertex_server.set_quota(
        "aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus", 0, "NVIDIA_TESLA_A100"
    )
    outcome = run_cli(
        "train",
        write_spec(tmp_path, "STANDARD"),
        "--vertex",
        "--project",
        PROJECT,
        "--region",
        REGION,
        "--json",
        tmp_path / "r.json",
    )
    assert_contract(outcome, max_seconds=60, allowed=(1,))
    assert "class:    quota" in outcome.output
    assert "The following quota metrics exceed quota limits" in outcome.output
    assert "gcloud quotas preferences create" in outcome.output
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["failure_class"] == "quota" and data["diagnosis"]["failure_class"] == "quota"
    assert len(vertex_server.calls("create")) == 1 and vertex_server.calls("get") == []


def test_train_rejects_a_max_queued_that_is_not_a_duration(vertex_server, tmp_path):
    outcome = run_cli(
        "train",
        write_spec(tmp_path, "STANDARD"),
        "--vertex",
        "--project",
        PROJECT,
        "--region",
        REGION,
        "--max-queued",
        "soon",
    )
    assert_contract(outcome, allowed=(2,))
    assert "--max-queued: 'soon' is not a duration" in outcome.output
    assert vertex_server.requests == []


def test_a_dead_endpoint_is_named_within_the_short_deadline_not_after_minutes(
    monkeypatch, fake_time, dead_host
):
    # With nothing ever answering, the launcher once retried create (and a label lookup after
    # each try) for max_transient_s, 15 min by default, before saying anything was wrong.
    from trainguard.errors import EndpointUnreachable

    dead = f"http://{dead_host}"
    monkeypatch.setenv("TRAINGUARD_ENDPOINT_AIPLATFORM", dead)
    monkeypatch.setenv("TRAINGUARD_RETRY_DEADLINE", "10s")
    with pytest.raises(EndpointUnreachable, match=re.escape(dead)):
        backend(fake_time).run(a100_spec())
    assert sum(fake_time.sleeps) <= 10


def test_an_answering_but_failing_vertex_still_gets_the_long_deadline(vertex_server, fake_time):
    vertex_server.fail_next(6, 503, "create")  # 2+4+8+16+32+60 s of 503s: it is there, busy
    result = backend(fake_time).run(a100_spec())
    assert result.succeeded and len(vertex_server.jobs) == 1
