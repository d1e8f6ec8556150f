"""What every training backend returns, and the seam to the failure classifier."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

__all__ = ["TrainResult", "diagnose", "TERMINAL_OK"]

TERMINAL_OK = "SUCCEEDED"


@dataclass
class TrainResult:
    """The outcome of one training job.

    Attributes:
        state: the final job state (SUCCEEDED, FAILED, CANCELLED, EXPIRED).
        job_name: the Vertex resource name, or ``local/<id>``.
        base_output_dir: where model/, checkpoints/, logs/ and history.jsonl are.
        model_dir, checkpoint_dir, history_path: the Vertex environment contract's values.
        error: the job's error message ('' on success).
        log_tail: the last lines of the workers' output (for triage).
        restarts: how many times workers were restarted (preemptions included).
        console_url: where to look at the job, when there is a console.
        duration_s: wall time.
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

    @property
    def succeeded(self) -> bool:
        return self.state == TERMINAL_OK

    def to_dict(self) -> dict:
        return asdict(self)


def diagnose(text: str):
    """Names the failure class of a failed job's error text; None if the classifier is absent.

    The classifier lives in ``trainguard.triage``; this is the one place launchers call it.
    """
    try:
        from trainguard.triage import classify
    except ImportError:  # pragma: no cover - the classifier ships with trainguard
        return None
    return classify(text)
