"""How long a Vertex AI job may wait to start, and what it means when it waited too long.

Vertex does not fail a job it cannot start: it keeps it QUEUED. Why depends on the scheduling
strategy, and so does how long waiting is normal:

* ``STANDARD`` and ``SPOT``: a job that stays QUEUED is almost always short of accelerator quota
  in the region. trainguard cancels it after :data:`DEFAULT_MAX_QUEUED_S` (30 min) and names the
  failure ``quota``.
* ``FLEX_START`` (Dynamic Workload Scheduler): waiting for capacity is the point. Vertex itself
  ends the wait after ``scheduling.maxWaitDuration`` (default 24 h; 0 waits forever), so
  trainguard waits that long plus :data:`FLEX_MARGIN_S` (Vertex's own verdict comes first) and never
  cancels a job whose ``maxWaitDuration`` is 0. A Flex-start wait that runs out is ``capacity``:
  the project may use the accelerators, the region had none free; more quota would not help.

``--max-queued`` (the ``max_queued`` parameter) overrides the limit for any strategy; 0 means wait
forever. The failure class still follows the strategy.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainguard.durations import format_duration, parse_duration
from trainguard.errors import ConfigError
from trainguard.spec import JobSpec

__all__ = [
    "DEFAULT_MAX_QUEUED_S",
    "FLEX_DEFAULT_WAIT_S",
    "FLEX_MARGIN_S",
    "QueueLimit",
    "queue_limit",
    "parse_max_queued",
]

DEFAULT_MAX_QUEUED_S = 30 * 60.0
FLEX_DEFAULT_WAIT_S = 24 * 3600.0  # Scheduling.max_wait_duration's documented default
FLEX_MARGIN_S = 15 * 60.0
_FLEX = "FLEX_START"


@dataclass(frozen=True)
class QueueLimit:
    """The queue limit of one job.

    Attributes:
        seconds: cancel the job once it has been QUEUED this long; None never cancels it.
        failure_class: what a wait that ran out means (``quota`` or ``capacity``).
        flex_wait_s: a FLEX_START job's ``maxWaitDuration`` in seconds (None: not Flex-start, or
            0 = Vertex waits forever).
        source: how the limit was chosen, in words (for the progress line).
    """

    seconds: float | None
    failure_class: str
    flex_wait_s: float | None
    source: str

    def exceeded(self, waited_s: float, region: str) -> str:
        """The error of a job cancelled after ``waited_s`` seconds QUEUED."""
        if self.failure_class == "quota":
            # Worded as before: triage and users already know this sentence.
            return (
                f"stayed QUEUED for {waited_s:.0f} s: likely accelerator quota in {region}; "
                "run trainguard preflight"
            )
        return (
            f"Flex-start (DWS) found no free accelerators in {region} within {self.source} "
            f"(waited {waited_s:.0f} s, still QUEUED; cancelled): a capacity shortage, not "
            "quota; allow a longer scheduling.maxWaitDuration, use a reservation, or try a "
            "region with capacity"
        )

    def flex_wait_ran_out(self, waited_s: float, slack_s: float) -> bool:
        """True when a Flex-start job that Vertex ended without it ever leaving QUEUED had waited
        its whole ``maxWaitDuration`` (to within ``slack_s``, one poll interval): Vertex gave up
        finding capacity. (The caller checks that the job ended unstarted.)"""
        return self.flex_wait_s is not None and waited_s >= self.flex_wait_s - slack_s

    def ran_out(self, waited_s: float, region: str) -> str:
        """The error of a Flex-start job that Vertex ended after ``waited_s`` seconds QUEUED."""
        return (
            f"Flex-start (DWS) found no free accelerators in {region} within maxWaitDuration "
            f"{format_duration(self.flex_wait_s or 0)} (waited {waited_s:.0f} s, never "
            "started; Vertex ended the wait): a capacity shortage, not quota; allow a longer "
            "scheduling.maxWaitDuration, use a reservation, or try a region with capacity"
        )


def parse_max_queued(value: str | float | int | None, option: str = "--max-queued") -> float | None:
    """A ``--max-queued`` value in seconds; '' or None → None (follow the strategy); 0 = forever.

    Raises:
        ConfigError: not a duration such as 90, 20s, 45m or 2h.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return parse_duration(value, option)


def queue_limit(spec: JobSpec, max_queued_s: float | None = None) -> QueueLimit:
    """The queue limit of ``spec``'s job.

    Args:
        spec: the job (its ``scheduling.strategy`` and ``maxWaitDuration`` decide the default).
        max_queued_s: the user's limit in seconds (0 = wait forever); None follows the strategy.

    Raises:
        ConfigError: ``max_queued_s`` is negative.
    """
    if max_queued_s is not None and max_queued_s < 0:
        raise ConfigError(f"--max-queued must be a duration ≥ 0 (0 waits forever), got {max_queued_s:g}")
    flex = spec.strategy == _FLEX
    cls = "capacity" if flex else "quota"
    flex_wait = _flex_wait_s(spec) if flex else None
    if max_queued_s is not None:
        seconds = max_queued_s or None
        where = (
            f"the --max-queued limit of {format_duration(max_queued_s)}"
            if seconds
            else "no limit (--max-queued 0)"
        )
        return QueueLimit(seconds, cls, flex_wait or None, where)
    if not flex:
        return QueueLimit(
            DEFAULT_MAX_QUEUED_S, cls, None, f"the default {format_duration(DEFAULT_MAX_QUEUED_S)}"
        )
    if not flex_wait:  # maxWaitDuration 0: Vertex waits for capacity forever, and so do we
        return QueueLimit(None, cls, None, "no limit (maxWaitDuration 0 waits forever)")
    return QueueLimit(
        flex_wait + FLEX_MARGIN_S,
        cls,
        flex_wait,
        f"maxWaitDuration {format_duration(flex_wait)} + {format_duration(FLEX_MARGIN_S)} margin",
    )


def _flex_wait_s(spec: JobSpec) -> float:
    scheduling = spec.job_spec.scheduling
    if "max_wait_duration" not in scheduling:
        return FLEX_DEFAULT_WAIT_S
    return scheduling.max_wait_duration.total_seconds()
