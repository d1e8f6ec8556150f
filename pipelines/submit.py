"""Submit a trainguard pipeline to Vertex AI Pipelines (``trainguard run --vertex``)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from trainguard.errors import ConfigError, TrainguardError
from trainguard.spec import JobSpec

__all__ = ["submit"]


def submit(
    pipeline: str,
    spec: JobSpec,
    *,
    pipeline_root: str,
    backend: str = "vertex",
    service_account: str = "",
    say: Callable[[str], None] | None = None,
    **parameters,
) -> str:
    """Compiles ``pipeline``, submits it as a PipelineJob and returns its console URL.

    The components image must name a registry and exist there for linux/amd64 (preflight's image
    check): a pipeline whose every task would fail at the pull is not submitted. An image the
    registry would not tell us about is said through ``say`` and submitted.

    Raises:
        ConfigError: no gs:// pipeline root, an unknown pipeline, no credentials, a components
            image that names no registry or that its registry does not have.
        TrainguardError: Vertex AI refused the job.
    """
    import google.auth.exceptions
    from google.api_core import exceptions as api_exceptions

    from trainguard.run_options import PIPELINE_NAMES

    if pipeline not in PIPELINE_NAMES:
        raise ConfigError(f"unknown pipeline {pipeline!r}; use one of {', '.join(PIPELINE_NAMES)}")
    if not pipeline_root.startswith("gs://"):
        raise ConfigError("--pipeline-root must be a gs:// URI for Vertex AI Pipelines")
    _check_image(say)
    from trainguard.pipelines import PIPELINES  # built with the image just checked

    arguments = dict(
        job_spec=spec.to_body(),
        project=spec.project,
        region=spec.region,
        display_name=spec.display_name,
        backend=backend,
        **parameters,
    )
    try:
        job_id = _submit(PIPELINES[pipeline], spec, pipeline, pipeline_root, arguments, service_account)
    except google.auth.exceptions.DefaultCredentialsError as exc:
        raise ConfigError(
            f"no Google Cloud credentials on this machine ({exc}); run "
            "`gcloud auth application-default login`"
        ) from None
    except api_exceptions.GoogleAPICallError as exc:
        raise TrainguardError(f"Vertex AI refused the pipeline job: {exc}") from None
    return (
        f"https://console.cloud.google.com/vertex-ai/locations/{spec.region}/pipelines/runs/"
        f"{job_id}?project={spec.project}"
    )


def _check_image(say: Callable[[str], None] | None) -> None:
    from trainguard.component_image import check_component_image, component_image
    from trainguard.pipelines.compile import with_image
    from trainguard.preflight.image import check_components_image
    from trainguard.preflight.results import Status

    image = check_component_image(component_image(), doing="submitting to Vertex AI Pipelines")
    with_image(image)
    found = check_components_image(image)
    if found.status == Status.FAIL:
        raise ConfigError(f"{found.evidence}; {found.remedy}")
    if found.status != Status.PASS and say is not None:
        say(f"components image not verified: {found.evidence} ({found.remedy})")


def _submit(
    pipeline_func, spec: JobSpec, name: str, pipeline_root: str, arguments: dict, service_account: str
) -> str:
    from google.cloud import aiplatform
    from kfp import compiler

    with tempfile.TemporaryDirectory() as tmp:
        package = str(Path(tmp) / f"{name}.yaml")
        compiler.Compiler().compile(pipeline_func, package)
        aiplatform.init(project=spec.project, location=spec.region)
        job = aiplatform.PipelineJob(
            display_name=f"{spec.display_name}-{name}",
            template_path=package,
            pipeline_root=pipeline_root,
            parameter_values=arguments,
            enable_caching=False,
        )
        job.submit(service_account=service_account or None)
    return job.resource_name.rsplit("/", 1)[-1]
