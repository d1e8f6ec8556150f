"""The Vertex AI backend: create a CustomJob from a JobSpec, wait for it, cancel it when told to.

What it does, in order:

1. If ``gcp_resources_path`` already names a CustomJob (an earlier attempt of the same component
   was restarted), it resumes polling that job instead of creating a second one. A job named there
   that ended FAILED, CANCELLED or EXPIRED is relaunched (``relaunch_failed``): the new job reads
   the same ``AIP_CHECKPOINT_DIR`` and so continues from the last checkpoint.
2. Otherwise it creates the job with the ``aiplatform_v1`` JobServiceClient made by
   :func:`trainguard.gcp.job_client` and writes ``gcp_resources`` in Google Cloud Pipeline
   Components' format (:mod:`trainguard.launch.gcp_resources`), so the Vertex AI Pipelines UI
   links the job and cancels it with the run. A create that fails with a transient error is
   retried only after looking the job up by a one-time ``trainguard-launch-id`` label, so a create
   that did reach Vertex is never doubled. A create refused because the job is over a quota
   *limit* (429 "The following quota metrics exceed quota limits: …") is not retried: the run
   ends at once, named ``quota``, with the metric and the ``gcloud quotas preferences create``
   line (:func:`~trainguard.launch.vertex_api.quota_refusal`); a rate-limit 429 is retried.
3. It polls with backoff (``poll_initial_s`` growing by ``poll_factor`` to ``poll_max_s``, fast
   again after each state change), logging each state change with the console URL. Every call
   goes through :class:`~trainguard.launch.vertex_api.VertexCalls`: 429/5xx and connection errors
   are retried by :class:`trainguard.retry.RetryPolicy`; only after ``max_transient_s`` of nothing
   but such errors does it give up with :class:`~trainguard.errors.TransientError` (and leaves the
   job running, so a retry of the component resumes it).
4. Between polls it calls the in-flight watcher, if any (:mod:`trainguard.launch.watching`): after
   each ``get`` of a job that has not ended, at least every ``watch_interval_s`` once RUNNING. On a
   :class:`~trainguard.launch.base.Stop` it cancels the job and waits for CANCELLED.
5. On SIGTERM (what KFP sends when a run is cancelled) or KeyboardInterrupt it cancels the job
   and waits up to ``cancel_wait_s`` for CANCELLED. A job QUEUED for longer than its queue limit
   (:mod:`trainguard.launch.queueing`: 30 min by default, a FLEX_START job's ``maxWaitDuration``
   plus a margin, or ``max_queued_s``) is cancelled the same way and named ``quota`` (or
   ``capacity`` for Flex-start).
6. When the job ends FAILED (or EXPIRED, …) on its own, it reads the last lines of the job's logs
   from Cloud Logging (:mod:`trainguard.launch.vertex_logs`) into ``TrainResult.log_tail``, so
   triage sees the traceback and not only "exited with a non-zero status of 1". Logs it cannot
   read leave one line saying why, never an exception.

:meth:`VertexBackend.run` never raises because the job failed: the caller turns a non-SUCCEEDED
:class:`~trainguard.launch.base.TrainResult` into ``TrainingFailed``. Everything it prints or
returns of the job's own text is redacted and bounded (:mod:`trainguard.launch.echo`).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from trainguard.errors import ConfigError, TrainguardError, TransientError
from trainguard.gcp import endpoint, job_client
from trainguard.launch.base import RunningJob, TrainResult, Watcher
from trainguard.launch.echo import safe_error, safe_line
from trainguard.launch.gcp_resources import read_gcp_resources, write_gcp_resources
from trainguard.launch.queueing import QueueLimit, queue_limit
from trainguard.launch.sigterm import SigtermGuard, Terminated
from trainguard.launch.vertex_api import (
    FAILED_STATES,
    LAUNCH_ID_LABEL,
    TERMINAL_STATES,
    VertexCalls,
    console_url,
    quota_refusal,
    state_name,
    system_labels,
)
from trainguard.launch.vertex_logs import DEFAULT_TIMEOUT_S, MAX_TAIL_LINES, read_log_tail
from trainguard.launch.watching import WatcherSeam, stop_error
from trainguard.retry import Backoff, RetryPolicy, transient_types
from trainguard.runtime.env import HISTORY_ENV, HISTORY_FILENAME
from trainguard.runtime.save_cost import NOTICE_ENV, PREEMPTION_NOTICE_S
from trainguard.spec import JobSpec

__all__ = ["VertexBackend"]

_log = logging.getLogger(__name__)


@dataclass
class _Run:
    """One run's state, shared by the steps of :meth:`VertexBackend.run`."""

    spec: JobSpec
    base: str
    limit: QueueLimit
    seam: WatcherSeam
    calls: VertexCalls
    started: float
    name: str | None = None
    launch_id: str = ""
    job: Any = None
    cancel_why: str = ""  # set when the launcher decides to cancel the job
    error: str = ""  # the launcher's account of why the job ended ('' when it ended on its own)
    failure_class: str = ""
    stopped: dict = field(default_factory=dict)
    interrupted: int = 0  # the signal that stopped the launcher (2: Ctrl-C, 15: SIGTERM)
    running_since: float | None = None  # on the backend's clock, when the job was first RUNNING


@dataclass
class VertexBackend:
    """Runs a JobSpec as a Vertex AI CustomJob.

    Attributes:
        gcp_resources_path: where to write GCPC's ``gcp_resources`` JSON (the KFP component's
            ``gcp_resources`` output); a job already named there is resumed. None: not written.
        output_dir: ``gs://`` base output directory for a spec without ``baseOutputDirectory``.
        extra_env: added to every pool's ``containerSpec.env`` (a pool's own value wins).
            ``TRAINGUARD_HISTORY=<base>/history.jsonl`` is always added when there is a base;
            ``TRAINGUARD_PREEMPTION_NOTICE`` (seconds) for a Spot or Flex-start job, and for any
            other where ``extra_env`` or the pool's env sets it (the ``preemption_notice`` setting).
        max_queued_s: cancel a job still QUEUED after this many seconds; 0 never cancels it; None
            (the default) follows the strategy: 30 min, or a FLEX_START job's ``maxWaitDuration``
            plus 15 min (never, when that is 0). See :mod:`trainguard.launch.queueing`.
        poll_initial_s, poll_factor, poll_max_s: the polling backoff.
        watch_interval_s: with a watcher, poll a RUNNING job at least this often.
        max_transient_s: give up (TransientError) after this long with only transient errors.
        cancel_wait_s: how long to wait for CANCELLED after cancelling (KFP's grace period is
            30 s by default, so stay below it).
        request_timeout_s: the HTTP timeout of one API call.
        log_tail_lines: after a failure, read at most this many lines of the job's logs from
            Cloud Logging into ``log_tail`` (needs roles/logging.viewer); 0 reads none.
        logs_timeout_s: the time allowed for reading them, all of it.
        relaunch_failed: when ``gcp_resources`` names a job that ended FAILED/CANCELLED/EXPIRED,
            launch a new one (True) or report that job's outcome again (False, as GCPC does).
        resume_prior: read ``gcp_resources`` for an earlier attempt's job (True, the first
            launch of a task); False creates a job at once and only writes the file: the
            launcher's own next attempt (a fallback, a retry) after one that ended here.
        handle_signals: install the SIGTERM handler (main thread only).
        stream: where progress lines go (also logged); None for the log only.
        clock, sleep: injectable for tests (monotonic seconds; sleep(seconds)).
    """

    gcp_resources_path: str | None = None
    output_dir: str = ""
    extra_env: Mapping[str, str] = field(default_factory=dict)
    max_queued_s: float | None = None
    poll_initial_s: float = 2.0
    poll_factor: float = 1.5
    poll_max_s: float = 60.0
    watch_interval_s: float = 15.0
    max_transient_s: float = 15 * 60.0
    cancel_wait_s: float = 20.0
    request_timeout_s: float = 60.0
    log_tail_lines: int = MAX_TAIL_LINES
    logs_timeout_s: float = DEFAULT_TIMEOUT_S
    relaunch_failed: bool = True
    resume_prior: bool = True
    handle_signals: bool = True
    stream: TextIO | None = None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep

    def __post_init__(self) -> None:
        if self.poll_initial_s <= 0 or self.poll_max_s < self.poll_initial_s or self.poll_factor < 1:
            raise ConfigError("polling needs 0 < poll_initial_s <= poll_max_s and poll_factor >= 1")
        if self.max_queued_s is not None and not self.max_queued_s >= 0:
            raise ConfigError(f"max_queued_s must be ≥ 0 (0 waits forever) or None, got {self.max_queued_s}")
        if not self.watch_interval_s > 0:
            raise ConfigError(f"watch_interval_s must be positive, got {self.watch_interval_s}")
        if self.output_dir and not self.output_dir.startswith("gs://"):
            raise ConfigError(
                f"output_dir {self.output_dir!r}: a Vertex job writes to Cloud Storage; use gs://BUCKET/PATH"
            )

    # -- building the request --

    def base_dir(self, spec: JobSpec) -> str:
        """The job's base output directory ('' when neither the spec nor ``output_dir`` sets one)."""
        return (spec.base_output_dir or self.output_dir).rstrip("/")

    def history_path(self, spec: JobSpec) -> str:
        """Where the chief writes its history: its pool's own ``TRAINGUARD_HISTORY``, else
        ``extra_env``'s, else ``<base>/history.jsonl`` ('' without any)."""
        base = self.base_dir(spec)
        pools = spec.pools
        own = pools[0].env.get(HISTORY_ENV, "") if pools else ""
        return str(own or self.extra_env.get(HISTORY_ENV) or (f"{base}/{HISTORY_FILENAME}" if base else ""))

    def build_job(self, spec: JobSpec, launch_id: str = ""):
        """The ``aiplatform_v1.CustomJob`` to create: the spec plus env, labels and base dir."""
        from google.cloud import aiplatform_v1

        job = spec.custom_job()
        js = job.job_spec
        base = self.base_dir(spec)
        if base and not spec.base_output_dir:
            js.base_output_directory.output_uri_prefix = base
        added = {HISTORY_ENV: f"{base}/{HISTORY_FILENAME}"} if base else {}
        notice = PREEMPTION_NOTICE_S.get(spec.strategy)
        if notice is not None:  # the runtime says at the first save whether a SIGTERM save fits
            added[NOTICE_ENV] = f"{notice:g}"
        added.update({str(k): str(v) for k, v in self.extra_env.items()})
        for pool in js.worker_pool_specs:
            if not pool.machine_spec.machine_type:
                continue  # an empty placeholder pool stays empty
            target = (
                pool.python_package_spec
                if pool.python_package_spec.executor_image_uri
                else pool.container_spec
            )
            present = {e.name for e in target.env}
            for name, value in added.items():
                if name not in present:
                    target.env.append(aiplatform_v1.EnvVar(name=name, value=value))
        if "max_wait_duration" in js.scheduling and spec.strategy != "FLEX_START":
            # Vertex accepts maxWaitDuration only with FLEX_START; GCPC drops it likewise.
            self._say(
                f"ignoring scheduling.maxWaitDuration: it applies to FLEX_START only, not {spec.strategy}"
            )
            del js.scheduling.max_wait_duration
        labels = {**system_labels(), **dict(job.labels)}
        if launch_id:
            labels[LAUNCH_ID_LABEL] = launch_id
        job.labels = labels
        return job

    # -- running --

    def run(self, spec: JobSpec, watcher: Watcher | None = None) -> TrainResult:
        """Runs the job to a terminal state (or resumes it) and returns the result.

        Never raises because the job failed, was cancelled, stayed queued, was refused for quota
        at create (state FAILED, no job name, class ``quota``) or was stopped by the watcher:
        that is in ``TrainResult.state``, ``.error``, ``.failure_class`` and ``.stopped``.

        Args:
            spec: the job.
            watcher: the in-flight guard, called between polls (see
                :mod:`trainguard.launch.watching`); None runs unguarded.

        Raises:
            SpecError: Vertex AI rejected the CustomJob (400), with its message and field.
            ConfigError / UserError: credentials, project/region or permissions are wrong, or
                ``gcp_resources_path`` holds something that is not a CustomJob of this region.
            TransientError: Vertex AI stayed unreachable for ``max_transient_s``; the job (if
                created) keeps running and a retry resumes it from ``gcp_resources``.
            EndpointUnreachable: Vertex AI never answered at all (a wrong endpoint override).
        """
        started = self.clock()
        client = self._client(spec)
        r = _Run(
            spec,
            self.base_dir(spec),
            queue_limit(spec, self.max_queued_s),
            WatcherSeam(watcher, self._say),
            self._calls(spec),
            started,
        )
        if not r.base:
            self._say(
                "no baseOutputDirectory: Vertex will not set AIP_CHECKPOINT_DIR, so the "
                "job cannot checkpoint or resume"
            )
        with SigtermGuard(self.handle_signals) as guard:
            try:
                self._launch(client, r)
                self._watch(client, r)
                if r.cancel_why:
                    r.job = self._cancel(r, r.cancel_why, r.job)
            except _Refused as refused:  # no job was created: nothing to watch or cancel
                self._say(refused.error)
                r.failure_class = "quota"
                return self._result(r, "", "FAILED", refused.error)
            except (Terminated, KeyboardInterrupt) as exc:
                guard.fired = True
                early = self._interrupted(r, exc)
                if early is not None:
                    return early
        return self._finish(r)

    def _launch(self, client: Any, r: _Run) -> None:
        """Resumes the earlier attempt's job, or creates one (and names it in gcp_resources)."""
        r.name = self._prior_job(r.spec)  # known before any call, so a SIGTERM can cancel it
        job = self._existing(client, r, r.name) if r.name else None
        if job is not None:
            self._follow(r, job)
        if job is None:
            r.name = None
            r.launch_id = uuid.uuid4().hex
            job = self._create(client, r)
            r.name = job.name
            if self.gcp_resources_path:
                write_gcp_resources(self.gcp_resources_path, job.name)
        r.name, r.job = job.name, job
        if r.limit.seconds is None:
            self._say(f"a QUEUED job is never cancelled for waiting: {r.limit.source}")
        elif r.limit.failure_class == "capacity" or self.max_queued_s is not None:
            self._say(f"cancelling the job if it is still QUEUED after {r.limit.source}")

    def _follow(self, r: _Run, job: Any) -> None:
        """A resumed job writes where it was created to write: its outputs are read from there."""
        base = job.job_spec.base_output_directory.output_uri_prefix.rstrip("/")
        if base and base != r.base:
            self._say(f"{job.name} writes to {base} (set when it was created): reading its outputs there")
            r.base = base
            r.spec = r.spec.with_base_output_dir(base)

    def _interrupted(self, r: _Run, exc: BaseException) -> TrainResult | None:
        """Cancels the job after SIGTERM/KeyboardInterrupt; a result when there was none to cancel."""
        r.interrupted = signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT
        why = (
            "SIGTERM (the pipeline run was cancelled)" if isinstance(exc, Terminated) else "KeyboardInterrupt"
        )
        if r.name is None and r.launch_id:
            r.name = self._find_launch(r, within_s=self.cancel_wait_s)
        if r.name is None:
            self._say(f"{why} before a job was created: nothing to cancel")
            return self._result(r, "", "CANCELLED", f"cancelled by {why} before the job was created")
        r.job = self._cancel(r, why, r.job)
        ended = r.job is not None and state_name(r.job.state) in TERMINAL_STATES
        if r.stopped:  # the guard had already asked for the stop: that stays the reason
            r.error = (
                f"{r.error}; then {why} came"
                if ended
                else f"{r.error}; then {why} came before the job reached CANCELLED"
            )
            return None
        r.error = (
            f"cancelled by {why}" if ended else f"cancelled by {why}; the job had not reached CANCELLED yet"
        )
        r.failure_class = ""  # the user cancelled: not a failure class of the job
        return None

    def _finish(self, r: _Run) -> TrainResult:
        if r.job is None:  # cancelled, but the job could not be read since
            return self._result(r, r.name or "", "CANCELLING", r.error)
        job, state = r.job, state_name(r.job.state)
        error = r.error
        # Ended by the launcher (SIGTERM, the guard, queued too long): the error says why, and
        # a cancelled pipeline's grace period is no time to read logs.
        ended_on_its_own = not error
        message = safe_error(job.error.message) if job.error.message else ""
        if state == "SUCCEEDED" and not r.stopped:
            error = ""
        elif not error:
            error = message or f"the job ended {state} without an error message"
        elif message and message != "CANCELED":
            error = f"{error}; job error: {message}"
        log_tail = ""
        if state in FAILED_STATES and ended_on_its_own and self.log_tail_lines > 0:
            log_tail = self._log_tail(r.spec, job)
        return self._result(r, r.name or "", state, error, log_tail)

    def _result(self, r: _Run, name: str, state: str, error: str, log_tail: str = "") -> TrainResult:
        base = r.base
        return TrainResult(
            state=state,
            job_name=name,
            base_output_dir=base,
            model_dir=f"{base}/model/" if base else "",
            checkpoint_dir=f"{base}/checkpoints/" if base else "",
            history_path=self.history_path(r.spec),
            error=safe_error(error),
            log_tail=log_tail,
            console_url=console_url(r.spec.project, r.spec.region, name) if name else "",
            duration_s=round(self.clock() - r.started, 3),
            stopped=dict(r.stopped),
            failure_class=r.failure_class,
            interrupted=int(r.interrupted),
            running_s=round(self.clock() - r.running_since, 3) if r.running_since is not None else 0.0,
        )

    def _log_tail(self, spec: JobSpec, job: Any) -> str:
        """The last lines of the failed job's logs, or the line saying why they are missing."""
        job_id = job.name.rsplit("/", 1)[-1]
        tail = read_log_tail(
            spec.project,
            job_id,
            job.create_time or None,
            max_lines=self.log_tail_lines,
            timeout_s=self.logs_timeout_s,
        )
        if tail.note:
            self._say(tail.note.removeprefix("[trainguard] "))
        else:
            self._say(f"{job_id}: read the last {len(tail.lines)} lines of its logs from Cloud Logging")
        return tail.text

    def _client(self, spec: JobSpec):
        from google.auth import exceptions as auth_exc

        try:
            return job_client(spec.region)
        except auth_exc.DefaultCredentialsError as exc:
            raise ConfigError(
                f"no Google Cloud credentials for Vertex AI ({exc}); run gcloud auth "
                "application-default login"
            ) from None

    def _calls(self, spec: JobSpec) -> VertexCalls:
        # One policy for every call: the same backoff as polling, max_transient_s in all.
        policy = RetryPolicy(
            initial_s=self.poll_initial_s,
            factor=2.0,
            max_delay_s=self.poll_max_s,
            deadline_s=self.max_transient_s,
        )
        return VertexCalls(
            spec,
            policy,
            self._say,
            self.clock,
            self.sleep,
            where=endpoint("AIPLATFORM", spec.region).base_url,
        )

    def _say(self, line: str) -> None:
        line = safe_line(line)
        _log.info("%s", line)
        if self.stream is not None:
            print(f"[trainguard] {line}", file=self.stream, flush=True)

    def _get(
        self,
        client: Any,
        r: _Run,
        name: str,
        deadline: float | None = None,
        passthrough: tuple[type[BaseException], ...] = (),
    ):
        return r.calls(
            lambda: client.get_custom_job(name=name, timeout=self.request_timeout_s),
            "get",
            deadline=deadline,
            passthrough=passthrough,
        )

    def _prior_job(self, spec: JobSpec) -> str | None:
        """The job an earlier attempt wrote to ``gcp_resources`` (checked to be in this region)."""
        if not self.gcp_resources_path or not self.resume_prior:
            return None
        name = read_gcp_resources(self.gcp_resources_path)
        if name is not None and name.split("/")[3] != spec.region:
            raise ConfigError(
                f"gcp_resources file {self.gcp_resources_path!r} names {name}, in "
                f"{name.split('/')[3]}, but this job runs in {spec.region}; delete "
                "the file or fix --region"
            )
        return name

    def _existing(self, client: Any, r: _Run, name: str):
        """The earlier attempt's job ``name`` if it is to be resumed, else None."""
        from google.api_core import exceptions as gexc

        try:
            job = self._get(client, r, name, passthrough=(gexc.NotFound,))
        except gexc.NotFound:
            self._say(f"{name} from gcp_resources no longer exists; launching a new job")
            return None
        state = state_name(job.state)
        if state in FAILED_STATES and self.relaunch_failed:
            self._say(
                f"the earlier attempt's job {name} ended {state}; launching a new job "
                "(it resumes from the checkpoints in the same output directory)"
            )
            return None
        self._say(
            f"resuming {name} ({state}) from gcp_resources instead of creating a new job: "
            f"{console_url(r.spec.project, r.spec.region, name)}"
        )
        return job

    def _create(self, client: Any, r: _Run):
        """Creates the job; after a transient error, adopts the job if the create did land."""
        from google.api_core import exceptions as gexc

        spec = r.spec
        job = self.build_job(spec, r.launch_id)
        transient = transient_types()

        def attempt():
            try:
                return client.create_custom_job(
                    parent=spec.parent, custom_job=job, timeout=self.request_timeout_s
                )
            except transient as exc:
                # A 5xx or a lost answer may follow a create that landed: look before recreating.
                # (A 429 is a refusal before any work, and a connection that never opened sent
                # nothing, so there is nothing to look for.)
                found = (
                    None
                    if isinstance(exc, gexc.TooManyRequests) or _never_sent(exc)
                    else self._find_launch(r, client)
                )
                if found is None:
                    raise
                return self._get(client, r, found)

        try:
            # Only a quota refusal comes through as a 429: the policy retries rate limits.
            created = r.calls(attempt, "create", passthrough=(gexc.TooManyRequests,))
        except gexc.TooManyRequests as exc:
            raise _Refused(quota_refusal(exc, spec)) from None
        self._say(
            f"created {created.name} ({spec.display_name}, {spec.strategy}): "
            f"{console_url(spec.project, spec.region, created.name)}"
        )
        return created

    def _find_launch(self, r: _Run, client: Any = None, within_s: float | None = None) -> str | None:
        """The job this run created, found by its launch label (None if it was never created)."""
        client = client or self._client(r.spec)
        request = {"parent": r.spec.parent, "filter": f'labels.{LAUNCH_ID_LABEL}="{r.launch_id}"'}
        deadline = self.clock() + (self.max_transient_s if within_s is None else within_s)
        try:
            pager = r.calls(
                lambda: client.list_custom_jobs(request=request, timeout=self.request_timeout_s),
                "list",
                deadline=deadline,
            )
        except TrainguardError as exc:
            self._say(f"could not look the job up by its label: {exc}")
            return None
        found = list(pager.custom_jobs)  # the first page; the label is unique to this launch
        return found[0].name if found else None

    def _watch(self, client: Any, r: _Run) -> None:
        """Polls until the job ends, or until the launcher decides to cancel it (``cancel_why``)."""
        name = r.job.name
        url = console_url(r.spec.project, r.spec.region, name)
        backoff = Backoff(self.poll_initial_s, self.poll_factor, self.poll_max_s)
        last = ""
        queued_since: float | None = None
        started_running: float | None = None  # on self.clock, when the job was first RUNNING
        left_queue = False  # seen in a state other than QUEUED before it ended
        while True:
            state = state_name(r.job.state)
            now = self.clock()
            if state != last:
                self._say(f"{name.rsplit('/', 1)[-1]}: {last + ' → ' if last else ''}{state}  {url}")
                last = state
                backoff.reset()
            if state in TERMINAL_STATES:
                if (
                    not left_queue
                    and queued_since is not None
                    and state in FAILED_STATES
                    and r.limit.flex_wait_ran_out(now - queued_since, self.poll_max_s)
                ):
                    r.error = r.limit.ran_out(now - queued_since, r.spec.region)
                    r.failure_class = "capacity"
                return
            left_queue = left_queue or state != "QUEUED"
            queued_since = (queued_since if queued_since is not None else now) if state == "QUEUED" else None
            if state == "RUNNING" and started_running is None:
                started_running = now - _running_for(r.job)
                r.running_since = started_running
            if self._guard_stops(r, state, now, started_running):
                return
            delay = backoff()
            if state == "QUEUED" and queued_since is not None and r.limit.seconds is not None:
                waited = now - queued_since
                if waited >= r.limit.seconds:
                    r.error = r.limit.exceeded(waited, r.spec.region)
                    r.failure_class = r.limit.failure_class
                    r.cancel_why = "it " + r.error.split(":", 1)[0]
                    return
                delay = min(delay, r.limit.seconds - waited)
            if r.seam.active and state == "RUNNING":
                delay = min(delay, self.watch_interval_s)
            self.sleep(delay)
            r.job = self._get(client, r, name)

    def _guard_stops(self, r: _Run, state: str, now: float, started_running: float | None) -> bool:
        """Asks the watcher about the job; True (with the Stop recorded) when it must be stopped."""
        if not r.seam.active:
            return False
        elapsed = now - started_running if started_running is not None else 0.0
        stop = r.seam.poll(
            RunningJob(
                job_name=r.job.name,
                state=state,
                base_output_dir=r.base,
                history_path=self.history_path(r.spec),
                tensorboard_dir=f"{r.base}/logs/" if r.base else "",
                elapsed_s=round(elapsed, 3),
            )
        )
        if stop is None:
            return False
        r.stopped = stop.to_dict()
        r.failure_class = stop.failure_class
        r.error = stop_error(stop)
        r.cancel_why = f"the in-flight guard asked to stop it [{stop.failure_class}]"
        return True

    def _cancel(self, r: _Run, why: str, last: Any = None):
        """Cancels the job and waits up to ``cancel_wait_s`` for a final state; returns the job."""
        from google.api_core import exceptions as gexc

        name = r.name
        assert name is not None
        self._say(f"cancelling {name}: {why}")
        deadline = self.clock() + self.cancel_wait_s
        # A fresh client: an interrupted request may have left the old one's session mid-call.
        client = self._client(r.spec)
        job = last
        try:
            r.calls(
                lambda: client.cancel_custom_job(name=name, timeout=self.request_timeout_s),
                "cancel",
                deadline=deadline,
                passthrough=(gexc.BadRequest,),
            )
        except gexc.BadRequest as exc:  # 400 FAILED_PRECONDITION: it already ended; read how
            self._say(f"cancel: {exc.message}")
        except TrainguardError as exc:
            self._say(f"cancel failed: {exc}")
            return job
        backoff = Backoff(min(1.0, self.poll_initial_s), 1.5, 5.0)
        try:
            while True:
                with contextlib.suppress(TransientError):
                    job = self._get(client, r, name, deadline)
                if job is not None and state_name(job.state) in TERMINAL_STATES:
                    self._say(f"{name.rsplit('/', 1)[-1]}: {state_name(job.state)}")
                    return job
                remaining = deadline - self.clock()
                if remaining <= 0:
                    state = state_name(job.state) if job is not None else "unknown"
                    self._say(
                        f"{name} is still {state} after {self.cancel_wait_s:g} s; Vertex "
                        "finishes the cancellation on its own"
                    )
                    return job
                self.sleep(min(backoff(), remaining))
        except (KeyboardInterrupt, Terminated):
            # The cancel request is in: a SIGTERM now (KFP's grace period running out) only
            # ends the wait; Vertex finishes the cancellation on its own.
            self._say("stopped waiting for the cancellation")
            return job


class _Refused(Exception):
    """Vertex refused to create the job over a quota limit; ``error`` says what to do."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


def _running_for(job: Any) -> float:
    """How long Vertex says the job has been running (its ``start_time``), 0 when unknown: a
    resumed job's elapsed time then counts from its real start, not from this attempt's."""
    start = getattr(job, "start_time", None)
    if not start:
        return 0.0
    with contextlib.suppress(TypeError, ValueError, OverflowError):
        return max(0.0, time.time() - start.timestamp())
    return 0.0


def _never_sent(exc: BaseException) -> bool:
    """True when the request cannot have reached Vertex: the connection itself never opened
    (refused, no such host, a connect timeout), however the HTTP stack wrapped that."""
    from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

    seen: BaseException | None = exc
    for _ in range(8):  # requests wraps urllib3's MaxRetryError, which holds the reason
        if seen is None:
            return False
        if isinstance(seen, NewConnectionError | ConnectTimeoutError):
            return True
        inner = getattr(seen, "reason", None)
        if not isinstance(inner, BaseException) and seen.args and isinstance(seen.args[0], BaseException):
            inner = seen.args[0]
        seen = inner if isinstance(inner, BaseException) else (seen.__cause__ or seen.__context__)
    return False
