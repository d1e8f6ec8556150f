"""SIGTERM as a flag: what Vertex sends a Spot/preempted worker before it kills it (the grace
period), turned into a flag that the training loop reads at its next save point, so that the
save happens between steps and never from inside a signal handler.

>>> flag = SigtermFlag()
>>> flag.install()
>>> flag.is_set
False
>>> flag.uninstall()  # the handler that was there before is back
"""

from __future__ import annotations

import signal
import threading
from typing import Any

__all__ = ["SigtermFlag"]


class SigtermFlag:
    """A SIGTERM handler that only sets a flag; ``uninstall`` puts back the previous handler."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._previous: Any = None
        self._installed = False

    @property
    def is_set(self) -> bool:
        """True once SIGTERM arrived (or :meth:`set` was called)."""
        return self._event.is_set()

    def set(self) -> None:
        """Acts as if SIGTERM had arrived (e.g. another process of the job got it)."""
        self._event.set()

    def install(self, *, main_thread_only: bool = False) -> None:
        """Installs the handler once (a second call keeps the first one's previous handler).

        Python lets only the main thread install signal handlers: elsewhere this raises
        ``ValueError``, or does nothing with ``main_thread_only=True`` (a framework that runs
        its callbacks on a worker thread installs from the main thread instead).
        """
        if self._installed:
            return
        if main_thread_only and threading.current_thread() is not threading.main_thread():
            return
        self._previous = signal.signal(signal.SIGTERM, lambda signum, frame: self._event.set())
        self._installed = True

    def uninstall(self) -> None:
        """Puts back the SIGTERM handler that was there before :meth:`install`."""
        if not self._installed:
            return
        previous, self._previous, self._installed = self._previous, None, False
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
