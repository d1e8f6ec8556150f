"""The Vertex AI backend: create a CustomJob from a JobSpec, wait for it, cancel it when told to.

What it does, in order:

1. If ``gcp_resources_path`` already names a CustomJob (an earlier attempt of the same component
   was restarted), it resumes polling that job instead of creating a second one. A job named there
   that ended FAILED, CANCELLED or EXPIRED is relaunched (``relaunch_failed``): the new job reads
   the same ``AIP_CHECKPOINT_DIR`` and so continues from the last checkpoint.
2. Otherwise it creates the job with the ``aiplatform_v1`` JobServiceClient made by
   :func:`trainguard.gcp.job_client` and writes ``gcp_resources`` in Google Cloud Pipeline
   Components' format, so the Vertex AI Pipelines UI links the job and cancels it with the run.
   A create that fails with a transient error is retried only after looking the job up by a
   one-time ``trainguard-launch-id`` label, so a create that did reach Vertex is never doubled.
3. It polls with backoff (``poll_initial_s`` growing by ``poll_factor`` to ``poll_max_s``, fast
   again after each state change), logging each state change with the console URL. 503, 429,
   500, 504 and connection errors are retried with backoff; only after ``max_transient_s`` of
   nothing but such errors does it give up with :class:`~trainguard.errors.TransientError` (and
   leaves the job running, so a retry of the component resumes it).
4. On SIGTERM (what KFP sends when a run is cancelled) or KeyboardInterrupt it cancels the job
   and waits up to ``cancel_wait_s`` for CANCELLED. A job that stays QUEUED longer than
   ``max_queued_s`` (Vertex queues a job the project has no accelerator quota for; it does not
   fail it) is cancelled the same way and reported as a quota problem.
5. When the job ends FAILED (or EXPIRED, …) on its own, it reads the last lines of the job's logs
   from Cloud Logging (:mod:`trainguard.launch.vertex_logs`) into ``TrainResult.log_tail``, so
   triage sees the traceback and not only "exited with a non-zero status of 1". Logs it cannot
   read leave one line saying why, never an exception.

:meth:`VertexBackend.run` never raises because the job failed: the caller turns a non-SUCCEEDED
:class:`~trainguard.launch.base.TrainResult` into ``TrainingFailed``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar

from trainguard.errors import ConfigError, SpecError, TrainguardError, TransientError, UserError
from trainguard.gcp import job_client
from trainguard.launch.base import TrainResult
from trainguard.launch.vertex_logs import DEFAULT_TIMEOUT_S, MAX_TAIL_LINES, read_log_tail
from trainguard.runtime.env import HISTORY_ENV, HISTORY_FILENAME
from trainguard.spec import JobSpec

__all__ = [
    "VertexBackend",
    "TERMINAL_STATES",
    "LAUNCH_ID_LABEL",
    "SYSTEM_LABELS_ENV",
    "console_url",
    "resource_uri",
    "read_gcp_resources",
    "write_gcp_resources",
    "state_name",
]

_log = logging.getLogger(__name__)

TERMINAL_STATES = frozenset(
    {"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "PARTIALLY_SUCCEEDED", "PAUSED"})
# Ended, but not with the job's work done: a later attempt may relaunch it.
_FAILED_STATES = frozenset({"FAILED", "CANCELLED", "EXPIRED", "PARTIALLY_SUCCEEDED", "PAUSED"})
LAUNCH_ID_LABEL = "trainguard-launch-id"
# Vertex AI Pipelines puts the run's billing labels here; GCPC's launcher adds them to the job.
SYSTEM_LABELS_ENV = "VERTEX_AI_PIPELINES_RUN_LABELS"
_RESOURCE_TYPE = "CustomJob"
_URI_RE = re.compile(
    r"^https://(?P<host_region>[a-z0-9-]+)-aiplatform\.googleapis\.com/v1/"
    r"(?P<name>projects/[^/]+/locations/(?P<region>[^/]+)/customJobs/(?P<id>[^/:?#]+))$")
_T = TypeVar("_T")


# --- small pure helpers ------------------------------------------------------------------------


def state_name(state: Any) -> str:
    """``JobState.JOB_STATE_RUNNING`` (or 3) → ``RUNNING``."""
    from google.cloud import aiplatform_v1

    return aiplatform_v1.JobState(int(state)).name.removeprefix("JOB_STATE_")


def console_url(project: str, region: str, job_name: str) -> str:
    """The Cloud console page of a CustomJob (``job_name`` may be the full name or the ID)."""
    job_id = job_name.rsplit("/", 1)[-1]
    return (f"https://console.cloud.google.com/vertex-ai/locations/{region}/training/{job_id}/cpu"
            f"?project={project}")


def resource_uri(job_name: str) -> str:
    """The ``gcp_resources`` URI of a CustomJob: always the public regional endpoint, as GCPC."""
    region = job_name.split("/")[3]
    return f"https://{region}-aiplatform.googleapis.com/v1/{job_name}"


def write_gcp_resources(path: str | os.PathLike[str], job_name: str) -> None:
    """Writes GCPC's ``GcpResources`` JSON naming ``job_name`` (atomically: a restart never sees
    half a file)."""
    from google.protobuf import json_format
    from google_cloud_pipeline_components.proto import gcp_resources_pb2

    resources = gcp_resources_pb2.GcpResources()
    resource = resources.resources.add()
    resource.resource_type = _RESOURCE_TYPE
    resource.resource_uri = resource_uri(job_name)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json_format.MessageToJson(resources), encoding="utf-8")
    os.replace(tmp, target)


def read_gcp_resources(path: str | os.PathLike[str]) -> str | None:
    """The CustomJob name an earlier attempt wrote to ``path``; None if there is none yet.

    Raises:
        ConfigError: the file exists but is not GCPC's ``GcpResources`` JSON naming one CustomJob.
    """
    from google.protobuf import json_format
    from google_cloud_pipeline_components.proto import gcp_resources_pb2

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read gcp_resources file {str(p)!r}: {exc}") from None
    if not text.strip():  # KFP creates the output file empty before the first attempt
        return None
    try:
        resources = json_format.Parse(text, gcp_resources_pb2.GcpResources())
    except json_format.ParseError as exc:
        raise ConfigError(f"gcp_resources file {str(p)!r} is not GcpResources JSON ({exc}); "
                          "delete it to launch a new job") from None
    jobs = [r for r in resources.resources if r.resource_type == _RESOURCE_TYPE]
    if len(jobs) != 1:
        raise ConfigError(f"gcp_resources file {str(p)!r} names {len(jobs)} CustomJobs, expected "
                          "one; delete it to launch a new job")
    m = _URI_RE.match(jobs[0].resource_uri)
    if not m or m["host_region"] != m["region"]:
        raise ConfigError(f"gcp_resources file {str(p)!r}: {jobs[0].resource_uri!r} is not a "
                          "CustomJob URI such as https://us-central1-aiplatform.googleapis.com/v1/"
                          "projects/P/locations/us-central1/customJobs/ID")
    return m["name"]


def _system_labels() -> dict[str, str]:
    raw = os.environ.get(SYSTEM_LABELS_ENV, "")
    if not raw:
        return {}
    try:
        labels = json.loads(raw)
    except ValueError:
        _log.warning("ignoring %s: not JSON: %r", SYSTEM_LABELS_ENV, raw)
        return {}
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


class _Backoff:
    """Delays that start at ``initial`` and grow by ``factor`` up to ``cap``."""

    def __init__(self, initial: float, factor: float, cap: float) -> None:
        self.initial, self.factor, self.cap = initial, factor, cap
        self._next = initial

    def reset(self) -> None:
        self._next = self.initial

    def __call__(self) -> float:
        delay = self._next
        self._next = min(self.cap, self._next * self.factor)
        return delay


class _Terminated(BaseException):
    """Raised by the SIGTERM handler; a BaseException so that no library swallows it."""


class _SigtermGuard:
    """Turns the first SIGTERM into :class:`_Terminated` while a job is being watched.

    Only the main thread can install signal handlers; elsewhere this does nothing.
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.fired = False
        self._previous: Any = None
        self._installed = False

    def _handle(self, signum: int, frame: Any) -> None:
        if self.fired:  # a second SIGTERM must not interrupt the cancellation itself
            return
        self.fired = True
        raise _Terminated()

    def __enter__(self) -> _SigtermGuard:
        if self.enabled and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
            self._installed = True
        return self

    def __exit__(self, *_: object) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False


def _transient_types() -> tuple[type[BaseException], ...]:
    import requests
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc

    return (gexc.ServiceUnavailable, gexc.TooManyRequests, gexc.InternalServerError,
            gexc.GatewayTimeout, gexc.DeadlineExceeded, requests.ConnectionError,
            requests.Timeout, ConnectionError, TimeoutError, auth_exc.TransportError)


def _api_error(exc: Exception, doing: str, spec: JobSpec) -> TrainguardError:
    """A non-transient API error as the project's error, with what to do."""
    from google.api_core import exceptions as gexc

    msg = getattr(exc, "message", None) or str(exc)
    if isinstance(exc, gexc.BadRequest) and doing == "create":
        path = ""
        for detail in getattr(exc, "details", None) or []:
            violations = detail.get("fieldViolations") if isinstance(detail, dict) else None
            if violations:
                path = violations[0].get("field", "")
                break
        return SpecError(f"Vertex AI rejected the CustomJob: {msg}", path)
    if isinstance(exc, gexc.Unauthorized):
        return ConfigError(f"Vertex AI refused the credentials ({doing}): {msg}; run "
                           "gcloud auth application-default login")
    if isinstance(exc, gexc.Forbidden):
        return UserError(
            f"permission denied by Vertex AI ({doing} in {spec.parent}): {msg}. The caller needs "
            "aiplatform.customJobs.create/get/cancel (roles/aiplatform.user) and "
            "iam.serviceAccounts.actAs on the job's service account; run trainguard preflight")
    if isinstance(exc, gexc.NotFound) and doing == "create":
        return ConfigError(f"Vertex AI has no {spec.parent} ({msg}): check --project and "
                           "--region, and that the Vertex AI API is enabled")
    return TrainguardError(f"Vertex AI {doing} failed: {type(exc).__name__}: {msg}")


# --- the backend -------------------------------------------------------------------------------


@dataclass
class VertexBackend:
    """Runs a JobSpec as a Vertex AI CustomJob.

    Attributes:
        gcp_resources_path: where to write GCPC's ``gcp_resources`` JSON (the KFP component's
            ``gcp_resources`` output); a job already named there is resumed. None: not written.
        output_dir: ``gs://`` base output directory for a spec without ``baseOutputDirectory``.
        extra_env: added to every pool's ``containerSpec.env`` (a pool's own value wins).
            ``TRAINGUARD_HISTORY=<base>/history.jsonl`` is always added when there is a base.
        max_queued_s: cancel a job still QUEUED after this many seconds (likely no accelerator
            quota); None waits forever.
        poll_initial_s, poll_factor, poll_max_s: the polling backoff.
        max_transient_s: give up (TransientError) after this long with only transient errors.
        cancel_wait_s: how long to wait for CANCELLED after cancelling (KFP's grace period is
            30 s by default, so stay below it).
        request_timeout_s: the HTTP timeout of one API call.
        log_tail_lines: after a failure, read at most this many lines of the job's logs from
            Cloud Logging into ``log_tail`` (needs roles/logging.viewer); 0 reads none.
        logs_timeout_s: the time allowed for reading them, all of it.
        relaunch_failed: when ``gcp_resources`` names a job that ended FAILED/CANCELLED/EXPIRED,
            launch a new one (True) or report that job's outcome again (False, as GCPC does).
        handle_signals: install the SIGTERM handler (main thread only).
        stream: where progress lines go (also logged); None for the log only.
        clock, sleep: injectable for tests (monotonic seconds; sleep(seconds)).
    """

    gcp_resources_path: str | None = None
    output_dir: str = ""
    extra_env: Mapping[str, str] = field(default_factory=dict)
    max_queued_s: float | None = 30 * 60.0
    poll_initial_s: float = 2.0
    poll_factor: float = 1.5
    poll_max_s: float = 60.0
    max_transient_s: float = 15 * 60.0
    cancel_wait_s: float = 20.0
    request_timeout_s: float = 60.0
    log_tail_lines: int = MAX_TAIL_LINES
    logs_timeout_s: float = DEFAULT_TIMEOUT_S
    relaunch_failed: bool = True
    handle_signals: bool = True
    stream: TextIO | None = None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep

    def __post_init__(self) -> None:
        if self.poll_initial_s <= 0 or self.poll_max_s < self.poll_initial_s or self.poll_factor < 1:
            raise ConfigError("polling needs 0 < poll_initial_s <= poll_max_s and poll_factor >= 1")
        if self.max_queued_s is not None and self.max_queued_s <= 0:
            raise ConfigError(f"max_queued_s must be positive or None, got {self.max_queued_s}")
        if self.output_dir and not self.output_dir.startswith("gs://"):
            raise ConfigError(f"output_dir {self.output_dir!r}: a Vertex job writes to Cloud "
                              "Storage; use gs://BUCKET/PATH")

    # -- building the request --

    def base_dir(self, spec: JobSpec) -> str:
        """The job's base output directory ('' when neither the spec nor ``output_dir`` sets one)."""
        return (spec.base_output_dir or self.output_dir).rstrip("/")

    def build_job(self, spec: JobSpec, launch_id: str = ""):
        """The ``aiplatform_v1.CustomJob`` to create: the spec plus env, labels and base dir."""
        from google.cloud import aiplatform_v1

        job = spec.custom_job()
        js = job.job_spec
        base = self.base_dir(spec)
        if base and not spec.base_output_dir:
            js.base_output_directory.output_uri_prefix = base
        added = {HISTORY_ENV: f"{base}/{HISTORY_FILENAME}"} if base else {}
        added.update({str(k): str(v) for k, v in self.extra_env.items()})
        for pool in js.worker_pool_specs:
            if not pool.machine_spec.machine_type:
                continue  # an empty placeholder pool stays empty
            target = pool.python_package_spec if pool.python_package_spec.executor_image_uri \
                else pool.container_spec
            present = {e.name for e in target.env}
            for name, value in added.items():
                if name not in present:
                    target.env.append(aiplatform_v1.EnvVar(name=name, value=value))
        if js.scheduling.max_wait_duration and spec.strategy != "FLEX_START":
            # Vertex accepts maxWaitDuration only with FLEX_START; GCPC drops it likewise.
            self._say(f"ignoring scheduling.maxWaitDuration: it applies to FLEX_START only, "
                      f"not {spec.strategy}")
            del js.scheduling.max_wait_duration
        labels = {**_system_labels(), **dict(job.labels)}
        if launch_id:
            labels[LAUNCH_ID_LABEL] = launch_id
        job.labels = labels
        return job

    # -- running --

    def run(self, spec: JobSpec) -> TrainResult:
        """Runs the job to a terminal state (or resumes it) and returns the result.

        Never raises because the job failed, was cancelled or stayed queued: that is in
        ``TrainResult.state`` and ``.error``.

        Raises:
            SpecError: Vertex AI rejected the CustomJob (400), with its message and field.
            ConfigError / UserError: credentials, project/region or permissions are wrong, or
                ``gcp_resources_path`` holds something that is not a CustomJob of this region.
            TransientError: Vertex AI stayed unreachable for ``max_transient_s``; the job (if
                created) keeps running and a retry resumes it from ``gcp_resources``.
        """
        started = self.clock()
        client = self._client(spec)
        base = self.base_dir(spec)
        if not base:
            self._say("no baseOutputDirectory: Vertex will not set AIP_CHECKPOINT_DIR, so the "
                      "job cannot checkpoint or resume")
        name: str | None = None
        launch_id = ""
        job = None
        error = ""
        with _SigtermGuard(self.handle_signals) as guard:
            try:
                name = self._prior_job(spec)  # known before any call, so a SIGTERM can cancel it
                job = self._existing(client, spec, name) if name else None
                if job is None:
                    name = None
                    launch_id = uuid.uuid4().hex
                    job = self._create(client, spec, launch_id)
                    name = job.name
                    if self.gcp_resources_path:
                        write_gcp_resources(self.gcp_resources_path, name)
                name = job.name
                job, error = self._watch(client, spec, job)
                if error:  # queued too long: free the slot in the queue
                    job = self._cancel(spec, name, "it " + error.split(":", 1)[0], job)
            except (_Terminated, KeyboardInterrupt) as exc:
                why = "SIGTERM (the pipeline run was cancelled)" if isinstance(exc, _Terminated) \
                    else "KeyboardInterrupt"
                guard.fired = True
                if name is None and launch_id:
                    name = self._find_launch(spec, launch_id, within_s=self.cancel_wait_s)
                if name is None:
                    self._say(f"{why} before a job was created: nothing to cancel")
                    return self._result(spec, base, "", "CANCELLED",
                                        f"cancelled by {why} before the job was created", started)
                job = self._cancel(spec, name, why, job)
                if job is None or state_name(job.state) not in TERMINAL_STATES:
                    error = f"cancelled by {why}; the job had not reached CANCELLED yet"
                else:
                    error = f"cancelled by {why}"
        if job is None:  # cancelled, but the job could not be read since
            return self._result(spec, base, name or "", "CANCELLING", error, started)
        state = state_name(job.state)
        # Cancelled by us (SIGTERM, or queued too long): the error says why, and a cancelled
        # pipeline's grace period is no time to read logs.
        ended_on_its_own = not error
        if state == "SUCCEEDED":
            error = ""
        elif not error:
            error = job.error.message or f"the job ended {state} without an error message"
        elif job.error.message and job.error.message != "CANCELED":
            error = f"{error}; job error: {job.error.message}"
        log_tail = ""
        if state in _FAILED_STATES and ended_on_its_own and self.log_tail_lines > 0:
            log_tail = self._log_tail(spec, job)
        return self._result(spec, base, name or "", state, error, started, log_tail)

    def _result(self, spec: JobSpec, base: str, name: str, state: str, error: str,
                started: float, log_tail: str = "") -> TrainResult:
        return TrainResult(
            state=state, job_name=name, base_output_dir=base,
            model_dir=f"{base}/model/" if base else "",
            checkpoint_dir=f"{base}/checkpoints/" if base else "",
            history_path=f"{base}/{HISTORY_FILENAME}" if base else "",
            error=error, log_tail=log_tail,
            console_url=console_url(spec.project, spec.region, name) if name else "",
            duration_s=round(self.clock() - started, 3))

    def _log_tail(self, spec: JobSpec, job: Any) -> str:
        """The last lines of the failed job's logs, or the line saying why they are missing."""
        job_id = job.name.rsplit("/", 1)[-1]
        tail = read_log_tail(spec.project, job_id, job.create_time or None,
                             max_lines=self.log_tail_lines, timeout_s=self.logs_timeout_s)
        if tail.note:
            self._say(tail.note.removeprefix("[trainguard] "))
        else:
            self._say(f"{job_id}: read the last {len(tail.lines)} lines of its logs from Cloud "
                      "Logging")
        return tail.text

    def _client(self, spec: JobSpec):
        from google.auth import exceptions as auth_exc

        try:
            return job_client(spec.region)
        except auth_exc.DefaultCredentialsError as exc:
            raise ConfigError(f"no Google Cloud credentials for Vertex AI ({exc}); run gcloud auth "
                              "application-default login") from None

    def _say(self, line: str) -> None:
        _log.info("%s", line)
        if self.stream is not None:
            print(f"[trainguard] {line}", file=self.stream, flush=True)

    def _call(self, fn: Callable[[], _T], doing: str, spec: JobSpec, deadline: float | None = None,
              passthrough: tuple[type[BaseException], ...] = ()) -> _T:
        """``fn()``, retrying transient errors with backoff for up to ``max_transient_s``.

        Errors of the ``passthrough`` types are re-raised as they are; other API errors become the
        project's errors (see :func:`_api_error`).
        """
        transient = _transient_types()
        from google.api_core import exceptions as gexc

        backoff = _Backoff(self.poll_initial_s, 2.0, self.poll_max_s)
        first_failure: float | None = None
        while True:
            try:
                return fn()
            except passthrough:
                raise
            except transient as exc:
                now = self.clock()
                first_failure = now if first_failure is None else first_failure
                limit = first_failure + self.max_transient_s
                if deadline is not None:
                    limit = min(limit, deadline)
                delay = backoff()
                if now + delay > limit:
                    raise TransientError(
                        f"Vertex AI {doing} kept failing for {now - first_failure:.0f} s: "
                        f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}") from None
                self._say(f"{doing}: {type(exc).__name__} "
                          f"({getattr(exc, 'message', None) or exc}); retrying in {delay:g} s")
                self.sleep(delay)
            except gexc.GoogleAPICallError as exc:
                raise _api_error(exc, doing, spec) from None

    def _get(self, client: Any, name: str, spec: JobSpec, deadline: float | None = None):
        return self._call(lambda: client.get_custom_job(name=name, timeout=self.request_timeout_s),
                          "get", spec, deadline)

    def _prior_job(self, spec: JobSpec) -> str | None:
        """The job an earlier attempt wrote to ``gcp_resources`` (checked to be in this region)."""
        if not self.gcp_resources_path:
            return None
        name = read_gcp_resources(self.gcp_resources_path)
        if name is not None and name.split("/")[3] != spec.region:
            raise ConfigError(f"gcp_resources file {self.gcp_resources_path!r} names {name}, in "
                              f"{name.split('/')[3]}, but this job runs in {spec.region}; delete "
                              "the file or fix --region")
        return name

    def _existing(self, client: Any, spec: JobSpec, name: str):
        """The earlier attempt's job ``name`` if it is to be resumed, else None."""
        from google.api_core import exceptions as gexc

        try:
            job = self._call(lambda: client.get_custom_job(name=name, timeout=self.request_timeout_s),
                             "get", spec, passthrough=(gexc.NotFound,))
        except gexc.NotFound:
            self._say(f"{name} from gcp_resources no longer exists; launching a new job")
            return None
        state = state_name(job.state)
        if state in _FAILED_STATES and self.relaunch_failed:
            self._say(f"the earlier attempt's job {name} ended {state}; launching a new job "
                      "(it resumes from the checkpoints in the same output directory)")
            return None
        self._say(f"resuming {name} ({state}) from gcp_resources instead of creating a new job: "
                  f"{console_url(spec.project, spec.region, name)}")
        return job

    def _create(self, client: Any, spec: JobSpec, launch_id: str):
        """Creates the job; after a transient error, adopts the job if the create did land."""
        transient = _transient_types()
        from google.api_core import exceptions as gexc

        job = self.build_job(spec, launch_id)
        backoff = _Backoff(self.poll_initial_s, 2.0, self.poll_max_s)
        first_failure: float | None = None
        while True:
            try:
                created = client.create_custom_job(parent=spec.parent, custom_job=job,
                                                   timeout=self.request_timeout_s)
                break
            except transient as exc:
                # A 503 or a lost answer may follow a create that landed: look before recreating.
                # (A 429 is a refusal before any work, so there is nothing to look for.)
                found = None if isinstance(exc, gexc.TooManyRequests) else \
                    self._find_launch(spec, launch_id, client)
                if found is not None:
                    created = self._get(client, found, spec)
                    break
                now = self.clock()
                first_failure = now if first_failure is None else first_failure
                delay = backoff()
                if now + delay - first_failure > self.max_transient_s:
                    raise TransientError(
                        f"Vertex AI create kept failing for {now - first_failure:.0f} s: "
                        f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}") from None
                self._say(f"create: {type(exc).__name__} "
                          f"({getattr(exc, 'message', None) or exc}); retrying in {delay:g} s")
                self.sleep(delay)
            except gexc.GoogleAPICallError as exc:
                raise _api_error(exc, "create", spec) from None
        self._say(f"created {created.name} ({spec.display_name}, {spec.strategy}): "
                  f"{console_url(spec.project, spec.region, created.name)}")
        return created

    def _find_launch(self, spec: JobSpec, launch_id: str, client: Any = None,
                     within_s: float | None = None) -> str | None:
        """The job this run created, found by its launch label (None if it was never created)."""
        client = client or self._client(spec)
        request = {"parent": spec.parent, "filter": f'labels.{LAUNCH_ID_LABEL}="{launch_id}"'}
        deadline = self.clock() + (self.max_transient_s if within_s is None else within_s)
        try:
            pager = self._call(lambda: client.list_custom_jobs(
                request=request, timeout=self.request_timeout_s), "list", spec, deadline)
        except TrainguardError as exc:
            self._say(f"could not look the job up by its label: {exc}")
            return None
        found = list(pager.custom_jobs)  # the first page; the label is unique to this launch
        return found[0].name if found else None

    def _watch(self, client: Any, spec: JobSpec, job: Any) -> tuple[Any, str]:
        """Polls until the job ends; returns (job, '') or (job, why it must be cancelled)."""
        name = job.name
        url = console_url(spec.project, spec.region, name)
        backoff = _Backoff(self.poll_initial_s, self.poll_factor, self.poll_max_s)
        last = ""
        queued_since: float | None = None
        while True:
            state = state_name(job.state)
            if state != last:
                self._say(f"{name.rsplit('/', 1)[-1]}: {last + ' → ' if last else ''}{state}  {url}")
                last = state
                backoff.reset()
            if state in TERMINAL_STATES:
                return job, ""
            delay = backoff()
            now = self.clock()
            if state == "QUEUED" and self.max_queued_s is not None:
                queued_since = now if queued_since is None else queued_since
                waited = now - queued_since
                if waited >= self.max_queued_s:
                    return job, (f"stayed QUEUED for {waited:.0f} s: likely accelerator quota in "
                                 f"{spec.region}; run trainguard preflight")
                delay = min(delay, self.max_queued_s - waited)
            else:
                queued_since = None
            self.sleep(delay)
            job = self._get(client, name, spec)

    def _cancel(self, spec: JobSpec, name: str, why: str, last: Any = None):
        """Cancels ``name`` and waits up to ``cancel_wait_s`` for a final state; returns the job."""
        from google.api_core import exceptions as gexc

        self._say(f"cancelling {name}: {why}")
        deadline = self.clock() + self.cancel_wait_s
        # A fresh client: an interrupted request may have left the old one's session mid-call.
        client = self._client(spec)
        job = last
        try:
            self._call(lambda: client.cancel_custom_job(name=name, timeout=self.request_timeout_s),
                       "cancel", spec, deadline, passthrough=(gexc.BadRequest,))
        except gexc.BadRequest as exc:  # 400 FAILED_PRECONDITION: it already ended; read how
            self._say(f"cancel: {exc.message}")
        except TrainguardError as exc:
            self._say(f"cancel failed: {exc}")
            return job
        backoff = _Backoff(min(1.0, self.poll_initial_s), 1.5, 5.0)
        try:
            while True:
                with contextlib.suppress(TransientError):
                    job = self._get(client, name, spec, deadline)
                if job is not None and state_name(job.state) in TERMINAL_STATES:
                    self._say(f"{name.rsplit('/', 1)[-1]}: {state_name(job.state)}")
                    return job
                remaining = deadline - self.clock()
                if remaining <= 0:
                    state = state_name(job.state) if job is not None else "unknown"
                    self._say(f"{name} is still {state} after {self.cancel_wait_s:g} s; Vertex "
                              "finishes the cancellation on its own")
                    return job
                self.sleep(min(backoff(), remaining))
        except KeyboardInterrupt:
            self._say("stopped waiting for the cancellation")
            return job
