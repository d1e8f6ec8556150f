"""The validate component: fails the pipeline on divergence or overfit, with a diagnosis."""

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
    mode: str = "min",
    fail_on: str = "",
    warn_on: str = "",
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
        mode: ``min`` for a loss, ``max`` for a metric like accuracy.
        fail_on: comma-separated failure classes that fail (defaults when empty).
        warn_on: comma-separated failure classes that only warn.
        fail_pipeline: raise on a failing verdict (False: only return it).
    """
    from trainguard.stages import validate_stage

    return validate_stage(history.path, format=history_format, train_metric=train_metric,
                          val_metric=val_metric, mode=mode, fail_on=fail_on, warn_on=warn_on,
                          json_path=verdict.path, markdown_path=report.path, html_path=curves.path,
                          metrics=metrics, raise_on_fail=fail_pipeline).passed
