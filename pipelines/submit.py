"""Submit a trainguard pipeline to Vertex AI Pipelines (``trainguard run --vertex``)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from trainguard.errors import ConfigError
from trainguard.spec import JobSpec

__all__ = ["submit"]


def submit(pipeline: str, spec: JobSpec, *, pipeline_root: str, backend: str = "vertex",
           service_account: str = "", **parameters) -> str:
    """Compiles ``pipeline``, submits it as a PipelineJob and returns its console URL.

    Raises:
        ConfigError: no gs:// pipeline root, or an unknown pipeline.
    """
    from google.cloud import aiplatform
    from kfp import compiler

    from trainguard.pipelines import PIPELINES

    if pipeline not in PIPELINES:
        raise ConfigError(f"unknown pipeline {pipeline!r}; use one of {', '.join(PIPELINES)}")
    if not pipeline_root.startswith("gs://"):
        raise ConfigError("--pipeline-root must be a gs:// URI for Vertex AI Pipelines")
    with tempfile.TemporaryDirectory() as tmp:
        package = str(Path(tmp) / f"{pipeline}.yaml")
        compiler.Compiler().compile(PIPELINES[pipeline], package)
        aiplatform.init(project=spec.project, location=spec.region)
        job = aiplatform.PipelineJob(
            display_name=f"{spec.display_name}-{pipeline}",
            template_path=package,
            pipeline_root=pipeline_root,
            parameter_values=dict(job_spec=spec.to_dict(), project=spec.project,
                                  region=spec.region, display_name=spec.display_name,
                                  backend=backend, **parameters),
            enable_caching=False,
        )
        job.submit(service_account=service_account or None)
    job_id = job.resource_name.rsplit("/", 1)[-1]
    return (f"https://console.cloud.google.com/vertex-ai/locations/{spec.region}/pipelines/runs/"
            f"{job_id}?project={spec.project}")
