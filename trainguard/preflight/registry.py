"""The check registry: each check family registers itself here; the runner asks for them.

A check is a function ``(ctx: PreflightContext) -> list[CheckResult]``. It may raise: the runner
turns any exception or time-out into UNKNOWN with the reason, so one broken check never crashes
the run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from trainguard.preflight.report import CheckResult
from trainguard.spec import JobSpec

__all__ = ["PreflightContext", "Check", "register", "CHECKS", "BACKENDS"]

BACKENDS = ("vertex", "local")


@dataclass(frozen=True)
class PreflightContext:
    """What every check sees.

    Attributes:
        spec: the validated job spec.
        backend: ``vertex`` (the job will run on Vertex AI) or ``local`` (on this machine).
        call_timeout_s: the per-call time limit a check should pass to its clients.
        local_output_dir: for the local backend, where outputs go when the spec sets none.
        environ: the environment the local backend will run the command with.
    """

    spec: JobSpec
    backend: str = "vertex"
    call_timeout_s: float = 10.0
    local_output_dir: str = ""
    environ: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    """A registered check family."""

    name: str
    func: Callable[[PreflightContext], list[CheckResult]]
    backends: tuple[str, ...]
    online: bool
    description: str


CHECKS: dict[str, Check] = {}


def register(name: str, *, backends: tuple[str, ...] = ("vertex",), online: bool = False,
             description: str = ""):
    """Decorator: registers a check family under ``name``."""

    def wrap(func: Callable[[PreflightContext], list[CheckResult]]):
        if name in CHECKS:
            raise ValueError(f"check {name!r} registered twice")
        CHECKS[name] = Check(name, func, backends, online, description or (func.__doc__ or "")
                             .strip().splitlines()[0])
        return func

    return wrap
