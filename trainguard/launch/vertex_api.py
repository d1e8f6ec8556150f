"""The Vertex AI CustomJob API as the backend uses it: states, names, errors, and the one retry.

Every call the backend makes goes through :class:`VertexCalls`, which retries 429/5xx and
connection errors with :class:`trainguard.retry.RetryPolicy` (backoff within a total deadline,
``max_transient_s`` for the job watcher) and turns any other API error into the project's own
error with what to do (:func:`api_error`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

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
    "VertexCalls",
]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

TERMINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "PARTIALLY_SUCCEEDED", "PAUSED"})
# Ended, but not with the job's work done: a later attempt may relaunch it.
FAILED_STATES = frozenset({"FAILED", "CANCELLED", "EXPIRED", "PARTIALLY_SUCCEEDED", "PAUSED"})
LAUNCH_ID_LABEL = "trainguard-launch-id"
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
    if isinstance(exc, gexc.BadRequest) and doing == "create":
        path = ""
        for detail in getattr(exc, "details", None) or []:
            violations = detail.get("fieldViolations") if isinstance(detail, dict) else None
            if violations:
                path = violations[0].get("field", "")
                break
        return SpecError(f"Vertex AI rejected the CustomJob: {msg}", path)
    if isinstance(exc, gexc.Unauthorized):
        return ConfigError(
            f"Vertex AI refused the credentials ({doing}): {msg}; run gcloud auth application-default login"
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
