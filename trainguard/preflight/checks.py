"""The check registry: which check families exist, and the function each one runs.

``FAMILIES`` is the one table of families (name, module, backends, online, description). It is
read without importing any family, so listing or validating ``--only``/``--skip`` costs nothing;
``load(name)`` imports a family's module only when it is going to run, and the module's
``@register`` connects its function. Families' own imports (the Google clients) happen lazily
inside their functions, so a run of ``--only compat`` never imports a Google client.

A check is a function ``(ctx: PreflightContext) -> list[CheckResult]``. A check that raises is a
bug: the runner turns the exception into an ERROR result (an internal error, with the trace in
the log) and a time-out into UNKNOWN, so one broken check never crashes the run. A family made
of several sub-checks runs each through ``guarded`` so one broken sub-check costs only its own
result.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from trainguard.choices import Backend
from trainguard.preflight.results import CheckResult

if TYPE_CHECKING:
    from trainguard.spec import JobSpec

__all__ = [
    "PreflightContext",
    "Check",
    "Family",
    "FAMILIES",
    "register",
    "load",
    "guarded",
    "CHECKS",
    "BACKENDS",
]

BACKENDS = tuple(b.value for b in Backend)


@dataclass(frozen=True)
class PreflightContext:
    """What every check sees.

    Attributes:
        spec: the validated job spec.
        backend: ``vertex`` (the job will run on Vertex AI) or ``local`` (on this machine).
        call_timeout_s: the per-call time limit a check should pass to its clients.
        local_output_dir: for the local backend, where outputs go when the spec sets none.
        environ: the environment the local backend will run the command with.
        components_image: the pipeline's components image, checked by the image family ('' none).
        budget_usd: the most the job may cost at its timeout, in USD (None: no budget; the cost
            family checks it).
    """

    spec: JobSpec
    backend: str = "vertex"
    call_timeout_s: float = 10.0
    local_output_dir: str = ""
    environ: Mapping[str, str] = field(default_factory=dict)
    components_image: str = ""
    budget_usd: float | None = None


@dataclass(frozen=True)
class Family:
    """A check family as the registry knows it before its module is imported."""

    name: str
    module: str
    backends: tuple[str, ...]
    online: bool
    description: str


#: Every check family, in report order. ``module`` is under ``trainguard.preflight``.
FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "compat",
            "compat",
            ("vertex",),
            False,
            "machine/accelerator/region/scheduling, Flex-start, TPU slices, resource names (offline)",
        ),
        Family("local", "local_checks", ("local",), False, "command resolvable, output directory writable"),
        Family(
            "quota",
            "quota",
            ("vertex",),
            True,
            "accelerator and CPU quota per region (Cloud Quotas + Monitoring)",
        ),
        Family(
            "iam",
            "iam",
            ("vertex",),
            True,
            "job service account, caller and CMEK key IAM (Policy Troubleshooter, Cloud KMS)",
        ),
        Family(
            "image",
            "image",
            ("vertex",),
            True,
            "images exist, have linux/amd64 and an entrypoint (registry v2)",
        ),
        Family(
            "storage",
            "storage",
            ("vertex",),
            True,
            "output bucket and TensorBoard instance exist in the job's region",
        ),
        Family(
            "network",
            "network",
            ("vertex",),
            True,
            "VPC peering with servicenetworking, reserved ranges, PSC network attachment",
        ),
        Family(
            "capacity",
            "capacity",
            ("vertex",),
            True,
            "reservations and persistent resources the job names exist and fit",
        ),
        Family(
            "cost",
            "cost",
            ("vertex",),
            True,
            "price per hour, cost at scheduling.timeout, budget (Cloud Billing Catalog)",
        ),
    )
}


@dataclass(frozen=True)
class Check:
    """A loaded check family: its function, ready to run."""

    name: str
    func: Callable[[PreflightContext], list[CheckResult]]
    backends: tuple[str, ...]
    online: bool
    description: str


#: Loaded families (and any a caller registers directly), by name.
CHECKS: dict[str, Check] = {}


def register(
    name: str, *, backends: tuple[str, ...] = ("vertex",), online: bool = False, description: str = ""
):
    """Decorator: registers a check family's function under ``name``."""

    def wrap(func: Callable[[PreflightContext], list[CheckResult]]):
        if name in CHECKS and CHECKS[name].func is not func:
            raise ValueError(f"check {name!r} registered twice")
        family = FAMILIES.get(name)
        CHECKS[name] = Check(
            name,
            func,
            family.backends if family else backends,
            family.online if family else online,
            description
            or (family.description if family else "")
            or (func.__doc__ or "").strip().splitlines()[0],
        )
        return func

    return wrap


def load(name: str) -> Check:
    """The check called ``name``, importing its family's module on first use.

    Raises:
        KeyError: no such family.
    """
    if name not in CHECKS:
        importlib.import_module(f"trainguard.preflight.{FAMILIES[name].module}")
    return CHECKS[name]


def guarded(
    family: str, title: str, func: Callable[..., CheckResult | list[CheckResult] | None], *args
) -> list[CheckResult]:
    """``func(*args)`` as a list of results; an exception becomes one ERROR result (internal
    error, trace logged) titled ``title``, so the family's other sub-checks still report."""
    try:
        found = func(*args)
    except Exception as exc:  # a defect: reported, never silent
        from trainguard.preflight.runner import internal_error

        return [internal_error(family, title, exc)]
    if found is None:
        return []
    return [found] if isinstance(found, CheckResult) else list(found)
