"""Run a trainguard pipeline in the KFP local runner (``SubprocessRunner(use_venv=False)``).

The components run as subprocesses of this interpreter; the ``local`` training backend runs the
job's command on this machine. ``run_local`` returns a ``LocalOutcome`` that knows where every
artifact is and, when a task failed, what the failure was (read from that task's own reports).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trainguard.errors import ConfigError
from trainguard.pipelines.task_logs import RedactingStream, TaskEvent, TaskLogSplitter
from trainguard.spec import JobSpec

__all__ = ["LocalOutcome", "run_local", "TaskEvent"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class LocalOutcome:
    """The result of one local pipeline run."""

    pipeline: str
    succeeded: bool
    run_dir: Path | None
    failed_task: str = ""
    message: str = ""
    outputs: dict = field(default_factory=dict)
    log_dir: Path | None = None
    interrupted: bool = False

    def artifact(self, task: str, name: str) -> Path | None:
        """The path of ``task``'s output ``name`` in this run, if it was written."""
        if self.run_dir is None:
            return None
        path = self.run_dir / task / name
        return path if path.exists() else None

    def read_json(self, task: str, name: str) -> dict | None:
        path = self.artifact(task, name)
        if path is None or not path.is_file():
            return None
        try:
            return json.loads(path.read_text())
        except ValueError:
            return None

    def metadata(self, task: str, name: str) -> dict:
        """The metadata ``task`` recorded on its output artifact ``name`` (empty if none)."""
        data = self.read_json(task, "executor_output.json") or {}
        found = data.get("artifacts", {}).get(name, {}).get("artifacts", [])
        return dict(found[0].get("metadata", {})) if found else {}

    def failure_detail(self) -> str:
        """The failure class and remedy, from the failed task's own report."""
        if self.failed_task == "validate":
            verdict = self.read_json("validate", "verdict") or {}
            fails = [f for f in verdict.get("findings", []) if f.get("severity") == "fail"]
            if fails:
                f = fails[0]
                return (
                    f"failure class: {verdict.get('failure_class')}\n"
                    f"  {f.get('message')}\n  remedy: {f.get('remedy')}"
                )
        if self.failed_task == "train":
            path = self.artifact("train", "diagnosis")
            if path is not None and path.is_file():
                return path.read_text().strip()
        if self.failed_task == "preflight":
            report = self.read_json("preflight", "report_json") or {}
            lines = [
                f"{r['status']} {r['check']}: {r['title']}: {r['evidence']}\n  fix: {r['remedy']}"
                for r in report.get("results", [])
                if r["status"] == "FAIL"
            ]
            if lines:
                return "\n".join(lines)
        return self.message

    def unproven(self) -> str:
        """The preflight task's "not proven" line, when some of its checks could not tell."""
        report = self.read_json("preflight", "report_json") or {}
        unknown = [r for r in report.get("results", []) if r.get("status") == "UNKNOWN"]
        if not unknown or report.get("passed") is False:
            return ""
        names = "; ".join(f"{r.get('check')}: {r.get('title')}" for r in unknown[:6])
        more = f"; and {len(unknown) - 6} more" if len(unknown) > 6 else ""
        return (
            f"preflight NOT PROVEN: {len(unknown)} check(s) could not tell ({names}{more}): see "
            "the preflight report; fail_on=unknown fails on them"
        )

    def brief(self) -> list[str]:
        """A few lines a person reads: the outcome, and on failure the class, evidence, remedy."""
        if self.succeeded:
            unproven = self.unproven()
            return [f"pipeline {self.pipeline}: SUCCEEDED"] + ([f"  {unproven}"] if unproven else [])
        lines = [f"pipeline {self.pipeline}: FAILED at task '{self.failed_task}'"]
        if self.failed_task == "validate":
            verdict = self.read_json("validate", "verdict") or {}
            fails = [f for f in verdict.get("findings", []) if f.get("severity") == "fail"]
            if fails:
                return lines + [
                    f"  class:    {verdict.get('failure_class')}",
                    f"  evidence: {fails[0].get('message')}",
                    f"  remedy:   {fails[0].get('remedy')}",
                ]
        if self.failed_task == "train":
            path = self.artifact("train", "diagnosis")
            if path is not None and path.is_file():
                return lines + _diagnosis_lines(path.read_text())
        detail = [line for line in self.failure_detail().splitlines() if line.strip()]
        return lines + [f"  {line.strip()}" for line in detail[:8]]

    def summary(self) -> str:
        """What a person reads at the end of the run."""
        head = (
            f"pipeline {self.pipeline}: SUCCEEDED"
            if self.succeeded
            else f"pipeline {self.pipeline}: INTERRUPTED (Ctrl-C) during task '{self.failed_task}'"
            if self.interrupted
            else f"pipeline {self.pipeline}: FAILED at task '{self.failed_task}'"
        )
        lines = [head]
        if self.interrupted:
            pass  # nothing failed: what ran is in the artifacts and the task logs below
        elif not self.succeeded:
            lines.append(self.failure_detail())
        elif self.unproven():
            lines.append(self.unproven())
        if self.run_dir is not None:
            lines.append(f"artifacts: {self.run_dir}")
            for task_dir in sorted(p for p in self.run_dir.iterdir() if p.is_dir() and p != self.log_dir):
                names = sorted(p.name for p in task_dir.iterdir() if not p.name.startswith("."))
                lines.append(f"  {task_dir.name}/: {', '.join(names)}")
        if self.log_dir is not None:
            lines.append(
                f"task logs: {self.log_dir}/ "
                f"({', '.join(sorted(p.name for p in self.log_dir.glob('*.log')))})"
            )
        return "\n".join(lines)


def _diagnosis_lines(markdown: str) -> list[str]:
    """Class, why, evidence and remedy from a train task's diagnosis (triage's Markdown)."""
    found: dict[str, str] = {}
    lines = markdown.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("## Training failure"):
            m = re.search(r"`([\w-]+)`", line)
            found["class"] = m.group(1) if m else "unknown"
        elif line.startswith("**Why:**"):
            found["why"] = re.sub(r" \(confidence [\d.]+\)$", "", line[len("**Why:**") :].strip())
        elif line.startswith("```") and "evidence" not in found and i + 1 < len(lines):
            found["evidence"] = lines[i + 1].strip()
        elif line.startswith("**First remedy:**"):
            found["remedy"] = line[len("**First remedy:**") :].strip()
        elif line.startswith("**Cost:**"):
            found["cost"] = line[len("**Cost:**") :].strip()
    return [
        f"  {key + ':':<9} {found[key]}"
        for key in ("class", "evidence", "why", "remedy", "cost")
        if key in found
    ]


def run_local(
    pipeline: str,
    spec: JobSpec,
    *,
    backend: str = "local",
    pipeline_root: str = "./.tg-local",
    preempt_after: str = "",
    on_event: Callable[[TaskEvent], None] | None = None,
    **parameters,
) -> LocalOutcome:
    """Runs ``guarded_training`` or ``preflight_only`` on ``spec`` in the KFP local runner.

    With ``on_event`` set, the runner's output (its log lines, each component's streamed output,
    the executor JSON) goes to one log file per task under ``<run>/logs/`` instead of the
    terminal, and ``on_event`` hears each task start and end; without it, everything is printed
    as the runner prints it.

    Raises:
        ConfigError: an unknown pipeline name.
    """
    from kfp import local

    from trainguard.pipelines import PIPELINES

    if pipeline not in PIPELINES:
        raise ConfigError(f"unknown pipeline {pipeline!r}; use one of {', '.join(PIPELINES)}")
    root = Path(pipeline_root).resolve()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create the pipeline root {root}: {exc.strerror or exc}; "
            "choose a writable --pipeline-root"
        ) from None
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(root), raise_on_error=True)
    args = dict(
        job_spec=spec.to_body(),
        project=spec.project,
        region=spec.region,
        display_name=spec.display_name,
        backend=backend,
        **parameters,
    )
    if pipeline == "guarded_training" and preempt_after:
        args["preempt_after"] = preempt_after
    func = PIPELINES[pipeline]
    before = set(root.iterdir())
    succeeded, failed_task, message, outputs = True, "", "", {}
    staging = Path(tempfile.mkdtemp(prefix=".logs-", dir=root)) if on_event else None
    with warnings.catch_warnings(), _captured(staging, on_event) as splitter:
        # The local runner warns about any base image without "python" in its name.
        warnings.filterwarnings("ignore", message=".*non-Python base image.*")
        with _first_ctrl_c() as ctrl_c:
            try:
                result = func(**args)
                outputs = dict(getattr(result, "outputs", {}) or {})
            except RuntimeError as exc:
                message = _ANSI.sub("", str(exc))
                m = re.search(r"Inner task failed: '?([\w-]+)", message)
                if m is None:
                    raise
                succeeded, failed_task = False, m.group(1)
            except KeyboardInterrupt:  # the second Ctrl-C: leave now, keep what was logged
                succeeded, failed_task = False, splitter.task if splitter is not None else ""
        interrupted = ctrl_c.is_set()
    new = sorted(
        (p for p in root.iterdir() if p not in before and p.is_dir() and p != staging),
        key=lambda p: p.stat().st_mtime,
    )
    run_dir = new[-1] if new else None
    log_dir = _keep_logs(staging, run_dir) if splitter is not None else None
    return LocalOutcome(pipeline, succeeded, run_dir, failed_task, message, outputs, log_dir, interrupted)


@contextlib.contextmanager
def _first_ctrl_c():
    """While the pipeline runs, the first Ctrl-C only sets the event it yields: the terminal sent
    it to the running task as well (one process group), which stops its job — a local job's
    workers save — and fails, so the runner goes on streaming its output into the task's log. A
    second Ctrl-C raises KeyboardInterrupt as usual."""
    import signal
    import threading

    event = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield event
        return

    def first(signum, frame) -> None:
        if event.is_set():
            raise KeyboardInterrupt
        event.set()

    previous = signal.signal(signal.SIGINT, first)
    try:
        yield event
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _captured(directory: Path | None, on_event: Callable[[TaskEvent], None] | None):
    """sys.stdout → one log file per task, while the runner runs (nothing when not asked)."""
    if directory is None or on_event is None:  # verbose: all of it, but never a secret
        previous = sys.stdout
        sys.stdout = RedactingStream(previous)
        try:
            yield None
        finally:
            sys.stdout.flush()
            sys.stdout = previous
        return
    splitter = TaskLogSplitter(directory, on_event)
    previous = sys.stdout
    sys.stdout = splitter
    try:
        yield splitter
    finally:
        sys.stdout = previous
        splitter.close()


def _keep_logs(staging: Path | None, run_dir: Path | None) -> Path | None:
    """Moves the task logs into the run's directory (beside its artifacts)."""
    if staging is None:
        return None
    if run_dir is None:
        return staging
    target = run_dir / "logs"
    shutil.move(str(staging), str(target))
    return target
