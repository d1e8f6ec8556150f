"""Offline compatibility checks: machine ↔ accelerator ↔ count and TPU slice, region,
scheduling (Flex-start included), outputs, and the names of the resources the spec references.

These need no network and no credentials, so they run everywhere (the demo shows them on an A100
Spot spec). Facts come from ``trainguard.catalog``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from trainguard import catalog
from trainguard.preflight.checks import PreflightContext, register
from trainguard.preflight.flexstart import check_flex_start
from trainguard.preflight.references import check_references
from trainguard.preflight.results import CheckResult, Status

if TYPE_CHECKING:
    from trainguard.spec import Pool

__all__ = [
    "check_machine",
    "check_unknown_machine",
    "check_tpu",
    "check_region",
    "check_scheduling",
    "check_outputs",
    "compat",
]

NAME = "compat"


def _pool_label(pool: Pool) -> str:
    acc = f" + {pool.accelerator_count} × {pool.accelerator_type}" if pool.accelerator_type else ""
    return f"workerPoolSpecs[{pool.index}] {pool.machine_type}{acc}"


def check_machine(pool: Pool) -> CheckResult:
    """Machine type ↔ accelerator type ↔ count (and TPU topology) for one pool."""
    title = f"machine/accelerator {_pool_label(pool)}"
    rule = catalog.machine_rule(pool.machine_type)
    if rule is None:
        return check_unknown_machine(pool, title)
    fix_path = f"workerPoolSpecs[{pool.index}].machineSpec"
    if rule.is_tpu:
        return check_tpu(pool, rule, title)
    if not pool.accelerator_type:
        if rule.needs_accelerator:
            ((accel, counts),) = rule.accelerators.items()
            return CheckResult(
                NAME,
                title,
                Status.FAIL,
                f"{pool.machine_type} comes with {counts[0]} × {accel}, but the spec "
                "names no accelerator; Vertex rejects the job",
                f"set {fix_path}.acceleratorType: {accel} and acceleratorCount: {counts[0]}",
                "container",
            )
        return CheckResult(NAME, title, Status.PASS, f"{pool.machine_type}, CPU only")
    allowed = rule.accelerators.get(pool.accelerator_type)
    if allowed is None:
        if rule.accelerators:
            options = "; ".join(
                f"{a} × {', '.join(map(str, c))}" if c else f"{a} (none at {rule.vcpus} vCPUs)"
                for a, c in rule.accelerators.items()
            )
            evidence = f"{pool.machine_type} takes {options}, not {pool.accelerator_type}"
        else:
            evidence = f"{pool.machine_type} takes no accelerators"
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            evidence,
            f"pick a machine type for {pool.accelerator_type} (for example "
            f"{_example_machine(pool.accelerator_type)}) or change "
            f"{fix_path}.acceleratorType",
            "container",
        )
    if pool.accelerator_count not in allowed:
        return _wrong_count(pool, rule, allowed, title)
    return CheckResult(
        NAME,
        title,
        Status.PASS,
        f"{pool.machine_type} takes {pool.accelerator_count} × {pool.accelerator_type}",
    )


def _wrong_count(pool: Pool, rule: catalog.MachineRule, allowed: tuple[int, ...], title: str) -> CheckResult:
    fix_path = f"workerPoolSpecs[{pool.index}].machineSpec"
    if not allowed:
        evidence = (
            f"{pool.machine_type} has {rule.vcpus} vCPUs, more than any "
            f"{pool.accelerator_type} count allows on n1"
        )
        remedy = f"use a smaller n1 machine type with {pool.accelerator_type}"
    else:
        evidence = (
            f"{pool.machine_type} takes {pool.accelerator_type} × "
            f"{' or '.join(map(str, allowed))}, not {pool.accelerator_count}"
        )
        remedy = f"set {fix_path}.acceleratorCount: {allowed[0]}"
        if len(allowed) == 1 and rule.needs_accelerator:
            remedy += (
                f", or pick the machine type of the same family with {pool.accelerator_count} accelerators"
            )
    return CheckResult(NAME, title, Status.FAIL, evidence, remedy, "container")


def check_unknown_machine(pool: Pool, title: str) -> CheckResult:
    """A machine type not in the table: WARN when it follows a known family's naming (a type
    trainguard has not learnt), FAIL with the closest known name otherwise (a typo)."""
    family = catalog.machine_family(pool.machine_type)
    path = f"workerPoolSpecs[{pool.index}].machineSpec.machineType"
    if family is not None:
        return CheckResult(
            NAME,
            title,
            Status.WARN,
            f"machine type {pool.machine_type} has the shape of the {family} family "
            "but is not in trainguard's table, so its accelerators cannot be "
            "checked",
            "check it on the Vertex AI 'Configure compute for training' "
            "page (gcloud compute machine-types list --filter=name="
            f"{pool.machine_type})",
        )
    close = catalog.suggest_machine(pool.machine_type)
    hint = f"; did you mean {close}?" if close else ""
    return CheckResult(
        NAME,
        title,
        Status.FAIL,
        f"{pool.machine_type!r} is not a Vertex AI machine type: it follows no known family's naming{hint}",
        f"set {path}: {close or 'n1-standard-8'} (see the Vertex AI 'Configure compute for training' page)",
        "container",
        details={"suggestion": close or ""},
    )


def check_tpu(pool: Pool, rule: catalog.MachineRule, title: str) -> CheckResult:
    """A TPU machine type: accelerator, chips and slice topology (single- or multi-host)."""
    fix_path = f"workerPoolSpecs[{pool.index}].machineSpec"
    ((accel, (chips,)),) = rule.accelerators.items()
    slices = catalog.tpu_slices(pool.machine_type)
    single = rule.tpu_topologies.get(chips, "")
    if not pool.accelerator_type:
        return CheckResult(
            NAME,
            title,
            Status.WARN,
            f"{pool.machine_type} is a {accel} machine type but the spec names no acceleratorType",
            f"set {fix_path}.acceleratorType: {accel} and acceleratorCount: {chips}",
        )
    if pool.accelerator_type != accel:
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"{pool.machine_type} takes {accel}, not {pool.accelerator_type}",
            f"set {fix_path}.acceleratorType: {accel}",
            "container",
        )
    if not slices:  # cloud-tpu (TPU v2/v3): 8 cores per device
        if pool.accelerator_count not in rule.accelerators[accel]:
            return _wrong_count(pool, rule, rule.accelerators[accel], title)
        return CheckResult(
            NAME, title, Status.PASS, f"{pool.machine_type} takes {pool.accelerator_count} × {accel}"
        )
    if not pool.tpu_topology:
        return CheckResult(
            NAME,
            title,
            Status.WARN,
            f"{pool.machine_type} has {chips} TPU chips but no tpuTopology",
            f"set {fix_path}.tpuTopology: {single}",
        )
    shape = slices.get(pool.tpu_topology)
    if shape is None:
        options = ", ".join(slices)
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"{pool.machine_type} forms the slices {options}, not {pool.tpu_topology}",
            f"set {fix_path}.tpuTopology: {single} (one host), or one of {options}",
            "container",
        )
    # One host holds ``chips``; a multi-host slice may state either the host's or the slice's.
    counts = (chips, shape.chips) if shape.multi_host else (chips,)
    if pool.accelerator_count not in counts:
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"{pool.machine_type} has {chips} chips per host, not {pool.accelerator_count}",
            f"set {fix_path}.acceleratorCount: {chips}",
            "container",
        )
    if shape.multi_host:
        return CheckResult(
            NAME,
            title,
            Status.PASS,
            f"{pool.machine_type} forms a {shape.topology} slice: {shape.chips} "
            f"{accel} chips on {shape.hosts} hosts",
            details={"chips": shape.chips, "hosts": shape.hosts},
        )
    return CheckResult(
        NAME,
        title,
        Status.PASS,
        f"{pool.machine_type} takes {pool.accelerator_count} × {accel} ({shape.topology})",
    )


def _example_machine(accelerator: str) -> str:
    examples = {
        "NVIDIA_TESLA_A100": "a2-highgpu-1g",
        "NVIDIA_A100_80GB": "a2-ultragpu-1g",
        "NVIDIA_L4": "g2-standard-8",
        "NVIDIA_H100_80GB": "a3-highgpu-1g",
        "NVIDIA_H100_MEGA_80GB": "a3-megagpu-8g",
        "NVIDIA_H200_141GB": "a3-ultragpu-8g",
        "NVIDIA_B200": "a4-highgpu-8g",
        "TPU_V5_LITEPOD": "ct5lp-hightpu-4t",
        "TPU_V4_POD": "ct4p-hightpu-4t",
    }
    return examples.get(accelerator, "n1-standard-8")


def check_region(pool: Pool, region: str) -> CheckResult | None:
    """Is the pool's accelerator offered for training in ``region`` (per the table)?"""
    if not pool.accelerator_type:
        return None
    accel = catalog.ACCELERATORS.get(pool.accelerator_type)
    title = f"{pool.accelerator_type} in {region}"
    if accel is None:
        return CheckResult(
            NAME,
            title,
            Status.WARN,
            f"{pool.accelerator_type} is not in trainguard's table",
            "check the Vertex AI locations page for training accelerators",
        )
    if region in accel.regions:
        return CheckResult(
            NAME, title, Status.PASS, f"{pool.accelerator_type} is offered for training in {region}"
        )
    if not accel.regions:
        return CheckResult(
            NAME,
            title,
            Status.WARN,
            f"trainguard's table lists no training regions for {pool.accelerator_type}",
            "check the Vertex AI locations page; the quota check asks the live API",
        )
    # A warning, not a failure: the table ages; the live quota check is authoritative.
    return CheckResult(
        NAME,
        title,
        Status.WARN,
        f"{pool.accelerator_type} is not offered for Vertex AI training in {region} "
        f"per the locations page as of {catalog.REGIONS_AS_OF}; a job there would "
        "stay QUEUED",
        f"use one of {', '.join(accel.regions)}",
        "quota",
    )


def check_scheduling(ctx: PreflightContext) -> list[CheckResult]:
    """Spot/Flex-start without checkpoints, maxWaitDuration, TPU mixed with GPUs, timeout."""
    spec, out = ctx.spec, []
    sched = spec.job_spec.scheduling
    strategy = spec.strategy
    pools = spec.pools
    kinds = {
        catalog.ACCELERATORS[p.accelerator_type].kind
        for p in pools
        if p.accelerator_type in catalog.ACCELERATORS
    }
    if {"gpu", "tpu"} <= kinds:
        out.append(
            CheckResult(
                NAME,
                "pools mix TPU and GPU",
                Status.FAIL,
                "one job cannot mix TPU and GPU worker pools",
                "use one accelerator kind for all worker pools",
                "container",
            )
        )
    if spec.preemptible and not spec.base_output_dir:
        out.append(
            CheckResult(
                NAME,
                f"{strategy} without checkpoints",
                Status.WARN,
                f"scheduling.strategy is {strategy} but baseOutputDirectory is not set, so Vertex sets "
                "no AIP_CHECKPOINT_DIR and a reclaim loses the whole run",
                "set baseOutputDirectory.outputUriPrefix (gs://BUCKET/PATH) and save checkpoints to "
                "AIP_CHECKPOINT_DIR (trainguard.runtime.CheckpointManager)",
                "preemption",
            )
        )
    elif spec.preemptible:
        out.append(
            CheckResult(
                NAME,
                f"{strategy} with checkpoints",
                Status.PASS,
                f"{strategy} job checkpoints under {spec.base_output_dir.rstrip('/')}/checkpoints/",
            )
        )
    if sched.max_wait_duration and strategy != "FLEX_START":
        out.append(
            CheckResult(
                NAME,
                "maxWaitDuration",
                Status.WARN,
                f"scheduling.maxWaitDuration is set but the strategy is {strategy}; "
                "Vertex applies it to FLEX_START only",
                "remove maxWaitDuration or set scheduling.strategy: FLEX_START",
            )
        )
    if strategy == "FLEX_START" and not sched.max_wait_duration:
        out.append(
            CheckResult(
                NAME,
                "FLEX_START wait",
                Status.WARN,
                "FLEX_START without maxWaitDuration waits for capacity for the service default",
                "set scheduling.maxWaitDuration (for example 3600s) to bound it",
            )
        )
    timeout = sched.timeout
    if timeout and timeout.total_seconds() < 300:
        out.append(
            CheckResult(
                NAME,
                "timeout",
                Status.WARN,
                f"scheduling.timeout is {timeout.total_seconds():g} s: provisioning "
                "an accelerator VM alone can take longer",
                "raise scheduling.timeout to cover provisioning plus training",
            )
        )
    return out


# Cloud Storage's naming rules: 3-63 characters of [a-z0-9._-], a letter or digit at each end;
# with dots up to 222, each dot-separated part at most 63.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")


def _bucket_name_ok(name: str) -> bool:
    if not _BUCKET.fullmatch(name):
        return False
    return len(name) <= 63 or ("." in name and all(len(p) <= 63 for p in name.split(".")))


def check_outputs(ctx: PreflightContext) -> list[CheckResult]:
    """baseOutputDirectory and service account are well-formed for Vertex."""
    spec, out = ctx.spec, []
    base = spec.base_output_dir
    if base and not base.startswith("gs://"):
        out.append(
            CheckResult(
                NAME,
                "baseOutputDirectory",
                Status.FAIL,
                f"outputUriPrefix {base!r} is not a gs:// URI; Vertex only writes to Cloud Storage",
                "set baseOutputDirectory.outputUriPrefix to gs://BUCKET/PATH (or run with the local backend)",
                "container",
            )
        )
    elif base and not _bucket_name_ok(base[5:].split("/", 1)[0]):
        out.append(
            CheckResult(
                NAME,
                "baseOutputDirectory",
                Status.FAIL,
                f"outputUriPrefix {base!r} names no valid bucket: a bucket name is "
                "3-63 lowercase letters, digits, '-', '_' or '.', starting and "
                "ending with a letter or digit",
                "set baseOutputDirectory.outputUriPrefix to gs://BUCKET/PATH with the bucket's exact name",
                "container",
            )
        )
    sa = spec.service_account
    if sa and ("@" not in sa or not sa.endswith(".gserviceaccount.com")):
        out.append(
            CheckResult(
                NAME,
                "serviceAccount",
                Status.FAIL,
                f"{sa!r} is not a service account email",
                "set serviceAccount to NAME@PROJECT.iam.gserviceaccount.com",
                "permission",
            )
        )
    return out


@register(NAME)
def compat(ctx: PreflightContext) -> list[CheckResult]:
    """Machine/accelerator/TPU slice/region/scheduling/Flex-start/resource names, offline."""
    results: list[CheckResult] = []
    for pool in ctx.spec.pools:
        if pool.reduction_server:
            continue
        results.append(check_machine(pool))
        region = check_region(pool, ctx.spec.region)
        if region is not None:
            results.append(region)
    results.extend(check_scheduling(ctx))
    results.extend(check_flex_start(ctx.spec))
    results.extend(check_outputs(ctx))
    results.extend(check_references(ctx.spec))
    return results
