"""Network: the VPC a job peers with, its reserved ranges, and a PSC interface's attachment.

A job that sets ``network`` is peered with the VPC through private services access, which must
already exist (Vertex AI "Set up VPC Network Peering"): the network exists and has an ACTIVE
peering with ``servicenetworking.googleapis.com``; each ``reservedIpRanges`` entry is an allocated
range (a global address with purpose ``VPC_PEERING``) of that network, given to the private
connection (Service Networking ``services.connections.list`` → ``reservedPeeringRanges``). A job
that sets ``pscInterfaceConfig.networkAttachment`` needs that attachment in its region.

Read over REST (Compute Engine ``networks.get``, ``globalAddresses.get``,
``networkAttachments.get``; Service Networking ``connections.list``): ``google.cloud.compute_v1``
takes longer to import than preflight may run, and Service Networking has no Python client.
Names and regions are checked offline by ``compat`` (``references``); this family looks them up.
"""

from __future__ import annotations

import concurrent.futures as cf
from dataclasses import dataclass

from trainguard import gcp
from trainguard.preflight.checks import PreflightContext, register
from trainguard.preflight.common import (
    call_policy,
    describe_failure,
    enable_line,
    endpoint_of,
    unknown_result,
)
from trainguard.preflight.references import (
    AttachmentRef,
    NetworkRef,
    parse_attachment,
    parse_network,
)
from trainguard.preflight.results import CheckResult, Status

__all__ = [
    "SERVICE",
    "PEERING",
    "Connection",
    "assess_network",
    "assess_range",
    "assess_attachment",
    "network",
]

NAME = "network"
SERVICE = "servicenetworking.googleapis.com"
PEERING = "servicenetworking-googleapis-com"  # the peering private services access creates


@dataclass(frozen=True)
class Connection:
    """Service Networking's private connection of the network (None fields: not readable)."""

    ranges: tuple[str, ...] | None
    problem: str = ""
    enable: str = ""  # the gcloud services enable line when Service Networking is off


def _connect(ref: NetworkRef, ranges: str = "RANGE") -> str:
    return (
        f"gcloud services vpc-peerings connect --service={SERVICE} --network={ref.name} "
        f"--ranges={ranges} --project={ref.project}"
    )


def assess_network(ref: NetworkRef, network: dict) -> CheckResult:
    """PASS when the network has an ACTIVE private-services-access peering, else FAIL (pure)."""
    title = f"VPC network {ref.name}"
    peerings = [
        p
        for p in network.get("peerings") or []
        if p.get("name") == PEERING or "/servicenetworking" in p.get("network", "")
    ]
    details = {
        "peerings": [{"name": p.get("name"), "state": p.get("state")} for p in network.get("peerings") or []]
    }
    if not peerings:
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"network {ref.name} is not peered with {SERVICE} (no private services "
            "access): Vertex AI cannot peer the job with it",
            f"gcloud compute addresses create vertex-ai-range --global "
            f"--purpose=VPC_PEERING --prefix-length=16 --network={ref.name} "
            f"--project={ref.project}, then {_connect(ref, 'vertex-ai-range')}",
            "container",
            details=details,
        )
    peering = peerings[0]
    if peering.get("state") != "ACTIVE":
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"the peering {peering.get('name')} of {ref.name} is "
            f"{peering.get('state', 'in an unknown state')}: "
            f"{peering.get('stateDetails', '')}".rstrip(": "),
            f"gcloud services vpc-peerings update --service={SERVICE} "
            f"--network={ref.name} --ranges=RANGE --project={ref.project} --force",
            "container",
            details=details,
        )
    return CheckResult(
        NAME,
        title,
        Status.PASS,
        f"{ref.name} is peered with {SERVICE} ({peering.get('name')}, ACTIVE)",
        details=details,
    )


def assess_range(ref: NetworkRef, name: str, address: dict | None, connection: Connection) -> CheckResult:
    """One reserved range: exists (``address`` None = not found), a VPC_PEERING range of the
    network, and given to the private connection (pure)."""
    title = f"reserved range {name}"
    if address is None:
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"no allocated range {name} in project {ref.project}",
            f"gcloud compute addresses create {name} --global --purpose=VPC_PEERING "
            f"--prefix-length=16 --network={ref.name} --project={ref.project}, then "
            f"give it to the connection: gcloud services vpc-peerings update "
            f"--service={SERVICE} --network={ref.name} --ranges=...,{name} "
            f"--project={ref.project}",
            "container",
        )
    cidr = f"{address.get('address', '?')}/{address.get('prefixLength', '?')}"
    details = {"cidr": cidr, "purpose": address.get("purpose"), "network": address.get("network", "")}
    if address.get("purpose") != "VPC_PEERING":
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"{name} ({cidr}) has purpose {address.get('purpose') or 'none'}, not "
            "VPC_PEERING: it is not a range for private services access",
            f"gcloud compute addresses create RANGE --global --purpose=VPC_PEERING "
            f"--prefix-length=16 --network={ref.name} --project={ref.project}, and "
            "list RANGE in reservedIpRanges",
            "container",
            details=details,
        )
    if not address.get("network", "").endswith(f"/global/networks/{ref.name}"):
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"{name} ({cidr}) belongs to {address.get('network', 'another network')}, not to {ref.name}",
            f"use a range of {ref.name} in "
            "reservedIpRanges (gcloud compute addresses list --global "
            f"--filter=purpose=VPC_PEERING --project={ref.project})",
            "container",
            details=details,
        )
    if connection.ranges is None:
        return CheckResult(
            NAME,
            title,
            Status.WARN,
            f"{name} ({cidr}) is a VPC_PEERING range of {ref.name}, but whether it "
            f"is given to the private connection is unknown: {connection.problem}",
            (f"{connection.enable}, then run trainguard preflight again; or " if connection.enable else "")
            + f"verify by hand: gcloud services vpc-peerings list --network={ref.name} "
            f"--project={ref.project}",
            details=details,
        )
    if name not in connection.ranges:
        given = ",".join(list(connection.ranges) + [name])
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"{name} ({cidr}) is allocated in {ref.name} but not given to the "
            f"private connection, which has {list(connection.ranges) or 'no ranges'}"
            ": Vertex AI cannot place the job in it",
            f"gcloud services vpc-peerings update --service={SERVICE} "
            f"--network={ref.name} --ranges={given} --project={ref.project}",
            "container",
            details=details,
        )
    return CheckResult(
        NAME,
        title,
        Status.PASS,
        f"{name} ({cidr}) is a VPC_PEERING range of {ref.name}, given to the private connection",
        details=details,
    )


def assess_attachment(ref: AttachmentRef, attachment: dict | None) -> CheckResult:
    """PASS when the network attachment exists (``attachment`` None: not found) (pure)."""
    title = f"PSC network attachment {ref.name}"
    if attachment is None:
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"no network attachment {ref.name} in {ref.region} of project {ref.project}",
            f"gcloud compute network-attachments create {ref.name} "
            f"--region={ref.region} --subnets=SUBNET "
            f"--connection-preference=ACCEPT_AUTOMATIC --project={ref.project}",
            "container",
        )
    subnets = [s.rsplit("/", 1)[-1] for s in attachment.get("subnetworks") or []]
    return CheckResult(
        NAME,
        title,
        Status.PASS,
        f"network attachment {ref.name} exists in {ref.region} "
        f"({attachment.get('connectionPreference', '')}, subnets "
        f"{', '.join(subnets) or 'none'})",
    )


# --- calls --------------------------------------------------------------------------------------


def _get(ctx: PreflightContext, api: str, path: str) -> dict | None:
    """GET a resource over REST; None when it does not exist (404)."""
    from google.api_core import exceptions

    session, base = gcp.authorized_session(api)
    try:
        return gcp.rest_json(
            session, "GET", f"{base}{path}", timeout=ctx.call_timeout_s, retry=call_policy(ctx.call_timeout_s)
        )
    except exceptions.NotFound:
        return None


def _connection(ctx: PreflightContext, ref: NetworkRef) -> Connection:
    try:
        session, base = gcp.authorized_session("SERVICENETWORKING")
        data = gcp.rest_json(
            session,
            "GET",
            f"{base}/v1/services/{SERVICE}/connections",
            params={"network": f"projects/{ref.project}/global/networks/{ref.name}"},
            timeout=ctx.call_timeout_s,
            retry=call_policy(ctx.call_timeout_s),
        )
    except Exception as exc:
        problem, _ = describe_failure(
            exc,
            api="Service Networking",
            permission="servicenetworking.services.get",
            timeout_s=ctx.call_timeout_s,
            where=endpoint_of("SERVICENETWORKING"),
        )
        return Connection(None, problem, enable_line(exc, ctx.spec.project))
    ranges: list[str] = []
    for conn in data.get("connections") or []:
        if conn.get("service", "").endswith(SERVICE):
            ranges += conn.get("reservedPeeringRanges") or []
    return Connection(tuple(ranges))


def _unknown(
    ctx: PreflightContext, title: str, exc: BaseException, permission: str, verify: str
) -> CheckResult:
    return unknown_result(
        NAME,
        title,
        exc,
        api="Compute Engine",
        permission=permission,
        verify=verify,
        timeout_s=ctx.call_timeout_s,
        project=ctx.spec.project,
        failure_class="container",
        where=endpoint_of("COMPUTE"),
    )


def _peering(ctx: PreflightContext, ref: NetworkRef, pool: cf.ThreadPoolExecutor) -> list[CheckResult]:
    ranges = list(ctx.spec.job_spec.reserved_ip_ranges)
    network_f = pool.submit(
        _get, ctx, "COMPUTE", f"/compute/v1/projects/{ref.project}/global/networks/{ref.name}"
    )
    connection_f = pool.submit(_connection, ctx, ref) if ranges else None
    range_f = {
        r: pool.submit(_get, ctx, "COMPUTE", f"/compute/v1/projects/{ref.project}/global/addresses/{r}")
        for r in ranges
    }
    out = []
    try:
        found = network_f.result()
    except Exception as exc:
        out.append(
            _unknown(
                ctx,
                f"VPC network {ref.name}",
                exc,
                "compute.networks.get",
                f"gcloud compute networks peerings list --network={ref.name} --project={ref.project}",
            )
        )
    else:
        if found is None:
            return [
                CheckResult(
                    NAME,
                    f"VPC network {ref.name}",
                    Status.FAIL,
                    f"network {ref.name} does not exist in project {ref.project}",
                    f"fix network in the spec (gcloud compute networks list "
                    f"--project={ref.project}), or create it and set up private "
                    f"services access: {_connect(ref)}",
                    "container",
                )
            ]
        out.append(assess_network(ref, found))
    connection = connection_f.result() if connection_f else Connection(())
    for name, future in range_f.items():
        try:
            out.append(assess_range(ref, name, future.result(), connection))
        except Exception as exc:
            out.append(
                _unknown(
                    ctx,
                    f"reserved range {name}",
                    exc,
                    "compute.globalAddresses.get",
                    f"gcloud compute addresses describe {name} --global --project={ref.project}",
                )
            )
    return out


def _attachment(ctx: PreflightContext, ref: AttachmentRef) -> CheckResult:
    try:
        found = _get(
            ctx,
            "COMPUTE",
            f"/compute/v1/projects/{ref.project}/regions/{ref.region}/networkAttachments/{ref.name}",
        )
    except Exception as exc:
        return _unknown(
            ctx,
            f"PSC network attachment {ref.name}",
            exc,
            "compute.networkAttachments.get",
            f"gcloud compute network-attachments describe {ref.name} "
            f"--region={ref.region} --project={ref.project}",
        )
    return assess_attachment(ref, found)


@register(NAME)
def network(ctx: PreflightContext) -> list[CheckResult]:
    """The VPC peering and reserved ranges, and the PSC network attachment, the job names."""
    spec = ctx.spec
    ref = parse_network(spec.job_spec.network) if spec.job_spec.network else None
    attachment = spec.job_spec.psc_interface_config.network_attachment
    att = parse_attachment(attachment, spec.project, spec.region) if attachment else None
    if ref is not None and not ref.project.isdigit():
        ref = None  # compat fails the name; looking it up would only repeat that
    if att is not None and att.region != spec.region:
        att = None  # compat fails the region
    if ref is None and att is None:
        return [
            CheckResult(
                NAME,
                "private networking",
                Status.PASS,
                "the spec peers with no VPC and attaches no PSC interface (or names "
                "them wrongly, which compat reports): nothing to look up",
            )
        ]
    with cf.ThreadPoolExecutor(
        max_workers=4 + len(spec.job_spec.reserved_ip_ranges), thread_name_prefix="preflight-network"
    ) as pool:
        attachment_f = pool.submit(_attachment, ctx, att) if att is not None else None
        out = _peering(ctx, ref, pool) if ref is not None else []
        if attachment_f is not None:
            out.append(attachment_f.result())
    return out
