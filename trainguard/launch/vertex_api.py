"""The Vertex AI CustomJob API as the backend uses it: states, names, errors, and the one retry.

Every call the backend makes goes through :class:`VertexCalls`, which retries 429/5xx and
connection errors with :class:`trainguard.retry.RetryPolicy` (backoff within a total deadline,
``max_transient_s`` for the job watcher) and turns any other API error into the project's own
error with what to do (:func:`api_error`). A 429 is retried only when it is a rate limit: a create
over a quota *limit* ("The following quota metrics exceed quota limits: …") is refused until the
limit is raised, and :mod:`trainguard.launch.vertex` names it ``quota`` at once. What Google's
bodies say is read by :mod:`trainguard.api_errors`: a 403 may be the API being off
(``SERVICE_DISABLED``) or a project ID that is not one (``CONSUMER_INVALID``), not a role; a 400
names the field as ``job_spec.worker_pool_specs[0].machine_spec.…``, reported in the spec file's
spelling (``workerPoolSpecs[0].machineSpec.…``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from trainguard import api_errors
from trainguard.errors import (
    ConfigError,
    EndpointUnreachable,
    SpecError,
    TrainguardError,
    TransientError,
    UserError,
)
from trainguard.launch.echo import safe_error
from trainguard.retry import RetryPolicy, describe, transient_types
from trainguard.spec import JobSpec

__all__ = [
    "TERMINAL_STATES",
    "FAILED_STATES",
    "LAUNCH_ID_LABEL",
    "SYSTEM_LABELS_ENV",
    "state_name",
    "console_url",
    "system_labels",
    "api_error",
    "quota_refusal",
    "QUOTA_LOOKUP_TIMEOUT_S",
    "VertexCalls",
]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

TERMINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "PARTIALLY_SUCCEEDED", "PAUSED"})
# Ended, but not with the job's work done: a later attempt may relaunch it.
FAILED_STATES = frozenset({"FAILED", "CANCELLED", "EXPIRED", "PARTIALLY_SUCCEEDED", "PAUSED"})
LAUNCH_ID_LABEL = "trainguard-launch-id"
# After a quota refusal, Cloud Quotas is asked for the quota's ID (for the exact increase line)
# for at most this long; without it the line looks the ID up itself.
QUOTA_LOOKUP_TIMEOUT_S = 5.0
# Vertex AI Pipelines puts the run's billing labels here; GCPC's launcher adds them to the job.
SYSTEM_LABELS_ENV = "VERTEX_AI_PIPELINES_RUN_LABELS"


def state_name(state: Any) -> str:
    """``JobState.JOB_STATE_RUNNING`` (or 3) → ``RUNNING``."""
    from google.cloud import aiplatform_v1

    return aiplatform_v1.JobState(int(state)).name.removeprefix("JOB_STATE_")


def console_url(project: str, region: str, job_name: str) -> str:
    """The Cloud console page of a CustomJob (``job_name`` may be the full name or the ID)."""
    job_id = job_name.rsplit("/", 1)[-1]
    return (
        f"https://console.cloud.google.com/vertex-ai/locations/{region}/training/{job_id}/cpu"
        f"?project={project}"
    )


def system_labels() -> dict[str, str]:
    """The pipeline run's labels from ``VERTEX_AI_PIPELINES_RUN_LABELS`` (JSON), if any."""
    raw = os.environ.get(SYSTEM_LABELS_ENV, "")
    if not raw:
        return {}
    try:
        labels = json.loads(raw)
    except ValueError:
        _log.warning("ignoring %s: not JSON: %r", SYSTEM_LABELS_ENV, raw[:200])
        return {}
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def api_error(exc: Exception, doing: str, spec: JobSpec) -> TrainguardError:
    """A non-transient API error as the project's error, with what to do."""
    from google.api_core import exceptions as gexc

    msg = safe_error(str(getattr(exc, "message", None) or exc))
    facts = api_errors.ErrorFacts.of(exc)
    if isinstance(exc, gexc.BadRequest) and doing == "create":
        vertex_path, description = api_errors.field_violation(facts)
        path = api_errors.spec_path(vertex_path)
        named = f" (Vertex names it {vertex_path})" if vertex_path and vertex_path != path else ""
        # From Vertex's list ("List of found errors:\t1.Field: …; Message: …\t") the one message
        # is said alone; a list of several, or any other text, is said as Vertex wrote it.
        listed = facts.message.count("Field: ")
        said = safe_error(description if listed == 1 and description else facts.message.strip())
        return SpecError(f"Vertex AI rejected the CustomJob: {said}{named}", path)
    if isinstance(exc, gexc.Unauthorized):
        return ConfigError(
            f"Vertex AI refused the credentials ({doing}): {msg}; run gcloud auth application-default login"
        )
    disabled = api_errors.disabled_service(facts)
    if disabled is not None:
        return ConfigError(
            f"the Vertex AI API is not enabled ({doing} in {spec.parent}: 403 SERVICE_DISABLED, "
            f"{disabled.label()} off in project {disabled.project or spec.project}); "
            f"{disabled.remedy(spec.project, 'aiplatform.googleapis.com')}, then run again"
        )
    if api_errors.kind(facts) == api_errors.CONSUMER_INVALID:
        return ConfigError(
            f"Vertex AI does not know project {spec.project!r} ({doing}: {msg}); --project must "
            "be the project ID (gcloud projects list shows it), not its display name"
        )
    if isinstance(exc, gexc.Forbidden):
        return UserError(
            f"permission denied by Vertex AI ({doing} in {spec.parent}): {msg}. The caller needs "
            "aiplatform.customJobs.create/get/cancel (roles/aiplatform.user) and "
            "iam.serviceAccounts.actAs on the job's service account; run trainguard preflight"
        )
    if isinstance(exc, gexc.NotFound) and doing == "create":
        return ConfigError(
            f"Vertex AI has no {spec.parent} ({msg}): check --project and "
            "--region, and that the Vertex AI API is enabled"
        )
    return TrainguardError(f"Vertex AI {doing} failed: {type(exc).__name__}: {msg}")


def quota_refusal(exc: Exception, spec: JobSpec, quota_id_of: Callable[[str, str], str] | None = None) -> str:
    """What to say when Vertex refused the create over a quota limit: the metric, what the job
    asks of it, and the ``gcloud quotas preferences create`` line preflight gives.

    Args:
        exc: the 429 (``trainguard.retry.over_quota_limit`` was True for it).
        spec: the job.
        quota_id_of: ``(project, metric) → quota ID`` ('' when unknown); default: ask Cloud
            Quotas within :data:`QUOTA_LOOKUP_TIMEOUT_S`.
    """
    from trainguard.preflight import quota

    facts = api_errors.ErrorFacts.of(exc)
    lookup = quota_id_of or (lambda p, m: quota.quota_id_of(p, m, QUOTA_LOOKUP_TIMEOUT_S))
    wanted = {d.metric: d for d in quota.demands(spec)[0]}
    parts = []
    for metric in api_errors.quota_metrics(facts):
        demand = wanted.get(metric)
        quota_id = lookup(spec.project, metric) or (
            f"$(gcloud quotas info list --service={quota.SERVICE} --project={spec.project} "
            f'--filter="metric={metric}" --format="value(quotaId)")'
        )
        if demand is not None:
            unit = f" {demand.unit}" if demand.unit else ""
            pools = ", ".join(f"workerPoolSpecs[{i}]" for i in demand.pools)
            asks, value = f"the job asks for {demand.units}{unit} ({pools})", str(demand.units)
        else:
            asks, value = "the job asks for more than its limit", "VALUE"
        line = quota.increase_command(spec.project, spec.region, quota_id, value)
        parts.append(f"{metric}: {asks}; raise its limit to at least {value}: {line}")
    return (
        f"Vertex AI refused to create the job: it is over a quota limit in {spec.region} (429 "
        f"RESOURCE_EXHAUSTED: {facts.message.strip()}); "
        + "; ".join(parts or ["the answer names no metric: see the quotas of aiplatform.googleapis.com"])
        + "; no retry helps until the limit is raised (or run where there is quota: trainguard "
        "preflight --only quota lists the regions)"
    )


@dataclass
class VertexCalls:
    """Makes Vertex AI calls for one job: retried within the policy's deadline, errors translated.

    Attributes:
        spec: the job (for error messages).
        policy: the retry policy (its deadline is the longest time of nothing but transient errors).
        say: where "retrying in N s" lines go.
        clock, sleep: the backend's (injectable in tests).
        where: the endpoint, for messages.
    """

    spec: JobSpec
    policy: RetryPolicy
    say: Callable[[str], None]
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    where: str = ""
    # Until Vertex has answered once in this run, "no answer at all" gives up after the short,
    # user-visible deadline (TRAINGUARD_RETRY_DEADLINE, 10 s): a dead or mistyped endpoint is
    # named at once, not after max_transient_s of retries meant for an outage mid-job.
    first_contact_s: float = field(default_factory=lambda: RetryPolicy.from_env().deadline_s)
    _answered: bool = False

    def __call__(
        self,
        fn: Callable[[], _T],
        doing: str,
        *,
        deadline: float | None = None,
        passthrough: tuple[type[BaseException], ...] = (),
    ) -> _T:
        """``fn()``, retrying transient errors; ``deadline`` (on ``clock``) cuts the retries short.

        Errors of the ``passthrough`` types are re-raised as they are; other API errors become the
        project's errors (:func:`api_error`).

        Raises:
            TransientError: only transient errors until the deadline (the endpoint had answered
                before, in this run, or answered with 429/5xx now).
            EndpointUnreachable: the endpoint never answered at all in this run.
        """
        from google.api_core import exceptions as gexc

        policy = self.policy
        if deadline is not None:
            policy = policy.with_deadline(max(0.0, min(policy.deadline_s, deadline - self.clock())))

        def on_retry(exc: BaseException, delay: float) -> None:
            self.say(f"{doing}: {describe(exc)}; retrying in {delay:g} s")

        try:
            result = policy.call(
                fn,
                transient=transient_types(),
                what=f"Vertex AI {doing}",
                where=self.where,
                on_retry=on_retry,
                clock=self.clock,
                sleep=self.sleep,
                unanswered_deadline_s=None if self._answered else self.first_contact_s,
            )
        except passthrough:
            self._answered = True
            raise
        except EndpointUnreachable as exc:
            if self._answered:  # it did answer earlier: the job exists, a retry resumes it
                raise TransientError(str(exc)) from None
            raise
        except gexc.GoogleAPICallError as exc:
            self._answered = True
            raise api_error(exc, doing, self.spec) from None
        self._answered = True
        return result
