"""Flex-start (Dynamic Workload Scheduler) requirements, checked offline (part of ``compat``).

A ``FLEX_START`` job that breaks one of DWS's requirements is rejected by Vertex AI (the facts,
and their source, are ``trainguard.catalog.FLEX_START``): every pool requests one of the supported
GPU types, the timeout is at most 7 days (unset means Vertex's default, 7 days), and every worker
pool uses the same machine configuration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainguard import catalog
from trainguard.durations import format_duration
from trainguard.preflight.results import CheckResult, Status

if TYPE_CHECKING:
    from trainguard.spec import JobSpec, Pool

__all__ = ["check_flex_start", "machine_config"]

NAME = "compat"


def machine_config(pool: Pool) -> tuple[str, str, int, str]:
    """What "the same machine configuration" compares: type, accelerator, count, topology."""
    return (pool.machine_type, pool.accelerator_type or "", pool.accelerator_count, pool.tpu_topology)


def _span(seconds: float) -> str:
    return f"{seconds / 86400:g} days" if seconds >= 86400 else format_duration(seconds)


def _describe(config: tuple[str, str, int, str]) -> str:
    machine, accel, count, topology = config
    text = machine + (f" + {count} × {accel}" if accel else "")
    return text + (f" ({topology})" if topology else "")


def check_flex_start(spec: JobSpec) -> list[CheckResult]:
    """DWS's three requirements for a FLEX_START job; [] for any other strategy (pure)."""
    if spec.strategy != "FLEX_START":
        return []
    rules = catalog.FLEX_START
    pools = list(spec.pools)
    supported = ", ".join(sorted(rules.accelerators))
    out = []
    wrong = [p for p in pools if p.accelerator_type not in rules.accelerators]
    if wrong:
        listed = "; ".join(f"workerPoolSpecs[{p.index}] {_describe(machine_config(p))}" for p in wrong)
        out.append(
            CheckResult(
                NAME,
                "Flex-start GPU types",
                Status.FAIL,
                f"FLEX_START (Dynamic Workload Scheduler) takes only {supported}; {listed} "
                "requests none of them, so Vertex AI rejects the job",
                f"use one of {supported} in every pool (for example a2-highgpu-1g + NVIDIA_TESLA_A100)"
                ", or set scheduling.strategy: SPOT or STANDARD",
                "capacity",
                details={"source": rules.source},
            )
        )
    else:
        out.append(
            CheckResult(
                NAME,
                "Flex-start GPU types",
                Status.PASS,
                "every pool requests a GPU type Flex-start takes ("
                + ", ".join(sorted({p.accelerator_type or "" for p in pools}))
                + ")",
            )
        )
    timeout = spec.job_spec.scheduling.timeout
    seconds = timeout.total_seconds() if timeout else 0
    limit = rules.max_timeout.total_seconds()
    if seconds > limit:
        out.append(
            CheckResult(
                NAME,
                "Flex-start timeout",
                Status.FAIL,
                f"scheduling.timeout is {_span(seconds)}; a FLEX_START job may run at most {_span(limit)}",
                f"set scheduling.timeout: {int(limit)}s (or less), "
                "and checkpoint so a longer run can resume in a second job",
                "capacity",
                details={"timeout_s": seconds, "limit_s": limit, "source": rules.source},
            )
        )
    else:
        shown = _span(seconds) if seconds else "unset (Vertex's default, 7 days)"
        out.append(
            CheckResult(
                NAME,
                "Flex-start timeout",
                Status.PASS,
                f"scheduling.timeout {shown} is within the 7-day limit",
            )
        )
    configs = {machine_config(p) for p in pools}
    if rules.same_machine_for_all_pools and len(configs) > 1:
        listed = "; ".join(f"workerPoolSpecs[{p.index}] {_describe(machine_config(p))}" for p in pools)
        first = pools[0]
        out.append(
            CheckResult(
                NAME,
                "Flex-start machine configuration",
                Status.FAIL,
                f"FLEX_START needs the same machine configuration in every worker pool; this job "
                f"has {listed}",
                f"give every pool the machineSpec of workerPoolSpecs[{first.index}] "
                f"({_describe(machine_config(first))}), or split the job",
                "capacity",
                details={"source": rules.source},
            )
        )
    elif len(pools) > 1:
        out.append(
            CheckResult(
                NAME,
                "Flex-start machine configuration",
                Status.PASS,
                f"all {len(pools)} pools use {_describe(configs.pop())}",
            )
        )
    return out
