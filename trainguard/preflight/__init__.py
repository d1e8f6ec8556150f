"""Preflight: prove a job can start before it is submitted.

Check families register themselves (``registry.register``); ``run_preflight`` runs those that
apply to the backend concurrently and returns a ``Report``.
"""

from trainguard.preflight.registry import CHECKS, PreflightContext, register
from trainguard.preflight.report import CheckResult, Report, Status
from trainguard.preflight.runner import available_checks, run_preflight

__all__ = [
    "CHECKS",
    "CheckResult",
    "PreflightContext",
    "Report",
    "Status",
    "available_checks",
    "register",
    "run_preflight",
]
