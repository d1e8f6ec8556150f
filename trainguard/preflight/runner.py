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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from trainguard.errors import ConfigError
from trainguard.preflight.alternatives import FAMILIES as ALTERNATIVE_FAMILIES
from trainguard.preflight.checks import BACKENDS, CHECKS, FAMILIES, Check, PreflightContext, load
from trainguard.preflight.results import CheckResult, Report, Status

if TYPE_CHECKING:
    from trainguard.launch.alternatives import Alternative
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
    alternatives: Sequence[Alternative] = (),
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
        alternatives: the job's fallbacks (Vertex): each is checked too, with the families
            that depend on where and on what it runs, all within the one deadline
            (:mod:`trainguard.preflight.alternatives`).

    Raises:
        ConfigError: an unknown backend or check name, a deadline that is not a positive number,
            a malformed ``TRAINGUARD_ENDPOINT_*`` (when an online check runs).
        SpecError: an alternative makes the job invalid.
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
    others = [(a, a.apply(spec)) for a in alternatives] if backend == "vertex" else []
    # One task per (0 = the job, n = its n-th alternative; family), all under one deadline.
    tasks: dict[tuple[int, str], PreflightContext] = {(0, name): ctx for name in names}
    for n, (_, alt_spec) in enumerate(others, start=1):
        for name in names:
            if name in ALTERNATIVE_FAMILIES:
                tasks[(n, name)] = replace(ctx, spec=alt_spec, components_image="")
    started = time.perf_counter()
    done = _run_all(tasks, checks, started + timeout_s)
    found: dict[int, list[CheckResult]] = {}
    for (n, name), _ in tasks.items():
        found.setdefault(n, []).extend(_results_of(name, done.get((n, name)), timeout_s, started))
    order = {n: i for i, n in enumerate(names)}
    for rows in found.values():
        rows.sort(key=lambda r: order.get(r.check, len(order)))
    results = found.get(0, [])
    if others:
        from trainguard.preflight.alternatives import combine

        results = combine(
            spec, results, [(a, s, found.get(n, [])) for n, (a, s) in enumerate(others, start=1)]
        )
    subject = f"{spec.display_name} in {spec.project}/{spec.region}"
    return Report(subject=subject, backend=backend, results=results, wall_s=time.perf_counter() - started)


_Outcome = tuple[list[CheckResult] | None, BaseException | None]


def _run_all(
    tasks: Mapping[tuple[int, str], PreflightContext], checks: Mapping[str, Check], deadline: float
) -> dict[tuple[int, str], _Outcome]:
    """Runs every task in a thread of its own; what finished by ``deadline``."""
    # Daemon threads, not a pool: a check stuck in a hung call must neither delay the report
    # past the deadline nor keep the process alive after it.
    outcomes: dict[tuple[int, str], _Outcome] = {}
    finished = threading.Condition()

    def run_one(key: tuple[int, str]) -> None:
        outcome: _Outcome
        try:
            outcome = (_timed(checks[key[1]].func, tasks[key]), None)
        except BaseException as exc:  # reported as ERROR below
            outcome = (None, exc)
        with finished:
            outcomes[key] = outcome
            finished.notify_all()

    for key in tasks:
        threading.Thread(
            target=run_one, args=(key,), name=f"preflight-{key[1]}-{key[0]}", daemon=True
        ).start()
    with finished:
        while len(outcomes) < len(tasks) and time.perf_counter() < deadline:
            finished.wait(timeout=max(0.0, deadline - time.perf_counter()))
        return dict(outcomes)


def _results_of(name: str, outcome: _Outcome | None, timeout_s: float, started: float) -> list[CheckResult]:
    """One family's results: its own, UNKNOWN when it missed the deadline, ERROR when it raised."""
    if outcome is None:
        return [
            CheckResult(
                name,
                "did not finish",
                Status.UNKNOWN,
                f"still running after the {timeout_s:g} s deadline",
                "check network access to the API, or raise --timeout",
                duration_s=timeout_s,
            )
        ]
    found, exc = outcome
    if exc is not None:
        return [internal_error(name, "the check family", exc, time.perf_counter() - started)]
    return list(found or ())


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
