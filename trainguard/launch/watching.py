"""How a backend calls its in-flight watcher (the guard): one place for both backends.

The contract (see also :mod:`trainguard.launch.base`):

* A backend calls :meth:`WatcherSeam.poll` between its polls while the job has not ended: the
  Vertex backend after each successful ``get`` of a job in a non-terminal state (at least every
  ``watch_interval_s`` once RUNNING), the local backend about once a second while its workers run.
* The watcher returns None (let it run) or a :class:`~trainguard.launch.base.Stop`. On a Stop the
  backend stops the job and returns ``TrainResult(state="CANCELLED", stopped=stop.to_dict(),
  failure_class=stop.failure_class, error=stop_error(stop))``.
* A watcher that raises (or returns something that is not a Stop) is reported once, as one line
  naming the error, and never called again: the job runs on, unguarded. The guard fails open; the
  job is never stopped because of the guard's own error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from trainguard.launch.base import RunningJob, Stop, Watcher
from trainguard.launch.echo import safe_error, safe_line
from trainguard.retry import describe

__all__ = ["WatcherSeam", "stop_error"]

_log = logging.getLogger(__name__)


def stop_error(stop: Stop) -> str:
    """The ``TrainResult.error`` of a job the guard stopped: that it did, and why."""
    verb = "ended early" if stop.success else "stopped"
    return safe_error(f"{verb} by the trainguard guard [{stop.failure_class}]: {stop.evidence}")


class WatcherSeam:
    """Calls a watcher, failing open: the first error disables it, with one line saying why.

    Attributes:
        watcher: the watcher (None: nothing to call).
        say: where the one line goes when the watcher fails (the backend's progress stream).
        failure: the line reported when the watcher failed ('' while it works).
    """

    def __init__(self, watcher: Watcher | None, say: Callable[[str], None]) -> None:
        self.watcher = watcher
        self.say = say
        self.failure = ""

    @property
    def active(self) -> bool:
        """True while there is a watcher that has not failed."""
        return self.watcher is not None and not self.failure

    def poll(self, job: RunningJob) -> Stop | None:
        """The watcher's answer for ``job``; None when there is none, or it failed."""
        if not self.active:
            return None
        assert self.watcher is not None
        try:
            answer = self.watcher.poll(job)
        except Exception as exc:  # the guard fails open: its own error never stops the job
            self._fail(describe(exc))
            return None
        if answer is None or isinstance(answer, Stop):
            return answer
        self._fail(f"it returned a {type(answer).__name__}, not a Stop or None")
        return None

    def _fail(self, why: str) -> None:
        self.failure = safe_line(
            f"the in-flight guard stopped guarding ({why}); the job runs on "
            "unguarded and validate still judges its history afterwards"
        )
        _log.warning("%s", self.failure)
        self.say(self.failure)
