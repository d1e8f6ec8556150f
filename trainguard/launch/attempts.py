"""The attempt loop: fall back when there is no capacity, retry what a relaunch can fix, stop on
what only the user can.

A ``train`` is a sequence of attempts, each a launch of the job on one backend:

* **Fallbacks** (:mod:`trainguard.launch.alternatives`): an attempt that ends for ``quota`` or
  ``capacity`` — a create refused over a quota limit, a stockout, a job QUEUED past its limit, a
  Flex-start wait that ran out — moves on to the next alternative at once, spending no budget.
  No other class ever moves a job elsewhere.
* **Retry budgets** (:class:`RetryBudget`, ``--retries preemption=3,capacity=2,unknown=1``):
  an attempt that ended for a class in :data:`RETRYABLE` is relaunched while that class's budget
  lasts — a ``preemption``, ``hang`` or ``unknown`` in the same alternative, at once (it resumes
  from the checkpoint); ``capacity`` or ``quota`` after every alternative was tried, from the
  first again, after a wait that doubles (:data:`CAPACITY_WAIT_S`). A class not named is not
  retried. Without ``--retries`` the budget is :data:`DEFAULT_RETRIES`: ``preemption=3,hang=1``.
  ``capacity`` and ``unknown`` are left to the user to name, because a capacity retry waits again
  (a Flex-start job its whole ``maxWaitDuration``) and an unknown failure is as likely the job's
  own as the platform's: a relaunch of a costly job should be asked for.
* Everything else — the classes that are the user's to fix (``container``, ``permission``,
  ``non_finite``, ``divergence``, ``device_oom``, ``host_oom``, …), a job that succeeded, an early
  stop, an interruption, an input the trainer refused — ends the loop at once.

Every attempt writes to the same run directory (the caller claims it once,
:mod:`trainguard.launch.run_dir`): the same checkpoints, so each one resumes where the last
stopped. Vertex's own restarts come first: a Spot job Vertex restarted is still one attempt. How
Vertex reports a Spot reclaim it did not restart: "When Spot VMs are preempted, the job fails with
a STOCKOUT error" (Vertex AI docs, *Use Spot VMs*), the same word as a stockout before the job ran;
:func:`attempt_class` tells them apart by whether the Spot job had run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from trainguard.errors import ConfigError
from trainguard.launch.alternatives import Alternative, shape_of
from trainguard.launch.base import TrainResult, Watcher, diagnose_result

if TYPE_CHECKING:
    from trainguard.launch.base import Backend
    from trainguard.spec import JobSpec

__all__ = [
    "RETRYABLE",
    "FALLBACK_CLASSES",
    "DEFAULT_RETRIES",
    "CAPACITY_WAIT_S",
    "RetryBudget",
    "AttemptPlan",
    "AttemptRecord",
    "Attempts",
    "attempt_class",
    "run_attempts",
    "start_index",
]

#: The classes that move a job to its next alternative.
FALLBACK_CLASSES = ("quota", "capacity")

#: The classes a relaunch can fix, and why (each other class is the user's to fix).
RETRYABLE: dict[str, str] = {
    "preemption": "the machines were taken away, not refused: the job resumes from its checkpoint",
    "capacity": "a stockout clears as machines free up: every alternative is tried again after a wait",
    "quota": "quota other jobs hold comes back when they end (a limit does not: raise it)",
    "hang": "a restart from the checkpoint is the first remedy for a stuck collective or loader",
    "unknown": "an error no class names may be the platform's own: one more try tells",
}

#: ``--retries`` when it is not given.
DEFAULT_RETRIES: dict[str, int] = {"preemption": 3, "hang": 1}

#: The wait before the first capacity/quota retry from the top; it doubles at each, to 30 min.
CAPACITY_WAIT_S = 120.0
_CAPACITY_WAIT_MAX_S = 30 * 60.0


@dataclass(frozen=True)
class RetryBudget:
    """How many relaunches each failure class gets (``--retries``).

    Raises (at construction):
        ConfigError: a class that is not retryable (the user's to fix) or not a class, or a
            count below 0.
    """

    counts: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_RETRIES))

    def __post_init__(self) -> None:
        from trainguard.failure_classes import CLASS_NAMES

        for name, count in self.counts.items():
            if name not in CLASS_NAMES:
                raise ConfigError(f"--retries {name}: not a failure class; retryable: {', '.join(RETRYABLE)}")
            if name not in RETRYABLE:
                raise ConfigError(
                    f"--retries {name}: {name} is the job's own to fix (its code, image, data or "
                    f"settings): a relaunch as it is fails the same way; retryable: {', '.join(RETRYABLE)}"
                )
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise ConfigError(f"--retries {name}={count!r}: a count of relaunches, 0 or more")
        object.__setattr__(self, "counts", dict(self.counts))

    @classmethod
    def parse(cls, value: str | Sequence[str] | None, option: str = "--retries") -> RetryBudget:
        """``preemption=3,capacity=2`` (or a list of such items) → a budget; ''/None → the
        defaults; ``none`` → no retries at all.

        Raises:
            ConfigError: not ``class=N`` items, or a class :meth:`__post_init__` refuses.
        """
        items = [value] if isinstance(value, str) else list(value or [])
        parts = [p.strip() for item in items for p in item.split(",") if p.strip()]
        if not parts:
            return cls()
        if [p.lower() for p in parts] == ["none"]:
            return cls({})
        counts: dict[str, int] = {}
        for part in parts:
            name, sep, raw = part.partition("=")
            name, raw = name.strip().lower(), raw.strip()
            if not sep or not raw.isdigit():
                raise ConfigError(
                    f"{option} {part[:40]!r}: use CLASS=N items, e.g. {option} preemption=3,capacity=2 "
                    f"(retryable: {', '.join(RETRYABLE)}; 'none' retries nothing)"
                )
            if name in counts:
                raise ConfigError(f"{option}: {name} is given twice; give it once")
            counts[name] = int(raw)
        return cls(counts)

    def describe(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.counts.items() if v)
        return shown or "no retries"


@dataclass(frozen=True)
class AttemptPlan:
    """What one ``train`` may try.

    Attributes:
        spec: the job as specified (its run directory already claimed).
        alternatives: the fallbacks, in order (the job itself comes first, and is not listed).
        budget: the retry budget.
        capacity_wait_s: the wait before the first capacity/quota retry from the top (0: none,
            as for a local run, where a stockout is injected).
    """

    spec: JobSpec
    alternatives: tuple[Alternative, ...] = ()
    budget: RetryBudget = field(default_factory=RetryBudget)
    capacity_wait_s: float = CAPACITY_WAIT_S

    def specs(self) -> list[tuple[Alternative, JobSpec]]:
        """Each way to run the job, the job itself first, built now (a bad one is bad input
        before anything launches).

        Raises:
            SpecError: an alternative makes the job invalid.
        """
        return [(Alternative(), self.spec)] + [(a, a.apply(self.spec)) for a in self.alternatives]


@dataclass
class AttemptRecord:
    """One attempt, as the task's outputs record it."""

    number: int
    alternative: int
    label: str
    region: str
    machine: str
    accelerator: str
    count: int
    strategy: str
    job_name: str = ""
    state: str = ""
    failure_class: str = ""
    duration_s: float = 0.0
    running_s: float = 0.0
    restarts: int = 0
    started_s: float = 0.0  # since the first attempt started
    ended_s: float = 0.0
    next: str = ""  # fallback, retry, or '' for the last
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        """``#1 us-central1 a2-highgpu-1g SPOT: FAILED [capacity] after 12 s``."""
        accel = f" {self.count}×{self.accelerator}" if self.accelerator else ""
        cls = f" [{self.failure_class}]" if self.failure_class else ""
        return (
            f"#{self.number + 1} {self.region} {self.machine}{accel} {self.strategy}: "
            f"{self.state}{cls} after {self.duration_s:.0f} s"
        )


@dataclass
class Attempts:
    """What the loop did: every attempt, and the last one's result, spec and watcher."""

    result: TrainResult
    spec: JobSpec
    watcher: Watcher | None
    records: list[AttemptRecord]

    @property
    def model_attempt(self) -> int | None:
        """The attempt whose job produced the model (the last, when it succeeded or ended early)."""
        last = self.records[-1] if self.records else None
        if last is None or not (self.result.succeeded or self.result.stopped.get("success")):
            return None
        return last.number

    def gaps(self) -> list[float]:
        """Seconds from the end of each attempt to the launch of the next."""
        return [
            round(b.started_s - a.ended_s, 3) for a, b in zip(self.records, self.records[1:], strict=False)
        ]

    def to_dict(self) -> dict:
        return {
            "attempts": [r.to_dict() for r in self.records],
            "model_attempt": self.model_attempt,
            "relaunch_gaps_s": self.gaps(),
        }


def attempt_class(result: TrainResult, spec: JobSpec) -> str:
    """The failure class of an attempt that did not succeed.

    The guard's stop, else what the backend knows for certain, else what triage reads — except
    that a SPOT job that had run and then ended for ``capacity`` (a STOCKOUT) was reclaimed:
    Vertex reports a Spot preemption it did not restart as a STOCKOUT ("When Spot VMs are
    preempted, the job fails with a STOCKOUT error", Vertex AI docs, *Use Spot VMs*), while a job
    that never ran met a stockout ("Resources are insufficient in region",
    openreview/openreview-expertise#401).
    """
    if result.stopped:
        return str(result.stopped.get("failure_class", "unknown"))
    diagnosis = diagnose_result(result)
    name = diagnosis.failure_class if diagnosis is not None else "unknown"
    if name == "capacity" and result.running_s > 0 and spec.strategy == "SPOT":
        return "preemption"
    return name


def start_index(specs: Sequence[tuple[Alternative, JobSpec]], gcp_resources_path: str | None) -> int:
    """Where a task that ran before resumes: the alternative whose region holds the job its
    ``gcp_resources`` names (a KFP retry after a fallback finds that job), else the first.

    Raises:
        ConfigError: the file names a job in a region no alternative runs in.
    """
    if not gcp_resources_path:
        return 0
    from trainguard.launch.gcp_resources import read_gcp_resources

    name = read_gcp_resources(gcp_resources_path)
    if name is None:
        return 0
    region = name.split("/")[3]
    for i, (_, spec) in enumerate(specs):
        if spec.region == region:
            return i
    regions = ", ".join(dict.fromkeys(s.region for _, s in specs))
    raise ConfigError(
        f"gcp_resources file {gcp_resources_path!r} names {name}, in {region}, but this job runs in "
        f"{regions}; delete the file, fix --region, or add --fallback region={region}"
    )


def run_attempts(
    plan: AttemptPlan,
    *,
    backend_for: Callable[[bool], Backend],
    watcher_for: Callable[[JobSpec], Watcher | None],
    final: Callable[[TrainResult], bool] = lambda result: False,
    on_end: Callable[[TrainResult], str] = lambda result: "",
    gcp_resources_path: str | None = None,
    say: Callable[[str], None] = lambda line: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Attempts:
    """Runs attempts until one succeeds or the loop must stop (see the module docstring).

    Args:
        plan: the job, its alternatives and the budget.
        backend_for: a backend for the next attempt; its argument is True for the first
            attempt (which may resume the job ``gcp_resources`` names), False after.
        watcher_for: the in-flight guard of one attempt's job (None: unguarded).
        final: True for a result no relaunch may follow whatever its class (the trainer
            refused its input).
        on_end: called once after every attempt, before the next is chosen (the ledger adds
            its bill); a reason it returns ends the loop: no relaunch follows (the budget is
            spent), and the attempt's note says why.
        gcp_resources_path: the task's ``gcp_resources`` (Vertex), to start where it was.
        say: where the lines for people go.
        clock, sleep: injectable for tests.

    Raises:
        SpecError / ConfigError: an alternative is not a valid job, or ``gcp_resources`` names
            a job in a region no alternative runs in; and whatever the backend raises.
    """
    specs = plan.specs()
    index = start_index(specs, gcp_resources_path)
    if index:
        say(f"gcp_resources names a job in {specs[index][1].region}: continuing at alternative {index + 1}")
    spent: dict[str, int] = {}
    records: list[AttemptRecord] = []
    origin = clock()
    waits = 0
    while True:
        alternative, spec = specs[index]
        shape = shape_of(spec)
        record = AttemptRecord(len(records), index, alternative.label(), **shape)
        if len(specs) > 1 or records:
            say(f"attempt {record.number + 1}: {alternative.label()} ({_where(shape)})")
        record.started_s = round(clock() - origin, 3)
        watcher = watcher_for(spec)
        result = backend_for(not records).run(spec, watcher=watcher)
        record.ended_s = round(clock() - origin, 3)
        cls = "" if result.succeeded else attempt_class(result, spec)
        if cls == "preemption" and not result.failure_class and not result.stopped:
            result.failure_class = cls  # a reclaim read as a STOCKOUT: the diagnosis says so too
        record.job_name, record.state, record.failure_class = result.job_name, result.state, cls
        record.duration_s, record.running_s, record.restarts = (
            result.duration_s,
            result.running_s,
            result.restarts,
        )
        records.append(record)
        stop_why = on_end(result)
        done = (
            result.succeeded
            or bool(result.stopped.get("success"))
            or bool(result.interrupted)
            or final(result)
        )
        step = None if done else _next_step(cls, index, len(specs), plan.budget, spent)
        if step is not None and stop_why:
            record.note = f"{cls}: {stop_why}"
            say(f"attempt {record.number + 1} ended {result.state} [{cls}]; {stop_why}")
            step = None
        if step is None:
            return Attempts(result, spec, watcher, records)
        kind, index = step
        record.next = kind
        if kind == "fallback":
            record.note = f"{cls}: falling back to alternative {index + 1} ({specs[index][0].label()})"
        else:
            spent[cls] = spent.get(cls, 0) + 1
            record.note = (
                f"{cls}: retry {spent[cls]} of {plan.budget.counts.get(cls, 0)} ({RETRYABLE.get(cls, '')})"
            )
        say(f"attempt {record.number + 1} ended {result.state} [{cls}]; {record.note}")
        if kind == "retry" and cls in FALLBACK_CLASSES and plan.capacity_wait_s > 0:
            wait = min(plan.capacity_wait_s * 2**waits, _CAPACITY_WAIT_MAX_S)
            waits += 1
            say(f"every alternative was tried: waiting {wait:.0f} s for capacity before trying again")
            sleep(wait)


def _next_step(
    cls: str, index: int, count: int, budget: RetryBudget, spent: Mapping[str, int]
) -> tuple[str, int] | None:
    """(``fallback`` or ``retry``, the alternative to run next), or None to stop."""
    if cls in FALLBACK_CLASSES and index + 1 < count:
        return "fallback", index + 1
    if spent.get(cls, 0) < budget.counts.get(cls, 0):
        return "retry", 0 if cls in FALLBACK_CLASSES else index
    return None


def _where(shape: Mapping[str, Any]) -> str:
    accel = f", {shape['count']}×{shape['accelerator']}" if shape["accelerator"] else ""
    return f"{shape['region']}, {shape['machine']}{accel}, {shape['strategy']}"
