"""Runs the registered checks concurrently and gathers one report.

Each check family runs in its own thread with a deadline, so the run always ends with a report: a
missed deadline is UNKNOWN (the world did not answer in time), an exception is ERROR, an internal
error of trainguard's, with its trace in the log (a check that raises is a bug, never a statement
about the job).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from trainguard.errors import ConfigError
from trainguard.preflight.checks import BACKENDS, CHECKS, FAMILIES, PreflightContext, load
from trainguard.preflight.results import CheckResult, Report, Status

if TYPE_CHECKING:
    from trainguard.spec import JobSpec

__all__ = ["run_preflight", "available_checks", "internal_error"]

_LOG = logging.getLogger(__name__)


def available_checks(backend: str = "vertex") -> list[str]:
    """Names of the check families that apply to ``backend`` (nothing is imported)."""
    names = [f.name for f in FAMILIES.values() if backend in f.backends]
    return names + [c.name for c in CHECKS.values() if c.name not in FAMILIES and backend in c.backends]


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:300]


def internal_error(check: str, title: str, exc: BaseException, duration_s: float = 0.0) -> CheckResult:
    """An exception inside a check, as the report shows it: ERROR, naming the exception, with
    the whole trace written to the log (``logging`` at ERROR, which reaches stderr)."""
    _LOG.error("internal error in preflight check %s (%s): please report it", check, title, exc_info=exc)
    return CheckResult(
        check,
        f"internal error: {title}",
        Status.ERROR,
        f"the check raised {_describe(exc)}; what it checks is unproven",
        "this is a defect in trainguard (the trace is in the log): report it; rerun with --skip "
        f"{check} to see the other checks",
        duration_s=duration_s,
    )


def run_preflight(
    spec: JobSpec,
    *,
    backend: str = "vertex",
    only: Iterable[str] | None = None,
    skip: Iterable[str] | None = None,
    timeout_s: float = 30.0,
    call_timeout_s: float = 10.0,
    local_output_dir: str = "",
    environ: Mapping[str, str] | None = None,
    components_image: str = "",
    budget_usd: float | None = None,
) -> Report:
    """Runs the checks that apply to ``backend`` and returns the report.

    Args:
        spec: the validated job spec.
        backend: ``vertex`` or ``local``.
        only: run just these check families.
        skip: leave these out.
        timeout_s: the deadline for the whole run; a check still running then is UNKNOWN.
        call_timeout_s: the per-call limit handed to each check's clients.
        local_output_dir: the local backend's output directory when the spec sets none.
        environ: the environment the local backend will use.
        components_image: the pipeline's components image, for the image family ('' none).
        budget_usd: the cost family fails a job whose cost at its timeout exceeds it (None: none).

    Raises:
        ConfigError: an unknown backend or check name, a deadline that is not a positive number,
            a malformed ``TRAINGUARD_ENDPOINT_*`` (when an online check runs).
    """
    names = _chosen(backend, only, skip)
    if not (isinstance(timeout_s, int | float) and math.isfinite(timeout_s) and timeout_s > 0):
        raise ConfigError(
            f"--timeout must be a finite number of seconds above 0 (default 30), not {timeout_s!r}"
        )
    checks = {name: load(name) for name in names}  # only the families that run are imported
    if any(c.online for c in checks.values()):
        from trainguard.gcp import check_overrides

        check_overrides()  # a malformed endpoint override is bad input, not N times UNKNOWN
    ctx = PreflightContext(
        spec=spec,
        backend=backend,
        call_timeout_s=call_timeout_s,
        local_output_dir=local_output_dir,
        environ=dict(environ or {}),
        components_image=components_image,
        budget_usd=budget_usd,
    )
    started = time.perf_counter()
    results: list[CheckResult] = []
    # Daemon threads, not a pool: a check stuck in a hung call must neither delay the report
    # past the deadline nor keep the process alive after it.
    outcomes: dict[str, tuple[list[CheckResult] | None, BaseException | None]] = {}
    finished = threading.Condition()

    def run_one(name: str) -> None:
        outcome: tuple[list[CheckResult] | None, BaseException | None]
        try:
            outcome = (_timed(checks[name].func, ctx), None)
        except BaseException as exc:  # reported as ERROR below
            outcome = (None, exc)
        with finished:
            outcomes[name] = outcome
            finished.notify_all()

    for name in names:
        threading.Thread(target=run_one, args=(name,), name=f"preflight-{name}", daemon=True).start()
    deadline = started + timeout_s
    with finished:
        while len(outcomes) < len(names) and time.perf_counter() < deadline:
            finished.wait(timeout=max(0.0, deadline - time.perf_counter()))
        done = dict(outcomes)
    for name in names:
        if name not in done:
            results.append(
                CheckResult(
                    name,
                    "did not finish",
                    Status.UNKNOWN,
                    f"still running after the {timeout_s:g} s deadline",
                    "check network access to the API, or raise --timeout",
                    duration_s=timeout_s,
                )
            )
            continue
        found, exc = done[name]
        if exc is not None:
            results.append(internal_error(name, "the check family", exc, time.perf_counter() - started))
            continue
        results.extend(found or ())
    order = {n: i for i, n in enumerate(names)}
    results.sort(key=lambda r: order.get(r.check, len(order)))
    subject = f"{spec.display_name} in {spec.project}/{spec.region}"
    return Report(subject=subject, backend=backend, results=results, wall_s=time.perf_counter() - started)


def _chosen(backend: str, only: Iterable[str] | None, skip: Iterable[str] | None) -> list[str]:
    """The check families to run: the backend's, narrowed by --only and --skip.

    Raises:
        ConfigError: an unknown backend or check, one of another backend, or nothing left.
    """
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; use one of {', '.join(BACKENDS)}")
    names = available_checks(backend)
    known = set(FAMILIES) | set(CHECKS)
    for label, chosen in (("--only", only), ("--skip", skip)):
        unknown = sorted(set(chosen or ()) - known)
        if unknown:
            raise ConfigError(
                f"{label}: unknown check {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
    if only:
        elsewhere = sorted(set(only) - set(names))
        if elsewhere:
            raise ConfigError(
                f"--only: {', '.join(elsewhere)}: not a check of the {backend} "
                f"backend, whose checks are {', '.join(names)}"
            )
        names = [n for n in names if n in set(only)]
    if skip:
        names = [n for n in names if n not in set(skip)]
    if not names:
        raise ConfigError(
            "no check left to run: --skip removed them all; a preflight that checks nothing cannot pass"
        )
    return names


def _timed(func, ctx: PreflightContext) -> list[CheckResult]:
    started = time.perf_counter()
    out = func(ctx)
    if isinstance(out, CheckResult):
        out = [out]
    elapsed = time.perf_counter() - started
    return [r if r.duration_s else _with_duration(r, elapsed) for r in out]


def _with_duration(result: CheckResult, seconds: float) -> CheckResult:
    return replace(result, duration_s=round(seconds, 4))
