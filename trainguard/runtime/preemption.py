"""SIGTERM (and Ctrl-C's SIGINT) as a flag: what Vertex sends a Spot/preempted worker before it
kills it (the grace period), and what a person sends a run in a terminal, turned into a flag that
the training loop reads at its next save point, so that the save happens between steps and never
from inside a signal handler. A second Ctrl-C stops at once (KeyboardInterrupt), as people expect.

SIGINT is taken only where Python's own handler is in place: a framework or program that installed
its own keeps it.

>>> flag = SigtermFlag()
>>> flag.install()
>>> flag.is_set, flag.exit_code
(False, 143)
>>> flag.uninstall()  # the handlers that were there before are back
"""

from __future__ import annotations

import signal
import threading
from typing import Any

__all__ = ["SigtermFlag", "stop_reason"]


def stop_reason(signum: int | None) -> str:
    """How a person reads the signal a run stopped on."""
    if signum == signal.SIGINT:
        return "interrupted (Ctrl-C)"
    return "stopped by SIGTERM (a Spot reclaim, a cancellation, or trainguard's guard)"


class SigtermFlag:
    """A SIGTERM/SIGINT handler that only sets a flag; ``uninstall`` puts back the previous ones."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._previous: dict[int, Any] = {}
        self._installed = False
        self.signum: int | None = None

    @property
    def is_set(self) -> bool:
        """True once SIGTERM or SIGINT arrived (or :meth:`set` was called)."""
        return self._event.is_set()

    @property
    def exit_code(self) -> int:
        """The exit status after the save: 128 + the signal (143 for SIGTERM, 130 for Ctrl-C)."""
        return 128 + int(self.signum or signal.SIGTERM)

    @property
    def reason(self) -> str:
        """``interrupted (Ctrl-C)`` or ``stopped by SIGTERM (…)``."""
        return stop_reason(self.signum)

    def set(self, signum: int = signal.SIGTERM) -> None:
        """Acts as if the signal had arrived (e.g. another process of the job got SIGTERM)."""
        if self.signum is None:
            self.signum = signum
        self._event.set()

    def _handle(self, signum: int, frame: object) -> None:
        if signum == signal.SIGINT and self._event.is_set():
            raise KeyboardInterrupt  # a second Ctrl-C: the person does not want to wait
        self.set(signum)

    def install(self, *, main_thread_only: bool = False) -> None:
        """Installs the handlers once (a second call keeps the first one's previous handlers).

        Python lets only the main thread install signal handlers: elsewhere this raises
        ``ValueError``, or does nothing with ``main_thread_only=True`` (a framework that runs
        its callbacks on a worker thread installs from the main thread instead).
        """
        if self._installed:
            return
        if main_thread_only and threading.current_thread() is not threading.main_thread():
            return
        self._previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, self._handle)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous[signal.SIGINT] = signal.signal(signal.SIGINT, self._handle)
        self._installed = True

    def uninstall(self) -> None:
        """Puts back the handlers that were there before :meth:`install`."""
        if not self._installed:
            return
        previous, self._previous, self._installed = self._previous, {}, False
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
