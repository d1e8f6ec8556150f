"""Training backends: ``local`` (this machine, Vertex's environment contract) and ``vertex``.

Backends implement :class:`~trainguard.launch.base.Backend`; their names are
:class:`trainguard.choices.Backend`, and :func:`~trainguard.launch.backends.make_backend` is the one
place a name becomes a backend.

Modules: ``base`` (the protocol, TrainResult, the watcher seam's types), ``backends`` (name →
backend), ``watching`` (how backends call the watcher), ``queueing`` (how long a Vertex job may
wait to start), ``echo`` (redacted, bounded output), ``sigterm``, ``local`` (the local backend),
``vertex`` (the Vertex backend), ``vertex_api`` (states, errors, the one retry helper),
``gcp_resources`` (GCPC's file), ``vertex_logs`` (a failed job's Cloud Logging tail).
"""

from __future__ import annotations

from trainguard.choices import Backend as BackendName
from trainguard.launch.base import (
    Backend,
    RunningJob,
    Stop,
    TrainResult,
    Watcher,
    diagnose,
    diagnose_result,
)

__all__ = [
    "Backend",
    "BackendName",
    "RunningJob",
    "Stop",
    "TrainResult",
    "Watcher",
    "diagnose",
    "diagnose_result",
    "BACKENDS",
]

BACKENDS = tuple(b.value for b in BackendName)
