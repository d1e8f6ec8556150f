"""Preflight alone: check a job before submitting it by other means."""

from kfp import dsl

from trainguard.components import preflight

__all__ = ["preflight_only"]


@dsl.pipeline(
    name="trainguard-preflight",
    description="Check quota, IAM, image and compatibility of a Vertex AI CustomJob",
)
def preflight_only(
    job_spec: dict,
    project: str,
    region: str,
    display_name: str = "trainguard-job",
    backend: str = "vertex",
    fail_on: str = "fail",
    only: str = "",
    skip: str = "",
    budget: float = 0.0,
    fallbacks: str = "",
):
    """Runs preflight on one job spec.

    Args:
        job_spec: the CustomJobSpec (camelCase).
        project: the Google Cloud project.
        region: the region the job would run in.
        display_name: the job's display name.
        backend: ``vertex`` or ``local``.
        fail_on: ``fail``, ``unknown`` or ``warn``.
        only: comma-separated check families to run.
        skip: comma-separated check families to skip.
        budget: fail when the job's cost at its timeout exceeds this many USD (0: no budget).
        fallbacks: ``;``-separated alternatives (``region=us-east4;machine=a3-highgpu-1g``),
            each checked in a section of its own.
    """
    task = preflight(
        job_spec=job_spec,
        project=project,
        region=region,
        display_name=display_name,
        backend=backend,
        fail_on=fail_on,
        only=only,
        skip=skip,
        budget=budget,
        fallbacks=fallbacks,
    )
    task.set_caching_options(False)
    task.set_display_name("preflight")
