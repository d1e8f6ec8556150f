"""A resumed Vertex job is read where it writes, even when this attempt would have chosen
another run directory."""

from __future__ import annotations

import io

from tests.integration.test_vertex_launcher import a100_spec, backend
from tests.integration.test_vertex_launcher import fake_time as fake_time_fixture
from tests.servers import vertex_jobs
from tests.servers.vertex_jobs import Scenario
from trainguard.launch.gcp_resources import write_gcp_resources

vertex_server = vertex_jobs.vertex_server
fake_time = fake_time_fixture


def test_a_job_resumed_from_gcp_resources_is_followed_to_its_own_output_directory(
    vertex_server, fake_time, tmp_path
):
    earlier = "gs://bucket/runs/r1/runs/pipeline-job-1"
    name = vertex_server.add_job(
        Scenario((("RUNNING", 2),), "SUCCEEDED"),
        spec={
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": "1",
                    "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/trainer:1"},
                }
            ],
            "baseOutputDirectory": {"outputUriPrefix": earlier},
        },
    )
    gcp_resources = tmp_path / "gcp_resources"
    write_gcp_resources(gcp_resources, name)
    out = io.StringIO()
    result = backend(fake_time, gcp_resources_path=str(gcp_resources), stream=out).run(a100_spec())
    assert result.succeeded and vertex_server.calls("create") == []
    assert result.base_output_dir == earlier
    assert result.history_path == f"{earlier}/history.jsonl"
    assert result.checkpoint_dir == f"{earlier}/checkpoints/"
    assert f"writes to {earlier}" in out.getvalue()
