"""The seam every training backend plugs into, what it returns, and the in-flight watcher hook.

A backend (``local``, ``vertex``; names in :class:`trainguard.choices.Backend`) turns a
:class:`~trainguard.spec.JobSpec` into a finished :class:`TrainResult`. While the job runs it calls
its :class:`Watcher` (the in-flight guard) between polls with a :class:`RunningJob`; when the
watcher returns a :class:`Stop`, the backend stops the job (Vertex: cancel and wait for CANCELLED;
local: stop the process groups) and records the stop in ``TrainResult.stopped``. A watcher that
raises is reported once and never stops the job (the guard fails open). The exact calling contract
is in :mod:`trainguard.launch.watching`.

When a backend knows for certain why a job ended (the guard stopped it, it waited too long for
quota or for Flex-start capacity), it says so in ``TrainResult.failure_class``;
:func:`diagnose_result` prefers that to reading the error text.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from trainguard.spec import JobSpec

__all__ = [
    "TrainResult",
    "Backend",
    "Watcher",
    "RunningJob",
    "Stop",
    "diagnose",
    "diagnose_result",
    "TERMINAL_OK",
]

TERMINAL_OK = "SUCCEEDED"


@dataclass(frozen=True)
class Stop:
    """Why a watcher asks the backend to stop a running job.

    Attributes:
        failure_class: a class of :mod:`trainguard.failure_classes` (``non_finite``, ``overfit``…).
        evidence: what was seen, one or two lines (already redacted and bounded).
        remedy: the first remedy to try.
        success: True for an early stop that ends the job as success-with-finding (a confirmed
            overfit: the best model is already saved); False fails the task.
        details: machine-readable numbers (steps, values, accelerator-hours saved…).
    """

    failure_class: str
    evidence: str
    remedy: str
    success: bool = False
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RunningJob:
    """What a watcher may look at between polls.

    Attributes:
        job_name: the Vertex resource name, or ``local/<id>``.
        state: the job's current state (QUEUED, PENDING, RUNNING…).
        base_output_dir: the job's base output directory ('' when it has none).
        history_path: where the job writes trainguard's JSONL history.
        tensorboard_dir: ``AIP_TENSORBOARD_LOG_DIR``.
        elapsed_s: seconds since the job started running (0 while queued).
    """

    job_name: str
    state: str
    base_output_dir: str
    history_path: str
    tensorboard_dir: str
    elapsed_s: float


@runtime_checkable
class Watcher(Protocol):
    """Looks at a running job between polls; returns a Stop to end it, None to let it run."""

    def poll(self, job: RunningJob) -> Stop | None: ...


@dataclass
class TrainResult:
    """The outcome of one training job.

    Attributes:
        state: the final job state (SUCCEEDED, FAILED, CANCELLED, EXPIRED).
        job_name: the Vertex resource name, or ``local/<id>``.
        base_output_dir: where model/, checkpoints/, logs/ and history.jsonl are.
        model_dir, checkpoint_dir, history_path: the Vertex environment contract's values.
        error: the job's error message ('' on success).
        log_tail: the last lines of the workers' output (for triage), redacted.
        restarts: how many times workers were restarted (preemptions included).
        console_url: where to look at the job, when there is a console.
        duration_s: wall time.
        exit_codes: each replica's exit status (local backend).
        stopped: the watcher's Stop as a dict, when the guard ended the job.
        failure_class: the class the backend knows for certain ('' when only the error text can
            tell): the Stop's class, ``quota`` (QUEUED too long), ``capacity`` (a Flex-start
            wait that ran out).
        interrupted: the signal that stopped the launcher (2 for Ctrl-C, 15 for SIGTERM: a
            cancelled pipeline task), 0 when nothing did; the job was then stopped (local: its
            workers saved and exited) or cancelled (Vertex).
        running_s: how long the launcher saw the job RUNNING (0 when it never ran: refused at
            create, a stockout, cancelled while QUEUED). A Spot job that ran and then ended in
            a STOCKOUT was reclaimed; one that never ran found no capacity
            (:func:`trainguard.launch.attempts.attempt_class`).
        attempts: every attempt of this ``train`` (fallbacks and retries, the last is this
            result's), as :class:`~trainguard.launch.attempts.AttemptRecord` dicts; filled in by
            the train stage ([] from a backend alone).
    """

    state: str
    job_name: str
    base_output_dir: str
    model_dir: str
    checkpoint_dir: str
    history_path: str
    error: str = ""
    log_tail: str = ""
    restarts: int = 0
    console_url: str = ""
    duration_s: float = 0.0
    exit_codes: dict = field(default_factory=dict)
    stopped: dict = field(default_factory=dict)
    failure_class: str = ""
    interrupted: int = 0
    running_s: float = 0.0
    attempts: list = field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        return self.state == TERMINAL_OK

    def to_dict(self) -> dict:
        return asdict(self)


class Backend(Protocol):
    """A training backend: runs a job to a terminal state and never raises because it failed.

    Raises (from ``run``):
        ConfigError / SpecError: the spec cannot run on this backend.
        TransientError / EndpointUnreachable: the service could not be reached for long enough.
    """

    def run(self, spec: JobSpec, watcher: Watcher | None = None) -> TrainResult: ...


def diagnose(text: str):
    """Names the failure class of a failed job's error text (``trainguard.triage``)."""
    from trainguard.triage import classify

    return classify(text)


def diagnose_result(result: TrainResult):
    """The diagnosis of a job that did not succeed: the backend's own class when it knows one,
    else what triage reads in the error and the log tail."""
    if not result.failure_class:
        return diagnose("\n".join(filter(None, [result.error, result.log_tail])))
    from trainguard.failure_classes import get
    from trainguard.redaction import bound, redact
    from trainguard.triage import MAX_EVIDENCE_CHARS, Diagnosis

    playbook = get(result.failure_class)
    stop = result.stopped or {}
    evidence = stop.get("evidence") or (result.error.splitlines() or [""])[0]
    reason = (
        "the in-flight guard stopped the job"
        if stop
        else "named by the launcher, which saw why the job ended"
    )
    return Diagnosis(
        failure_class=playbook.name,
        evidence=bound(redact(str(evidence)), MAX_EVIDENCE_CHARS),
        remedy=str(stop.get("remedy") or playbook.remedy),
        trap=playbook.trap,
        confidence=0.95,
        reason=reason,
    )
