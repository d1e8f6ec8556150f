"""A protocol-faithful Vertex AI CustomJob server on loopback, for the real ``JobServiceClient``.

It speaks the REST surface the ``aiplatform_v1`` REST transport uses:

* ``POST /v1/projects/P/locations/L/customJobs`` — create (body: a CustomJob);
* ``GET  /v1/projects/P/locations/L/customJobs/ID`` — get;
* ``POST /v1/projects/P/locations/L/customJobs/ID:cancel`` — cancel (body ``{}``, answer ``{}``);
* ``GET  /v1/projects/P/locations/L/customJobs?pageSize&pageToken&filter`` — list;
* ``DELETE /v1/projects/P/locations/L/customJobs/ID`` — delete (answers an Operation).

Bodies are encoded with the real proto types, so what goes out is what Vertex sends: camelCase,
int64 as strings, RFC 3339 timestamps, and integer enums when the client asks for them with
``$alt=json;enum-encoding=int`` (enum names otherwise). Resource names carry the project *number*
(as Vertex's do) even when the request named the project ID. Errors have the real shape
``{"error": {"code", "message", "status", "details"}}``.

Each created job follows a :class:`Scenario`: a list of (state, GETs) steps and a final state. A job
advances one step per GET of that job, so tests that inject a fake sleep are deterministic and fast.
A Flex-start (``FLEX_START``) job made with :meth:`Scenario.waits_for_capacity` instead waits in
QUEUED by the server's :attr:`VertexJobsServer.clock` (share the test's fake clock): until capacity
comes, or until its own ``scheduling.maxWaitDuration`` runs out (default 24 h; ``0s`` waits forever),
as the Dynamic Workload Scheduler docs describe; then it moves on one step per GET.
A cancelled job goes CANCELLING → CANCELLED (``error: {code: 1, message: "CANCELED"}``).

Quota, as Vertex applies it (:meth:`VertexJobsServer.set_quota`, in every region or in one): a
create whose accelerators are over a metric's *limit* is refused with 429 RESOURCE_EXHAUSTED "The
following quota metrics exceed quota limits: …" (GoogleCloudPlatform/stable-diffusion-on-gcp#12,
google-deepmind/xmanager#29); one within the limit while other jobs hold the rest is accepted and
stays QUEUED until they end. Regions differ (:meth:`VertexJobsServer.in_region`,
:meth:`VertexJobsServer.script_in`): one region can stock out (:meth:`Scenario.stockout`) or hold a
job QUEUED while the next runs it, as a fallback needs.
A rate-limited call is a different 429 (``fail_next(status=429)``: "Quota exceeded for quota
metric 'Resource management (CRUD) requests' …", ErrorInfo ``RATE_LIMIT_EXCEEDED``,
GoogleCloudPlatform/vertex-ai-samples#1000). :meth:`VertexJobsServer.disable` turns the API off:
every call answers 403 ``SERVICE_DISABLED``. A 400 names fields as Vertex does,
``job_spec.worker_pool_specs[0].…`` in "List of found errors:\t1.Field: …; Message: …\t"
(prefect-archive/prefect-gcp#175). Faults are
injected with :meth:`VertexJobsServer.fail_next` (an error status for the next N matching requests)
and :meth:`VertexJobsServer.drop_next` (close the connection without answering). Every request is
recorded in :attr:`VertexJobsServer.requests`. :attr:`VertexJobsServer.on_running` is called on
each GET answered RUNNING, before the answer, so a test can write what the job "writes" meanwhile
(a history growing in the storage emulator).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from google.cloud import aiplatform_v1
from google.protobuf import json_format

from tests.servers.googleapi import disabled_body
from tests.servers.loopback import LoopbackServer, Request

__all__ = [
    "Scenario",
    "RecordedRequest",
    "Fault",
    "VertexJobsServer",
    "vertex_server",
    "STATUS_NAMES",
]

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_DEFAULT_MESSAGES = {
    400: "Request contains an invalid argument.",
    401: "Request is missing required authentication credential.",
    403: "Permission 'aiplatform.customJobs.create' denied on resource "
    "'//aiplatform.googleapis.com/projects/{project}/locations/{location}' (or it may not exist).",
    404: "The CustomJob does not exist.",
    409: "The resource already exists.",
    # A rate limit, word for word as GoogleCloudPlatform/vertex-ai-samples#1000 shows it.
    429: "Quota exceeded for quota metric 'Resource management (CRUD) requests' and limit "
    "'Resource management (CRUD) requests per minute per region' of service "
    "'aiplatform.googleapis.com' for consumer 'project_number:{number}'.",
    500: "Internal error encountered.",
    503: "The service is currently unavailable.",
    504: "The request timed out. Please try again.",
}
_TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "PARTIALLY_SUCCEEDED"}
_STATES = {s.name.removeprefix("JOB_STATE_"): s for s in aiplatform_v1.JobState}
_PATH = re.compile(
    r"^/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/customJobs"
    r"(?:/(?P<id>[^/:]+))?(?::(?P<verb>[a-zA-Z]+))?$"
)
_FOREVER = 10**9
FLEX_DEFAULT_WAIT_S = 24 * 3600.0  # Scheduling.max_wait_duration's documented default


@dataclass
class Scenario:
    """How a job moves: ``steps`` of (state, answers given in it), then ``final``.

    The create response is the first answer, each GET of the job the next one: with the default
    steps, create says QUEUED, GET 1 PENDING, GETs 2-3 RUNNING, GET 4 and later SUCCEEDED.

    ``final=None`` keeps the job in its last step forever (a quota-short job stuck in QUEUED).
    ``error_code``/``error_message`` are the job's ``error`` when it ends FAILED.

    With ``flex=True`` the job first waits in QUEUED for capacity by the server's clock:
    ``capacity_after_s`` after its creation (None: capacity never comes), then follows ``steps``.
    If its ``maxWaitDuration`` runs out first, it ends in ``expired_state`` (the docs say the wait
    ends, not in which state; None stands for a Vertex that never ends it).
    """

    steps: Sequence[tuple[str, int]] = (("QUEUED", 1), ("PENDING", 1), ("RUNNING", 2))
    final: str | None = "SUCCEEDED"
    error_message: str = ""
    error_code: int = 3
    cancelling_gets: int = 1
    flex: bool = False
    capacity_after_s: float | None = None
    expired_state: str | None = "FAILED"

    def __post_init__(self) -> None:
        for state, _ in self.steps:
            if state not in _STATES:
                raise ValueError(f"unknown job state {state!r}")
        if self.final is not None and self.final not in _STATES:
            raise ValueError(f"unknown job state {self.final!r}")

    @classmethod
    def succeeds(cls, queued: int = 1, pending: int = 1, running: int = 2) -> Scenario:
        """QUEUED → PENDING → RUNNING → SUCCEEDED, with that many GETs in each."""
        return cls((("QUEUED", queued), ("PENDING", pending), ("RUNNING", running)), "SUCCEEDED")

    @classmethod
    def fails(cls, message: str, code: int = 3, running: int = 2) -> Scenario:
        """Runs, then ends FAILED with ``error: {code, message}``."""
        return cls(
            (("QUEUED", 1), ("PENDING", 1), ("RUNNING", running)),
            "FAILED",
            error_message=message,
            error_code=code,
        )

    @classmethod
    def stuck_queued(cls) -> Scenario:
        """Stays QUEUED (what Vertex does with a job the project has no accelerator quota for)."""
        return cls((("QUEUED", _FOREVER),), None)

    @classmethod
    def waits_for_capacity(
        cls,
        capacity_after_s: float | None = None,
        running: int = 2,
        expired_state: str | None = "FAILED",
        error_message: str = "",
    ) -> Scenario:
        """A Flex-start job: QUEUED until capacity comes (by the server's clock), then PENDING →
        RUNNING → SUCCEEDED; ended in ``expired_state`` when its maxWaitDuration runs out first."""
        return cls(
            (("PENDING", 1), ("RUNNING", running)),
            "SUCCEEDED",
            flex=True,
            capacity_after_s=capacity_after_s,
            expired_state=expired_state,
            error_message=error_message,
        )

    @classmethod
    def stockout(cls, region: str, pending: int = 2) -> Scenario:
        """No machines of the job's shape in ``region``: QUEUED → PENDING → FAILED, never RUNNING.

        The message is word for word what Vertex AI training said when us-central1 had no N1 + T4
        machines (openreview/openreview-expertise#401: "the pipeline fails after internal
        retries"; "it already tried all available zones in us-central1"). The thread does not show
        the error's code; 8 (RESOURCE_EXHAUSTED) is our stand-in and nothing reads it.
        """
        return cls(
            (("QUEUED", 1), ("PENDING", pending)),
            "FAILED",
            error_message=f"Resources are insufficient in region: {region}",
            error_code=8,
        )

    @classmethod
    def spot_reclaimed(cls, running: int = 3) -> Scenario:
        """A Spot job that runs, then loses its VMs for good: RUNNING → FAILED with a STOCKOUT.

        Vertex's documentation says only that "when Spot VMs are preempted, the job fails with a
        STOCKOUT error" (Vertex AI docs, *Use Spot VMs*); no public thread shows the whole message,
        so the error here is that one documented word and nothing more. (Vertex first restarts
        workers itself — "VM maintenance … restarts the worker on another VM", *Understand the
        training service* — so a job that ends this way is one Vertex gave up on.)
        """
        return cls((("QUEUED", 1), ("PENDING", 1), ("RUNNING", running)), "FAILED", error_message="STOCKOUT")

    @classmethod
    def runs_forever(cls) -> Scenario:
        """Reaches RUNNING and stays there until cancelled."""
        return cls((("QUEUED", 1), ("PENDING", 1), ("RUNNING", _FOREVER)), None)


@dataclass
class RecordedRequest(Request):
    """One request as received: method, path, decoded query, JSON body (or None), headers, and
    when (``time.monotonic()``) it arrived and was answered (0 until it is)."""

    received_at: float = 0.0
    answered_at: float = 0.0

    @property
    def verb(self) -> str:
        """create, get, list, cancel, delete or other."""
        m = _PATH.match(self.path)
        if not m:
            return "other"
        if m["verb"]:
            return m["verb"]
        if m["id"]:
            return {"GET": "get", "DELETE": "delete"}.get(self.method, "other")
        return {"POST": "create", "GET": "list"}.get(self.method, "other")


@dataclass
class Fault:
    """An injected failure for the next ``count`` requests with that verb (any verb if None)."""

    count: int
    status: int = 503
    verb: str | None = None
    message: str = ""
    details: list[dict] | None = None
    drop: bool = False
    after_handling: bool = False

    def matches(self, verb: str) -> bool:
        return self.count > 0 and (self.verb is None or self.verb == verb)


@dataclass
class _Job:
    job: aiplatform_v1.CustomJob
    scenario: Scenario
    gets: int = 0
    cancel_requested: bool = False
    cancelling_seen: int = 0
    state: str = ""
    history: list[str] = field(default_factory=list)
    created_at: float = 0.0  # on the server's clock
    has_capacity: bool = False


def _now() -> datetime:
    return datetime.now(UTC)


class _ApiError(Exception):
    def __init__(
        self, status: int, message: str, details: list[dict] | None = None, status_name: str = ""
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.details = status, message, details or []
        self.status_name = status_name


class VertexJobsServer(LoopbackServer):
    """The CustomJob API on ``127.0.0.1:<free port>``, served from a thread.

    Attributes:
        url: ``http://127.0.0.1:PORT`` (what ``TRAINGUARD_ENDPOINT_AIPLATFORM`` takes).
        project_number: used in the resource names the server returns.
        requests: every request received, in order.
        default_scenario: for jobs created when no scenario is queued with :meth:`script`.
        clock: monotonic seconds, for Flex-start waits (tests set their fake clock here).
        on_running: ``f(job_name, n)`` for the n-th GET (1, 2, …) answered RUNNING, or None.
    """

    def __init__(
        self,
        project_number: str = "123456789012",
        default_scenario: Scenario | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.project_number = project_number
        self.clock = clock or time.monotonic
        self.default_scenario = default_scenario or Scenario.succeeds()
        self.requests: list[RecordedRequest] = []
        self._jobs: dict[str, _Job] = {}
        self._scenarios: list[Scenario] = []
        self._faults: list[Fault] = []
        self._ids = itertools.count(8_412_345_678_901_234_567)
        self._lock = threading.RLock()
        self.on_running: Callable[[str, int], None] | None = None
        self._running_gets: dict[str, int] = {}
        # (metric, region or '' for every region) → (limit, accelerator type, Spot), and the units
        # of it held by jobs outside this server
        self.quotas: dict[tuple[str, str], tuple[int, str, bool]] = {}
        self.quota_in_use: dict[tuple[str, str], int] = {}
        self._region_scenarios: dict[str, list[Scenario]] = {}
        self._region_defaults: dict[str, Scenario] = {}
        self.disabled_for = ""  # the consumer project the API is off in ('' = enabled)

    # -- scripting --

    def script(self, *scenarios: Scenario) -> None:
        """Queues scenarios for the next created jobs, one each, in order."""
        with self._lock:
            self._scenarios.extend(scenarios)

    def fail_next(
        self,
        count: int = 1,
        status: int = 503,
        verb: str | None = None,
        message: str = "",
        details: list[dict] | None = None,
    ) -> None:
        """Answers the next ``count`` requests (with ``verb``: create/get/list/cancel) with an error."""
        with self._lock:
            self._faults.append(Fault(count, status, verb, message, details))

    def set_quota(
        self,
        metric: str,
        limit: int,
        accelerator_type: str,
        preemptible: bool = False,
        in_use: int = 0,
        region: str = "",
    ) -> None:
        """Applies a quota: ``accelerator_type`` accelerators (× replicas) of STANDARD jobs, or of
        Spot/Flex-start jobs when ``preemptible``, count against ``metric`` with ``limit``;
        ``in_use`` of it is held by jobs this server does not know. With ``region`` the limit is
        that region's (Vertex's accelerator quotas are regional: ``dimensions: ["region"]``),
        else it applies in every region alike."""
        with self._lock:
            self.quotas[(metric, region)] = (limit, accelerator_type, preemptible)
            self.quota_in_use[(metric, region)] = in_use

    def set_in_use(self, metric: str, units: int, region: str = "") -> None:
        """Units of a quota :meth:`set_quota` applied that jobs outside this server now hold."""
        with self._lock:
            self.quota_in_use[(metric, region)] = units

    def in_region(self, region: str, scenario: Scenario) -> None:
        """Jobs created in ``region`` follow ``scenario`` unless one is scripted for them."""
        with self._lock:
            self._region_defaults[region] = scenario

    def script_in(self, region: str, *scenarios: Scenario) -> None:
        """Queues scenarios for the next jobs created in ``region``, one each, in order (before
        the scenarios :meth:`script` queued for any region)."""
        with self._lock:
            self._region_scenarios.setdefault(region, []).extend(scenarios)

    def disable(self, consumer: str = "123456789012") -> None:
        """Turns the Vertex AI API off in ``consumer``: every call answers 403 SERVICE_DISABLED."""
        with self._lock:
            self.disabled_for = consumer

    def drop_next(self, count: int = 1, verb: str | None = None, after_handling: bool = False) -> None:
        """Closes the connection without an answer for the next ``count`` matching requests.

        With ``after_handling`` the request takes effect first (a create that lands, then the
        answer is lost), which is what makes a blind retry of a create dangerous.
        """
        with self._lock:
            self._faults.append(Fault(count, 0, verb, drop=True, after_handling=after_handling))

    def add_job(
        self,
        scenario: Scenario | None = None,
        display_name: str = "existing",
        project: str = "",
        location: str = "us-central1",
        state: str | None = None,
        spec: dict | None = None,
    ) -> str:
        """Creates a job directly (as an earlier attempt would have); returns its resource name.

        ``state`` starts the job already in that state (e.g. ``RUNNING`` or ``FAILED``).
        """
        body = {
            "displayName": display_name,
            "jobSpec": spec
            or {
                "workerPoolSpecs": [
                    {
                        "machineSpec": {"machineType": "n1-standard-4"},
                        "replicaCount": "1",
                        "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/trainer:1"},
                    }
                ]
            },
        }
        job = json_format.ParseDict(body, aiplatform_v1.CustomJob.pb(aiplatform_v1.CustomJob()))
        if scenario is None and state is not None:
            scenario = (
                Scenario(
                    (), state, error_message="The replica workerpool0-0 exited with a non-zero status of 1."
                )
                if state in _TERMINAL
                else Scenario(((state, _FOREVER),), None)
            )
        name = self._store(
            aiplatform_v1.CustomJob.wrap(job),
            project or self.project_number,
            location,
            scenario or self.default_scenario,
        )
        return name

    # -- inspection --

    def calls(self, verb: str) -> list[RecordedRequest]:
        """The recorded requests with that verb (create, get, list, cancel, delete)."""
        with self._lock:
            return [r for r in self.requests if r.verb == verb]

    @property
    def jobs(self) -> dict[str, aiplatform_v1.CustomJob]:
        """The stored jobs by ID (copies, with their current state)."""
        with self._lock:
            return {
                i: aiplatform_v1.CustomJob.deserialize(aiplatform_v1.CustomJob.serialize(j.job))
                for i, j in self._jobs.items()
            }

    def state_of(self, job_id_or_name: str) -> str:
        """A job's current state name (``RUNNING``), without advancing it."""
        with self._lock:
            return self._jobs[job_id_or_name.rsplit("/", 1)[-1]].state

    def states_seen(self, job_id_or_name: str) -> list[str]:
        """The states a job has been in, in order."""
        with self._lock:
            return list(self._jobs[job_id_or_name.rsplit("/", 1)[-1]].history)

    # -- the API --

    def _store(self, job: aiplatform_v1.CustomJob, project: str, location: str, scenario: Scenario) -> str:
        with self._lock:
            job_id = str(next(self._ids))
            job.name = f"projects/{project}/locations/{location}/customJobs/{job_id}"
            now = _now()
            job.create_time = now
            job.update_time = now
            for pool in job.job_spec.worker_pool_specs:
                # Vertex fills in the boot disk it uses when the spec names none.
                if pool.machine_spec.machine_type and not pool.disk_spec.boot_disk_type:
                    pool.disk_spec.boot_disk_type = "pd-ssd"
                    pool.disk_spec.boot_disk_size_gb = 100
            entry = _Job(job, scenario, created_at=self.clock())
            self._jobs[job_id] = entry
            self._set_state(entry, "QUEUED" if scenario.flex else self._scheduled_state(entry))
            return job.name

    @staticmethod
    def _scheduled_state(entry: _Job) -> str:
        n = entry.gets
        for state, count in entry.scenario.steps:
            if n < count:
                return state
            n -= count
        if entry.scenario.final is not None:
            return entry.scenario.final
        return entry.scenario.steps[-1][0] if entry.scenario.steps else "QUEUED"

    def _set_state(self, entry: _Job, state: str) -> None:
        if state == entry.state:
            return
        job, now = entry.job, _now()
        entry.state = state
        entry.history.append(state)
        job.state = _STATES[state]
        job.update_time = now
        if state == "RUNNING" and "start_time" not in job:
            job.start_time = now
            if job.job_spec.enable_web_access:
                job.web_access_uris = {
                    "workerpool0-0": "https://abc123-dot-us-central1."
                    "aiplatform-training.googleusercontent.com"
                }
        if state in _TERMINAL:
            job.end_time = now
            if state == "FAILED":
                job.error = {
                    "code": entry.scenario.error_code,
                    "message": entry.scenario.error_message or "Job failed.",
                }
            elif state == "CANCELLED":
                job.error = {"code": 1, "message": "CANCELED"}

    def _advance(self, entry: _Job) -> None:
        """One GET: move the scenario on by one answer (cancellation takes over once requested)."""
        if entry.state in _TERMINAL:
            return
        if entry.cancel_requested:
            entry.cancelling_seen += 1
            if entry.cancelling_seen > entry.scenario.cancelling_gets:
                self._set_state(entry, "CANCELLED")
            return
        if entry.scenario.flex and not entry.has_capacity:
            self._wait_for_capacity(entry)
            return
        if entry.state == "QUEUED" and not self._quota_fits(entry):
            return  # within the limit, but other jobs hold the rest: it waits QUEUED
        entry.gets += 1
        self._set_state(entry, self._scheduled_state(entry))

    def _demand(self, job: aiplatform_v1.CustomJob) -> dict[tuple[str, str], int]:
        """The job's units per quota (metric, region) this server applies in the job's region."""
        strategy = job.job_spec.scheduling.strategy
        preemptible = strategy in (
            aiplatform_v1.Scheduling.Strategy.SPOT,
            aiplatform_v1.Scheduling.Strategy.FLEX_START,
        )
        where = job.name.split("/")[3] if job.name.count("/") >= 3 else ""
        out: dict[tuple[str, str], int] = {}
        for key, (_, accel, spot) in self.quotas.items():
            if spot != preemptible or key[1] not in ("", where):
                continue
            units = sum(
                p.machine_spec.accelerator_count * p.replica_count
                for p in job.job_spec.worker_pool_specs
                if p.machine_spec.accelerator_type.name == accel
            )
            if units:
                out[key] = units
        return out

    def _held(self, key: tuple[str, str], but: _Job | None = None) -> int:
        """Units of a quota held: by jobs outside the server, and by its own jobs that left QUEUED."""
        held = self.quota_in_use.get(key, 0)
        for entry in self._jobs.values():
            if entry is not but and entry.state not in _TERMINAL and entry.state != "QUEUED":
                held += self._demand(entry.job).get(key, 0)
        return held

    def _quota_fits(self, entry: _Job) -> bool:
        return all(
            units + self._held(key, entry) <= self.quotas[key][0]
            for key, units in self._demand(entry.job).items()
        )

    def _wait_for_capacity(self, entry: _Job) -> None:
        """A Flex-start job's wait: capacity comes, its maxWaitDuration runs out, or it waits on."""
        waited = self.clock() - entry.created_at
        scenario = entry.scenario
        if scenario.capacity_after_s is not None and waited >= scenario.capacity_after_s:
            entry.has_capacity = True  # this GET answers the first step after the wait
            self._set_state(entry, self._scheduled_state(entry))
            return
        scheduling = entry.job.job_spec.scheduling
        max_wait = (
            scheduling.max_wait_duration.total_seconds()
            if "max_wait_duration" in scheduling
            else FLEX_DEFAULT_WAIT_S
        )
        if max_wait and waited >= max_wait and scenario.expired_state is not None:
            self._set_state(entry, scenario.expired_state)

    def _job(self, project: str, location: str, job_id: str) -> _Job:
        entry = self._jobs.get(job_id)
        if entry is None or entry.job.name.split("/")[3] != location:
            raise _ApiError(404, "The CustomJob does not exist.")
        del project  # Vertex answers for the project ID and the project number alike
        return entry

    def _render(self, job: aiplatform_v1.CustomJob, int_enums: bool) -> dict:
        return json.loads(
            json_format.MessageToJson(aiplatform_v1.CustomJob.pb(job), use_integers_for_enums=int_enums)
        )

    def handle(self, method: str, raw_path: str, body: Any) -> tuple[int, Any]:
        """Answers one request: (HTTP status, JSON body). Raises _ApiError for error bodies."""
        split = urlsplit(raw_path)
        path = unquote(split.path)
        query = parse_qs(split.query, keep_blank_values=True)
        int_enums = any("enum-encoding=int" in v for v in query.get("$alt", []))
        m = _PATH.match(path)
        if not m:
            raise _ApiError(404, f"The requested URL {path} was not found on this server.")
        project, location, job_id, verb = m["project"], m["location"], m["id"], m["verb"]
        with self._lock:
            if job_id is None and method == "POST" and verb is None:
                return 200, self._create(project, location, body, int_enums)
            if job_id is None and method == "GET" and verb is None:
                return 200, self._list(location, query, int_enums)
            if job_id is not None and method == "GET" and verb is None:
                entry = self._job(project, location, job_id)
                self._advance(entry)
                if entry.state == "RUNNING" and self.on_running is not None:
                    n = self._running_gets[job_id] = self._running_gets.get(job_id, 0) + 1
                    self.on_running(entry.job.name, n)
                return 200, self._render(entry.job, int_enums)
            if job_id is not None and method == "POST" and verb == "cancel":
                entry = self._job(project, location, job_id)
                if entry.state in _TERMINAL:
                    raise _ApiError(
                        400,
                        f'Cannot cancel CustomJob "{entry.job.name}" in state JOB_STATE_{entry.state}.',
                        [
                            {
                                "@type": "type.googleapis.com/google.rpc.PreconditionFailure",
                                "violations": [
                                    {
                                        "type": "STATE",
                                        "subject": entry.job.name,
                                        "description": "job is in a final state",
                                    }
                                ],
                            }
                        ],
                        status_name="FAILED_PRECONDITION",
                    )
                entry.cancel_requested = True
                self._set_state(entry, "CANCELLING")
                return 200, {}
            if job_id is not None and method == "DELETE" and verb is None:
                entry = self._job(project, location, job_id)
                del self._jobs[job_id]
                return 200, {
                    "name": f"{entry.job.name}/operations/1",
                    "metadata": {
                        "@type": "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata"
                    },
                    "done": True,
                    "response": {"@type": "type.googleapis.com/google.protobuf.Empty"},
                }
        raise _ApiError(404, f"Method {method} {path} is not supported.")

    def _create(self, project: str, location: str, body: Any, int_enums: bool) -> dict:
        if not isinstance(body, dict):
            raise _ApiError(400, "Invalid JSON payload received. Expected an object.")
        try:
            pb = json_format.ParseDict(body, aiplatform_v1.CustomJob.pb(aiplatform_v1.CustomJob()))
        except json_format.ParseError as exc:
            raise _ApiError(
                400,
                f"Invalid JSON payload received. {exc}",
                [
                    {
                        "@type": "type.googleapis.com/google.rpc.BadRequest",
                        "fieldViolations": [{"description": str(exc)}],
                    }
                ],
            ) from None
        job = aiplatform_v1.CustomJob.wrap(pb)
        violations = _violations(job)
        if violations:
            # The form of prefect-archive/prefect-gcp#175's answer: the fields in the message,
            # tab-separated; the public answers show no fieldViolations detail beside it.
            listed = "".join(
                f"{i}.Field: {f}; Message: {d}\t" for i, (f, d) in enumerate(violations, start=1)
            )
            raise _ApiError(400, f"List of found errors:\t{listed}")
        if job.job_spec.tensorboard and not job.job_spec.service_account:
            # Word for word from kubeflow/pipelines#7123 (CreateCustomJob): this one check
            # names the field from the CustomJob, custom_job.…, in a plain sentence.
            raise _ApiError(
                400, "custom_job.job_spec.service_account must be specified when uploading to TensorBoard"
            )
        job.name = f"projects/{project}/locations/{location}/customJobs/0"  # its region, for _demand
        over = [key[0] for key, units in self._demand(job).items() if units > self.quotas[key][0]]
        if over:
            # Over a limit: refused at once, whatever is free. The body gcloud printed in
            # GoogleCloudPlatform/stable-diffusion-on-gcp#12: code, message, status, no details.
            raise _ApiError(429, f"The following quota metrics exceed quota limits: {', '.join(over)}", [])
        # Output-only fields in the request are ignored, as Vertex does.
        for name in (
            "name",
            "state",
            "error",
            "create_time",
            "start_time",
            "end_time",
            "update_time",
            "web_access_uris",
        ):
            aiplatform_v1.CustomJob.pb(job).ClearField(name)
        scenario = self._scenario_for(location)
        number = self.project_number if not project.isdigit() else project
        name = self._store(job, number, location, scenario)
        return self._render(self._jobs[name.rsplit("/", 1)[1]].job, int_enums)

    def _scenario_for(self, location: str) -> Scenario:
        queued = self._region_scenarios.get(location)
        if queued:
            return queued.pop(0)
        if location in self._region_defaults:
            return self._region_defaults[location]
        return self._scenarios.pop(0) if self._scenarios else self.default_scenario

    def _list(self, location: str, query: dict[str, list[str]], int_enums: bool) -> dict:
        flt = (query.get("filter") or [""])[0]
        preds = []
        for clause in filter(None, (c.strip() for c in re.split(r"\s+AND\s+", flt))):
            m = re.fullmatch(r'(display_name|displayName|state|labels\.[\w-]+)\s*=\s*"?([^"]*)"?', clause)
            if not m:
                raise _ApiError(400, f"Unsupported filter: {clause!r}.")
            preds.append((m[1], m[2]))
        matching = []
        for entry in self._jobs.values():
            job = entry.job
            if job.name.split("/")[3] != location:
                continue
            ok = True
            for key, value in preds:
                if key in ("display_name", "displayName"):
                    ok &= job.display_name == value
                elif key == "state":
                    ok &= f"JOB_STATE_{entry.state}" == value or entry.state == value
                else:
                    ok &= job.labels.get(key.split(".", 1)[1]) == value
            if ok:
                matching.append(job)
        matching.sort(key=lambda j: j.create_time, reverse=True)  # newest first, as Vertex lists
        size = int((query.get("pageSize") or ["0"])[0] or 0) or 100
        start = int((query.get("pageToken") or ["0"])[0] or 0)
        page = matching[start : start + size]
        out: dict[str, Any] = {"customJobs": [self._render(j, int_enums) for j in page]}
        if start + size < len(matching):
            out["nextPageToken"] = str(start + size)
        return out

    def take_fault(self, verb: str) -> Fault | None:
        """The injected fault for this request, if any (consumes one count)."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(verb):
                    fault.count -= 1
                    return fault
        return None

    def error_body(
        self, status: int, message: str = "", details: list[dict] | None = None, status_name: str = ""
    ) -> dict:
        """The error body Google APIs send for ``status`` (``status_name`` overrides the usual one)."""
        message = message or _DEFAULT_MESSAGES.get(status, "Error.").format(
            number=self.project_number, project=self.project_number, location="us-central1"
        )
        if details is None and status == 429:
            # A rate limit's ErrorInfo: reason RATE_LIMIT_EXCEEDED (vertex-ai-samples#1000); the
            # metadata keys are those Google's rate-limit answers carry
            # (google-gemini/deprecated-generative-ai-python#244), the values illustrative.
            details = [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "RATE_LIMIT_EXCEEDED",
                    "domain": "googleapis.com",
                    "metadata": {
                        "service": "aiplatform.googleapis.com",
                        "consumer": f"projects/{self.project_number}",
                        "quota_metric": "aiplatform.googleapis.com/resource_management_requests",
                        "quota_limit": "ResourceManagementRequestsPerMinutePerProjectPerRegion",
                        "quota_location": "us-central1",
                    },
                }
            ]
        error: dict[str, Any] = {
            "code": status,
            "message": message,
            "status": status_name or STATUS_NAMES.get(status, "UNKNOWN"),
        }
        if details:  # Google leaves the key out when there are none (stable-diffusion-on-gcp#12)
            error["details"] = details
        return {"error": error}


def _violations(job: aiplatform_v1.CustomJob) -> list[tuple[str, str]]:
    """The checks Vertex makes on create, with its field paths: snake_case from the CustomJob,
    ``job_spec.worker_pool_specs[0].machine_spec.accelerator_type`` (prefect-archive/prefect-gcp
    #175, which also gives the accelerator message word for word; the other messages are ours)."""
    out = []
    if not job.display_name:
        out.append(("display_name", "Required field is not set."))
    pools = job.job_spec.worker_pool_specs
    if not pools:
        out.append(("job_spec.worker_pool_specs", "Required field is not set."))
    for i, pool in enumerate(pools):
        path = f"job_spec.worker_pool_specs[{i}]"
        if not pool.machine_spec.machine_type:
            if i == 0:
                out.append((f"{path}.machine_spec.machine_type", "Required field is not set."))
            continue
        if not pool.container_spec.image_uri and not pool.python_package_spec.executor_image_uri:
            out.append((f"{path}.container_spec.image_uri", "Required field is not set."))
        if bool(pool.machine_spec.accelerator_type) != (pool.machine_spec.accelerator_count > 0):
            out.append(
                (
                    f"{path}.machine_spec.accelerator_type",
                    "Both `accelerator_type` and `accelerator_count` should be specified or none.",
                )
            )
        if i == 0 and pool.replica_count != 1:
            out.append(
                (f"{path}.replica_count", "The first worker pool must have exactly one replica (the chief).")
            )
        if pool.replica_count < 1:
            out.append((f"{path}.replica_count", "Replica count must be positive."))
    base = job.job_spec.base_output_directory.output_uri_prefix
    if base and not base.startswith("gs://"):
        out.append(
            (
                "job_spec.base_output_directory.output_uri_prefix",
                f"Output URI prefix must be a Cloud Storage path (gs://...), got {base!r}.",
            )
        )
    return out


class _Handler(BaseHTTPRequestHandler):
    owner: VertexJobsServer
    _record: RecordedRequest
    protocol_version = "HTTP/1.1"
    # Headers and body in one segment, sent at once: no 40 ms Nagle/delayed-ACK stall per call.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def log_message(self, *_: object) -> None:  # keep pytest output clean
        return

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        split = urlsplit(self.path)
        record = RecordedRequest(
            self.command,
            unquote(split.path),
            parse_qs(split.query, keep_blank_values=True),
            body,
            dict(self.headers.items()),
            received_at=time.monotonic(),
        )
        self._record = record
        server = self.owner
        with server._lock:
            server.requests.append(record)
            consumer = server.disabled_for
        if consumer:
            self._send(403, disabled_body("aiplatform.googleapis.com", consumer))
            return
        fault = server.take_fault(record.verb)
        if fault is not None and fault.drop:
            if fault.after_handling and not isinstance(body, str):
                with contextlib.suppress(_ApiError):
                    server.handle(self.command, self.path, body)
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault is not None:
            self._send(fault.status, server.error_body(fault.status, fault.message, fault.details))
            return
        if isinstance(body, str):
            self._send(400, server.error_body(400, "Invalid JSON payload received. Unexpected token."))
            return
        try:
            status, payload = server.handle(self.command, self.path, body)
        except _ApiError as err:
            self._send(err.status, server.error_body(err.status, err.message, err.details, err.status_name))
            return
        self._send(status, payload)

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload, indent=2).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self._record.answered_at = time.monotonic()

    do_GET = do_POST = do_DELETE = _serve


@pytest.fixture
def vertex_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[VertexJobsServer]:
    """A running server, with ``TRAINGUARD_ENDPOINT_AIPLATFORM`` pointing at it.

    Cloud Logging (read for a failed job's log tail), Cloud Quotas (asked for a quota ID after
    a quota refusal) and the Cloud Billing Catalog (read to price each attempt) point at a closed
    loopback port unless a test sets its own server: no test may reach the real API with this
    machine's credentials.
    """
    with VertexJobsServer() as server:
        monkeypatch.setenv("TRAINGUARD_ENDPOINT_AIPLATFORM", server.url)
        for api in ("LOGGING", "CLOUDQUOTAS", "CLOUDBILLING"):  # read after a failure / to price
            if f"TRAINGUARD_ENDPOINT_{api}" not in os.environ:
                with socket.socket() as probe:  # a port nothing listens on
                    probe.bind(("127.0.0.1", 0))
                    closed = probe.getsockname()[1]
                monkeypatch.setenv(f"TRAINGUARD_ENDPOINT_{api}", f"http://127.0.0.1:{closed}")
        yield server


VertexJobsServer.handler_class = _Handler
