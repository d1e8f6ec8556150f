"""Training backends: ``local`` (this machine, Vertex's environment contract) and ``vertex``.

Backends implement :class:`~trainguard.launch.base.Backend`; their names are
:class:`trainguard.choices.Backend`.
"""

from __future__ import annotations

from trainguard.choices import Backend as BackendName
from trainguard.launch.base import Backend, RunningJob, Stop, TrainResult, Watcher, diagnose

__all__ = ["Backend", "BackendName", "RunningJob", "Stop", "TrainResult", "Watcher", "diagnose",
           "BACKENDS"]

BACKENDS = tuple(b.value for b in BackendName)
