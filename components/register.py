"""The register component: the validated model into the Vertex AI Model Registry, verdict and all.

A lightweight component of ours rather than GCPC's ``ModelUploadOp`` (which ``train``'s
``serving_model`` also fits): it runs in the KFP local runner, so the gate is tested end to end
here; it reads the verdict itself, so labels and description come from it inside the one step
(``ModelUploadOp`` builds its request by pasting parameters into a JSON string: a description
holding a quote breaks it); it takes ``parent_model`` as a plain resource name (``ModelUploadOp``
wants a ``VertexModel`` artifact, an importer per pipeline, and an empty one takes a second
branch); its launcher calls ``https://{location}-aiplatform.googleapis.com`` whatever the
endpoint settings, where ours honours ``TRAINGUARD_ENDPOINT_AIPLATFORM``; and it refuses a failing
verdict even when wired without the ``dsl.If``.
"""

from google_cloud_pipeline_components.types.artifact_types import UnmanagedContainerModel, VertexModel
from kfp import dsl
from kfp.dsl import Artifact, Input, Output, OutputPath

from trainguard.components.image import COMPONENT_IMAGE

__all__ = ["register"]


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def register(
    project: str,
    region: str,
    serving_model: Input[UnmanagedContainerModel],
    verdict: Input[Artifact],
    history: Input[Artifact],
    model: Output[VertexModel],
    gcp_resources: OutputPath(str),
    display_name: str = "",
    fallback_display_name: str = "trainguard-model",
    parent_model: str = "",
    pipeline_run: str = "",
    pipeline_job_id: str = "",
) -> str:
    """Registers the shipped model when its verdict passed; returns the version's resource name.

    Args:
        project: the Google Cloud project of the Model Registry.
        region: its region (the model's, and where it can be deployed).
        serving_model: train's ``serving_model``: the model's directory on Cloud Storage and its
            serving container (``containerSpec.imageUri``).
        verdict: validate's ``verdict``: a failing one is refused; its warnings, the shipped step
            and its validation metric go into the model's labels and description.
        history: train's ``history`` (linked in the model's lineage and description).
        model: the registered version, as GCPC's ``google.VertexModel`` (``resourceName``
            ``projects/P/locations/L/models/ID@VERSION``), for GCPC's deploy components.
        gcp_resources: the upload's long-running operation, for the console; a retry of this
            task follows it instead of uploading again.
        display_name: the model's display name (a new version keeps its parent's).
        fallback_display_name: the display name when ``display_name`` is empty (the pipelines
            pass the training job's).
        parent_model: register as a new version of this model
            (``projects/P/locations/L/models/ID``); empty: a new model.
        pipeline_run: the pipeline run (the ``trainguard-run`` label).
        pipeline_job_id: the pipeline job's ID (in Vertex Pipelines the model names its job).
    """
    import sys

    from trainguard.registry import register_stage

    return register_stage(
        project=project,
        region=region,
        serving_model=serving_model,
        verdict=verdict,
        vertex_model=model,
        history=history,
        display_name=display_name or fallback_display_name,
        parent_model=parent_model,
        pipeline_run=pipeline_run,
        pipeline_job_id=pipeline_job_id,
        gcp_resources_path=gcp_resources,
        stream=sys.stdout,
    ).resource_name
