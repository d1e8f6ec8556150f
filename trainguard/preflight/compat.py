"""Offline compatibility checks: machine ↔ accelerator ↔ count and TPU slice, region,
scheduling (Flex-start included), outputs, and the names of the resources the spec references.

These need no network and no credentials, so they run everywhere (the demo shows them on an A100
Spot spec). Facts come from ``trainguard.catalog``.
"""

from __future__ import annotations

import re
from datetime import date
from typing import TYPE_CHECKING

from trainguard import catalog
from trainguard.preflight.checks import PreflightContext, guarded, register
from trainguard.preflight.flexstart import check_flex_start
from trainguard.preflight.references import check_references
from trainguard.preflight.results import CheckResult, Status

if TYPE_CHECKING:
    from trainguard.spec import Pool

__all__ = [
    "check_machine",
    "check_unknown_machine",
    "check_tpu",
    "check_support",
    "check_region",
    "check_tpu_pools",
    "check_disks",
    "check_dns_peering",
    "check_scheduling",
    "check_outputs",
    "compat",
]

NAME = "compat"


def _pool_label(pool: Pool) -> str:
    acc = f" + {pool.accelerator_count} × {pool.accelerator_type}" if pool.accelerator_type else ""
    return f"workerPoolSpecs[{pool.index}] {pool.machine_type}{acc}"


def _result(
    rule: str,
    title: str,
    status: Status,
    evidence: str,
    remedy: str = "",
    failure_class: str = "",
    source: str = "",
    **details,
) -> CheckResult:
    """A compat result; ``rule`` names the rule (stable, for reports and the spec corpus) and
    ``source`` the catalog source the fact comes from."""
    details["rule"] = rule
    if source:
        details["source"] = catalog.SOURCES[source].url
        details["read"] = catalog.SOURCES[source].read
    return CheckResult(NAME, title, status, evidence, remedy, failure_class, details=details)


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
            return _result(
                "machine-needs-accelerator",
                title,
                Status.FAIL,
                f"{pool.machine_type} comes with {counts[0]} × {accel}, but the spec "
                "names no accelerator; Vertex rejects the job",
                f"set {fix_path}.acceleratorType: {accel} and acceleratorCount: {counts[0]}",
                "container",
                "configure-compute",
            )
        return _result("machine", title, Status.PASS, f"{pool.machine_type}, CPU only")
    allowed = rule.accelerators.get(pool.accelerator_type)
    if allowed is None:
        if rule.accelerators:
            options = "; ".join(f"{a} × {', '.join(map(str, c))}" for a, c in rule.accelerators.items())
            evidence = f"{pool.machine_type} takes {options}, not {pool.accelerator_type}"
        else:
            evidence = f"{pool.machine_type} takes no accelerators"
        example = _example_machine(pool.accelerator_type, pool.accelerator_count)
        return _result(
            "machine-accelerator",
            title,
            Status.FAIL,
            evidence,
            (
                f"pick a machine type for {pool.accelerator_type} (for example {example}) or change "
                f"{fix_path}.acceleratorType"
                if example
                else f"change {fix_path}.acceleratorType to one {pool.machine_type} takes"
            ),
            "container",
            "configure-compute",
        )
    if pool.accelerator_count not in allowed:
        return _wrong_count(pool, rule, allowed, title)
    return _result(
        "machine",
        title,
        Status.PASS,
        f"{pool.machine_type} takes {pool.accelerator_count} × {pool.accelerator_type}",
    )


def _wrong_count(pool: Pool, rule: catalog.MachineRule, allowed: tuple[int, ...], title: str) -> CheckResult:
    fix_path = f"workerPoolSpecs[{pool.index}].machineSpec"
    evidence = (
        f"{pool.machine_type} takes {pool.accelerator_type} × "
        f"{' or '.join(map(str, allowed))}, not {pool.accelerator_count}"
    )
    remedy = f"set {fix_path}.acceleratorCount: {allowed[0]}"
    if len(allowed) == 1 and rule.needs_accelerator:
        remedy += f", or pick the machine type of the same family with {pool.accelerator_count} accelerators"
    return _result(
        "accelerator-count", title, Status.FAIL, evidence, remedy, "container", "configure-compute"
    )


def _closest_listed(machine_type: str) -> str | None:
    """The listed machine type of the same family and kind nearest above in size
    (``n1-standard-2`` → ``n1-standard-4``), else difflib's closest listed name."""
    m = re.match(r"^(.*-)(\d+)([a-z]?)$", machine_type)
    if m:
        prefix, size, suffix = m.group(1), int(m.group(2)), m.group(3)
        sizes = sorted(
            int(t[len(prefix) : len(t) - len(suffix)] if suffix else t[len(prefix) :])
            for t in catalog.TRAINING_MACHINE_TYPES
            if t.startswith(prefix)
            and t.endswith(suffix)
            and (t[len(prefix) : len(t) - len(suffix)] if suffix else t[len(prefix) :]).isdigit()
        )
        if sizes:
            above = [n for n in sizes if n >= size]
            return f"{prefix}{above[0] if above else sizes[-1]}{suffix}"
    return catalog.suggest_machine(machine_type)


def check_unknown_machine(pool: Pool, title: str) -> CheckResult:
    """A machine type training does not list: FAIL when its family is listed (the page lists all
    of the family's types training accepts) or it follows no family's naming (a typo), WARN when
    its family is newer than the page (Google may take it; trainguard cannot check it)."""
    family = catalog.machine_family(pool.machine_type)
    path = f"workerPoolSpecs[{pool.index}].machineSpec.machineType"
    page = catalog.SOURCES["configure-compute"]
    if family is not None and family not in catalog.LISTED_FAMILIES:
        return _result(
            "machine-type-unlisted-family",
            title,
            Status.WARN,
            f"machine type {pool.machine_type} has the shape of the {family} family, which the "
            f"Vertex AI training machine-type list (read {page.read}) does not list, so its "
            "accelerators cannot be checked",
            "check it on the 'Configure compute for training' page; if training does not take "
            f"it, use a listed type (for example {_closest_listed(pool.machine_type) or 'n1-standard-8'})",
            source="configure-compute",
        )
    close = _closest_listed(pool.machine_type)
    if family is not None:
        evidence = (
            f"{pool.machine_type} is not one of the machine types Vertex AI training accepts "
            f"(the {family} types it takes are listed on 'Configure compute for training', "
            f"read {page.read})"
        )
    else:
        evidence = (
            f"{pool.machine_type!r} is not a Vertex AI machine type: it follows no known family's naming"
        )
    hint = f"; did you mean {close}?" if close else ""
    return _result(
        "machine-type",
        title,
        Status.FAIL,
        evidence + hint,
        f"set {path}: {close or 'n1-standard-8'} (see the Vertex AI 'Configure compute for training' page)",
        "container",
        "configure-compute",
        suggestion=close or "",
    )


def check_tpu(pool: Pool, rule: catalog.MachineRule, title: str) -> CheckResult:
    """A TPU machine type: accelerator, chips or cores, and slice topology (single- or
    multi-host), in the forms ``configure-compute`` documents."""
    fix_path = f"workerPoolSpecs[{pool.index}].machineSpec"
    if pool.machine_type == "cloud-tpu":
        return _check_cloud_tpu(pool, title)
    ((accel, (chips,)),) = rule.accelerators.items()
    slices = catalog.tpu_slices(pool.machine_type)
    single = rule.tpu_topologies.get(chips, "")
    entry = catalog.ACCELERATORS.get(accel)
    if pool.accelerator_type and pool.accelerator_type != accel:
        return _result(
            "tpu-accelerator",
            title,
            Status.FAIL,
            f"{pool.machine_type} holds {accel}, not {pool.accelerator_type}",
            f"set {fix_path}.acceleratorType: {accel}"
            if entry is not None and entry.in_enum
            else f"remove {fix_path}.acceleratorType: the machine type names the TPU",
            "container",
            "configure-compute",
        )
    if not pool.tpu_topology and accel in catalog.TPU_TOPOLOGY_REQUIRED:
        return _result(
            "tpu-topology",
            title,
            Status.FAIL,
            f"{pool.machine_type} ({accel}) has no tpuTopology, which Vertex AI requires for TPU v5",
            f"set {fix_path}.tpuTopology: {single} (its {chips} chips on one host)",
            "container",
            "sdk-tpu-topology",
        )
    if not pool.tpu_topology:
        return _result(
            "tpu-topology",
            title,
            Status.WARN,
            f"{pool.machine_type} has {chips} TPU chips but no tpuTopology",
            f"set {fix_path}.tpuTopology: {single}",
            source="configure-compute",
        )
    shape = slices.get(pool.tpu_topology)
    if shape is None:
        options = ", ".join(slices)
        return _result(
            "tpu-topology",
            title,
            Status.FAIL,
            f"{pool.machine_type} forms the slices {options}, not {pool.tpu_topology}",
            f"set {fix_path}.tpuTopology: {single} (one host), or one of {options}",
            "container",
            "configure-compute",
        )
    # One host holds ``chips``; a multi-host slice may state either the host's or the slice's.
    counts = (chips, shape.chips) if shape.multi_host else (chips,)
    if pool.accelerator_type and pool.accelerator_count not in counts:
        return _result(
            "tpu-count",
            title,
            Status.FAIL,
            f"{pool.machine_type} has {chips} chips per host, not {pool.accelerator_count}",
            f"set {fix_path}.acceleratorCount: {chips}",
            "container",
            "configure-compute",
        )
    if shape.multi_host:
        return _result(
            "tpu",
            title,
            Status.PASS,
            f"{pool.machine_type} forms a {shape.topology} slice: {shape.chips} "
            f"{accel} chips on {shape.hosts} hosts",
            chips=shape.chips,
            hosts=shape.hosts,
        )
    return _result(
        "tpu", title, Status.PASS, f"{pool.machine_type} holds {shape.chips} × {accel} ({shape.topology})"
    )


def _check_cloud_tpu(pool: Pool, title: str) -> CheckResult:
    """``cloud-tpu`` (TPU v2/v3): acceleratorType TPU_V2 or TPU_V3, 8 cores or a Pod slice."""
    fix_path = f"workerPoolSpecs[{pool.index}].machineSpec"
    if pool.accelerator_type not in ("TPU_V2", "TPU_V3"):
        return _result(
            "tpu-accelerator",
            title,
            Status.FAIL,
            f"cloud-tpu takes TPU_V2 or TPU_V3, not {pool.accelerator_type or 'no acceleratorType'}",
            f"set {fix_path}.acceleratorType: TPU_V3 (or TPU_V2) and acceleratorCount: 8",
            "container",
            "configure-compute",
        )
    kind = catalog.cloud_tpu_counts(pool.accelerator_type, pool.accelerator_count)
    if kind == "invalid":
        return _result(
            "tpu-count",
            title,
            Status.FAIL,
            f"cloud-tpu takes {pool.accelerator_type} × 8 (one TPU) or a multiple of 32 (a Pod "
            f"slice), not {pool.accelerator_count}",
            f"set {fix_path}.acceleratorCount: 8",
            "container",
            "configure-compute",
        )
    what = "one TPU device" if kind == "single" else "a TPU Pod slice"
    return _result(
        "tpu",
        title,
        Status.PASS,
        f"cloud-tpu takes {pool.accelerator_count} × {pool.accelerator_type} cores ({what})",
        pod=kind == "pod",
    )


#: Machine types a remedy names first (a common size of each family), before any other type
#: training accepts; whichever is named, it takes the accelerator at the count asked.
_PREFERRED_EXAMPLES = (
    "n1-standard-8",
    "n1-standard-16",
    "n1-standard-32",
    "n1-standard-64",
    "g2-standard-8",
    "a2-highgpu-1g",
    "a2-ultragpu-1g",
    "a3-highgpu-1g",
)


def _example_machine(accelerator: str, count: int = 1) -> str:
    """A machine type that takes ``count`` × ``accelerator`` (or the accelerator at all), ''
    when trainguard knows none: a remedy never names a machine that cannot work."""
    others = sorted(catalog.TRAINING_MACHINE_TYPES - set(_PREFERRED_EXAMPLES), key=lambda m: (len(m), m))
    candidates = [*_PREFERRED_EXAMPLES, *others]
    for wanted in (count, None):
        for machine in candidates:
            rule = catalog.machine_rule(machine)
            allowed = rule.accelerators.get(accelerator, ()) if rule is not None else ()
            if allowed and (wanted is None or wanted in allowed):
                return machine
    return ""


def check_support(pool: Pool, today: date | None = None) -> CheckResult | None:
    """An accelerator past its end of support: FAIL, with the date and what to use instead."""
    if not pool.accelerator_type:
        return None
    accel = catalog.ACCELERATORS.get(pool.accelerator_type)
    if accel is None or accel.end_of_support is None:
        return None
    when = accel.end_of_support.strftime("%B %-d, %Y")
    title = f"{pool.accelerator_type} support"
    if not accel.out_of_support(today):
        return _result(
            "end-of-support",
            title,
            Status.WARN,
            f"{pool.accelerator_type} reaches end of support on {when}",
            f"move to {accel.replacement} before then",
            source=accel.source,
        )
    swap = catalog.replacement_for(pool.accelerator_type, pool.machine_type, pool.accelerator_count)
    path = f"workerPoolSpecs[{pool.index}].machineSpec"
    if swap is None:
        remedy = f"use another accelerator in {path}"
    elif swap[0] == pool.machine_type:
        remedy = f"set {path}.acceleratorType: {swap[1]} (on {swap[0]}, × {swap[2]})"
    else:
        remedy = f"set {path}.machineType: {swap[0]}, acceleratorType: {swap[1]}, acceleratorCount: {swap[2]}"
    return _result(
        "end-of-support",
        title,
        Status.FAIL,
        f"{pool.accelerator_type} reached end of support on {when}: Vertex AI no longer "
        "provisions it for training",
        remedy,
        "container",
        accel.source,
    )


def check_region(pool: Pool, region: str) -> CheckResult | None:
    """Is the pool's accelerator (or TPU generation, or TPU Pod) offered in ``region``?"""
    name = pool.accelerator_type or catalog.tpu_machine_accelerator(pool.machine_type)
    if not name:
        return None
    accel = catalog.ACCELERATORS.get(name)
    title = f"{name} in {region}"
    if accel is None:
        return _result(
            "region",
            title,
            Status.WARN,
            f"{name} is not in trainguard's table",
            "check the Vertex AI locations page for training accelerators",
        )
    if accel.end_of_support is not None and accel.out_of_support():
        return None  # check_support already failed it; its regions no longer matter
    pod = pool.machine_type == "cloud-tpu" and catalog.cloud_tpu_counts(name, pool.accelerator_count) == "pod"
    regions = accel.pod_regions if pod else accel.regions
    what = f"{name} Pod slices ({pool.accelerator_count} cores)" if pod else name
    source = catalog.SOURCES[accel.region_source]
    if region in regions:
        return _result("region", title, Status.PASS, f"{what} offered for training in {region}")
    if not regions:
        return _result(
            "region",
            title,
            Status.WARN,
            f"trainguard's table lists no training regions for {name}",
            "check the Vertex AI locations page; the quota check asks the live API",
        )
    if pod:
        return _result(
            "tpu-pod-region",
            title,
            Status.FAIL,
            f"{what} are offered only in {', '.join(regions)} (read {source.read}), not {region}",
            f"run the job in {regions[0]}, or use acceleratorCount: 8 (one TPU device)",
            "capacity",
            accel.region_source,
        )
    # A warning, not a failure: the table ages; the live quota check is authoritative.
    return _result(
        "region",
        title,
        Status.WARN,
        f"{what} is not offered for Vertex AI training in {region} per {source.url} as of "
        f"{source.read}; the create would be refused or the job would wait for capacity that "
        "never comes",
        f"use one of {', '.join(regions)}",
        "capacity",
        accel.region_source,
    )


def check_tpu_pools(ctx: PreflightContext) -> list[CheckResult]:
    """A TPU job has one worker pool with one replica ("When you use a TPU VM ... you must
    only use a single worker pool ... and ... only one replica", configure-compute)."""
    pools = ctx.spec.pools
    tpu = [p for p in pools if (rule := catalog.machine_rule(p.machine_type)) is not None and rule.is_tpu]
    if not tpu:
        return []
    extra = [p for p in pools if p.index != tpu[0].index] + [p for p in tpu if p.replica_count > 1]
    if not extra:
        return []
    return [
        _result(
            "tpu-single-pool",
            "TPU job layout",
            Status.FAIL,
            "a TPU job takes one worker pool with replicaCount 1; this job has "
            + "; ".join(f"workerPoolSpecs[{p.index}] × {p.replica_count}" for p in pools),
            "keep one worker pool with replicaCount: 1 and choose the slice with tpuTopology "
            "(or acceleratorCount for cloud-tpu)",
            "container",
            "configure-compute",
        )
    ]


def check_disks(ctx: PreflightContext) -> list[CheckResult]:
    """``diskSpec``: a documented boot disk type, 100–64,000 GB (configure-compute)."""
    out = []
    low, high = catalog.BOOT_DISK_SIZE_GB
    for i, wp in enumerate(ctx.spec.job_spec.worker_pool_specs):
        disk = wp.disk_spec
        path = f"workerPoolSpecs[{i}].diskSpec"
        if disk.boot_disk_type and disk.boot_disk_type not in catalog.BOOT_DISK_TYPES:
            out.append(
                _result(
                    "boot-disk-type",
                    f"boot disk of workerPoolSpecs[{i}]",
                    Status.FAIL,
                    f"bootDiskType {disk.boot_disk_type!r} is not one training takes "
                    f"({', '.join(catalog.BOOT_DISK_TYPES)})",
                    f"set {path}.bootDiskType: pd-ssd",
                    "container",
                    "configure-compute",
                )
            )
        size = int(disk.boot_disk_size_gb)
        if size and not low <= size <= high:
            out.append(
                _result(
                    "boot-disk-size",
                    f"boot disk of workerPoolSpecs[{i}]",
                    Status.FAIL,
                    f"bootDiskSizeGb {size} is outside {low}–{high:,} GB, what training takes",
                    f"set {path}.bootDiskSizeGb: {low if size < low else high}",
                    "container",
                    "configure-compute",
                )
            )
    return out


def check_dns_peering(ctx: PreflightContext) -> list[CheckResult]:
    """PSC-I ``dnsPeeringConfigs[].domain``: "Must end with a dot" (aiplatform v1
    DnsPeeringConfig reference)."""
    out = []
    for i, cfg in enumerate(ctx.spec.job_spec.psc_interface_config.dns_peering_configs):
        if cfg.domain and not cfg.domain.endswith("."):
            out.append(
                _result(
                    "dns-peering-domain",
                    f"pscInterfaceConfig.dnsPeeringConfigs[{i}]",
                    Status.FAIL,
                    f"domain {cfg.domain!r} does not end with a dot; Vertex AI takes the DNS "
                    "name suffix with its trailing dot (e.g. 'my-internal-domain.corp.')",
                    f"set pscInterfaceConfig.dnsPeeringConfigs[{i}].domain: {cfg.domain}.",
                    "container",
                )
            )
    return out


def check_scheduling(ctx: PreflightContext) -> list[CheckResult]:
    """Spot without checkpoints, maxWaitDuration, reservations the strategy cannot use, TPU
    mixed with GPUs, timeout."""
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
            _result(
                "mixed-accelerators",
                "pools mix TPU and GPU",
                Status.FAIL,
                "one job cannot mix TPU and GPU worker pools",
                "use one accelerator kind for all worker pools",
                "container",
            )
        )
    # Only Spot is reclaimed: DWS capacity "aren't preemptible and behave like standard
    # resources" (dws), so a FLEX_START job without checkpoints loses nothing to a reclaim.
    if strategy == "SPOT" and not spec.base_output_dir:
        out.append(
            _result(
                "spot-checkpoints",
                f"{strategy} without checkpoints",
                Status.WARN,
                "scheduling.strategy is SPOT but baseOutputDirectory is not set, so Vertex sets "
                "no AIP_CHECKPOINT_DIR and a reclaim loses the whole run",
                "set baseOutputDirectory.outputUriPrefix (gs://BUCKET/PATH) and save checkpoints to "
                "AIP_CHECKPOINT_DIR (trainguard.runtime.CheckpointManager)",
                "preemption",
            )
        )
    elif strategy == "SPOT":
        out.append(
            _result(
                "spot-checkpoints",
                f"{strategy} with checkpoints",
                Status.PASS,
                f"{strategy} job checkpoints under {spec.base_output_dir.rstrip('/')}/checkpoints/",
            )
        )
    has_wait = type(sched).pb(sched).HasField("max_wait_duration")
    if has_wait and strategy != "FLEX_START":
        # The API takes maxWaitDuration only with FLEX_START: GCPC's launcher deletes it from
        # every other job before create ("max_wait_duration is acceptable only when strategy is
        # FLEX_START in CustomJob API", kubeflow/pipelines components/google-cloud/
        # google_cloud_pipeline_components/container/v1/custom_job/remote_runner.py).
        out.append(
            _result(
                "max-wait-strategy",
                "maxWaitDuration",
                Status.FAIL,
                f"scheduling.maxWaitDuration is set but the strategy is {strategy}; the CustomJob "
                "API accepts it only with FLEX_START",
                "remove scheduling.maxWaitDuration, or set scheduling.strategy: FLEX_START",
                "container",
            )
        )
    if strategy == "FLEX_START":
        wait = sched.max_wait_duration.total_seconds() if has_wait else None
        if wait == 0:
            out.append(
                _result(
                    "flex-start-wait",
                    "FLEX_START wait",
                    Status.WARN,
                    "scheduling.maxWaitDuration is 0s: the job waits for capacity indefinitely",
                    "set scheduling.maxWaitDuration (for example 86400s) to bound the wait",
                    source="dws",
                )
            )
        else:
            shown = f"{wait:g} s" if wait is not None else "1 day (Vertex's default)"
            out.append(
                _result(
                    "flex-start-wait", "FLEX_START wait", Status.PASS, f"waits for capacity up to {shown}"
                )
            )
    out.extend(_reservation_combinations(ctx))
    timeout = sched.timeout
    if timeout and timeout.total_seconds() < 300:
        out.append(
            _result(
                "timeout",
                "timeout",
                Status.WARN,
                f"scheduling.timeout is {timeout.total_seconds():g} s: provisioning "
                "an accelerator VM alone can take longer",
                "raise scheduling.timeout to cover provisioning plus training",
            )
        )
    return out


def _reservation_combinations(ctx: PreflightContext) -> list[CheckResult]:
    """A pool that consumes a reservation in a job whose capacity comes from elsewhere:
    Flex-start (DWS provisions it) or a persistent resource (its own machines)."""
    js = ctx.spec.job_spec
    out = []
    for pool in ctx.spec.pools:
        ra = js.worker_pool_specs[pool.index].machine_spec.reservation_affinity
        kind = type(ra).Type(ra.reservation_affinity_type).name
        if kind in ("TYPE_UNSPECIFIED", "NO_RESERVATION"):
            continue
        path = f"workerPoolSpecs[{pool.index}].machineSpec.reservationAffinity"
        if ctx.spec.strategy == "FLEX_START":
            other = "FLEX_START (Dynamic Workload Scheduler provisions the capacity)"
        elif js.persistent_resource_id:
            other = f"persistentResourceId {js.persistent_resource_id} (the job runs on its machines)"
        else:
            continue
        # A WARN, not a FAIL: no Google page read says how the API answers the combination.
        out.append(
            _result(
                "reservation-combination",
                f"reservationAffinity of workerPoolSpecs[{pool.index}]",
                Status.WARN,
                f"{path} is {kind} but the job's capacity comes from {other}: the reservation "
                "is not where its machines come from",
                f"remove {path}, or drop the other capacity source to run on the reservation",
                "capacity",
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
    """Machine/accelerator/TPU slice/region/support/scheduling/Flex-start/disks/resource names,
    offline. Each sub-check runs guarded: one that raises is reported as an internal error and
    the others still report."""
    results: list[CheckResult] = []
    for pool in ctx.spec.pools:
        if pool.reduction_server:
            continue
        label = _pool_label(pool)
        accel = catalog.ACCELERATORS.get(pool.accelerator_type or "")
        if accel is None or not accel.out_of_support():  # else check_support says it all
            results += guarded(NAME, f"machine/accelerator {label}", check_machine, pool)
        results += guarded(NAME, f"support of {label}", check_support, pool)
        results += guarded(NAME, f"region of {label}", check_region, pool, ctx.spec.region)
    results += guarded(NAME, "TPU job layout", check_tpu_pools, ctx)
    results += guarded(NAME, "scheduling", check_scheduling, ctx)
    results += guarded(NAME, "Flex-start", check_flex_start, ctx.spec)
    results += guarded(NAME, "boot disks", check_disks, ctx)
    results += guarded(NAME, "outputs", check_outputs, ctx)
    results += guarded(NAME, "PSC DNS peering", check_dns_peering, ctx)
    results += guarded(NAME, "resource names", check_references, ctx.spec)
    return results
