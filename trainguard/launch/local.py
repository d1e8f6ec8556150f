"""The local backend: runs each worker pool's command on this machine with Vertex's environment.

Each replica is a process in its own process group, with ``AIP_MODEL_DIR``, ``AIP_CHECKPOINT_DIR``,
``AIP_TENSORBOARD_LOG_DIR``, ``CLUSTER_SPEC``, ``TF_CONFIG``, ``MASTER_ADDR``/``MASTER_PORT``,
``WORLD_SIZE``, ``RANK`` and ``TRAINGUARD_HISTORY`` set, so code written for Vertex runs unchanged
(multi-replica jobs talk over loopback). ``python``/``python3`` as the command means this
interpreter, since the image is not used here.

Preemption injection (``preempt_after``) sends SIGTERM to every worker, then SIGKILL after a grace
period, as a Spot reclaim does, and restarts the job; failure messages follow Vertex's wording
("The replica workerpool0-0 exited with a non-zero status of 1") so triage reads both alike.
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
from trainguard.launch.base import TrainResult
from trainguard.runtime.env import HISTORY_ENV, HISTORY_FILENAME
from trainguard.spec import JobSpec, Pool

__all__ = ["LocalBackend", "resolve_command", "contract_env", "parse_durations"]

_TF_TASK = {0: "chief", 1: "worker", 2: "ps", 3: "evaluator"}
_PYTHON = {"python", "python3", f"python{sys.version_info.major}.{sys.version_info.minor}"}


def parse_durations(text: str) -> list[float]:
    """Parses ``20s,1m,90`` into seconds (for ``--preempt-after``).

    Raises:
        ConfigError: a part is not a duration.
    """
    out = []
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)?", part)
        if not m:
            raise ConfigError(f"--preempt-after: {part!r} is not a duration such as 20s or 1.5m")
        scale = {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600}[m.group(2)]
        out.append(float(m.group(1)) * scale)
    return sorted(out)


def resolve_command(pool: Pool) -> list[str]:
    """The argv the local backend runs for ``pool``.

    Raises:
        ConfigError: the pool has no ``command`` (the image's entrypoint is not available here).
    """
    if not pool.command:
        raise ConfigError(
            f"workerPoolSpecs[{pool.index}].containerSpec.command is empty: the local backend "
            "runs the command on this machine and cannot use the image's entrypoint; set "
            "command (for example [python, -m, trainer.task])")
    argv = [*pool.command, *pool.args]
    if argv[0] in _PYTHON:
        argv[0] = sys.executable
    return argv


class _Cancelled(BaseException):
    """Raised in the launcher's main thread when it receives SIGTERM (the pipeline was cancelled)."""


def _die_with_parent() -> None:
    """In the child before exec: receive SIGKILL when the launcher dies, even by SIGKILL (Linux)."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def contract_env(spec: JobSpec, base: str, pool: Pool, replica: int, rank: int, world_size: int,
                 ports: Mapping[tuple[int, int], int], job_id: str) -> dict[str, str]:
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
        "CLUSTER_SPEC": json.dumps({
            "cluster": cluster,
            "environment": "cloud",
            "task": {"type": f"workerpool{pool.index}", "index": replica, "trial": ""},
            "job": spec.to_dict(),
        }),
        "TF_CONFIG": json.dumps({
            "cluster": tf_cluster,
            "task": {"type": _TF_TASK.get(pool.index, f"workerpool{pool.index}"),
                     "index": replica},
            "environment": "cloud",
        }),
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
            return 127
        return self.proc.poll() if self.proc is not None else None


@dataclass
class LocalBackend:
    """Runs a JobSpec on this machine.

    Attributes:
        output_dir: the base output directory when the spec sets no ``baseOutputDirectory``.
        preempt_after: seconds after (re)start at which to preempt the job, one entry each.
        preempt_on: ``(regex, delay_s)`` pairs, used in order, one each: preempt ``delay_s``
            after a worker prints a line matching ``regex`` (deterministic resilience tests).
        grace_s: SIGTERM → SIGKILL grace period of a preemption (Spot gives 30 s).
        hard_kill: preempt with SIGKILL at once (a VM that vanishes), not SIGTERM first.
        max_restarts: restarts allowed after crashes when ``restartJobOnWorkerRestart`` is set.
        stream: where worker output goes (prefixed with the replica name); None for silence.
        extra_env: added to every worker's environment.
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

    def base_dir(self, spec: JobSpec) -> str:
        """Where outputs go: the spec's ``baseOutputDirectory`` or ``output_dir``."""
        base = spec.base_output_dir or self.output_dir
        if not base:
            raise ConfigError("the local backend needs an output directory: set "
                              "baseOutputDirectory.outputUriPrefix in the spec or --output-dir")
        return base.rstrip("/")

    def _workers(self, spec: JobSpec, base: str, job_id: str) -> list[_Worker]:
        pools = spec.pools
        world = sum(p.replica_count for p in pools)
        ports = {(p.index, r): _free_port() for p in pools for r in range(p.replica_count)}
        workers, rank = [], 0
        for pool in pools:
            argv = resolve_command(pool)
            for replica in range(pool.replica_count):
                env = {**os.environ, **self.extra_env,
                       **contract_env(spec, base, pool, replica, rank, world, ports, job_id)}
                workers.append(_Worker(f"workerpool{pool.index}-{replica}", argv, env))
                rank += 1
        return workers

    def run(self, spec: JobSpec) -> TrainResult:
        """Runs the job to a terminal state and returns the result (never raises on job failure).

        Raises:
            ConfigError: the spec cannot run locally (no command, no output directory).
        """
        base = self.base_dir(spec)
        job_id = f"local-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        if not base.startswith("gs://"):
            try:
                for sub in ("model", "checkpoints", "logs"):
                    Path(base, sub).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create the output directory {base}: "
                                  f"{exc.strerror or exc}; choose a writable --output-dir") from None
        tail: collections.deque[str] = collections.deque(maxlen=self.tail_lines)
        lock = threading.Lock()
        started = time.monotonic()
        restarts, state, error = 0, "RUNNING", ""
        exit_codes: dict[str, int] = {}
        preemptions = list(self.preempt_after)
        self._triggers = [(re.compile(rx), float(delay)) for rx, delay in self.preempt_on]
        self._triggered_at: float | None = None
        restart_on_crash = spec.job_spec.scheduling.restart_job_on_worker_restart
        workers = self._workers(spec, base, job_id)
        self._say(f"[trainguard] local job {job_id}: {len(workers)} replica(s), outputs in {base}")
        previous = None
        if threading.current_thread() is threading.main_thread():
            # A cancelled pipeline task gets SIGTERM: stop the workers instead of orphaning them.
            previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        try:
            attempt_start = time.monotonic()
            self._start_all(workers, tail, lock)
            while True:
                time.sleep(0.05)
                timed = preemptions and time.monotonic() - attempt_start >= preemptions[0]
                with lock:
                    matched = (self._triggered_at is not None
                               and time.monotonic() >= self._triggered_at)
                    if matched:
                        self._triggered_at = None
                if timed or matched:
                    if timed:
                        preemptions.pop(0)
                    if self.hard_kill:
                        self._say("[trainguard] killing the job (SIGKILL), as a lost VM would")
                    else:
                        self._say(f"[trainguard] preempting the job (SIGTERM, SIGKILL after "
                                  f"{self.grace_s:g} s), as a Spot reclaim would")
                    self._stop_all(workers, self.grace_s, preempt=True, hard=self.hard_kill)
                    restarts += 1
                    attempt_start = time.monotonic()
                    self._start_all(workers, tail, lock)
                    continue
                codes = {w.name: w.poll() for w in workers}
                failed = {n: c for n, c in codes.items() if c not in (None, 0)}
                if failed:
                    name, code = next(iter(failed.items()))
                    status = 128 - code if code < 0 else code
                    exit_codes = {n: (128 - c if c is not None and c < 0 else c)
                                  for n, c in codes.items() if c is not None}
                    if restart_on_crash and restarts < self.max_restarts:
                        self._say(f"[trainguard] {name} exited with {status}; restarting the job "
                                  "(restartJobOnWorkerRestart)")
                        self._stop_all(workers, self.grace_s)
                        restarts += 1
                        attempt_start = time.monotonic()
                        self._start_all(workers, tail, lock)
                        continue
                    self._stop_all(workers, self.grace_s)
                    state = "FAILED"
                    error = f"The replica {name} exited with a non-zero status of {status}."
                    break
                if all(c == 0 for c in codes.values()):
                    exit_codes = dict.fromkeys(codes, 0)
                    state = "SUCCEEDED"
                    break
        except (KeyboardInterrupt, _Cancelled):
            self._say("[trainguard] cancelled: stopping the workers")
            self._stop_all(workers, self.grace_s)
            state, error = "CANCELLED", "The job was cancelled."
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
            self._stop_all(workers, 0.5)
            for w in workers:
                if w.pump is not None:
                    w.pump.join(timeout=5)
        return TrainResult(
            state=state, job_name=f"local/{job_id}", base_output_dir=base,
            model_dir=f"{base}/model/", checkpoint_dir=f"{base}/checkpoints/",
            history_path=f"{base}/{HISTORY_FILENAME}", error=error, log_tail="\n".join(tail),
            restarts=restarts, duration_s=round(time.monotonic() - started, 3),
            exit_codes=exit_codes)

    # -- process handling --

    @staticmethod
    def _on_sigterm(signum, frame) -> None:
        # Once is enough: a second SIGTERM must not interrupt the orderly stop it started.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise _Cancelled()

    def _say(self, line: str) -> None:
        if self.stream is not None:
            print(line, file=self.stream, flush=True)

    def _start_all(self, workers: list[_Worker], tail, lock) -> None:
        for w in workers:
            w.preempted, w.launch_error, w.proc = False, "", None
            try:
                w.proc = subprocess.Popen(
                    w.argv, env=w.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True, bufsize=1, text=True,
                    errors="replace", preexec_fn=_die_with_parent)
            except OSError as exc:
                # What a container runtime reports for a missing entrypoint; exit status 127.
                w.launch_error = (f'exec: "{w.argv[0]}": {exc.strerror or exc}: executable file '
                                  "not found in $PATH")
                with lock:
                    tail.append(f"[{w.name}] {w.launch_error}")
                self._say(f"[{w.name}] {w.launch_error}")
                continue
            w.pump = threading.Thread(target=self._pump, args=(w, tail, lock), daemon=True)
            w.pump.start()

    def _pump(self, w: _Worker, tail, lock) -> None:
        assert w.proc is not None and w.proc.stdout is not None
        for line in w.proc.stdout:
            line = line.rstrip("\n")
            with lock:
                tail.append(f"[{w.name}] {line}")
                if self.stream is not None:
                    print(f"[{w.name}] {line}", file=self.stream, flush=True)
                if (self._triggers and self._triggered_at is None
                        and self._triggers[0][0].search(line)):
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

    def _stop_all(self, workers: list[_Worker], grace_s: float, preempt: bool = False,
                  hard: bool = False) -> None:
        for w in workers:
            w.preempted = preempt
            self._signal(w, signal.SIGKILL if hard else signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for w in workers:
            if w.proc is None:
                continue
            try:
                w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._signal(w, signal.SIGKILL)
                w.proc.wait()
        for w in workers:
            if w.pump is not None:
                w.pump.join(timeout=5)
