"""The three stages as one call each: what a KFP component body (and the CLI) runs.

Each stage takes plain values plus artifact-like objects (anything with ``.path``, ``.uri``,
``.metadata``; a Metrics sink needs ``log_metric(name, value)``), writes its reports, and raises a
``GuardFailed`` subclass when the guarded thing failed, so the pipeline fails at that task. This
module never imports kfp: the components pass their artifacts in.
"""

from __future__ import annotations

import json
import re
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from trainguard.choices import Backend, FailOn, GuardMode, ModelChoice, parse
from trainguard.errors import (
    CheckpointError,
    ConfigError,
    Interrupted,
    PreflightFailed,
    TrainingFailed,
    ValidationFailed,
)
from trainguard.launch.base import TrainResult, Watcher, diagnose_result
from trainguard.launch.run_dir import RunDir, claim, new_run_id, task_run_id
from trainguard.preflight import Report, run_preflight
from trainguard.runtime.env import DEFAULT_OUTPUT_DIR
from trainguard.spec import JobSpec, load_spec, parse_spec

if TYPE_CHECKING:
    from trainguard.guard.outcome import GuardedResult

__all__ = ["make_spec", "preflight_stage", "train_stage", "validate_stage", "split_names", "refused_input"]


def split_names(value: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """``"a, b"`` or a list → ``["a", "b"]``."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [v for v in value if v]


def make_spec(
    job_spec: Mapping[str, Any] | str | Path | JobSpec, *, project: str, region: str, display_name: str = ""
) -> JobSpec:
    """A JobSpec from a mapping, a spec file path, YAML/JSON text or a JobSpec."""
    if isinstance(job_spec, JobSpec):
        return job_spec
    if isinstance(job_spec, Path) or (
        isinstance(job_spec, str)
        and "\n" not in job_spec
        and job_spec.strip().endswith((".yaml", ".yml", ".json"))
    ):
        return load_spec(job_spec, project=project, region=region, display_name=display_name or None)
    return parse_spec(job_spec, project=project, region=region, display_name=display_name or None)


def _write(path: str | None, text: str | bytes) -> None:
    if path:
        from trainguard.output_files import write_output

        write_output(path, text)


def _log_metrics(sink, values: Mapping[str, float]) -> None:
    if sink is None:
        return
    for key, value in values.items():
        sink.log_metric(key, value)


def preflight_stage(
    job_spec: Mapping[str, Any] | str | Path | JobSpec,
    *,
    project: str,
    region: str,
    display_name: str = "",
    backend: Backend | str = Backend.VERTEX,
    fail_on: FailOn | str = FailOn.FAIL,
    only: str | list[str] = "",
    skip: str | list[str] = "",
    output_dir: str = "",
    timeout_s: float = 30.0,
    json_path: str | None = None,
    markdown_path: str | None = None,
    metrics=None,
    stream: TextIO | None = None,
    components_image: str = "",
    budget: float | str | None = None,
    fallbacks: str | Sequence[str] | None = None,
) -> Report:
    """Runs preflight, writes the JSON and Markdown reports and metrics, raises on failure.

    ``components_image`` (the pipeline's components image) is checked by the image family too;
    ``budget`` (USD; None or 0: none) is the most the job may cost at its timeout (family ``cost``).
    ``fallbacks`` (as for :func:`train_stage`) are checked too, each in a section of its own
    (:mod:`trainguard.preflight.alternatives`).

    Raises:
        SpecError / ConfigError: bad input.
        PreflightFailed: a check failed (``fail_on`` decides whether WARN/UNKNOWN count).
    """
    from trainguard.launch.alternatives import parse_fallbacks
    from trainguard.preflight.alternatives import render_sections
    from trainguard.preflight.cost import cost_metrics, parse_budget

    fail_on = parse(FailOn, fail_on, "fail_on")
    backend = parse(Backend, backend, "--backend")
    budget_usd = parse_budget(budget)
    alternatives = parse_fallbacks(fallbacks)
    spec = make_spec(job_spec, project=project, region=region, display_name=display_name)
    if backend == "local" and not output_dir:
        # In a pipeline the train task writes next to its artifacts, on this same filesystem; on
        # the command line where `trainguard train --local` writes by default.
        output_dir = str(Path(markdown_path).parent) if markdown_path else DEFAULT_OUTPUT_DIR
    report = run_preflight(
        spec,
        backend=backend,
        only=split_names(only) or None,
        skip=split_names(skip) or None,
        timeout_s=timeout_s,
        local_output_dir=output_dir,
        components_image=components_image,
        budget_usd=None if budget_usd is None else float(budget_usd),
        alternatives=alternatives,
    )
    markdown = report.to_markdown(fail_on) + render_sections(report)
    _write(json_path, report.to_json(fail_on))
    _write(markdown_path, markdown)
    _log_metrics(metrics, {**report.summary_metrics(), **cost_metrics(report.results)})
    if stream is not None:
        print(markdown, file=stream, flush=True)
        if report.verdict(fail_on) == "NOT PROVEN":
            print(f"preflight {report.unproven_line()}", file=stream, flush=True)
    if not report.passed(fail_on):
        failing = report.failing(fail_on)
        first = failing[0]
        raise PreflightFailed(
            f"preflight failed: {len(failing)} check(s) — first: {first.check}: {first.title}: "
            f"{first.evidence}. Fix: {first.remedy}",
            report,
        )
    return report


def _backend(
    name: str,
    *,
    output_dir: str,
    preempt_after: str,
    gcp_resources_path: str | None,
    stream: TextIO | None,
    extra_env: Mapping[str, str],
    max_queued: str | float = "",
    inject=None,
    resume_prior: bool = True,
):
    from trainguard.durations import parse_durations
    from trainguard.launch.backends import LaunchOptions, make_backend
    from trainguard.launch.queueing import parse_max_queued

    return make_backend(
        name,
        LaunchOptions(
            output_dir=output_dir,
            preempt_after=tuple(parse_durations(preempt_after, "--preempt-after")),
            gcp_resources_path=gcp_resources_path,
            max_queued_s=parse_max_queued(max_queued),
            stream=stream,
            extra_env=dict(extra_env),
            inject=inject,
            resume_prior=resume_prior,
        ),
    )


def claim_run_dir(
    root: str, *, run_id: str, resume: bool, display_name: str, stream: TextIO | None
) -> RunDir:
    """This run's own directory under ``root`` (:func:`trainguard.launch.run_dir.claim`), said
    in one line. Storage that cannot be read (no permission, unreachable) is said loudly and the
    run writes to ``root`` as it is, like the guard, which fails open too.

    Raises:
        ConfigError: a bad ``run_id``, or a local directory that cannot be written.
        EndpointUnreachable: Cloud Storage does not answer at all.
    """
    from trainguard.errors import EndpointUnreachable, TrainguardError

    def say(line: str) -> None:
        if stream is not None:
            print(f"[trainguard] {line}", file=stream, flush=True)

    unreadable: tuple[type[BaseException], ...] = (TrainguardError, OSError)
    if root.startswith("gs://"):
        from google.api_core.exceptions import GoogleAPICallError
        from google.auth.exceptions import GoogleAuthError

        unreadable += (GoogleAPICallError, GoogleAuthError)
    try:
        run = claim(root, run_id=run_id, resume=resume, display_name=display_name, say=say)
    except (ConfigError, EndpointUnreachable):
        raise  # no answer at all: a wrong endpoint or no network, said now, not after a launch
    except unreadable as exc:
        run = RunDir(run_id or new_run_id(), root.rstrip("/"), root.rstrip("/"))
        reason = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        say(
            f"cannot tell whether {root} holds an earlier run ({reason}); writing there as run "
            f"{run.run_id}: a history or checkpoints already there would be read as this run's"
        )
        return run
    say(run.message())
    return run


def train_stage(
    job_spec: Mapping[str, Any] | str | Path | JobSpec,
    *,
    project: str,
    region: str,
    display_name: str = "",
    backend: Backend | str = Backend.LOCAL,
    output_dir: str = "",
    preempt_after: str = "",
    gcp_resources_path: str | None = None,
    model=None,
    history=None,
    diagnosis_path: str | None = None,
    result_path: str | None = None,
    attempts_path: str | None = None,
    stream: TextIO | None = sys.stdout,
    max_queued: str | float = "",
    guard: GuardMode | str = GuardMode.FAIL,
    model_choice: ModelChoice | str = ModelChoice.BEST,
    thresholds: Mapping[str, float] | None = None,
    watcher: Watcher | None = None,
    run_id: str = "",
    resume: bool = False,
    fallbacks: str | Sequence[str] | None = None,
    retries: str | Sequence[str] | None = None,
    hang_after: str | float = "",
    inject: str = "",
    serving_model=None,
    serving_image: str = "",
    budget: float | str | None = None,
    metrics=None,
) -> GuardedResult:
    """Runs the training job to a terminal state and publishes its outputs.

    For the local backend with a ``model`` artifact and no output directory, the job's base
    directory is the artifact's parent, so ``AIP_MODEL_DIR`` *is* the artifact. For Vertex, the
    artifact's URI is set to the job's ``<base>/model/``. ``max_queued`` (Vertex: ``45m``,
    seconds, 0 = wait forever; '' follows the scheduling strategy) is the queue limit.

    With ``guard`` (``off``, ``nonfinite``, ``fail``; :mod:`trainguard.guard`) the job's history
    is followed while it runs and the job is stopped on a failing finding (``fail`` also stops a
    confirmed overfit, as a success), or when it stopped growing (``hang_after``: ''
    automatic, ``0`` off, a duration; :mod:`trainguard.guard.hang`). ``history`` receives
    whatever history the job wrote (JSONL, TensorBoard, Keras/Lightning CSV); ``model`` the
    weights ``model_choice`` picks (``best``: the kept checkpoint nearest the best validation
    step), step and metric in its metadata. A ``watcher`` given explicitly replaces the guard
    (the backend calls it between polls).

    ``fallbacks`` (``region=us-east4;machine=a3-highgpu-1g``, or a list) are tried in order when
    an attempt ends for quota or capacity; ``retries`` (``preemption=3,capacity=1``) relaunch a
    retryable class (:mod:`trainguard.launch.attempts`); ``inject`` (local only:
    ``stockout@0,hang@5s``, :mod:`trainguard.launch.inject`) makes attempts fail on purpose.
    ``attempts_path`` receives every attempt as JSON; the result's ``attempts`` holds them too.
    ``budget`` (USD; None or 0: none): the guard stops the job, class ``budget``, once what the
    run has spent — each attempt's time RUNNING × the Catalog price of what it ran — reaches it;
    no relaunch follows a spent budget (:mod:`trainguard.guard.ledger`). Whatever the budget,
    the task says what the run cost (``$0 (local)`` for a local run) and what a guard stop saved,
    in its output, the result's ``cost``, the attempts JSON and ``metrics`` (a KFP Metrics sink).
    ``serving_model`` (a ``google.UnmanagedContainerModel`` artifact) names the model's directory
    with ``serving_image`` as its container, for a registration step (:mod:`trainguard.registry`,
    or GCPC's ``ModelUploadOp``).

    Each run writes to a directory of its own (:mod:`trainguard.launch.run_dir`): the output
    directory when no other run holds it, else ``<dir>/runs/<run_id>/``. ``run_id`` names the run
    (the same id continues it; in a pipeline the task's identity is used when none is given);
    ``resume`` continues the newest run under the output directory instead of starting one.
    Every attempt writes to that one directory, so each resumes from the last one's checkpoints.

    Raises:
        TrainingFailed: the job did not succeed, or the guard stopped it; ``diagnosis`` names the
            failure class (and, for a stop, the accelerator-hours saved).
        ConfigError / SpecError: bad options (before anything launches).
    """
    from trainguard.guard.hang import HangPolicy
    from trainguard.guard.ledger import Ledger
    from trainguard.guard.outcome import conclude
    from trainguard.launch.alternatives import parse_fallbacks
    from trainguard.launch.attempts import CAPACITY_WAIT_S, AttemptPlan, RetryBudget, run_attempts
    from trainguard.launch.inject import InjectionPlan, parse_injections

    backend = parse(Backend, backend, "--backend")
    guard_mode = parse(GuardMode, guard, "--guard")
    choice = parse(ModelChoice, model_choice, "--model")
    hang = HangPolicy.parse(hang_after)
    faults = InjectionPlan(parse_injections(inject))
    from trainguard.preflight.cost import parse_budget

    alternatives, retry_budget = parse_fallbacks(fallbacks), RetryBudget.parse(retries)
    ledger = Ledger(
        local=backend == "local", budget=parse_budget(budget), say=lambda line: _say(stream, line)
    )

    def backend_for(first: bool):
        return _backend(
            backend,
            output_dir=output_dir,
            preempt_after=preempt_after,
            gcp_resources_path=gcp_resources_path,
            stream=stream,
            extra_env={},
            max_queued=max_queued,
            inject=faults or None,
            resume_prior=first,
        )

    def watcher_for(attempt_spec: JobSpec) -> Watcher | None:
        meter = ledger.begin(attempt_spec)  # priced whatever the guard: the cost is reported
        if watcher is not None or (guard_mode == GuardMode.OFF and (meter is None or meter.budget is None)):
            return watcher
        from trainguard.guard import HistoryGuard

        return HistoryGuard.for_spec(
            attempt_spec,
            guard_mode,
            local=backend == "local",
            thresholds=thresholds,
            stream=stream,
            hang=hang,
            spend=meter,
        )

    # Bad input (an option the backend cannot honour, an alternative that makes the job invalid)
    # is said before the run directory is claimed and anything launches.
    backend_for(True)
    given = make_spec(job_spec, project=project, region=region, display_name=display_name)
    AttemptPlan(given, alternatives).specs()
    spec, run = _claimed_spec(given, backend, output_dir, model, run_id, resume, stream)
    plan = AttemptPlan(
        spec,
        alternatives,
        retry_budget,
        capacity_wait_s=0.0 if backend == "local" else CAPACITY_WAIT_S,  # a local stockout is injected
    )
    attempts = run_attempts(
        plan,
        backend_for=backend_for,
        watcher_for=watcher_for,
        final=lambda r: bool(refused_input(r)),
        on_end=ledger.end,
        gcp_resources_path=gcp_resources_path if backend == "vertex" else None,
        say=lambda line: _say(stream, line),
    )
    result = conclude(
        attempts.result, attempts.watcher, model=model, history=history, model_choice=choice, stream=stream
    )
    cost = ledger.report(attempts.result)
    result.cost = cost.to_dict()
    _publish_attempts(result, attempts, model, attempts_path, stream, cost.to_dict())
    _publish_cost(cost, model, metrics, stream)
    if serving_model is not None and model is not None:
        from trainguard.guard.layout import publish_serving

        publish_serving(serving_model, model, serving_image)
    _write(result_path, json.dumps(result.to_dict(), indent=2))
    return _outcome(result, run, backend, diagnosis_path, cost.headline().removeprefix("cost: "))


def _claimed_spec(
    spec: JobSpec, backend: str, output_dir: str, model, run_id: str, resume: bool, stream: TextIO | None
) -> tuple[JobSpec, RunDir]:
    """The spec, with the base output directory of the run it claimed (one for every attempt)."""
    root = spec.base_output_dir or output_dir
    if backend == "local" and not root:
        # In a pipeline the task's own artifact directory; on the command line the runtime's default.
        root = str(Path(model.path).parent) if model is not None else DEFAULT_OUTPUT_DIR
    if backend == "vertex" and not root.startswith("gs://"):
        raise ConfigError(
            f"baseOutputDirectory.outputUriPrefix {root!r} is not a gs:// URI: a Vertex job writes "
            "its outputs to Cloud Storage; use gs://BUCKET/PATH"
            if root
            else "a Vertex job needs baseOutputDirectory.outputUriPrefix in the spec "
            "(or output_dir=gs://BUCKET/PATH): without it nothing checkpoints"
        )
    if not run_id and getattr(model, "uri", None):
        run_id = task_run_id(model.uri)  # one pipeline task: its attempts are one run
    run = claim_run_dir(root, run_id=run_id, resume=resume, display_name=spec.display_name, stream=stream)
    return spec.with_base_output_dir(run.base), run


def _publish_cost(cost, model, metrics, stream: TextIO | None) -> None:
    """Says what the run cost (and what a guard stop saved): lines, metrics, model metadata."""
    for line in cost.lines():
        _say(stream, line)
    numbers = cost.metrics()
    _log_metrics(metrics, numbers)
    if model is not None:
        model.metadata.update({k: v for k, v in numbers.items() if k in ("cost_usd", "saved_usd")})
        model.metadata["cost"] = cost.headline()


def _publish_attempts(
    result, attempts, model, path: str | None, stream: TextIO | None, cost: dict | None = None
) -> None:
    """Records every attempt: on the result, in ``path`` (JSON, with the run's ``cost``), on the
    model's metadata, and (when there was more than one) in a few lines for people."""
    summary = {**attempts.to_dict(), **({"cost": cost} if cost is not None else {})}
    result.attempts = summary["attempts"]
    _write(path, json.dumps(summary, indent=2))
    produced = attempts.model_attempt
    if model is not None:
        model.metadata["attempts"] = len(attempts.records)
        if produced is not None:
            shipped = attempts.records[produced]
            model.metadata.update(
                attempt=produced + 1,
                attempt_region=shipped.region,
                attempt_machine=shipped.machine,
                attempt_strategy=shipped.strategy,
            )
    if len(attempts.records) > 1:
        _say(stream, f"{len(attempts.records)} attempts:")
        for record in attempts.records:
            mark = "  <- the model" if record.number == produced else ""
            _say(stream, f"  {record.line()}{mark}")


def _outcome(
    result: GuardedResult, run: RunDir, backend: str, diagnosis_path: str | None, cost: str = ""
) -> GuardedResult:
    """``result`` when the training succeeded (or ended early, a success); raises otherwise.
    ``cost`` (what the run cost) ends the diagnosis of a failure."""
    note = f"\n**Cost:** {cost}\n" if cost else ""
    from trainguard.guard.outcome import early_stopped, stop_diagnosis, stop_message

    tried = f" after {len(result.attempts)} attempts" if len(result.attempts) > 1 else ""
    if result.interrupted and not result.succeeded:
        how = "Ctrl-C" if result.interrupted == signal.SIGINT else "SIGTERM (a cancellation)"
        done = (
            "the job was cancelled"
            if backend == "vertex"
            else "its workers were sent SIGTERM, and trainguard's runtime saves before it exits"
        )
        _write(diagnosis_path, f"# Training interrupted\n\n{how}: {done}.\n")
        raise Interrupted(
            f"training job {result.job_name} interrupted by {how}: {done}; to continue it, run the "
            f"same command with --run-id {run.run_id} (or --resume)",
            int(result.interrupted),
        )
    if result.stopped and not early_stopped(result):
        diagnosis = stop_diagnosis(result.stopped)
        _write(diagnosis_path, diagnosis.to_markdown() + note)
        raise TrainingFailed(
            f"training job {result.job_name} was stopped by the guard{tried}: {stop_message(result.stopped)}",
            result,
            diagnosis,
        )
    if not result.succeeded and not early_stopped(result):
        refused = refused_input(result)
        if refused:  # the trainer said its input (a checkpoint) is unusable: bad input, exit 2
            _write(diagnosis_path, f"# The training job refused its input\n\n{refused}\n")
            raise CheckpointError(f"training job {result.job_name} stopped on bad input: {refused}")
        diagnosis = diagnose_result(result)
        if diagnosis is not None:
            _write(diagnosis_path, diagnosis.to_markdown() + note)
            detail = f" [{diagnosis.failure_class}] {diagnosis.remedy}"
        else:
            _write(diagnosis_path, f"# Training failed\n\n{result.error}\n")
            detail = ""
        name = result.job_name or "(none created)"
        raise TrainingFailed(
            f"training job {name} ended {result.state}{tried}: {result.error}{detail}", result, diagnosis
        )
    return result


def _say(stream: TextIO | None, line: str) -> None:
    if stream is not None:
        from trainguard.launch.echo import safe_line

        print(f"[trainguard] {safe_line(line)}", file=stream, flush=True)


# How trainguard's runtime, inside a training job, says its input cannot be used (a checkpoint
# that is crafted, damaged or of another framework; a full disk) before exiting with status 2.
_REFUSAL = re.compile(r"^(?:\[[\w.:-]+\] )?trainguard: (.+)$")


def refused_input(result: TrainResult) -> str:
    """The runtime's own bad-input message when a replica exited 2 with one, else ''."""
    exited_2 = 2 in result.exit_codes.values() or "non-zero status of 2." in result.error
    if not exited_2:
        return ""
    for line in reversed(result.log_tail.splitlines()):
        m = _REFUSAL.match(line.strip())
        if m:
            return m.group(1)
    return ""


def validate_stage(
    history: str,
    *,
    format: str = "",
    train_metric: str = "",
    val_metric: str = "",
    mode: str = "",
    fail_on: str | list[str] = "",
    warn_on: str | list[str] = "",
    thresholds: Mapping[str, float] | str | list[str] | None = None,
    gates: str | list[str] | None = None,
    gate_at: str = "best",
    directions: str | list[str] | None = None,
    shipped_step: float | None = None,
    json_path: str | None = None,
    markdown_path: str | None = None,
    html_path: str | None = None,
    plot_path: str | None = None,
    metrics=None,
    raise_on_fail: bool = True,
    stream: TextIO | None = None,
):
    """Judges a training history; writes the verdict (JSON, Markdown, HTML with the curves).

    ``thresholds`` and ``directions`` are ``name=value`` items (a mapping, a list, or one string
    separated by commas); ``gates`` are ``metric>=value[@best|@last]`` texts. ``shipped_step``
    is the step of the checkpoint the train task shipped: an overfit it escaped only warns.

    Raises:
        HistoryError / ConfigError: unreadable history, bad options, or a history where nothing
            could be judged (a 1-point history must not pass silently).
        ValidationFailed: a failing finding, when ``raise_on_fail``.
    """
    from trainguard.errors import HistoryError
    from trainguard.validation import (
        RuleConfig,
        parse_assignments,
        render_html,
        render_markdown,
        validate,
    )

    verdict = validate(
        history,
        format=format or None,
        train_metric=train_metric or None,
        val_metric=val_metric or None,
        mode=mode or None,
        fail_on=split_names(fail_on) or None,
        warn_on=split_names(warn_on) or None,
        thresholds=parse_assignments(thresholds, "--threshold", RuleConfig.names()),
        gates=gates or None,
        gate_at=gate_at or "best",
        directions=directions or None,
        shipped_step=shipped_step if shipped_step is not None and shipped_step >= 0 else None,
    )
    if verdict.undecided:
        raise HistoryError(f"{history}: {verdict.undecided}")
    png: bytes | None = None
    if plot_path or html_path:  # the HTML embeds the curves; no stray PNG beside the artifact
        from trainguard.validation import plot_png

        png = plot_png(verdict)
    if plot_path and png is not None:  # a directory or an unwritable path: exit 2, like --json
        _write(plot_path, png)
    _write(json_path, json.dumps(verdict.to_dict(), indent=2))
    _write(markdown_path, render_markdown(verdict))
    _write(html_path, render_html(verdict, png) if html_path else "")
    _log_metrics(metrics, verdict.summary_metrics())
    if stream is not None:
        print(render_markdown(verdict), file=stream, flush=True)
    if raise_on_fail and not verdict.passed:
        first = next(f for f in verdict.findings if f.severity == "fail")
        raise ValidationFailed(
            f"validation failed [{verdict.failure_class}]: {first.message} Remedy: {first.remedy}", verdict
        )
    return verdict
