"""SIGTERM while a job is watched: what KFP sends a task when its pipeline run is cancelled.

Both backends turn the first SIGTERM into :class:`Terminated` in the main thread, stop their job
(Vertex: cancel it; local: stop the workers) and return. A second SIGTERM is ignored, so it cannot
interrupt the stopping itself.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

__all__ = ["Terminated", "SigtermGuard"]


class Terminated(BaseException):
    """Raised by the SIGTERM handler; a BaseException so that no library swallows it."""


class SigtermGuard:
    """Turns the first SIGTERM into :class:`Terminated` while a job is being watched.

    Only the main thread can install signal handlers; elsewhere (and with ``enabled=False``) this
    does nothing. The previous handler is restored on exit.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.fired = False
        self._previous: Any = None
        self._installed = False

    def _handle(self, signum: int, frame: Any) -> None:
        if self.fired:  # a second SIGTERM must not interrupt the cancellation itself
            return
        self.fired = True
        raise Terminated()

    def __enter__(self) -> SigtermGuard:
        if self.enabled and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
            self._installed = True
        return self

    def __exit__(self, *_: object) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False
