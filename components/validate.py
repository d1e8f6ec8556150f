"""The validate component: fails the pipeline on divergence, overfit or a missed quality gate, with
a diagnosis."""

from kfp import dsl
from kfp.dsl import HTML, Artifact, Input, Markdown, Metrics, Output

from trainguard.components.image import COMPONENT_IMAGE

__all__ = ["validate"]


@dsl.component(base_image=COMPONENT_IMAGE, install_kfp_package=False)
def validate(
    history: Input[Artifact],
    verdict: Output[Artifact],
    report: Output[Markdown],
    curves: Output[HTML],
    metrics: Output[Metrics],
    history_format: str = "",
    train_metric: str = "",
    val_metric: str = "",
    mode: str = "",
    fail_on: str = "",
    warn_on: str = "",
    thresholds: str = "",
    gates: str = "",
    gate_at: str = "best",
    directions: str = "",
    shipped_step: int = -1,
    fail_pipeline: bool = True,
) -> bool:
    """Reads the training history and judges it; returns whether it passed (for ``dsl.If``).

    Args:
        history: the training history (trainguard JSONL, Keras/Lightning CSV, TensorBoard dir).
        verdict: the JSON verdict (passed, failure_class, findings, series).
        report: the Markdown diagnosis.
        curves: an HTML report with the curves plotted.
        metrics: best step, best validation loss, final gap.
        history_format: force a format (jsonl, keras_csv, lightning_csv, tensorboard).
        train_metric: the training-loss series name (detected when empty).
        val_metric: the validation-loss series name (detected when empty).
        mode: ``min`` for a loss, ``max`` for a metric like accuracy (empty: from the metric's
            name, else ``min``).
        fail_on: comma-separated failure classes that fail (defaults when empty).
        warn_on: comma-separated failure classes that only warn.
        thresholds: comma-separated ``name=value`` rule thresholds (the README lists them),
            e.g. ``overfit_patience=5,warmup_steps=200``.
        gates: comma-separated quality gates, ``metric>=value`` (or ``<=``, ``>``, ``<``),
            each optionally ``@best`` or ``@last``, e.g. ``val_accuracy>=0.9,val_loss<=0.3``.
        gate_at: where gates without ``@`` read: ``best`` (the best validation step) or
            ``last``.
        directions: comma-separated ``metric=min|max`` for metrics whose name does not say.
        shipped_step: the step of the checkpoint the train task shipped (its output); an overfit
            that model escaped is a warning, not a failure. -1: unknown.
        fail_pipeline: raise on a failing verdict (False: only return it).
    """
    from trainguard.stages import validate_stage

    return validate_stage(
        history.path,
        format=history_format,
        train_metric=train_metric,
        val_metric=val_metric,
        mode=mode,
        fail_on=fail_on,
        warn_on=warn_on,
        thresholds=thresholds,
        gates=gates,
        gate_at=gate_at,
        directions=directions,
        shipped_step=shipped_step,
        json_path=verdict.path,
        markdown_path=report.path,
        html_path=curves.path,
        metrics=metrics,
        raise_on_fail=fail_pipeline,
    ).passed
