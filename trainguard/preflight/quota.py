"""Accelerator quota: does the region have room for every worker pool's accelerators?

The limit comes from the Cloud Quotas API (``list_quota_infos`` on
``projects/P/locations/global/services/aiplatform.googleapis.com``, matched on ``metric`` — quota
IDs are not stable enough to hard-code — and the ``dimensionsInfos`` entry for the region, else the
region-less default). Usage comes from Cloud Monitoring
(``serviceruntime.googleapis.com/quota/allocation/usage`` on the ``consumer_quota`` resource; REST,
the Python client being gRPC-only). A quota-short job does not fail on Vertex: it sits QUEUED, which
is why this check matters. Metric names come from ``trainguard.catalog``.
"""

from __future__ import annotations

import concurrent.futures as cf
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from trainguard import catalog, gcp
from trainguard.preflight.iam import describe_failure, role_for, unknown_result
from trainguard.preflight.registry import PreflightContext, register
from trainguard.preflight.report import CheckResult, Status
from trainguard.spec import JobSpec, Pool

__all__ = ["Demand", "Limit", "demands", "pool_units", "limit_in", "latest_usage", "assess", "quota"]

NAME = "quota"
SERVICE = "aiplatform.googleapis.com"
USAGE_METRIC = "serviceruntime.googleapis.com/quota/allocation/usage"
CONSOLE_URL = "https://console.cloud.google.com/iam-admin/quotas?project={project}"
# Allocation usage is a gauge written when it changes; a day's window with one alignment period
# returns the latest value of each series.
USAGE_WINDOW = timedelta(days=1)


@dataclass(frozen=True)
class Demand:
    """What the job asks of one quota metric: ``units`` over the pools in ``pools``."""

    metric: str
    accelerator: str
    units: int
    pools: tuple[int, ...]

    @property
    def short(self) -> str:
        return self.metric.split("/", 1)[1]


@dataclass(frozen=True)
class Limit:
    """The limit in force for a region; ``quota_id`` for the increase command; -1 = unlimited."""

    value: int
    quota_id: str
    source: str  # "region" (an entry for this region) or "default"


def pool_units(pool: Pool) -> int:
    """Quota units one pool consumes: accelerators × replicas (TPU: chips × replicas)."""
    if not pool.accelerator_type:
        return 0
    accel = catalog.ACCELERATORS.get(pool.accelerator_type)
    if accel is not None and accel.kind == "tpu":
        return catalog.tpu_chips(pool.machine_type, pool.accelerator_count) * pool.replica_count
    return pool.accelerator_count * pool.replica_count


def demands(spec: JobSpec) -> tuple[list[Demand], list[str]]:
    """The job's demand per quota metric (pools summed), and accelerators with no known metric."""
    totals: dict[str, Demand] = {}
    unknown: list[str] = []
    for pool in spec.pools:
        units = pool_units(pool)
        if not units:
            continue
        metric = catalog.quota_metric(pool.accelerator_type, spec.preemptible)
        if metric is None:
            unknown.append(pool.accelerator_type)
            continue
        prev = totals.get(metric)
        totals[metric] = Demand(metric, pool.accelerator_type, units + (prev.units if prev else 0),
                                (prev.pools if prev else ()) + (pool.index,))
    return list(totals.values()), unknown


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


def latest_usage(payload: dict) -> int:
    """The current usage in a timeSeries.list answer: each series' newest point; no series = 0."""
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
    return max(values, default=0)


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


def assess(demand: Demand, *, project: str, region: str, limit: Limit | None, usage: int | None,
           info=None, usage_problem: str = "") -> CheckResult:
    """PASS / WARN / FAIL for one metric from the limit and usage (pure).

    Args:
        usage: None when it could not be read (``usage_problem`` says why): the limit alone is
            compared, and a fit is only a WARN.
    """
    pools = ", ".join(f"workerPoolSpecs[{i}]" for i in demand.pools)
    title = f"{demand.short} in {region}"
    url = CONSOLE_URL.format(project=project)
    details = {"metric": demand.metric, "region": region, "requested": demand.units,
               "pools": list(demand.pools)}
    if limit is None:
        return CheckResult(NAME, title, Status.UNKNOWN,
                           f"Cloud Quotas has no entry for {demand.metric} in {region}",
                           f"verify by hand: gcloud quotas info list --service={SERVICE} "
                           f"--project={project} --filter=metric={demand.metric}", "quota",
                           details=details)
    details.update(limit=limit.value, limit_source=limit.source, usage=usage,
                   quota_id=limit.quota_id)
    if limit.value < 0:
        return CheckResult(NAME, title, Status.PASS,
                           f"{demand.metric} is unlimited in {region}; {pools} request "
                           f"{demand.units}", details=details)
    in_use = usage or 0
    available = limit.value - in_use
    details["available"] = available
    if available >= demand.units and usage is not None:
        return CheckResult(NAME, title, Status.PASS,
                           f"{demand.metric} in {region}: limit {limit.value}, in use {usage}, "
                           f"requested {demand.units} ({pools}); {available} available",
                           details=details)
    if limit.value >= demand.units and usage is None:
        return CheckResult(NAME, title, Status.WARN,
                           f"{demand.metric} in {region}: limit {limit.value} covers the "
                           f"{demand.units} requested ({pools}), but current usage is unknown "
                           f"({usage_problem}); running jobs may hold some of it",
                           f"check current usage at {url} (preflight needs "
                           f"{role_for('monitoring.timeSeries.list')} to read it)", "quota",
                           details=details)
    needed = in_use + demand.units
    alternatives, fit = _alternatives(demand, region, info)
    used = f"in use {usage}" if usage is not None else f"usage unknown ({usage_problem})"
    evidence = (f"{demand.metric} in {region}: limit {limit.value}, {used}, requested "
                f"{demand.units} ({pools}); the job would stay QUEUED")
    if limit.value == 0:
        evidence += f" — {demand.accelerator} has no quota in {region}"
    remedy = (f"raise the limit to {needed}: gcloud quotas preferences create --service={SERVICE} "
              f"--project={project} --quota-id={limit.quota_id} --preferred-value={needed} "
              f"--dimensions=region={region} --email=$(gcloud config get-value account) "
              f"(or {url})")
    if alternatives and fit:
        remedy += f"; or run in {', '.join(alternatives[:5])}"
    elif alternatives:
        remedy += (f"; {demand.accelerator} is also offered in {', '.join(alternatives[:6])} "
                   "(check their quota)")
    details["alternatives"] = alternatives
    return CheckResult(NAME, title, Status.FAIL, evidence, remedy, "quota", details=details)


def _list_infos(ctx: PreflightContext) -> dict[str, object]:
    """Every aiplatform QuotaInfo of the project, by metric (all pages)."""
    client = gcp.quotas_client()
    parent = f"projects/{ctx.spec.project}/locations/global/services/{SERVICE}"
    # A large page: fewer round trips over aiplatform's many quotas (the server may cap it).
    pager = client.list_quota_infos(request={"parent": parent, "page_size": 100},
                                    timeout=ctx.call_timeout_s,
                                    retry=gcp.retry_policy(ctx.call_timeout_s))
    return {info.metric: info for info in pager}


def _usage(ctx: PreflightContext, metric: str) -> int:
    """Current allocation usage of ``metric`` in the job's region (Monitoring REST)."""
    spec = ctx.spec
    session, base = gcp.authorized_session("MONITORING")
    end = datetime.now(UTC)
    stamp = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    params = {
        "filter": (f'metric.type="{USAGE_METRIC}" AND resource.type="consumer_quota" AND '
                   f'metric.label.quota_metric="{metric}" AND '
                   f'resource.label.location="{spec.region}" AND '
                   f'resource.label.service="{SERVICE}"'),
        "interval.startTime": stamp(end - USAGE_WINDOW),
        "interval.endTime": stamp(end),
        "aggregation.alignmentPeriod": f"{int(USAGE_WINDOW.total_seconds())}s",
        "aggregation.perSeriesAligner": "ALIGN_NEXT_OLDER",
    }
    url = f"{base}/v3/projects/{spec.project}/timeSeries"
    retry = gcp.retry_policy(ctx.call_timeout_s)
    payload = gcp.rest_json(session, "GET", url, params=params, timeout=ctx.call_timeout_s,
                            retry=retry)
    series = list(payload.get("timeSeries", []))
    while payload.get("nextPageToken"):
        payload = gcp.rest_json(session, "GET", url, timeout=ctx.call_timeout_s, retry=retry,
                                params={**params, "pageToken": payload["nextPageToken"]})
        series += payload.get("timeSeries", [])
    return latest_usage({"timeSeries": series})


@register(NAME, backends=("vertex",), online=True,
          description="accelerator quota per region (Cloud Quotas + Monitoring)")
def quota(ctx: PreflightContext) -> list[CheckResult]:
    """Accelerator quota for every worker pool in the job's region."""
    spec = ctx.spec
    wanted, unknown = demands(spec)
    results = [CheckResult(NAME, f"{accel} quota", Status.UNKNOWN,
                           f"trainguard knows no Vertex AI quota metric for {accel}",
                           f"check it by hand at {CONSOLE_URL.format(project=spec.project)}",
                           "quota") for accel in unknown]
    if not wanted:
        if not unknown:
            results.append(CheckResult(NAME, "accelerator quota", Status.PASS,
                                       "the job requests no accelerators"))
        return results
    with cf.ThreadPoolExecutor(max_workers=1 + len(wanted),
                               thread_name_prefix="preflight-quota") as pool:
        infos_f = pool.submit(_list_infos, ctx)
        usage_f = {d.metric: pool.submit(_usage, ctx, d.metric) for d in wanted}
        try:
            infos, infos_error = infos_f.result(), None
        except Exception as exc:
            infos, infos_error = {}, exc
        for demand in wanted:
            if infos_error is not None:
                results.append(unknown_result(
                    NAME, f"{demand.short} in {spec.region}", infos_error, api="Cloud Quotas",
                    permission="cloudquotas.quotas.get",
                    verify=f"gcloud quotas info list --service={SERVICE} --project={spec.project} "
                           f"--filter=metric={demand.metric}",
                    timeout_s=ctx.call_timeout_s, failure_class="quota"))
                continue
            try:
                usage, problem = usage_f[demand.metric].result(), ""
            except Exception as exc:
                usage = None
                problem, _ = describe_failure(exc, api="Cloud Monitoring",
                                              permission="monitoring.timeSeries.list",
                                              timeout_s=ctx.call_timeout_s)
            info = infos.get(demand.metric)
            limit = limit_in(info, spec.region) if info is not None else None
            results.append(assess(demand, project=spec.project, region=spec.region, limit=limit,
                                  usage=usage, info=info, usage_problem=problem))
    return results
