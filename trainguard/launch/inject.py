"""Faults a local run can be given on purpose: ``--inject stockout@0,quota@1,hang@5s,reclaim@4s``.

The local backend already injects preemptions that Vertex survives on its own (``--preempt-after``:
SIGTERM, then a restart of the same job). These are the faults that end an attempt, so that the
launcher's fallbacks, retry budgets and hang detection can be tried on one machine, each as Vertex
shows it:

* ``stockout@N``: attempt N (0 = the first launch) finds no free machines: it ends FAILED at
  once, never running, with Vertex's words for a regional stockout ("Resources are insufficient
  in region: R", openreview/openreview-expertise#401).
* ``quota@N``: attempt N is refused at create over a quota limit: FAILED, nothing runs, class
  ``quota``, in the words of Vertex's 429 ("The following quota metrics exceed quota limits: …",
  GoogleCloudPlatform/stable-diffusion-on-gcp#12).
* ``hang@DURATION``: the next attempt that runs freezes DURATION after it starts (every replica
  gets SIGSTOP: alive, silent, its history no longer growing), as a job stuck in a collective
  does; the guard's hang detection has to stop it.
* ``reclaim@DURATION``: the next attempt that runs loses its (Spot) machines DURATION after it
  starts and ends FAILED as a reclaim Vertex did not restart (class ``preemption``): the
  launcher relaunches it from the checkpoint.

Attempt numbers count every launch of one ``train`` (fallbacks and retries alike); ``hang`` and
``reclaim`` are used up in the order given, one per attempt that runs. The same name may appear
more than once (``hang@5s,hang@5s``: two attempts in a row hang).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from trainguard.durations import parse_duration
from trainguard.errors import ConfigError

if TYPE_CHECKING:
    from trainguard.spec import JobSpec

__all__ = [
    "Fault",
    "InjectionPlan",
    "parse_injections",
    "refusal_error",
    "reclaim_error",
    "AT_CREATE",
    "WHILE_RUNNING",
]

AT_CREATE = ("stockout", "quota")  # take an attempt number
WHILE_RUNNING = ("hang", "reclaim")  # take a duration after the attempt starts
_ITEM = re.compile(r"([a-z]+)@(\S+)")
_USAGE = (
    "use KIND@WHEN items separated by commas: stockout@N and quota@N (N: the attempt, 0 = the "
    "first launch), hang@DURATION and reclaim@DURATION (after the attempt starts), e.g. "
    "--inject stockout@0,hang@5s"
)


@dataclass(frozen=True)
class Fault:
    """One injected fault.

    Attributes:
        kind: ``stockout``, ``quota``, ``hang`` or ``reclaim``.
        attempt: the attempt it hits (``stockout``/``quota``), -1 for the others.
        after_s: seconds after the attempt starts (``hang``/``reclaim``), 0 for the others.
    """

    kind: str
    attempt: int = -1
    after_s: float = 0.0

    def label(self) -> str:
        return f"{self.kind}@{self.attempt}" if self.kind in AT_CREATE else f"{self.kind}@{self.after_s:g}s"


def parse_injections(text: str | None, option: str = "--inject") -> tuple[Fault, ...]:
    """``stockout@0,hang@5s`` → the faults, in order ('' → none).

    Raises:
        ConfigError: an unknown kind, a missing or malformed ``@WHEN``, or one attempt given two
            faults at create.
    """
    faults: list[Fault] = []
    seen_at: dict[int, str] = {}
    for raw in (p.strip() for p in (text or "").split(",")):
        if not raw:
            continue
        m = _ITEM.fullmatch(raw.lower())
        if not m or m[1] not in AT_CREATE + WHILE_RUNNING:
            raise ConfigError(f"{option} {raw[:60]!r}: {_USAGE}")
        kind, when = m[1], m[2]
        if kind in AT_CREATE:
            if not when.isdigit():
                raise ConfigError(
                    f"{option} {raw!r}: {kind} takes the attempt it refuses (0 = the first launch), "
                    f"e.g. {kind}@0"
                )
            attempt = int(when)
            if attempt in seen_at:
                raise ConfigError(
                    f"{option}: attempt {attempt} is given both {seen_at[attempt]} and {kind}; "
                    "an attempt is refused once"
                )
            seen_at[attempt] = kind
            faults.append(Fault(kind, attempt=attempt))
        else:
            after = parse_duration(when, f"{option} {kind}")
            faults.append(Fault(kind, after_s=after))
    return tuple(faults)


@dataclass
class InjectionPlan:
    """The faults of one ``train``, used up as its attempts launch (shared by every attempt's
    backend: the plan, not the backend, counts the attempts).

    Attributes:
        faults: what :func:`parse_injections` returned.
        launches: attempts launched so far.
    """

    faults: tuple[Fault, ...] = ()
    launches: int = 0
    _running: list[Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._running = [f for f in self.faults if f.kind in WHILE_RUNNING]

    def __bool__(self) -> bool:
        return bool(self.faults)

    def launch(self) -> tuple[Fault | None, Fault | None]:
        """Called once per attempt: (the fault refusing it at create, or None; the fault that hits
        it while it runs, or None). A refused attempt uses up no running fault."""
        with self._lock:
            n = self.launches
            self.launches += 1
            refused = next((f for f in self.faults if f.kind in AT_CREATE and f.attempt == n), None)
            if refused is not None or not self._running:
                return refused, None
            return None, self._running.pop(0)


def refusal_error(fault: Fault, spec: JobSpec) -> str:
    """How Vertex words the end of an attempt ``fault`` refuses at create (``stockout``, ``quota``)."""
    if fault.kind == "stockout":
        # Word for word what Vertex AI training said when a region had no machines of the shape
        # (openreview/openreview-expertise#401, after its own retries over the region's zones).
        return f"Resources are insufficient in region: {spec.region} (injected: {fault.label()})"
    from trainguard.preflight.quota import demands

    metrics = [d.metric for d in demands(spec)[0]] or ["aiplatform.googleapis.com/custom_model_training_cpus"]
    # The body of Vertex's 429 over a limit (GoogleCloudPlatform/stable-diffusion-on-gcp#12), in
    # the sentence the Vertex backend puts around it.
    return (
        f"Vertex AI refused to create the job: it is over a quota limit in {spec.region} (429 "
        f"RESOURCE_EXHAUSTED: The following quota metrics exceed quota limits: {', '.join(metrics)}) "
        f"(injected: {fault.label()})"
    )


def reclaim_error(fault: Fault, ran_s: float) -> str:
    """The end of an attempt whose machines an injected ``reclaim`` took away."""
    return (
        f"the job's Spot VMs were preempted after {ran_s:.0f} s and the job was not restarted: "
        f"Vertex reports such a reclaim as a STOCKOUT (injected: {fault.label()})"
    )
