"""The train component: runs the CustomJob (Vertex or local) and publishes model and history."""

from google_cloud_pipeline_components.types.artifact_types import UnmanagedContainerModel
from kfp import dsl
from kfp.dsl import Artifact, Markdown, Metrics, Model, Output, OutputPath

from trainguard.components.image import COMPONENT_IMAGE

__all__ = ["train"]


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def train(
    job_spec: dict,
    project: str,
    region: str,
    model: Output[Model],
    serving_model: Output[UnmanagedContainerModel],
    history: Output[Artifact],
    diagnosis: Output[Markdown],
    attempts: Output[Artifact],
    metrics: Output[Metrics],
    gcp_resources: OutputPath(str),
    display_name: str = "trainguard-job",
    backend: str = "vertex",
    output_dir: str = "",
    preempt_after: str = "",
    max_queued: str = "",
    guard: str = "fail",
    model_choice: str = "best",
    run_id: str = "",
    resume: bool = False,
    fallbacks: str = "",
    retries: str = "",
    hang_after: str = "",
    inject: str = "",
    serving_image: str = "",
    budget: float = 0.0,
) -> int:
    """Launches the training job, waits for it, cancels it with the pipeline, classifies failures.

    Returns the step of the checkpoint shipped as ``model`` (-1 when the final weights, or
    unknown), for ``validate``'s ``shipped_step``.

    Args:
        job_spec: the CustomJobSpec (camelCase).
        project: the Google Cloud project.
        region: the job's region.
        model: the shipped model, in one layout whichever step shipped: the serving files (the
            step's weights exported as the trainer exports them) at its root, that step's
            training checkpoint in ``checkpoint/``, ``trainguard-model.json`` (see the README).
        serving_model: the same directory as GCPC's ``google.UnmanagedContainerModel``
            (``containerSpec.imageUri`` = ``serving_image``), which ``ModelUploadOp`` and
            trainguard's ``register`` take.
        history: the history the job wrote (trainguard JSONL, or its TensorBoard event files or
            Keras/Lightning CSV log).
        diagnosis: on failure, the failure class, evidence and first remedy.
        attempts: JSON: every attempt (region, machine, accelerator, strategy, state, failure
            class, duration, why the next one ran) and which produced the model; the model's
            metadata names that attempt too. Its ``cost``: what each attempt was billed (time
            RUNNING × the Cloud Billing Catalog price of what it ran) and what a guard stop saved.
        metrics: what the run cost (``cost_usd``; ``cost_local`` 1 for a local run, which costs
            $0), ``cost_usd_per_hour``, ``cost_hours_run``, ``budget_usd``, and ``saved_usd``
            when the guard stopped the job early.
        gcp_resources: the Vertex job that ran last, for the console link and cancellation; a
            retry of this task finds it, in whichever alternative's region it is.
        display_name: the job's display name.
        backend: ``vertex`` or ``local``.
        output_dir: base output directory when the spec has no baseOutputDirectory.
        preempt_after: local backend only: inject preemptions (``20s,45s``).
        max_queued: Vertex only: cancel a job still QUEUED after this long (``45m``, seconds;
            ``0`` waits forever); empty: 30 min, or a FLEX_START job's maxWaitDuration + 15 min.
        guard: the in-flight guard: ``off``, ``nonfinite`` (stop the job on NaN/Inf) or ``fail``
            (also divergence and instability; a confirmed overfit ends it early as a success).
        model_choice: ``best`` (the kept checkpoint nearest the best validation step) or ``last``.
        run_id: this run's identity: a run writes only to its own directory (the output directory
            when no other run holds it, else ``<dir>/runs/<run_id>/``); the same id continues it.
            Empty: this task's own (every attempt of the task is one run). The pipelines pass the
            pipeline job's name.
        resume: continue the newest run in the output directory instead of starting one.
        fallbacks: other ways to run the job, tried in order when an attempt meets no quota or
            capacity: ``;``-separated alternatives of ``key=value`` changes (region, machine,
            accelerator, count, strategy), e.g. ``region=us-east4;region=europe-west4,strategy=FLEX_START``.
        retries: relaunches per failure class (``preemption=3,hang=1``, the default; ``none``).
        hang_after: stop a RUNNING job whose history is silent this long (``20m``; ``0`` off);
            empty: max(10 × its median interval, 30 min).
        inject: local backend only: end attempts on purpose (``stockout@0,hang@5s``).
        serving_image: the serving container that loads the model (``containerSpec.imageUri`` of
            ``serving_model``); empty: none named (a registration then needs one).
        budget: stop the job (class ``budget``) once the run has spent this many USD (0: no
            budget); a job the Catalog cannot price runs on, with a warning.
    """
    from trainguard.stages import train_stage

    result = train_stage(
        job_spec,
        project=project,
        region=region,
        display_name=display_name,
        backend=backend,
        output_dir=output_dir,
        preempt_after=preempt_after,
        gcp_resources_path=gcp_resources,
        model=model,
        history=history,
        diagnosis_path=diagnosis.path,
        attempts_path=attempts.path,
        max_queued=max_queued,
        guard=guard,
        model_choice=model_choice,
        run_id=run_id,
        resume=resume,
        fallbacks=fallbacks,
        retries=retries,
        hang_after=hang_after,
        inject=inject,
        serving_model=serving_model,
        serving_image=serving_image,
        budget=budget,
        metrics=metrics,
    )
    return result.model_step
