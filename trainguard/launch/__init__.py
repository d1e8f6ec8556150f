"""Training backends: ``local`` (this machine, Vertex's environment contract) and ``vertex``."""

from __future__ import annotations

from trainguard.launch.base import TrainResult, diagnose

__all__ = ["TrainResult", "diagnose", "BACKENDS"]

BACKENDS = ("local", "vertex")
