"""``trainguard``: preflight | train | validate | triage | compile | run.

Exit codes (DESIGN.md): 0 pass (warnings allowed), 1 the guarded thing failed, 2 bad input.
``--json PATH`` writes the machine-readable result; stdout is for people. ``compile`` and ``run``
import the KFP pipelines lazily: the rest of the CLI, like the core, works without kfp.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trainguard import __version__
from trainguard.choices import Backend, parse
from trainguard.errors import EXIT_BAD_INPUT, ConfigError, TrainguardError

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Guard costly Vertex AI training: preflight, train, validate, triage.",
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

_STYLE = {"PASS": "green", "WARN": "yellow", "UNKNOWN": "magenta", "FAIL": "bold red", "ERROR": "bold red"}

# A job that runs on this machine uses no cloud names: these harmless placeholders stand in.
LOCAL_PROJECT = "local-project"
LOCAL_REGION = "us-central1"
Project = Annotated[
    str,
    typer.Option(
        "--project",
        "-p",
        envvar="GOOGLE_CLOUD_PROJECT",
        help=f"Google Cloud project ID (required for Vertex; local runs default to {LOCAL_PROJECT})",
    ),
]
Region = Annotated[
    str,
    typer.Option(
        "--region",
        "-r",
        envvar="GOOGLE_CLOUD_REGION",
        help=f"region, e.g. us-central1 (required for Vertex; local runs default to {LOCAL_REGION})",
    ),
]
JsonOut = Annotated[Path | None, typer.Option("--json", help="write the machine-readable result")]
Fallbacks = Annotated[
    list[str] | None,
    typer.Option(
        "--fallback",
        metavar="SPEC",
        help="another way to run the job when it meets no quota or capacity (repeatable, tried "
        "in order): region=, machine=, accelerator=, count=, strategy= (e.g. region=us-east4)",
    ),
]
Retries = Annotated[
    list[str] | None,
    typer.Option(
        "--retries",
        metavar="BUDGET",
        help="relaunches per failure class, from the checkpoint: preemption, hang, unknown, "
        "capacity, quota (default preemption=3,hang=1; none: never; a class not named is not retried)",
    ),
]
HangAfter = Annotated[
    str,
    typer.Option(
        "--hang-after",
        help="stop a RUNNING job whose history is silent this long (20m; 0: off); default "
        "max(10 × its median interval between records, 30m)",
    ),
]
Inject = Annotated[
    list[str] | None,
    typer.Option(
        "--inject",
        metavar="FAULTS",
        help="local: end attempts on purpose: stockout@N, quota@N (N: the attempt, 0 first), "
        "hang@DURATION, reclaim@DURATION (after it starts)",
    ),
]


def _version(value: bool) -> None:
    if value:
        out.print(f"trainguard {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version")
    ] = False,
):
    """Guard costly Vertex AI training: preflight, train, validate, triage."""


def _write_json(path: Path | None, data: dict) -> None:
    if path is not None:
        from trainguard.output_files import write_output

        try:
            write_output(path, json.dumps(data, indent=2), "--json")
        except TrainguardError as exc:
            _fail(exc)


def _cloud_names(project: str, region: str, *, local: bool, local_flag: str = "--local") -> tuple[str, str]:
    """(project, region): placeholders for a job that runs here, required for Vertex.
    ``local_flag`` is how this command asks for a local run (named in the message).

    Raises:
        ConfigError: a Vertex command without --project or --region.
    """
    if local:
        return project or LOCAL_PROJECT, region or LOCAL_REGION
    missing = [flag for flag, value in (("--project", project), ("--region", region)) if not value]
    if missing:
        raise ConfigError(
            f"{' and '.join(missing)} required for Vertex AI (or set "
            f"GOOGLE_CLOUD_PROJECT / GOOGLE_CLOUD_REGION); a {local_flag} run needs none"
        )
    return project, region


def _fail(exc: TrainguardError) -> None:
    from trainguard.errors import Interrupted

    label = (
        "interrupted"
        if isinstance(exc, Interrupted)
        else "bad input"
        if exc.exit_code == EXIT_BAD_INPUT
        else "failed"
    )
    err.print(f"[bold red]trainguard: {label}:[/] {escape(str(exc))}")
    raise typer.Exit(exc.exit_code)


def _print_report(report, fail_on: str) -> None:
    ordered = sorted(report.results, key=lambda r: -r.status.rank)
    if out.is_terminal:
        table = Table(title=f"Preflight: {report.subject}", show_lines=False, expand=False)
        for column in ("status", "check", "evidence", "remedy"):
            table.add_column(column, overflow="fold")
        for r in ordered:
            table.add_row(
                f"[{_STYLE[r.status.value]}]{r.status.value}[/]",
                escape(f"{r.check}: {r.title}"),
                escape(r.evidence),
                escape(r.remedy),
            )
        out.print(table)
    else:  # logs and pipes: one unwrapped line per fact, easy to grep
        out.print(f"Preflight: {report.subject}", markup=False)
        for r in ordered:
            out.print(
                f"{r.status.value:<7} {r.check}: {r.title}\n        {r.evidence}"
                + (f"\n        fix: {r.remedy}" if r.remedy else ""),
                markup=False,
            )
    c = report.counts()
    verdict = report.verdict(fail_on)
    style = {"passed": "green", "NOT PROVEN": "bold magenta"}.get(verdict, "bold red")
    out.print(
        f"preflight [{style}]{verdict}[/]: {c['PASS']} pass, {c['WARN']} warn, {c['UNKNOWN']} unknown, "
        f"{c['FAIL']} fail"
        + (f", {c['ERROR']} internal error" if c["ERROR"] else "")
        + f" in {report.wall_s:.2f} s"
    )
    if verdict == "NOT PROVEN":
        out.print(report.unproven_line(), markup=False)


@app.command()
def preflight(
    spec: Annotated[Path, typer.Argument(help="CustomJobSpec file (YAML/JSON, gcloud --config)")],
    project: Project = "",
    region: Region = "",
    display_name: Annotated[str, typer.Option(help="the job's display name")] = "trainguard-job",
    backend: Annotated[Backend, typer.Option(help="where the job will run")] = Backend.VERTEX,
    json_path: JsonOut = None,
    markdown: Annotated[Path | None, typer.Option(help="write the Markdown report")] = None,
    fail_on: Annotated[str, typer.Option(help="lowest status that fails: fail, unknown, warn")] = "fail",
    only: Annotated[str, typer.Option(help="comma-separated check families to run")] = "",
    skip: Annotated[str, typer.Option(help="comma-separated check families to skip")] = "",
    output_dir: Annotated[str, typer.Option(help="local backend: output directory")] = "",
    timeout: Annotated[float, typer.Option(help="deadline for all checks, seconds")] = 30.0,
    components_image: Annotated[
        str,
        typer.Option(
            envvar="TRAINGUARD_COMPONENT_IMAGE",
            help="also check the pipeline's components image (it must name your registry)",
        ),
    ] = "",
    budget: Annotated[
        float | None,
        typer.Option(
            "--budget",
            metavar="USD",
            help="fail when the job's cost at its scheduling.timeout (Vertex's default: 7 days) exceeds this",
        ),
    ] = None,
    fallback: Fallbacks = None,
):
    """Check quota, IAM, image, compatibility and cost before submitting a job (and each --fallback)."""
    from trainguard.errors import PreflightFailed
    from trainguard.stages import preflight_stage

    try:
        project, region = _cloud_names(
            project, region, local=backend == Backend.LOCAL, local_flag="--backend local"
        )
        report = preflight_stage(
            spec,
            project=project,
            region=region,
            display_name=display_name,
            backend=backend,
            fail_on=fail_on,
            only=only,
            skip=skip,
            output_dir=output_dir,
            timeout_s=timeout,
            json_path=str(json_path) if json_path else None,
            markdown_path=str(markdown) if markdown else None,
            components_image=components_image,
            budget=budget,
            fallbacks=fallback,
        )
    except PreflightFailed as exc:
        _print_report(exc.result, fail_on)
        raise typer.Exit(exc.exit_code) from None
    except TrainguardError as exc:
        _fail(exc)
    _print_report(report, fail_on)


@app.command()
def train(
    spec: Annotated[Path, typer.Argument(help="CustomJobSpec file")],
    project: Project = "",
    region: Region = "",
    local: Annotated[
        bool, typer.Option("--local/--vertex", help="run here (default) or on Vertex AI")
    ] = True,
    display_name: Annotated[str, typer.Option(help="the job's display name")] = "trainguard-job",
    output_dir: Annotated[
        str,
        typer.Option(
            help="base output dir when the spec has none (--local default: ./trainguard-output); "
            "a run never reuses another run's: it writes to DIR/runs/RUN_ID/ beside it"
        ),
    ] = "",
    run_id: Annotated[
        str, typer.Option("--run-id", help="name this run; the same id continues that run")
    ] = "",
    resume: Annotated[
        bool,
        typer.Option(
            "--resume", help="continue the newest run in the output directory (history, checkpoints)"
        ),
    ] = False,
    preempt_after: Annotated[str, typer.Option(help="local: inject preemptions, e.g. 20s,45s")] = "",
    gcp_resources: Annotated[Path | None, typer.Option(help="vertex: gcp_resources file")] = None,
    max_queued: Annotated[
        str,
        typer.Option(
            "--max-queued",
            help="vertex: cancel a job still QUEUED after this long (90, 20s, 45m, 2h;"
            " 0 waits forever). Default: 30m; FLEX_START: its maxWaitDuration + 15m",
        ),
    ] = "",
    json_path: JsonOut = None,
    guard: Annotated[
        str,
        typer.Option(
            help="in-flight guard: off, nonfinite (stop on NaN/Inf), "
            "fail (also divergence, instability; early-stop a "
            "confirmed overfit)"
        ),
    ] = "fail",
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="which weights are the model: best (the "
            "checkpoint nearest the best validation "
            "step) or last",
        ),
    ] = "best",
    fallback: Fallbacks = None,
    retries: Retries = None,
    hang_after: HangAfter = "",
    inject: Inject = None,
    budget: Annotated[
        float,
        typer.Option(
            "--budget",
            metavar="USD",
            help="vertex: stop the job (class budget) once it has spent this much (0: none)",
        ),
    ] = 0.0,
):
    """Run the training job (locally with Vertex's environment, or on Vertex AI).

    An attempt that meets no quota or capacity falls back to the next --fallback; a preemption
    or a hang is relaunched from the checkpoint while its --retries budget lasts; any other
    failure stops at once.
    """
    from trainguard.errors import TrainingFailed
    from trainguard.stages import train_stage

    try:
        from trainguard.output_files import check_writable

        check_writable(json_path, "--json")  # now, not after the job has run for hours
        project, region = _cloud_names(project, region, local=local)
        result = train_stage(
            spec,
            project=project,
            region=region,
            display_name=display_name,
            backend="local" if local else "vertex",
            output_dir=output_dir,
            preempt_after=preempt_after,
            gcp_resources_path=str(gcp_resources) if gcp_resources else None,
            stream=sys.stdout,
            max_queued=max_queued,
            guard=guard,
            model_choice=model,
            run_id=run_id,
            resume=resume,
            fallbacks=fallback,
            retries=retries,
            hang_after=hang_after,
            inject=",".join(inject or ()),
            budget=budget,
        )
    except TrainingFailed as exc:
        data = exc.result.to_dict() if exc.result is not None else {}
        if exc.diagnosis is not None:
            data["diagnosis"] = exc.diagnosis.to_dict()
            d = exc.diagnosis
            stopped = exc.result.stopped if exc.result is not None else {}
            saved = (stopped or {}).get("details", {}).get("saved", "")
            error = exc.result.error if exc.result is not None else str(exc)
            err.print(
                f"[bold red]training failed[/]: {escape(error)}\n"
                f"  class:    [bold]{d.failure_class}[/]\n"
                f"  evidence: {escape(d.evidence)}\n  remedy:   {escape(d.remedy)}"
                + (f"\n  not this: {escape(d.trap)}" if d.trap else "")
                + (f"\n  saved:    {escape(saved)}" if saved else "")
            )
        else:
            err.print(f"[bold red]training failed[/]: {escape(str(exc))}")
        _write_json(json_path, data)
        raise typer.Exit(exc.exit_code) from None
    except TrainguardError as exc:
        _fail(exc)
    _write_json(json_path, result.to_dict())
    if result.stopped:  # an early stop that is a success: a confirmed overfit
        stop = result.stopped
        out.print(
            f"[yellow]training stopped early[/] ([bold]{stop['failure_class']}[/]): "
            f"{escape(stop['evidence'])}\n  {escape(stop['details'].get('saved', ''))}"
        )
    model_shown = result.model_uri or "none (the job left no weights)"
    if result.model_step >= 0:
        model_shown += (
            f" (the checkpoint of step {result.model_step}: validate --shipped-step {result.model_step})"
        )
    ended = "ended early, a success" if result.stopped else result.state
    out.print(
        f"[green]training {ended}[/] in {result.duration_s:.1f} s "
        f"({result.restarts} restart(s)); model: {escape(model_shown)}; "
        f"history: {escape(result.history_path)}"
    )


@app.command()
def validate(
    history: Annotated[
        str,
        typer.Argument(
            help="history: JSONL, Keras/Lightning CSV, TensorBoard, a DVCLive or MLflow run's dir; local or gs://"
        ),
    ],
    format: Annotated[
        str,
        typer.Option(
            help=(
                # validation.formats.FORMATS, written out: importing it would load numpy at start-up
                "jsonl, keras_csv, lightning_csv, tensorboard, hf_trainer_state, dvclive, mlflow "
                "(default: from the file)"
            )
        ),
    ] = "",
    train_metric: Annotated[str, typer.Option(help="training-loss series")] = "",
    val_metric: Annotated[str, typer.Option(help="validation-loss series")] = "",
    mode: Annotated[
        str,
        typer.Option(
            help="min for a loss, max for accuracy-like (default: from the metric's name, else min)"
        ),
    ] = "",
    fail_on: Annotated[str, typer.Option(help="classes that fail (comma-separated)")] = "",
    warn_on: Annotated[str, typer.Option(help="classes that only warn")] = "",
    threshold: Annotated[
        list[str] | None,
        typer.Option(
            "--threshold", metavar="NAME=VALUE", help="repeatable: a rule threshold (the README lists them)"
        ),
    ] = None,
    gate: Annotated[
        list[str] | None,
        typer.Option(
            "--gate",
            metavar="METRIC>=VALUE[@best|@last]",
            help="repeatable (or <=, >, <): a bar the model must clear, e.g. 'val_accuracy>=0.9'",
        ),
    ] = None,
    gate_at: Annotated[
        str,
        typer.Option(
            help="where gates read: best (the best validation step, what --model best ships) or last"
        ),
    ] = "best",
    direction: Annotated[
        list[str] | None,
        typer.Option(
            "--direction",
            metavar="METRIC=min|max",
            help="repeatable: which way a metric improves, when its name does not say",
        ),
    ] = None,
    shipped_step: Annotated[
        int | None,
        typer.Option(
            "--shipped-step",
            help="the step of the checkpoint that ships (train prints it): an overfit it escaped only warns",
        ),
    ] = None,
    json_path: JsonOut = None,
    markdown: Annotated[Path | None, typer.Option(help="write the Markdown report")] = None,
    html: Annotated[Path | None, typer.Option(help="write the HTML report with curves")] = None,
    plot: Annotated[Path | None, typer.Option(help="write the curves as PNG")] = None,
):
    """Judge a training history: fail on NaN, divergence, instability, overfit, a run that learnt
    nothing or a missed gate."""
    from trainguard.stages import validate_stage
    from trainguard.validation import render_markdown

    try:
        verdict = validate_stage(
            history,
            format=format,
            train_metric=train_metric,
            val_metric=val_metric,
            mode=mode,
            fail_on=fail_on,
            warn_on=warn_on,
            thresholds=threshold or None,
            gates=gate or None,
            gate_at=gate_at,
            directions=direction or None,
            shipped_step=shipped_step,
            json_path=str(json_path) if json_path else None,
            markdown_path=str(markdown) if markdown else None,
            html_path=str(html) if html else None,
            plot_path=str(plot) if plot else None,
            raise_on_fail=False,
        )
    except TrainguardError as exc:
        _fail(exc)
    out.print(render_markdown(verdict), markup=False)
    if not verdict.passed:
        raise typer.Exit(1)


_TRIAGE_SOURCE_HELP = (
    "a log file, or - for stdin (the default); an argument that names no file "
    "and reads as a sentence is classified as the error text itself"
)


@app.command()
def triage(
    source: Annotated[str, typer.Argument(help=_TRIAGE_SOURCE_HELP, metavar="[LOG_FILE|-]")] = "-",
    text: Annotated[
        str | None, typer.Option("--text", "-t", help="classify this error text (instead of a file)")
    ] = None,
    json_path: JsonOut = None,
):
    """Name the failure class of a failed job from its log file, stdin, or --text."""
    from trainguard.triage_input import read_diagnosis

    try:
        diagnosis, note = read_diagnosis(source, text, stdin=sys.stdin)
    except TrainguardError as exc:
        _fail(exc)
    if note:
        err.print(note, markup=False)
    _write_json(json_path, diagnosis.to_dict())
    out.print(f"class:    [bold]{diagnosis.failure_class}[/] (confidence {diagnosis.confidence:.2f})")
    if diagnosis.evidence:
        out.print(f"evidence: {diagnosis.evidence}", markup=False)
    out.print(f"remedy:   {diagnosis.remedy}", markup=False)
    if diagnosis.trap:
        out.print(f"not this: {diagnosis.trap}", markup=False)


@app.command("compile")
def compile_(
    output_dir: Annotated[Path, typer.Option(help="where the YAML files go")] = Path("compiled"),
    image: Annotated[
        str,
        typer.Option(
            help="components image in your registry, e.g. us-central1-docker.pkg.dev/PROJECT/REPO/"
            f"trainguard/components:{__version__} (default: TRAINGUARD_COMPONENT_IMAGE)"
        ),
    ] = "",
):
    """Compile the pipelines and components to YAML (for Vertex AI: needs --image)."""
    from trainguard.pipelines.compile import compile_all

    try:
        written = compile_all(output_dir, image)
    except TrainguardError as exc:
        _fail(exc)
    for path in written:
        out.print(f"wrote {path}", markup=False)


@app.command()
def run(
    spec: Annotated[Path, typer.Argument(help="CustomJobSpec file")],
    project: Project = "",
    region: Region = "",
    local: Annotated[
        bool, typer.Option("--local/--vertex", help="KFP local runner (default) or Vertex AI Pipelines")
    ] = True,
    pipeline: Annotated[str, typer.Option(help="guarded_training or preflight_only")] = "guarded_training",
    display_name: Annotated[str, typer.Option(help="the job's display name")] = "trainguard-job",
    backend: Annotated[
        str,
        typer.Option(
            help="where the training job runs: local or vertex (default: local for a --local "
            "guarded_training, vertex otherwise: preflight_only checks the job as Vertex would run it)"
        ),
    ] = "",
    pipeline_root: Annotated[str, typer.Option(help="local dir, or gs:// for Vertex")] = "",
    preempt_after: Annotated[str, typer.Option(help="local: inject preemptions")] = "",
    image: Annotated[str, typer.Option(help="--vertex: the components image")] = "",
    service_account: Annotated[str, typer.Option(help="--vertex: the pipeline's SA")] = "",
    verbose: Annotated[
        bool,
        typer.Option("--verbose", help="--local: print all of the runner's output, not one line per task"),
    ] = False,
    only: Annotated[str, typer.Option(help="preflight: comma-separated check families to run")] = "",
    skip: Annotated[str, typer.Option(help="preflight: comma-separated check families to skip")] = "",
    fail_on: Annotated[
        str, typer.Option(help="preflight: lowest status that fails: fail, unknown, warn")
    ] = "",
    output_dir: Annotated[str, typer.Option(help="train: base output dir when the spec has none")] = "",
    resume: Annotated[
        bool, typer.Option("--resume", help="train: continue the newest run in the output directory")
    ] = False,
    guard: Annotated[str, typer.Option(help="train: in-flight guard: off, nonfinite, fail")] = "",
    model: Annotated[str, typer.Option("--model", help="train: which weights ship: best or last")] = "",
    max_queued: Annotated[
        str,
        typer.Option("--max-queued", help="train (vertex): cancel a job QUEUED this long (45m; 0: never)"),
    ] = "",
    train_metric: Annotated[str, typer.Option(help="validate: training-loss series")] = "",
    val_metric: Annotated[str, typer.Option(help="validate: validation-loss series")] = "",
    validate_fail_on: Annotated[str, typer.Option(help="validate: classes that fail")] = "",
    validate_warn_on: Annotated[str, typer.Option(help="validate: classes that only warn")] = "",
    gate: Annotated[
        list[str] | None,
        typer.Option("--gate", metavar="METRIC>=VALUE[@best|@last]", help="validate: repeatable"),
    ] = None,
    threshold: Annotated[
        list[str] | None, typer.Option("--threshold", metavar="NAME=VALUE", help="validate: repeatable")
    ] = None,
    direction: Annotated[
        list[str] | None, typer.Option("--direction", metavar="METRIC=min|max", help="validate: repeatable")
    ] = None,
    gate_at: Annotated[str, typer.Option(help="validate: where gates read: best or last")] = "",
    budget: Annotated[
        float,
        typer.Option(
            "--budget",
            metavar="USD",
            help="preflight: fail when the cost at the timeout exceeds this; train: stop the job "
            "once it has spent this much",
        ),
    ] = 0.0,
    fallback: Fallbacks = None,
    retries: Retries = None,
    hang_after: HangAfter = "",
    inject: Inject = None,
    serving_image: Annotated[
        str, typer.Option(help="register: the serving container; given, a model that passed is registered")
    ] = "",
    parent_model: Annotated[str, typer.Option(help="register: as a new version of this Vertex model")] = "",
    model_display_name: Annotated[str, typer.Option(help="register: the model's display name")] = "",
):
    """Run a pipeline on SPEC: in the KFP local runner, or submitted to Vertex AI Pipelines.

    Takes what the pipelines take: preflight's --only/--skip/--fail-on, train's --guard/--model/
    --max-queued/--output-dir/--resume/--fallback/--retries/--hang-after (and, locally,
    --inject), validate's --gate/--threshold/--direction/--gate-at.
    """
    from trainguard.stages import make_spec

    if image:
        os.environ["TRAINGUARD_COMPONENT_IMAGE"] = image  # submit() builds the pipelines with it
    try:
        backend = parse(Backend, backend, "--backend").value if backend else ""
        backend = backend or ("local" if local and pipeline == "guarded_training" else "vertex")
        from trainguard.run_options import RunOptions

        parameters = RunOptions(
            pipeline=pipeline,
            only=only,
            skip=skip,
            fail_on=fail_on,
            output_dir=output_dir,
            resume=resume,
            guard=guard,
            model=model,
            max_queued=max_queued,
            train_metric=train_metric,
            val_metric=val_metric,
            validate_fail_on=validate_fail_on,
            validate_warn_on=validate_warn_on,
            gate=tuple(gate or ()),
            threshold=tuple(threshold or ()),
            direction=tuple(direction or ()),
            gate_at=gate_at,
            budget=budget,
            fallback=tuple(fallback or ()),
            retries=tuple(retries or ()),
            hang_after=hang_after,
            inject=tuple(inject or ()),
            serving_image=serving_image,
            parent_model=parent_model,
            model_display_name=model_display_name,
        ).parameters()
        project, region = _cloud_names(
            project, region, local=local and backend == "local", local_flag="--local --backend local"
        )
        for flag, given in (("--preempt-after", preempt_after), ("--inject", inject)):
            if given and (not local or pipeline != "guarded_training" or backend != "local"):
                raise ConfigError(
                    f"{flag} injects faults into a local training job: it needs --local, "
                    "--backend local and --pipeline guarded_training"
                )
        from trainguard.durations import parse_durations

        parse_durations(preempt_after, "--preempt-after")  # before the pipeline runs, not in it
        job = make_spec(spec, project=project, region=region, display_name=display_name)
        if local:
            from trainguard.pipelines.local_runner import run_local
            from trainguard.pipelines.task_logs import TaskReporter

            outcome = run_local(
                pipeline,
                job,
                backend=backend,
                pipeline_root=pipeline_root or "./.tg-local",
                preempt_after=preempt_after,
                on_event=None if verbose else TaskReporter(indent=""),
                **parameters,
            )
            out.print(outcome.summary(), markup=False)
            raise typer.Exit(0 if outcome.succeeded else 130 if outcome.interrupted else 1)
        from trainguard.pipelines.submit import submit

        url = submit(
            pipeline,
            job,
            pipeline_root=pipeline_root,
            backend=backend,
            service_account=service_account,
            say=lambda line: err.print(f"trainguard: {line}", markup=False),
            **parameters,
        )
        out.print(f"submitted: {url}", markup=False)
    except TrainguardError as exc:
        _fail(exc)


def main() -> None:
    """Entry point of the ``trainguard`` command.

    Usage errors (an unknown option, a value not among the choices) are printed by us rather than
    by click: the value echoed goes through the one redaction table and is bounded, like every
    other message (a token pasted into the wrong flag must not reach a CI log).
    """
    try:  # typer vendors click; older typer releases use click itself
        from typer._click import exceptions as click_exc
    except ImportError:  # pragma: no cover
        from click import exceptions as click_exc  # type: ignore[no-redef]

    try:
        code = app(standalone_mode=False)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except click_exc.ClickException as exc:
        from trainguard.redaction import bound, printable, redact

        exc.message = printable(bound(redact(exc.message), 2000))
        from typer import rich_utils

        rich_utils.rich_format_error(exc)
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
