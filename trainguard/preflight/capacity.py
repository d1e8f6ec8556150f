"""Capacity the job claims: Compute Engine reservations and Vertex AI persistent resources.

- ``machineSpec.reservationAffinity`` SPECIFIC_RESERVATION (Vertex AI "Use reservations with
  training"): the reservation exists in a zone of the job's region, its VMs match the pool
  exactly (machine type and accelerators), Vertex AI may consume it
  (``reservationSharingPolicy.serviceShareType: ALLOW_ALL``), it is shared with the job's project
  when another project owns it, and it has unused VMs (``count - inUseCount``) for the replicas
  that name it. Compute Engine ``reservations.get`` over REST. A value may name a block of the
  reservation or a block's sub-block (``…/reservationBlocks/B[/reservationSubBlocks/S]``, allowed
  by aiplatform v1 ``ReservationAffinity.values``): the VM shape and sharing are the
  reservation's, and the block (``reservationBlocks.get``) or sub-block
  (``reservationSubBlocks.get``; both answer ``{"resource": {...}}``, counts as int32 numbers)
  must exist, be READY and have the room; a DEGRADED one (``healthInfo``) is a warning.
- ``persistentResourceId`` (Vertex AI "Run training jobs on a persistent resource"): the resource
  exists in the job's project and region, is RUNNING, every pool fits a resource pool with the
  same machine spec (and boot disk type, when the job sets one) and enough replicas, and its
  network and CMEK key equal the job's ("otherwise, the job will be rejected", CustomJobSpec).
  Vertex ``persistentResources.get`` over REST (``aiplatform_v1`` would cost ~1 s of imports).

Names and regions are checked offline by ``compat`` (``references``).
"""

from __future__ import annotations

import concurrent.futures as cf
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainguard import catalog, gcp
from trainguard.preflight.checks import PreflightContext, register
from trainguard.preflight.common import call_policy, endpoint_of, unknown_result
from trainguard.preflight.references import ReservationRef, affinities, parse_reservation
from trainguard.preflight.results import CheckResult, Status

if TYPE_CHECKING:
    from trainguard.spec import JobSpec, Pool

__all__ = ["Claim", "claims", "assess_reservation", "assess_persistent_resource", "capacity"]

NAME = "capacity"


@dataclass(frozen=True)
class Claim:
    """The pools that name one reservation, and the VMs (replicas) they need from it."""

    ref: ReservationRef
    value: str
    pools: tuple[Pool, ...]

    @property
    def replicas(self) -> int:
        return sum(p.replica_count for p in self.pools)


def claims(spec: JobSpec) -> list[Claim]:
    """SPECIFIC_RESERVATION claims per reservation (well-formed names in the region only)."""
    by_value: dict[str, tuple[ReservationRef, list[Pool]]] = {}
    pools = {p.index: p for p in spec.pools}
    for aff in affinities(spec):
        if aff.kind != "SPECIFIC_RESERVATION":
            continue
        for value in aff.values[:1]:  # Vertex consumes the first named reservation
            ref = parse_reservation(value)
            if ref is not None and ref.region == spec.region:
                by_value.setdefault(value, (ref, []))[1].append(pools[aff.pool])
    return [Claim(ref, v, tuple(ps)) for v, (ref, ps) in by_value.items()]


def _int(value) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _vm_problems(claim: Claim, props: dict) -> list[str]:
    """How the reservation's VMs differ from each pool's (exact match required)."""
    problems = []
    reserved = props.get("machineType", "")
    got = {
        g.get("acceleratorType", ""): _int(g.get("acceleratorCount"))
        for g in props.get("guestAccelerators") or []
    }
    for pool in claim.pools:
        where = f"workerPoolSpecs[{pool.index}]"
        if reserved != pool.machine_type:
            problems.append(f"{where} is {pool.machine_type}, the reservation holds {reserved} VMs")
            continue
        accel = catalog.ACCELERATORS.get(pool.accelerator_type or "")
        rule = catalog.machine_rule(pool.machine_type)
        bundled = bool(rule and rule.needs_accelerator)
        if accel is not None and got and got.get(accel.compute_name) != pool.accelerator_count:
            problems.append(
                f"{where} wants {pool.accelerator_count} × {accel.compute_name}, the "
                f"reservation's VMs have {got or 'none'}"
            )
        elif accel is not None and not got and not bundled:
            problems.append(
                f"{where} wants {pool.accelerator_count} × {accel.compute_name}, the "
                "reservation's VMs have no GPUs"
            )
    return problems


def _sharing_problems(claim: Claim, reservation: dict, project: str) -> list[str]:
    problems = []
    policy = (reservation.get("reservationSharingPolicy") or {}).get("serviceShareType", "")
    if policy != "ALLOW_ALL":
        problems.append(
            f"Vertex AI may not consume it (reservationSharingPolicy."
            f"serviceShareType is {policy or 'unset'}, not ALLOW_ALL)"
        )
    share = reservation.get("shareSettings") or {}
    if claim.ref.project != project:
        shared = set((share.get("projectMap") or {}).keys())
        if share.get("shareType") != "SPECIFIC_PROJECTS" or project not in shared:
            problems.append(f"it belongs to project {claim.ref.project} and is not shared with {project}")
    return problems


def _missing_part(claim: Claim) -> CheckResult:
    """The block or sub-block the value names is not in the reservation."""
    ref = claim.ref
    where = f"--zone={ref.zone} --project={ref.project}"
    if ref.sub_block:
        what = f"sub-block {ref.sub_block} of block {ref.block}"
        listing = f"gcloud compute reservations sub-blocks list {ref.name} --block-name={ref.block} {where}"
    else:
        what = f"block {ref.block}"
        listing = f"gcloud compute reservations blocks list {ref.name} {where}"
    return CheckResult(
        NAME,
        f"reservation {ref.label} ({ref.zone})",
        Status.FAIL,
        f"reservation {ref.name} in {ref.zone} has no {what}",
        f"fix reservationAffinity.values ({listing})",
        "capacity",
    )


def assess_reservation(
    claim: Claim, reservation: dict | None, project: str, part: dict | None = None
) -> CheckResult:
    """PASS / WARN / FAIL for one claimed reservation (``reservation`` None: not found) (pure).

    Args:
        part: the block or sub-block the value names (the ``resource`` of Compute's answer), whose
            counts, status and health then decide the room; None when the value names the whole
            reservation (the caller reports a named part that does not exist).
    """
    ref = claim.ref
    title = f"reservation {ref.label} ({ref.zone})"
    describe = ref.describe_command()
    if reservation is None:
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"reservation {ref.name} does not exist in {ref.zone} of project {ref.project}",
            "fix reservationAffinity.values (gcloud compute "
            f"reservations list --project={ref.project} --filter=zone~"
            f"{ref.region})",
            "capacity",
        )
    specific = reservation.get("specificReservation") or {}
    props = specific.get("instanceProperties") or {}
    # The room is that of what the value names: the whole reservation, or its block/sub-block.
    counted = part if part is not None else specific
    count, in_use = _int(counted.get("count")), _int(counted.get("inUseCount"))
    free = count - in_use
    status = (part if part is not None else reservation).get("status")
    details = {
        "count": count,
        "in_use": in_use,
        "free": free,
        "needed": claim.replicas,
        "status": status or "",
    }
    fails = _vm_problems(claim, props)
    sharing = _sharing_problems(claim, reservation, project)
    if reservation.get("status") not in ("READY", None):
        fails.append(f"its status is {reservation.get('status')}, not READY")
    if part is not None and status not in ("READY", None):
        fails.append(f"{ref.label} is {status}, not READY")
    short = free < claim.replicas
    if short:
        pools = ", ".join(f"workerPoolSpecs[{p.index}]" for p in claim.pools)
        unit = "VMs" if part is None else ("hosts" if ref.sub_block else "VMs in the block")
        fails.append(
            f"{count} {unit}, {in_use} in use, {free} free; {pools} need {claim.replicas}: "
            "the job would wait for reserved capacity"
        )
    if fails or sharing:
        if sharing and not fails and all("ALLOW_ALL" in f for f in sharing):
            remedy = (
                f"gcloud compute reservations update {ref.name} --zone={ref.zone} "
                f"--project={ref.project} --reservation-sharing-policy=ALLOW_ALL"
            )
        elif short and len(fails) == 1 and not sharing and part is not None:
            listing = (
                f"gcloud compute reservations sub-blocks list {ref.name} --block-name={ref.block}"
                if ref.sub_block
                else f"gcloud compute reservations blocks list {ref.name}"
            )
            remedy = (
                f"name a {'sub-block' if ref.sub_block else 'block'} with room ({listing} "
                f"--zone={ref.zone} --project={ref.project}), name the whole reservation, or "
                "lower replicaCount"
            )
        elif short and len(fails) == 1 and not sharing:
            remedy = (
                f"gcloud compute reservations update {ref.name} --zone={ref.zone} "
                f"--vm-count={in_use + claim.replicas} --project={ref.project}, or lower "
                "replicaCount"
            )
        else:
            remedy = (
                f"use a reservation whose VMs match the pools exactly, shared with "
                f"{project} and with --reservation-sharing-policy=ALLOW_ALL ({describe})"
            )
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"{ref.label}: " + "; ".join(fails + sharing),
            remedy,
            "capacity",
            details=details,
        )
    health = (part or {}).get("healthInfo") or {}
    if health.get("healthStatus") == "DEGRADED":
        degraded = health.get("degradedHostCount", health.get("degradedSubBlockCount"))
        return CheckResult(
            NAME,
            title,
            Status.WARN,
            f"{ref.label} is DEGRADED"
            + (f" ({degraded} degraded {'hosts' if ref.sub_block else 'sub-blocks'})" if degraded else "")
            + f"; {free} of {count} free for the {claim.replicas} replicas",
            f"check it: {describe}; a degraded host can fail the job's workers",
            "capacity",
            details=details,
        )
    if props.get("localSsds"):
        return CheckResult(
            NAME,
            title,
            Status.WARN,
            f"{ref.name}'s VMs have Local SSDs attached; Vertex AI cannot consume "
            "reservations of VMs with manually attached Local SSDs",
            f"check it: {describe}",
            "capacity",
            details=details,
        )
    holds = (
        f"holds {count} × {props.get('machineType')}"
        if part is None
        else f"of {props.get('machineType')} VMs has {count}"
    )
    return CheckResult(
        NAME,
        title,
        Status.PASS,
        f"{ref.label} {holds} ({in_use} in use, {free} free for the {claim.replicas} replicas), ALLOW_ALL",
        details=details,
    )


def _pool_spec(spec: JobSpec, pool: Pool) -> tuple[str, str, int, str]:
    disk = spec.job_spec.worker_pool_specs[pool.index].disk_spec.boot_disk_type
    return (pool.machine_type, pool.accelerator_type or "", pool.accelerator_count, disk)


def _resource_pools(resource: dict) -> list[dict]:
    out = []
    for rp in resource.get("resourcePools") or []:
        ms = rp.get("machineSpec") or {}
        accel = ms.get("acceleratorType") or ""
        out.append(
            {
                "id": rp.get("id", ""),
                "machine": ms.get("machineType", ""),
                "accel": "" if accel == "ACCELERATOR_TYPE_UNSPECIFIED" else accel,
                "count": _int(ms.get("acceleratorCount")),
                "disk": (rp.get("diskSpec") or {}).get("bootDiskType", ""),
                "replicas": max(
                    _int(rp.get("replicaCount")),
                    _int((rp.get("autoscalingSpec") or {}).get("maxReplicaCount")),
                ),
                "used": _int(rp.get("usedReplicaCount")),
            }
        )
    return out


def _fit(spec: JobSpec, resource: dict) -> tuple[list[str], list[str]]:
    """(failures, warnings) of fitting every pool into the resource's pools."""
    fails, warns = [], []
    pools = _resource_pools(resource)
    taken: dict[str, int] = {}
    for pool in spec.pools:
        machine, accel, count, disk = _pool_spec(spec, pool)
        same = [
            rp
            for rp in pools
            if (rp["machine"], rp["accel"], rp["count"]) == (machine, accel, count)
            and (not disk or disk == rp["disk"])
        ]
        where = f"workerPoolSpecs[{pool.index}] ({machine}" + (f" + {count} × {accel}" if accel else "") + ")"
        if not same:
            have = (
                "; ".join(
                    f"{rp['id']}: {rp['machine']}"
                    + (f" + {rp['count']} × {rp['accel']}" if rp["accel"] else "")
                    for rp in pools
                )
                or "no pools"
            )
            fails.append(f"{where} matches no resource pool (it has {have})")
            continue
        rp = max(same, key=lambda r: r["replicas"] - taken.get(r["id"], 0))
        room = rp["replicas"] - taken.get(rp["id"], 0)
        if pool.replica_count > room:
            fails.append(f"{where} needs {pool.replica_count} replicas, resource pool {rp['id']} has {room}")
        elif pool.replica_count > room - rp["used"]:
            warns.append(
                f"resource pool {rp['id']} has {rp['used']} of {rp['replicas']} replicas "
                f"busy: {where} waits for {pool.replica_count}"
            )
        taken[rp["id"]] = taken.get(rp["id"], 0) + pool.replica_count
    return fails, warns


def assess_persistent_resource(spec: JobSpec, resource: dict | None) -> CheckResult:
    """PASS / WARN / FAIL for the persistent resource (``resource`` None: not found) (pure)."""
    rid = spec.job_spec.persistent_resource_id
    title = f"persistent resource {rid}"
    listing = f"gcloud ai persistent-resources list --region={spec.region} --project={spec.project}"
    if resource is None:
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"no persistent resource {rid} in {spec.project}/{spec.region}",
            f"fix persistentResourceId ({listing}), or create it: gcloud ai "
            f"persistent-resources create --persistent-resource-id={rid} "
            f"--region={spec.region} --resource-pool-spec=...",
            "capacity",
        )
    state = resource.get("state", "STATE_UNSPECIFIED")
    fails, warns = _fit(spec, resource)
    if state != "RUNNING":
        fails.insert(0, f"it is {state}, not RUNNING")
    if (resource.get("network") or "") != (spec.job_spec.network or ""):
        fails.append(
            f"its network {resource.get('network') or '(none)'} differs from the job's "
            f"{spec.job_spec.network or '(none)'}"
        )
    key = (resource.get("encryptionSpec") or {}).get("kmsKeyName", "")
    if key != spec.kms_key_name:
        fails.append(f"its CMEK key {key or '(none)'} differs from the job's {spec.kms_key_name or '(none)'}")
    details = {"state": state, "pools": _resource_pools(resource)}
    if fails:
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"{rid}: " + "; ".join(fails),
            "make each pool's machineSpec (and diskSpec.bootDiskType), network and "
            f"encryptionSpec match the resource ({listing}), or use another "
            "persistent resource",
            "capacity",
            details=details,
        )
    if warns:
        return CheckResult(
            NAME,
            title,
            Status.WARN,
            f"{rid}: " + "; ".join(warns),
            "wait for the running jobs, or raise the pool's replica count: gcloud ai "
            f"persistent-resources update {rid} --region={spec.region}",
            "capacity",
            details=details,
        )
    return CheckResult(
        NAME,
        title,
        Status.PASS,
        f"{rid} is RUNNING and every pool fits a resource pool with room",
        details=details,
    )


# --- calls --------------------------------------------------------------------------------------


def _get(ctx: PreflightContext, api: str, region: str, path: str) -> dict | None:
    from google.api_core import exceptions

    session, base = gcp.authorized_session(api, region)
    try:
        return gcp.rest_json(
            session, "GET", f"{base}{path}", timeout=ctx.call_timeout_s, retry=call_policy(ctx.call_timeout_s)
        )
    except exceptions.NotFound:
        return None


def _reservation(ctx: PreflightContext, claim: Claim) -> CheckResult:
    ref = claim.ref
    base = f"/compute/v1/projects/{ref.project}/zones/{ref.zone}/reservations/{ref.name}"
    permission = "compute.reservations.get"
    try:
        found = _get(ctx, "COMPUTE", "", base)
        part = None
        if found is not None and ref.block:
            # reservationBlocks.get / reservationSubBlocks.get (compute v1 discovery document):
            # …/reservations/R/reservationBlocks/B[/reservationSubBlocks/S] → {"resource": {...}}
            path = f"{base}/reservationBlocks/{ref.block}"
            permission = "compute.reservationBlocks.get"
            if ref.sub_block:
                path += f"/reservationSubBlocks/{ref.sub_block}"
                permission = "compute.reservationSubBlocks.get"
            answer = _get(ctx, "COMPUTE", "", path)
            if answer is None:
                return _missing_part(claim)
            part = answer.get("resource") or {}
    except Exception as exc:
        return unknown_result(
            NAME,
            f"reservation {ref.label} ({ref.zone})",
            exc,
            api="Compute Engine",
            permission=permission,
            verify=ref.describe_command(),
            timeout_s=ctx.call_timeout_s,
            project=ctx.spec.project,
            failure_class="capacity",
            where=endpoint_of("COMPUTE"),
        )
    return assess_reservation(claim, found, ctx.spec.project, part)


def _persistent_resource(ctx: PreflightContext) -> CheckResult:
    spec = ctx.spec
    rid = spec.job_spec.persistent_resource_id
    try:
        found = _get(
            ctx,
            "AIPLATFORM",
            spec.region,
            f"/v1/projects/{spec.project}/locations/{spec.region}/persistentResources/{rid}",
        )
    except Exception as exc:
        return unknown_result(
            NAME,
            f"persistent resource {rid}",
            exc,
            api="Vertex AI persistentResources",
            permission="aiplatform.persistentResources.get",
            verify=f"gcloud ai persistent-resources describe {rid} "
            f"--region={spec.region} --project={spec.project}",
            timeout_s=ctx.call_timeout_s,
            project=ctx.spec.project,
            failure_class="capacity",
            where=endpoint_of("AIPLATFORM", spec.region),
        )
    return assess_persistent_resource(spec, found)


@register(NAME)
def capacity(ctx: PreflightContext) -> list[CheckResult]:
    """The reservations and the persistent resource the job names: exist, match, have room."""
    spec = ctx.spec
    wanted = claims(spec)
    if not wanted and not spec.job_spec.persistent_resource_id:
        return [
            CheckResult(
                NAME,
                "reserved capacity",
                Status.PASS,
                "the spec names no specific reservation or persistent resource: "
                "Vertex AI provisions on demand",
            )
        ]
    with cf.ThreadPoolExecutor(max_workers=1 + len(wanted), thread_name_prefix="preflight-capacity") as pool:
        futures = [pool.submit(_reservation, ctx, c) for c in wanted]
        if spec.job_spec.persistent_resource_id:
            futures.append(pool.submit(_persistent_resource, ctx))
        return [f.result() for f in futures]
