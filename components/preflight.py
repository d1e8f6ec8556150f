"""The preflight component: fails the task when the job could not start."""

from kfp import dsl
from kfp.dsl import Artifact, Markdown, Metrics, Output

from trainguard.components.image import COMPONENT_IMAGE

__all__ = ["preflight"]


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def preflight(
    job_spec: dict,
    project: str,
    region: str,
    report: Output[Markdown],
    report_json: Output[Artifact],
    metrics: Output[Metrics],
    display_name: str = "trainguard-job",
    backend: str = "vertex",
    fail_on: str = "fail",
    only: str = "",
    skip: str = "",
    output_dir: str = "",
    budget: float = 0.0,
    fallbacks: str = "",
):
    """Checks quota, IAM, image, compatibility and cost of a CustomJobSpec before it is submitted.

    Args:
        job_spec: the CustomJobSpec (camelCase, as in a gcloud --config file).
        project: the Google Cloud project the job runs in.
        region: the job's region.
        report: the Markdown report (status, check, evidence, remedy).
        report_json: the machine-readable report.
        metrics: counts of passed/failed/warning checks; the price per hour and the cost at the
            timeout (``cost_usd_per_hour``, ``cost_at_timeout_usd``, ``budget_hours``).
        display_name: the job's display name.
        backend: ``vertex`` or ``local``.
        fail_on: ``fail`` (default), ``unknown`` or ``warn``: the lowest status that fails.
        only: comma-separated check families to run.
        skip: comma-separated check families to leave out.
        output_dir: the local backend's output directory.
        budget: fail when the job's cost at its scheduling.timeout exceeds this many USD (0: none).
        fallbacks: the job's alternatives (as the train component takes them), each checked
            in a section of its own.
    """
    import sys

    from trainguard.stages import preflight_stage

    preflight_stage(
        job_spec,
        project=project,
        region=region,
        display_name=display_name,
        backend=backend,
        fail_on=fail_on,
        only=only,
        skip=skip,
        output_dir=output_dir,
        budget=budget,
        json_path=report_json.path,
        markdown_path=report.path,
        metrics=metrics,
        stream=sys.stdout,
        fallbacks=fallbacks,
    )
