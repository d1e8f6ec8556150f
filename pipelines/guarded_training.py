"""preflight → train → validate → register: a costly job that was never going to work does not
start, and a model that trained badly does not ship.

``register`` runs only when validation passed and a ``serving_image`` is given (two ``dsl.If``
branches the compiled YAML carries as trigger conditions); it refuses a failing verdict itself too.
"""

from kfp import dsl

from trainguard.components import preflight, register, train, validate

__all__ = ["guarded_training"]


@dsl.pipeline(
    name="trainguard-guarded-training",
    description="Preflight, checkpointed training and validation of a Vertex AI CustomJob",
)
def guarded_training(
    job_spec: dict,
    project: str,
    region: str,
    display_name: str = "trainguard-job",
    backend: str = "vertex",
    output_dir: str = "",
    preflight_fail_on: str = "fail",
    preflight_checks: str = "",
    preflight_skip: str = "",
    preempt_after: str = "",
    max_queued: str = "",
    train_metric: str = "",
    val_metric: str = "",
    validate_fail_on: str = "",
    validate_warn_on: str = "",
    guard: str = "fail",
    model_choice: str = "best",
    validate_thresholds: str = "",
    validate_gates: str = "",
    validate_gate_at: str = "best",
    validate_directions: str = "",
    resume: bool = False,
    budget: float = 0.0,
    fallbacks: str = "",
    retries: str = "",
    hang_after: str = "",
    inject: str = "",
    serving_image: str = "",
    parent_model: str = "",
    model_display_name: str = "",
) -> bool:
    """Guards one training job, and registers the model it shipped when validation passed.

    Args:
        job_spec: the CustomJobSpec (camelCase, as in a gcloud --config file).
        project: the Google Cloud project.
        region: the region the job runs in.
        display_name: the job's display name.
        backend: ``vertex``, or ``local`` to run the command on the pipeline's own machine.
        output_dir: base output directory when the spec has none.
        preflight_fail_on: ``fail``, ``unknown`` or ``warn``.
        preflight_checks: comma-separated preflight check families to run (empty: all).
        preflight_skip: comma-separated preflight check families to skip.
        preempt_after: local backend only: inject preemptions (``20s,45s``).
        max_queued: Vertex only: cancel a job still QUEUED after this long (``45m``; ``0`` waits
            forever); empty: 30 min, or a FLEX_START job's maxWaitDuration + 15 min.
        train_metric: training-loss series name (detected when empty).
        val_metric: validation-loss series name (detected when empty).
        validate_fail_on: failure classes that fail validation (defaults when empty).
        validate_warn_on: failure classes that only warn.
        guard: the in-flight guard during training: ``off``, ``nonfinite`` or ``fail``.
        model_choice: the model shipped: ``best`` (checkpoint nearest the best validation step)
            or ``last``.
        validate_thresholds: comma-separated ``name=value`` rule thresholds (see the README).
        validate_gates: comma-separated quality gates, e.g. ``val_accuracy>=0.9@best``.
        validate_gate_at: where gates without ``@`` read: ``best`` or ``last``.
        validate_directions: comma-separated ``metric=min|max`` for metrics whose name does not
            say which way they improve, e.g. ``dice=max``.
        resume: continue the newest run in the output directory (its history and checkpoints)
            instead of starting a run of this pipeline job's own beside it.
        budget: USD (0: none): preflight fails when the job's cost at its timeout exceeds it, and
            train's guard stops the job (class ``budget``) once its spend reaches it.
        fallbacks: ``;``-separated alternatives (``region=us-east4;machine=a3-highgpu-1g``),
            checked by preflight and tried in order by train when an attempt meets no quota or
            capacity.
        retries: relaunches per failure class (``preemption=3,hang=1``, the default; ``none``).
        hang_after: stop a RUNNING job whose history is silent this long (``0`` off; empty:
            max(10 × its median interval, 30 min)).
        inject: local backend only: end train's attempts on purpose (``stockout@0,hang@5s``).
        serving_image: the serving container that loads the model; given, the model is
            registered in the Vertex AI Model Registry when validation passed (empty: no
            registration).
        parent_model: register it as a new version of this model
            (``projects/P/locations/L/models/ID``); empty: a new model.
        model_display_name: the registered model's display name (empty: ``display_name``).

    Returns:
        Whether validation passed.
    """
    checked = preflight(
        job_spec=job_spec,
        project=project,
        region=region,
        display_name=display_name,
        backend=backend,
        fail_on=preflight_fail_on,
        only=preflight_checks,
        skip=preflight_skip,
        output_dir=output_dir,
        budget=budget,
        fallbacks=fallbacks,
    )
    checked.set_caching_options(False)
    checked.set_display_name("preflight")
    trained = train(
        job_spec=job_spec,
        project=project,
        region=region,
        display_name=display_name,
        backend=backend,
        output_dir=output_dir,
        preempt_after=preempt_after,
        max_queued=max_queued,
        guard=guard,
        model_choice=model_choice,
        run_id=dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
        resume=resume,
        fallbacks=fallbacks,
        retries=retries,
        hang_after=hang_after,
        inject=inject,
        serving_image=serving_image,
        budget=budget,
    )
    trained.after(checked)
    trained.set_caching_options(False)
    trained.set_display_name("train")
    judged = validate(
        history=trained.outputs["history"],
        train_metric=train_metric,
        val_metric=val_metric,
        fail_on=validate_fail_on,
        warn_on=validate_warn_on,
        thresholds=validate_thresholds,
        gates=validate_gates,
        gate_at=validate_gate_at,
        directions=validate_directions,
        shipped_step=trained.outputs["Output"],
    )
    judged.set_display_name("validate")
    passed = judged.outputs["Output"] == True  # noqa: E712 (KFP's condition syntax)
    with dsl.If(passed, name="validation-passed"), dsl.If(serving_image != "", name="serving-image-given"):
        registered = register(
            project=project,
            region=region,
            serving_model=trained.outputs["serving_model"],
            verdict=judged.outputs["verdict"],
            history=trained.outputs["history"],
            display_name=model_display_name,
            fallback_display_name=display_name,
            parent_model=parent_model,
            pipeline_run=dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
            pipeline_job_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        )
        registered.set_caching_options(False)  # a cached registration registers nothing
        registered.set_display_name("register")
    return judged.outputs["Output"]
