"""The local backend: runs each worker pool's command on this machine with Vertex's environment.

Each replica is a process in its own process group, with ``AIP_MODEL_DIR``, ``AIP_CHECKPOINT_DIR``,
``AIP_TENSORBOARD_LOG_DIR``, ``CLUSTER_SPEC``, ``TF_CONFIG``, ``MASTER_ADDR``/``MASTER_PORT``,
``WORLD_SIZE``, ``RANK`` and ``TRAINGUARD_HISTORY`` set, so code written for Vertex runs unchanged
(multi-replica jobs talk over loopback). ``python``/``python3`` as the command means this
interpreter, since the image is not used here.

Preemption injection (``preempt_after``) sends SIGTERM to every worker, then SIGKILL after a grace
period, as a Spot reclaim does, and restarts the job; the workers are told that grace period as
their preemption notice (``TRAINGUARD_PREEMPTION_NOTICE``, unless the pool's ``env`` or
``extra_env`` names one), so the runtime's word on whether a preemption save fits is about the
notice this backend really gives; failure messages follow Vertex's wording
("The replica workerpool0-0 exited with a non-zero status of 1") so triage reads both alike. The
faults that end an attempt (a stockout or a quota refusal at create, a hang, a reclaim Vertex does
not restart) are injected with an :class:`~trainguard.launch.inject.InjectionPlan`
(``--inject``), each in Vertex's words (:mod:`trainguard.launch.inject`).

While the workers run, the in-flight watcher (if any) is called about once a second
(:mod:`trainguard.launch.watching`); on a :class:`~trainguard.launch.base.Stop` every replica's
process group gets SIGTERM, then SIGKILL after ``grace_s``, and nothing of the job is left behind.
SIGTERM to the launcher (a cancelled pipeline) stops them the same way; SIGKILL to it ends them too,
on Linux (the parent-death signal, which :mod:`trainguard.launch.die_with_parent` sets before it
``exec``s the command). Worker output is echoed and kept in the log tail redacted and bounded
(:mod:`trainguard.launch.echo`).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from trainguard.errors import ConfigError
from trainguard.launch.base import RunningJob, TrainResult, Watcher
from trainguard.launch.die_with_parent import NOT_STARTED, not_started
from trainguard.launch.echo import safe_error, safe_line, safe_tail
from trainguard.launch.inject import Fault, InjectionPlan
from trainguard.launch.sigterm import SigtermGuard, Terminated
from trainguard.launch.watching import WatcherSeam, stop_error
from trainguard.runtime.env import HISTORY_ENV, HISTORY_FILENAME
from trainguard.runtime.save_cost import NOTICE_ENV
from trainguard.spec import JobSpec, Pool

__all__ = ["LocalBackend", "resolve_command", "contract_env", "MAX_LOCAL_REPLICAS", "check_replicas"]

_TF_TASK = {0: "chief", 1: "worker", 2: "ps", 3: "evaluator"}
# Every replica is a process here, and each one's CLUSTER_SPEC lists every other: past a few
# dozen a local run is a fork bomb (20,000 replicas took 2.9 GB and 37 s before a MemoryError).
MAX_LOCAL_REPLICAS = 64
_PYTHON = {"python", "python3", f"python{sys.version_info.major}.{sys.version_info.minor}"}


def resolve_command(pool: Pool) -> list[str]:
    """The argv the local backend runs for ``pool``.

    Raises:
        ConfigError: the pool has no ``command`` (the image's entrypoint is not available here).
    """
    if not pool.command:
        raise ConfigError(
            f"workerPoolSpecs[{pool.index}].containerSpec.command is empty: the local backend "
            "runs the command on this machine and cannot use the image's entrypoint; set "
            "command (for example [python, -m, trainer.task])"
        )
    argv = [*pool.command, *pool.args]
    if argv[0] in _PYTHON:
        argv[0] = sys.executable
    return argv


def check_replicas(spec: JobSpec) -> int:
    """The job's replica count, when this machine can run them all as processes.

    Raises:
        ConfigError: more than :data:`MAX_LOCAL_REPLICAS` replicas.
    """
    replicas = sum(p.replica_count for p in spec.pools)
    if replicas > MAX_LOCAL_REPLICAS:
        raise ConfigError(
            f"the spec asks for {replicas} replicas; the local backend runs each as a process on "
            f"this machine and takes at most {MAX_LOCAL_REPLICAS}: lower replicaCount for a local "
            "run (Vertex AI runs the full count)"
        )
    return replicas


_DIE_WITH_PARENT = str(Path(__file__).with_name("die_with_parent.py"))


def _launch_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` started so that it dies with this process, even when this one is SIGKILLed
    (Linux: through :mod:`trainguard.launch.die_with_parent`, which ``exec``s it in its place)."""
    if not sys.platform.startswith("linux") or not sys.executable:
        return list(argv)
    return [sys.executable, "-I", "-S", _DIE_WITH_PARENT, str(os.getpid()), *argv]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _thread_share(world: int) -> dict[str, str]:
    """``OMP_NUM_THREADS`` for replicas that share this machine's cores (as torchrun sets it), so
    that their intra-op thread pools do not spin against each other; the user's own setting (in
    this environment or the pool's ``env``) wins. Nothing for a single replica."""
    if world <= 1:
        return {}
    return {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // world))}


def contract_env(
    spec: JobSpec,
    base: str,
    pool: Pool,
    replica: int,
    rank: int,
    world_size: int,
    ports: Mapping[tuple[int, int], int],
    job_id: str,
) -> dict[str, str]:
    """Vertex's environment contract for one replica."""
    base = base.rstrip("/")
    cluster: dict[str, list[str]] = {}
    tf_cluster: dict[str, list[str]] = {}
    for p in spec.pools:
        addrs = [f"127.0.0.1:{ports[(p.index, r)]}" for r in range(p.replica_count)]
        cluster[f"workerpool{p.index}"] = addrs
        tf_cluster[_TF_TASK.get(p.index, f"workerpool{p.index}")] = addrs
    chief_port = ports[(spec.pools[0].index, 0)]
    env = {
        "AIP_MODEL_DIR": f"{base}/model/",
        "AIP_CHECKPOINT_DIR": f"{base}/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": f"{base}/logs/",
        HISTORY_ENV: f"{base}/{HISTORY_FILENAME}",
        "CLOUD_ML_JOB_ID": job_id,
        "CLUSTER_SPEC": json.dumps(
            {
                "cluster": cluster,
                "environment": "cloud",
                "task": {"type": f"workerpool{pool.index}", "index": replica, "trial": ""},
                "job": spec.to_dict(),
            }
        ),
        "TF_CONFIG": json.dumps(
            {
                "cluster": tf_cluster,
                "task": {"type": _TF_TASK.get(pool.index, f"workerpool{pool.index}"), "index": replica},
                "environment": "cloud",
            }
        ),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(chief_port),
        "WORLD_SIZE": str(world_size),
        "RANK": str(rank),
        "PYTHONUNBUFFERED": "1",
    }
    env.update(pool.env)
    return env


@dataclass
class _Worker:
    name: str
    argv: list[str]
    env: dict[str, str]
    proc: subprocess.Popen | None = None
    pump: threading.Thread | None = None
    preempted: bool = False
    launch_error: str = ""

    def poll(self) -> int | None:
        """The exit status; 127 when the command could not be started (as in a container)."""
        if self.launch_error:
            return NOT_STARTED
        return self.proc.poll() if self.proc is not None else None


def _status(code: int) -> int:
    """A Popen return code as a container reports it (-9 → 137)."""
    return 128 - code if code < 0 else code


@dataclass
class _LocalRun:
    """One run's state, shared by the steps of :meth:`LocalBackend.run`."""

    job_id: str
    base: str
    workers: list[_Worker]
    seam: WatcherSeam
    preemptions: list[float]
    restart_on_crash: bool
    started: float
    tail: collections.deque[str]
    lock: threading.Lock = field(default_factory=threading.Lock)
    attempt_start: float = 0.0
    last_watch: float = 0.0
    restarts: int = 0
    state: str = "RUNNING"
    error: str = ""
    exit_codes: dict[str, int] = field(default_factory=dict)
    stopped: dict = field(default_factory=dict)
    failure_class: str = ""
    interrupted: int = 0
    fault: Fault | None = None  # an injected hang or reclaim still to come

    @property
    def history_path(self) -> str:
        """What the chief was told to write (its pool's own ``TRAINGUARD_HISTORY`` wins)."""
        return self.workers[0].env.get(HISTORY_ENV) or f"{self.base}/{HISTORY_FILENAME}"


@dataclass
class LocalBackend:
    """Runs a JobSpec on this machine.

    Attributes:
        output_dir: the base output directory when the spec sets no ``baseOutputDirectory``.
        preempt_after: seconds after (re)start at which to preempt the job, one entry each.
        preempt_on: ``(regex, delay_s)`` pairs, used in order, one each: preempt ``delay_s``
            after a worker prints a line matching ``regex`` (deterministic resilience tests).
        grace_s: SIGTERM → SIGKILL grace period when stopping workers (preemption, the guard's
            stop, cancellation; Spot gives 30 s); the workers' ``TRAINGUARD_PREEMPTION_NOTICE``
            (none with ``hard_kill`` or a grace of 0: a preemption then gives no notice).
        hard_kill: preempt with SIGKILL at once (a VM that vanishes), not SIGTERM first.
        max_restarts: restarts allowed after crashes when ``restartJobOnWorkerRestart`` is set.
        stream: where worker output goes (prefixed with the replica name); None for silence.
        extra_env: added to every worker's environment.
        tail_lines: how many lines of output the result's ``log_tail`` keeps.
        watch_interval_s: how often the in-flight watcher is called while the workers run.
        inject: faults to inject (:mod:`trainguard.launch.inject`), shared by the attempts of
            one ``train``; None injects none.
    """

    output_dir: str = ""
    preempt_after: Sequence[float] = ()
    preempt_on: Sequence[tuple[str, float]] = ()
    grace_s: float = 10.0
    hard_kill: bool = False
    max_restarts: int = 3
    stream: TextIO | None = field(default=None)
    extra_env: Mapping[str, str] = field(default_factory=dict)
    tail_lines: int = 400
    watch_interval_s: float = 1.0
    inject: InjectionPlan | None = None

    def __post_init__(self) -> None:
        grace = self.grace_s
        if isinstance(grace, bool) or not isinstance(grace, int | float) or not 0 <= grace < float("inf"):
            raise ConfigError(
                f"grace_s={grace!r}: pass the seconds between SIGTERM and SIGKILL (>= 0), e.g. 10"
            )

    def _notice_env(self) -> dict[str, str]:
        """The preemption notice this backend gives its workers: the grace period before SIGKILL."""
        if self.hard_kill or self.grace_s <= 0:
            return {}
        return {NOTICE_ENV: f"{self.grace_s:g}"}

    def base_dir(self, spec: JobSpec) -> str:
        """Where outputs go: the spec's ``baseOutputDirectory`` or ``output_dir``."""
        base = spec.base_output_dir or self.output_dir
        if not base:
            raise ConfigError(
                "the local backend needs an output directory: set "
                "baseOutputDirectory.outputUriPrefix in the spec or --output-dir"
            )
        return base.rstrip("/")

    def _workers(self, spec: JobSpec, base: str, job_id: str) -> list[_Worker]:
        pools = spec.pools
        world = check_replicas(spec)
        ports = {(p.index, r): _free_port() for p in pools for r in range(p.replica_count)}
        workers, rank = [], 0
        shared = _thread_share(world)
        for pool in pools:
            argv = resolve_command(pool)
            for replica in range(pool.replica_count):
                env = {
                    **shared,
                    **os.environ,
                    **self._notice_env(),  # what a preemption here really gives, whatever the shell says
                    **self.extra_env,
                    **contract_env(spec, base, pool, replica, rank, world, ports, job_id),
                }
                workers.append(_Worker(f"workerpool{pool.index}-{replica}", argv, env))
                rank += 1
        return workers

    def run(self, spec: JobSpec, watcher: Watcher | None = None) -> TrainResult:
        """Runs the job to a terminal state and returns the result (never raises on job failure).

        Args:
            spec: the job.
            watcher: the in-flight guard, called about every ``watch_interval_s`` while the
                workers run (see :mod:`trainguard.launch.watching`); None runs unguarded.

        Raises:
            ConfigError: the spec cannot run locally (no command, no output directory).
        """
        base = self.base_dir(spec)
        job_id = f"local-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        if not base.startswith("gs://"):
            # Vertex's contract gives absolute URIs: a trainer that changes directory, or orbax
            # (which refuses relative paths), must find the same place.
            base = os.path.abspath(base)
            try:
                for sub in ("model", "checkpoints", "logs"):
                    Path(base, sub).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(
                    f"cannot create the output directory {base}: "
                    f"{exc.strerror or exc}; choose a writable --output-dir"
                ) from None
        refused, fault = self.inject.launch() if self.inject else (None, None)
        if refused is not None:
            return self._refused(spec, base, job_id, refused)
        now = time.monotonic()
        r = _LocalRun(
            job_id,
            base,
            self._workers(spec, base, job_id),
            WatcherSeam(watcher, self._say),
            list(self.preempt_after),
            bool(spec.job_spec.scheduling.restart_job_on_worker_restart),
            now,
            collections.deque(maxlen=self.tail_lines),
            attempt_start=now,
            last_watch=now,
            fault=fault,
        )
        self._triggers = [(re.compile(rx), float(delay)) for rx, delay in self.preempt_on]
        self._triggered_at: float | None = None
        self._say(f"local job {job_id}: {len(r.workers)} replica(s), outputs in {base}")
        # A cancelled pipeline task gets SIGTERM: stop the workers instead of orphaning them.
        with SigtermGuard() as guard:
            try:
                self._start_all(r)
                while r.state == "RUNNING":
                    time.sleep(0.05)
                    self._step(r)
            except (KeyboardInterrupt, Terminated) as exc:
                guard.fired = True
                r.interrupted = signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT
                why = "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C"
                self._say(f"{why}: stopping the workers (SIGTERM: each saves, then exits)")
                self._stop_all(r.workers, self.grace_s)
                r.state, r.error = "CANCELLED", f"The job was cancelled ({why})."
                r.stopped, r.failure_class = {}, ""
            finally:
                self._stop_all(r.workers, 0.5)
                for w in r.workers:
                    if w.pump is not None:
                        w.pump.join(timeout=5)
        return TrainResult(
            state=r.state,
            job_name=f"local/{job_id}",
            base_output_dir=base,
            model_dir=f"{base}/model/",
            checkpoint_dir=f"{base}/checkpoints/",
            history_path=r.history_path,
            error=safe_error(r.error),
            log_tail=safe_tail(r.tail),
            restarts=r.restarts,
            duration_s=round(time.monotonic() - r.started, 3),
            exit_codes=r.exit_codes,
            stopped=r.stopped,
            failure_class=r.failure_class,
            interrupted=int(r.interrupted),
            running_s=round(time.monotonic() - r.started, 3),
        )

    def _refused(self, spec: JobSpec, base: str, job_id: str, fault: Fault) -> TrainResult:
        """An attempt an injected stockout or quota refusal ends before anything runs."""
        from trainguard.launch.inject import refusal_error

        error = refusal_error(fault, spec)
        self._say(f"local job {job_id}: {error}")
        return TrainResult(
            state="FAILED",
            job_name="" if fault.kind == "quota" else f"local/{job_id}",  # a refused create names no job
            base_output_dir=base,
            model_dir=f"{base}/model/",
            checkpoint_dir=f"{base}/checkpoints/",
            history_path=f"{base}/{HISTORY_FILENAME}",
            error=safe_error(error),
            # The Vertex backend names a refusal at create for certain; a stockout is read from
            # its words by triage, as it is on Vertex.
            failure_class="quota" if fault.kind == "quota" else "",
        )

    # -- one turn of the loop --

    def _step(self, r: _LocalRun) -> None:
        """Preempts, restarts, finishes or asks the watcher, as the workers' state says."""
        if self._fault_due(r) or self._preemption_due(r):
            return
        codes = {w.name: w.poll() for w in r.workers}
        failed = {n: c for n, c in codes.items() if c not in (None, 0)}
        if failed:
            self._on_failure(r, codes, failed)
        elif all(c == 0 for c in codes.values()):
            r.exit_codes = dict.fromkeys(codes, 0)
            r.state = "SUCCEEDED"
        else:
            self._watch(r)

    def _fault_due(self, r: _LocalRun) -> bool:
        """Injects the attempt's hang or reclaim once its time has come; True when it ended the
        attempt (a reclaim)."""
        fault = r.fault
        if fault is None or time.monotonic() - r.started < fault.after_s:
            return False
        r.fault = None
        if fault.kind == "hang":
            self._say(
                f"injected {fault.label()}: freezing every replica (SIGSTOP): alive, silent, its "
                "history no longer growing, as a job stuck in a collective"
            )
            for w in r.workers:
                self._signal(w, signal.SIGSTOP)
            return False
        from trainguard.launch.inject import reclaim_error

        self._say(
            f"injected {fault.label()}: reclaiming the job's machines (SIGTERM, SIGKILL after "
            f"{self.grace_s:g} s), as Spot does, with no restart"
        )
        self._stop_all(r.workers, self.grace_s, preempt=True)
        r.exit_codes = {w.name: _status(c) for w in r.workers if (c := w.poll()) is not None}
        r.state, r.error = "FAILED", reclaim_error(fault, time.monotonic() - r.started)
        r.failure_class = "preemption"  # this backend took the machines away: it knows
        return True

    def _preemption_due(self, r: _LocalRun) -> bool:
        timed = bool(r.preemptions) and time.monotonic() - r.attempt_start >= r.preemptions[0]
        with r.lock:
            matched = self._triggered_at is not None and time.monotonic() >= self._triggered_at
            if matched:
                self._triggered_at = None
        if not (timed or matched):
            return False
        if timed:
            r.preemptions.pop(0)
        if self.hard_kill:
            self._say("killing the job (SIGKILL), as a lost VM would")
        else:
            self._say(
                f"preempting the job (SIGTERM, SIGKILL after {self.grace_s:g} s), as a Spot reclaim would"
            )
        self._stop_all(r.workers, self.grace_s, preempt=True, hard=self.hard_kill)
        self._restart(r)
        return True

    def _on_failure(
        self, r: _LocalRun, codes: Mapping[str, int | None], failed: Mapping[str, int | None]
    ) -> None:
        name, code = next(iter(failed.items()))
        status = _status(code or 0)
        r.exit_codes = {n: _status(c) for n, c in codes.items() if c is not None}
        if r.restart_on_crash and r.restarts < self.max_restarts:
            self._say(f"{name} exited with {status}; restarting the job (restartJobOnWorkerRestart)")
            self._stop_all(r.workers, self.grace_s)
            self._restart(r)
            return
        self._stop_all(r.workers, self.grace_s)
        r.state = "FAILED"
        r.error = f"The replica {name} exited with a non-zero status of {status}."

    def _restart(self, r: _LocalRun) -> None:
        r.restarts += 1
        r.attempt_start = time.monotonic()
        self._start_all(r)

    def _watch(self, r: _LocalRun) -> None:
        """Asks the watcher about the running job (every ``watch_interval_s``); stops it on a Stop."""
        now = time.monotonic()
        if not r.seam.active or now - r.last_watch < self.watch_interval_s:
            return
        r.last_watch = now
        stop = r.seam.poll(
            RunningJob(
                job_name=f"local/{r.job_id}",
                state="RUNNING",
                base_output_dir=r.base,
                history_path=r.history_path,
                tensorboard_dir=f"{r.base}/logs/",
                elapsed_s=round(now - r.started, 3),
            )
        )
        if stop is None:
            return
        self._say(
            f"the in-flight guard asked to stop the job [{stop.failure_class}]: stopping every "
            f"replica (SIGTERM, SIGKILL after {self.grace_s:g} s)"
        )
        self._stop_all(r.workers, self.grace_s)
        r.exit_codes = {w.name: _status(c) for w in r.workers if (c := w.poll()) is not None}
        r.state = "CANCELLED"
        r.error = stop_error(stop)
        r.stopped = stop.to_dict()
        r.failure_class = stop.failure_class

    # -- process handling --

    def _say(self, line: str) -> None:
        if self.stream is not None:
            print(f"[trainguard] {safe_line(line)}", file=self.stream, flush=True)

    def _start_all(self, r: _LocalRun) -> None:
        for w in r.workers:
            w.preempted, w.launch_error, w.proc = False, "", None
            try:
                w.proc = subprocess.Popen(
                    _launch_argv(w.argv),
                    env=w.env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    bufsize=1,
                    text=True,
                    errors="replace",
                )
            except OSError as exc:
                # Where the command is started directly (not Linux): exit status 127 and the
                # container runtime's words, as die_with_parent gives them on Linux.
                w.launch_error = not_started(w.argv[0], exc.strerror or str(exc))
                line = safe_line(f"[{w.name}] {w.launch_error}")
                with r.lock:
                    r.tail.append(line)
                if self.stream is not None:
                    print(line, file=self.stream, flush=True)
                continue
            w.pump = threading.Thread(target=self._pump, args=(w, r), daemon=True)
            w.pump.start()

    def _pump(self, w: _Worker, r: _LocalRun) -> None:
        assert w.proc is not None and w.proc.stdout is not None
        for raw in w.proc.stdout:
            raw = raw.rstrip("\n")
            line = safe_line(f"[{w.name}] {raw}")  # what is shown and kept: redacted, bounded
            with r.lock:
                r.tail.append(line)
                if self.stream is not None:
                    print(line, file=self.stream, flush=True)
                if self._triggers and self._triggered_at is None and self._triggers[0][0].search(raw):
                    _, delay = self._triggers.pop(0)
                    self._triggered_at = time.monotonic() + delay

    @staticmethod
    def _signal(w: _Worker, sig: int) -> None:
        # The whole process group, even when its leader has exited: what it started in the
        # background (sh -c "… &") would otherwise outlive the job and hold its output open.
        if w.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(w.proc.pid, sig)

    @staticmethod
    def _group_alive(w: _Worker) -> bool:
        if w.proc is None:
            return False
        try:
            os.killpg(w.proc.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def _stop_all(
        self, workers: list[_Worker], grace_s: float, preempt: bool = False, hard: bool = False
    ) -> None:
        """SIGTERM (or SIGKILL) to every replica's process group; SIGKILL to what is left of each
        group after ``grace_s``, leaders that ignored SIGTERM and stray children alike."""
        for w in workers:
            w.preempted = preempt
            self._signal(w, signal.SIGKILL if hard else signal.SIGTERM)
            # A replica frozen by an injected hang (SIGSTOP) only sees its SIGTERM once it runs
            # again: it then saves and exits as a stopped job does. A running one ignores it.
            self._signal(w, signal.SIGCONT)
        deadline = time.monotonic() + grace_s
        for w in workers:
            if w.proc is None:
                continue
            try:
                w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._signal(w, signal.SIGKILL)
                w.proc.wait()
        # The leaders are gone; a child they left in the group (a data loader, "cmd &") gets
        # the rest of the grace period, then SIGKILL: nothing of the job outlives it.
        while any(self._group_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.02)
        for w in workers:
            self._signal(w, signal.SIGKILL)
        for w in workers:
            if w.pump is not None:
                w.pump.join(timeout=5)
