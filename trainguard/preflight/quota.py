"""Quota: does the region have room for every worker pool's accelerators, and for the vCPUs of
its CPU-only pools?

The limit comes from the Cloud Quotas API (``list_quota_infos`` on
``projects/P/locations/global/services/aiplatform.googleapis.com``, matched on ``metric`` — quota
IDs are not stable enough to hard-code — and the ``dimensionsInfos`` entry for the region, else the
region-less default). Usage comes from Cloud Monitoring
(``serviceruntime.googleapis.com/quota/allocation/usage`` on the ``consumer_quota`` resource; REST,
the Python client being gRPC-only). What Vertex does with a quota-short job depends on which
number is short: a request over the *limit* is refused at create (429 RESOURCE_EXHAUSTED "The
following quota metrics exceed quota limits: …"); one within the limit but short of *free* quota
(other jobs hold it) is accepted and stays QUEUED until they free it. Usage is a sample Monitoring
repeats only "at least every 24 hours" when it does not change (the metric's description), so the
window read is longer than a day, and a metric with no sample in it is *unknown* usage, not 0:
nothing was ever allocated in the region, or the series cannot be seen. Metric names come from
``trainguard.catalog``: GPUs count accelerators × replicas; TPUs count the chips of the whole
slice (its topology) × replicas, in cores where the project's quota is kept in cores (TPU v4,
whose metric is found by pattern); CPU-only pools count vCPUs × replicas against their machine
family's ``custom_model_training_*cpus`` metric.
"""

from __future__ import annotations

import concurrent.futures as cf
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from trainguard import catalog, gcp
from trainguard.preflight.checks import PreflightContext, register
from trainguard.preflight.common import (
    api_retry,
    call_policy,
    describe_failure,
    enable_line,
    endpoint_of,
    role_for,
    unknown_result,
)
from trainguard.preflight.results import CheckResult, Status

if TYPE_CHECKING:
    from trainguard.spec import JobSpec, Pool

__all__ = [
    "Demand",
    "Limit",
    "demands",
    "pool_units",
    "limit_in",
    "latest_usage",
    "no_sample",
    "increase_command",
    "quota_id_of",
    "assess",
    "resolve",
    "quota",
]

NAME = "quota"
SERVICE = "aiplatform.googleapis.com"
USAGE_METRIC = "serviceruntime.googleapis.com/quota/allocation/usage"
CONSOLE_URL = "https://console.cloud.google.com/iam-admin/quotas?project={project}"
# Allocation usage is a gauge written when it changes, and "if no changes are received in quota
# usage, the last value is repeated at least every 24 hours" (the metric's description,
# https://cloud.google.com/monitoring/api/metrics_gcp_p_z#gcp-serviceruntime): a window of 25 h
# with one alignment period holds the latest sample of every series that exists.
USAGE_WINDOW = timedelta(hours=25)


@dataclass(frozen=True)
class Demand:
    """What the job asks of one quota metric: ``units`` over the pools in ``pools``.

    Attributes:
        accelerator: the accelerator type, or the machine family's vCPUs (``n2 vCPUs``).
        pattern: for a metric Google does not document (TPU v4), the pattern ``resolve`` finds it
            by in the project's quota list; ``metric`` is then only a label until resolved.
        cores_per_chip: a TPU's cores per chip, for a limit kept in cores.
    """

    metric: str
    accelerator: str
    units: int
    pools: tuple[int, ...]
    pattern: re.Pattern[str] | None = None
    cores_per_chip: int = 1
    unit: str = ""

    @property
    def short(self) -> str:
        return self.metric.split("/", 1)[-1]


@dataclass(frozen=True)
class Limit:
    """The limit in force for a region; ``quota_id`` for the increase command; -1 = unlimited."""

    value: int
    quota_id: str
    source: str  # "region" (an entry for this region) or "default"


def pool_units(pool: Pool) -> int:
    """Accelerator quota units one pool consumes: accelerators × replicas (TPU: the chips of its
    slice × replicas); 0 for a CPU-only pool."""
    if not pool.accelerator_type:
        return 0
    accel = catalog.ACCELERATORS.get(pool.accelerator_type)
    if accel is not None and accel.kind == "tpu":
        return (
            catalog.tpu_chips(pool.machine_type, pool.accelerator_count, pool.tpu_topology)
            * pool.replica_count
        )
    return pool.accelerator_count * pool.replica_count


def _pool_demand(pool: Pool, preemptible: bool) -> Demand | str:
    """The demand of one pool, or the reason it has no known metric."""
    if pool.accelerator_type:
        units = pool_units(pool)
        metric = catalog.quota_metric(pool.accelerator_type, preemptible)
        if metric is not None:
            return Demand(
                metric,
                pool.accelerator_type,
                units,
                (pool.index,),
                unit="chips" if catalog.ACCELERATORS[pool.accelerator_type].kind == "tpu" else "",
            )
        pattern = catalog.quota_metric_pattern(pool.accelerator_type, preemptible)
        if pattern is None:
            return f"trainguard knows no Vertex AI quota metric for {pool.accelerator_type}"
        accel = catalog.ACCELERATORS[pool.accelerator_type]
        label = pattern.pattern.strip("^$").replace("\\", "")
        return Demand(
            label,
            pool.accelerator_type,
            units,
            (pool.index,),
            pattern=pattern,
            cores_per_chip=accel.cores_per_chip,
            unit="chips",
        )
    metric = catalog.cpu_quota_metric(pool.machine_type, preemptible)
    vcpus = catalog.machine_vcpus(pool.machine_type)
    if metric is None or vcpus is None:
        return (
            f"trainguard cannot tell the vCPUs or CPU quota metric of {pool.machine_type} "
            f"(workerPoolSpecs[{pool.index}])"
        )
    family = pool.machine_type.split("-", 1)[0]
    return Demand(metric, f"{family} vCPUs", vcpus * pool.replica_count, (pool.index,), unit="vCPUs")


def demands(spec: JobSpec) -> tuple[list[Demand], list[str]]:
    """The job's demand per quota metric (pools summed), and why some pools have none known."""
    totals: dict[str, Demand] = {}
    unknown: list[str] = []
    for pool in spec.pools:
        found = _pool_demand(pool, spec.preemptible)
        if isinstance(found, str):
            unknown.append(found)
            continue
        prev = totals.get(found.metric)
        if prev is not None:
            found = replace(prev, units=prev.units + found.units, pools=prev.pools + found.pools)
        totals[found.metric] = found
    return list(totals.values()), unknown


def resolve(demand: Demand, infos: dict) -> Demand | None:
    """A pattern demand made concrete from the project's quota list (units in cores when the
    quota counts cores); the demand itself when it has a metric; None when nothing matches."""
    if demand.pattern is None:
        return demand
    found = sorted(m for m in infos if demand.pattern.match(m))
    if not found:
        return None
    info = infos[found[0]]
    names = f"{info.metric_display_name} {info.quota_display_name}".lower()
    in_cores = "core" in names and demand.cores_per_chip > 1
    return replace(
        demand,
        metric=found[0],
        pattern=None,
        units=demand.units * (demand.cores_per_chip if in_cores else 1),
        unit="cores" if in_cores else demand.unit,
    )


def limit_in(info, region: str) -> Limit | None:
    """The limit a QuotaInfo sets in ``region``: its entry for the region, else the default.

    ``dimensionsInfos`` are ordered most specific first; the entry without a ``region`` dimension
    applies to every region that has no entry of its own.
    """
    default = None
    for entry in info.dimensions_infos:
        dims = dict(entry.dimensions)
        if dims.get("region") == region:
            return Limit(int(entry.details.value), info.quota_id, "region")
        if "region" not in dims and default is None:
            default = Limit(int(entry.details.value), info.quota_id, "default")
    return default


def latest_usage(payload: dict) -> int | None:
    """The current usage in a timeSeries.list answer: each series' newest point; None when the
    answer holds no point at all (not proof of zero usage: see the module docstring)."""
    values = []
    for series in payload.get("timeSeries", []):
        points = series.get("points") or []
        if not points:
            continue
        newest = max(points, key=lambda p: p.get("interval", {}).get("endTime", ""))
        value = newest.get("value", {})
        raw = value.get("int64Value", value.get("doubleValue", 0))
        values.append(int(float(raw)))
    # One series per (metric, location) is expected; if the service splits it, the largest is
    # the conservative reading that cannot hide a shortage.
    return max(values, default=None)


def no_sample(metric: str, region: str) -> str:
    """Why usage is unknown when Monitoring answered with no sample."""
    hours = int(USAGE_WINDOW.total_seconds() // 3600)
    return (
        f"Cloud Monitoring holds no quota-usage sample of {metric} in {region} in the last {hours} h "
        "(it repeats the sample at least every 24 hours, so either nothing of it was ever "
        "allocated there or the series cannot be read; not counted as 0)"
    )


def _alternatives(demand: Demand, region: str, info) -> tuple[list[str], bool]:
    """Other training regions of the accelerator (catalog) and whether their limits fit.

    With the QuotaInfo at hand, the regions whose limit covers the request come first, with
    their limits; when none does, the catalog regions are all there is to offer.
    """
    accel = catalog.ACCELERATORS.get(demand.accelerator)
    regions = [r for r in (accel.regions if accel else ()) if r != region]
    if info is None:
        return regions, False
    fits = []
    for r in regions:
        limit = limit_in(info, r)
        if limit is not None and (limit.value < 0 or limit.value >= demand.units):
            fits.append(f"{r} (limit {'unlimited' if limit.value < 0 else limit.value})")
    return (fits, True) if fits else (regions, False)


def assess(
    demand: Demand,
    *,
    project: str,
    region: str,
    limit: Limit | None,
    usage: int | None,
    info=None,
    usage_problem: str = "",
    usage_fix: str = "",
) -> CheckResult:
    """PASS / WARN / FAIL for one metric from the limit and usage (pure).

    A request over the limit FAILs as Vertex's refusal at create; one within the limit that the
    usage leaves no room for FAILs as a job that would wait QUEUED.

    Args:
        usage: None when it is unknown (``usage_problem`` says why): the limit alone is
            compared, and a fit is only a WARN.
        usage_fix: what to do so usage can be read (``gcloud services enable …``); '' for the
            default (the Monitoring role).
    """
    pools = ", ".join(f"workerPoolSpecs[{i}]" for i in demand.pools)
    title = f"{demand.short} in {region}"
    url = CONSOLE_URL.format(project=project)
    details = {
        "metric": demand.metric,
        "region": region,
        "requested": demand.units,
        "pools": list(demand.pools),
    }
    if limit is None:
        return CheckResult(
            NAME,
            title,
            Status.UNKNOWN,
            f"Cloud Quotas has no entry for {demand.metric} in {region}",
            f"verify by hand: gcloud quotas info list --service={SERVICE} "
            f"--project={project} --filter=metric={demand.metric}",
            "quota",
            details=details,
        )
    details.update(limit=limit.value, limit_source=limit.source, usage=usage, quota_id=limit.quota_id)
    if limit.value < 0:
        return CheckResult(
            NAME,
            title,
            Status.PASS,
            f"{demand.metric} is unlimited in {region}; {pools} request {demand.units}",
            details=details,
        )
    in_use = usage or 0
    available = limit.value - in_use
    details["available"] = available
    unit = f" {demand.unit}" if demand.unit else ""
    if available >= demand.units and usage is not None:
        return CheckResult(
            NAME,
            title,
            Status.PASS,
            f"{demand.metric} in {region}: limit {limit.value}, in use {usage}, "
            f"requested {demand.units}{unit} ({pools}); {available} available",
            details=details,
        )
    if limit.value >= demand.units and usage is None:
        return CheckResult(
            NAME,
            title,
            Status.WARN,
            f"{demand.metric} in {region}: limit {limit.value} covers the "
            f"{demand.units} requested ({pools}), but current usage is unknown "
            f"({usage_problem}); running jobs may hold some of it, and then the job waits "
            "QUEUED until they free it",
            usage_fix
            or (
                f"check current usage at {url} (preflight needs "
                f"{role_for('monitoring.timeSeries.list')} to read it)"
            ),
            "quota",
            details=details,
        )
    needed = in_use + demand.units
    alternatives, fit = _alternatives(demand, region, info)
    over = demand.units > limit.value
    # Usage is unknown here only over the limit (a fit with unknown usage WARNed above), where
    # it does not matter: the request alone is too large.
    used = f", in use {usage}" if usage is not None else ""
    if over:
        # Over the limit: Vertex refuses customJobs.create at once (429 RESOURCE_EXHAUSTED
        # "The following quota metrics exceed quota limits: …",
        # GoogleCloudPlatform/stable-diffusion-on-gcp#12, google-deepmind/xmanager#29).
        outcome = (
            "over the limit: Vertex refuses to create the job (429 RESOURCE_EXHAUSTED, "
            "'The following quota metrics exceed quota limits')"
        )
    else:
        outcome = (
            f"within the limit, but {in_use} in use leave {available}: Vertex accepts the job "
            "and it stays QUEUED until other jobs free the rest"
        )
    details["refused_at_create"] = over
    evidence = (
        f"{demand.metric} in {region}: limit {limit.value}{used}, requested "
        f"{demand.units}{unit} ({pools}); {outcome}"
    )
    if limit.value == 0:
        evidence += f" — {demand.accelerator} has no quota in {region}"
    remedy = (
        f"raise the limit to {needed}: {increase_command(project, region, limit.quota_id, needed)} (or {url})"
    )
    if alternatives and fit:
        remedy += f"; or run in {', '.join(alternatives[:5])}"
    elif alternatives:
        remedy += (
            f"; {demand.accelerator} is also offered in {', '.join(alternatives[:6])} (check their quota)"
        )
    details["alternatives"] = alternatives
    return CheckResult(NAME, title, Status.FAIL, evidence, remedy, "quota", details=details)


def increase_command(project: str, region: str, quota_id: str, value: int | str) -> str:
    """The ``gcloud quotas preferences create`` line that asks for ``value`` in ``region``."""
    return (
        f"gcloud quotas preferences create --service={SERVICE} --project={project} "
        f"--quota-id={quota_id} --preferred-value={value} --dimensions=region={region} "
        "--email=$(gcloud config get-value account)"
    )


def quota_id_of(project: str, metric: str, timeout_s: float) -> str:
    """The Cloud Quotas ID of ``metric`` (for :func:`increase_command`); '' when it cannot be read.

    Never raises: the launcher asks this after Vertex refused a create, to give the exact line,
    and a missing ID only costs the user a ``gcloud quotas info list``.
    """
    try:
        client = gcp.quotas_client()
        pager = client.list_quota_infos(
            request={"parent": f"projects/{project}/locations/global/services/{SERVICE}", "page_size": 100},
            timeout=timeout_s,
            retry=api_retry(timeout_s),
        )
        return next((info.quota_id for info in pager if info.metric == metric), "")
    except Exception:  # any failure: the line then says how to find the ID
        return ""


def _list_infos(ctx: PreflightContext) -> dict[str, object]:
    """Every aiplatform QuotaInfo of the project, by metric (all pages)."""
    client = gcp.quotas_client()
    parent = f"projects/{ctx.spec.project}/locations/global/services/{SERVICE}"
    # A large page: fewer round trips over aiplatform's many quotas (the server may cap it).
    pager = client.list_quota_infos(
        request={"parent": parent, "page_size": 100},
        timeout=ctx.call_timeout_s,
        retry=api_retry(ctx.call_timeout_s),
    )
    return {info.metric: info for info in pager}


def _usage(ctx: PreflightContext, metric: str) -> int | None:
    """Current allocation usage of ``metric`` in the job's region (Monitoring REST); None when
    Monitoring holds no sample of it in the window."""
    spec = ctx.spec
    session, base = gcp.authorized_session("MONITORING")
    end = datetime.now(UTC)
    stamp = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    params = {
        "filter": (
            f'metric.type="{USAGE_METRIC}" AND resource.type="consumer_quota" AND '
            f'metric.label.quota_metric="{metric}" AND '
            f'resource.label.location="{spec.region}" AND '
            f'resource.label.service="{SERVICE}"'
        ),
        "interval.startTime": stamp(end - USAGE_WINDOW),
        "interval.endTime": stamp(end),
        "aggregation.alignmentPeriod": f"{int(USAGE_WINDOW.total_seconds())}s",
        "aggregation.perSeriesAligner": "ALIGN_NEXT_OLDER",
    }
    url = f"{base}/v3/projects/{spec.project}/timeSeries"
    retry = call_policy(ctx.call_timeout_s)
    payload = gcp.rest_json(session, "GET", url, params=params, timeout=ctx.call_timeout_s, retry=retry)
    series = list(payload.get("timeSeries", []))
    while payload.get("nextPageToken"):
        payload = gcp.rest_json(
            session,
            "GET",
            url,
            timeout=ctx.call_timeout_s,
            retry=retry,
            params={**params, "pageToken": payload["nextPageToken"]},
        )
        series += payload.get("timeSeries", [])
    return latest_usage({"timeSeries": series})


def _verify(project: str, metric: str) -> str:
    return f"gcloud quotas info list --service={SERVICE} --project={project} --filter=metric={metric}"


def _one(ctx: PreflightContext, demand: Demand, infos: dict, usage_f) -> CheckResult:
    """The verdict for one demand once the quota list is in (resolving pattern metrics)."""
    spec = ctx.spec
    resolved = resolve(demand, infos)
    if resolved is None:
        return CheckResult(
            NAME,
            f"{demand.accelerator} quota in {spec.region}",
            Status.UNKNOWN,
            f"Cloud Quotas lists no metric matching {demand.metric} for this "
            f"project; Google documents no quota metric name for "
            f"{demand.accelerator}",
            f"check it by hand: gcloud quotas info list "
            f"--service={SERVICE} --project={spec.project} (or "
            f"{CONSOLE_URL.format(project=spec.project)})",
            "quota",
            details={"pattern": demand.metric},
        )
    fix = ""
    try:
        future = usage_f.get(resolved.metric)
        usage = future.result() if future else _usage(ctx, resolved.metric)
        problem = no_sample(resolved.metric, spec.region) if usage is None else ""
        if usage is None:
            fix = (
                f"check current usage at {CONSOLE_URL.format(project=spec.project)} (filter on "
                f"{resolved.short}); with no other job using it, the limit is all there is"
            )
    except Exception as exc:
        usage = None
        problem, _ = describe_failure(
            exc,
            api="Cloud Monitoring",
            permission="monitoring.timeSeries.list",
            timeout_s=ctx.call_timeout_s,
            where=endpoint_of("MONITORING"),
        )
        enable = enable_line(exc, spec.project)
        fix = f"{enable}, then run trainguard preflight again" if enable else ""
    info = infos.get(resolved.metric)
    limit = limit_in(info, spec.region) if info is not None else None
    return assess(
        resolved,
        project=spec.project,
        region=spec.region,
        limit=limit,
        usage=usage,
        info=info,
        usage_problem=problem,
        usage_fix=fix,
    )


@register(NAME)
def quota(ctx: PreflightContext) -> list[CheckResult]:
    """Accelerator and CPU quota for every worker pool in the job's region."""
    spec = ctx.spec
    wanted, unknown = demands(spec)
    results = [
        CheckResult(
            NAME,
            "quota metric",
            Status.UNKNOWN,
            why,
            f"check it by hand at {CONSOLE_URL.format(project=spec.project)}",
            "quota",
        )
        for why in unknown
    ]
    if not wanted:
        return results
    with cf.ThreadPoolExecutor(max_workers=1 + len(wanted), thread_name_prefix="preflight-quota") as pool:
        infos_f = pool.submit(_list_infos, ctx)
        # Usage of the known metrics is read while the quota list pages in.
        usage_f = {d.metric: pool.submit(_usage, ctx, d.metric) for d in wanted if d.pattern is None}
        try:
            infos, infos_error = infos_f.result(), None
        except Exception as exc:
            infos, infos_error = {}, exc
        for demand in wanted:
            if infos_error is not None:
                results.append(
                    unknown_result(
                        NAME,
                        f"{demand.short} in {spec.region}",
                        infos_error,
                        api="Cloud Quotas",
                        permission="cloudquotas.quotas.get",
                        verify=_verify(spec.project, demand.metric),
                        timeout_s=ctx.call_timeout_s,
                        project=ctx.spec.project,
                        failure_class="quota",
                        where=endpoint_of("CLOUDQUOTAS"),
                    )
                )
                continue
            results.append(_one(ctx, demand, infos, usage_f))
    return results
