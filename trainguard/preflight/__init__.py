"""Preflight: prove a job can start before it is submitted.

The check families are listed in ``checks.FAMILIES``; ``run_preflight`` imports and runs those
that apply to the backend (and to ``only``/``skip``) concurrently and returns a ``Report``.
Attributes are resolved lazily, so ``import trainguard.preflight`` costs nothing until used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainguard.preflight.checks import CHECKS, FAMILIES, PreflightContext, register
    from trainguard.preflight.results import CheckResult, Report, Status
    from trainguard.preflight.runner import available_checks, run_preflight

__all__ = [
    "CHECKS",
    "FAMILIES",
    "CheckResult",
    "PreflightContext",
    "Report",
    "Status",
    "available_checks",
    "register",
    "run_preflight",
]

_WHERE = {
    "CHECKS": "checks",
    "FAMILIES": "checks",
    "PreflightContext": "checks",
    "register": "checks",
    "CheckResult": "results",
    "Report": "results",
    "Status": "results",
    "available_checks": "runner",
    "run_preflight": "runner",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'trainguard.preflight' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"trainguard.preflight.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
