"""The resources a job spec names, checked by name alone (part of ``compat``, offline).

The online families (``network``, ``capacity``, ``storage``) look the same resources up; the
parsers here are what they share. What Vertex AI requires of each name:

- ``network``: ``projects/{project}/global/networks/{network}`` "where {project} is a project
  number" (CustomJobSpec reference); training with H100 Mega, H200 or B200 cannot peer with a VPC
  ("Vertex AI Training doesn't support VPC Peering with H100-mega, H200 and B200 accelerators",
  using-private-ip); ``reservedIpRanges`` are "reserved ip ranges under the VPC network", so they
  need ``network``.
- ``pscInterfaceConfig.networkAttachment``: a network attachment "within the region and user
  project" (PscInterfaceConfig reference): a name, or a full name in the job's region.
- ``tensorboard``: ``projects/{project}/locations/{location}/tensorboards/{tensorboard}`` in the
  job's region; a job that uploads to one must run as a service account (``serviceAccount``).
- ``machineSpec.reservationAffinity`` SPECIFIC_RESERVATION: key
  ``compute.googleapis.com/reservation-name`` and values that are "the resource name of the
  reservation, reservation block, or reservation sub-block" (aiplatform v1
  ``ReservationAffinity.values``): ``projects/P/zones/Z/reservations/R``, with
  ``/reservationBlocks/B`` and ``/reservationSubBlocks/S`` after it (Compute Engine's
  ``reservationBlocks.get`` / ``reservationSubBlocks.get`` paths), in a zone of the job's region.
  H200/B200 capacity is sold as dense reservations of blocks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainguard import catalog
from trainguard.preflight.results import CheckResult, Status

if TYPE_CHECKING:
    from trainguard.spec import JobSpec

__all__ = [
    "NetworkRef",
    "AttachmentRef",
    "TensorboardRef",
    "ReservationRef",
    "Affinity",
    "parse_network",
    "parse_attachment",
    "parse_tensorboard",
    "parse_reservation",
    "affinities",
    "check_references",
    "RESERVATION_KEY",
]

NAME = "compat"
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
_NETWORK = re.compile(r"^projects/(?P<project>[^/]+)/global/networks/(?P<name>[^/]+)$")
_ATTACHMENT = re.compile(
    r"^projects/(?P<project>[^/]+)/regions/(?P<region>[^/]+)/"
    r"networkAttachments/(?P<name>[^/]+)$"
)
_TENSORBOARD = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/"
    r"tensorboards/(?P<id>[^/]+)$"
)
_RESERVATION = re.compile(
    r"^projects/(?P<project>[^/]+)/zones/(?P<zone>[^/]+)/reservations/(?P<name>[^/]+)"
    r"(?:/reservationBlocks/(?P<block>[^/]+)(?:/reservationSubBlocks/(?P<sub_block>[^/]+))?)?$"
)
_SIMPLE_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class NetworkRef:
    project: str
    name: str


@dataclass(frozen=True)
class AttachmentRef:
    project: str
    region: str
    name: str


@dataclass(frozen=True)
class TensorboardRef:
    project: str
    location: str
    id: str


@dataclass(frozen=True)
class ReservationRef:
    """A reservation, or one of its blocks (``block``), or a block's sub-block (``sub_block``)."""

    project: str
    zone: str
    name: str
    block: str = ""
    sub_block: str = ""

    @property
    def region(self) -> str:
        return self.zone.rsplit("-", 1)[0]

    @property
    def label(self) -> str:
        """``R``, ``R block B`` or ``R block B sub-block S``."""
        out = self.name
        if self.block:
            out += f" block {self.block}"
        if self.sub_block:
            out += f" sub-block {self.sub_block}"
        return out

    def describe_command(self) -> str:
        """The ``gcloud`` line that shows what is named (reservation, block or sub-block)."""
        where = f"--zone={self.zone} --project={self.project}"
        if self.sub_block:
            return (
                f"gcloud compute reservations sub-blocks describe {self.name} --block-name="
                f"{self.block} --sub-block-name={self.sub_block} {where}"
            )
        if self.block:
            return (
                f"gcloud compute reservations blocks describe {self.name} --block-name={self.block} {where}"
            )
        return f"gcloud compute reservations describe {self.name} {where}"


@dataclass(frozen=True)
class Affinity:
    """One pool's ``reservationAffinity``: its type name, key and values."""

    pool: int
    kind: str
    key: str
    values: tuple[str, ...]


def parse_network(name: str) -> NetworkRef | None:
    m = _NETWORK.match(name)
    return NetworkRef(m["project"], m["name"]) if m else None


def parse_attachment(name: str, project: str, region: str) -> AttachmentRef | None:
    """A full attachment name, or a bare one (then in the job's project and region)."""
    m = _ATTACHMENT.match(name)
    if m:
        return AttachmentRef(m["project"], m["region"], m["name"])
    return AttachmentRef(project, region, name) if _SIMPLE_NAME.match(name) else None


def parse_tensorboard(name: str) -> TensorboardRef | None:
    m = _TENSORBOARD.match(name)
    return TensorboardRef(m["project"], m["location"], m["id"]) if m else None


def parse_reservation(value: str) -> ReservationRef | None:
    """A reservation's, block's or sub-block's full name; None for anything else."""
    m = _RESERVATION.match(value)
    if not m:
        return None
    return ReservationRef(m["project"], m["zone"], m["name"], m["block"] or "", m["sub_block"] or "")


def affinities(spec: JobSpec) -> list[Affinity]:
    """The pools that set ``reservationAffinity``, with its type as a name."""
    out = []
    for pool in spec.pools:
        ra = spec.job_spec.worker_pool_specs[pool.index].machine_spec.reservation_affinity
        kind = type(ra).Type(ra.reservation_affinity_type).name
        if kind != "TYPE_UNSPECIFIED" or ra.key or ra.values:
            out.append(Affinity(pool.index, kind, ra.key, tuple(ra.values)))
    return out


def _network(spec: JobSpec) -> list[CheckResult]:
    js, out = spec.job_spec, []
    network = js.network
    if js.reserved_ip_ranges and not network:
        out.append(
            CheckResult(
                NAME,
                "reservedIpRanges",
                Status.FAIL,
                f"reservedIpRanges {list(js.reserved_ip_ranges)} are set but "
                "network is not: the ranges are looked up in the job's VPC",
                "set network: projects/PROJECT_NUMBER/global/networks/NETWORK, or remove reservedIpRanges",
                "container",
            )
        )
    if not network:
        return out
    ref = parse_network(network)
    if ref is None:
        out.append(
            CheckResult(
                NAME,
                "network",
                Status.FAIL,
                f"network {network!r} is not projects/PROJECT_NUMBER/global/networks/NETWORK",
                "set network to the full name, e.g. projects/123456789012/global/networks/my-vpc",
                "container",
            )
        )
    elif not ref.project.isdigit():
        out.append(
            CheckResult(
                NAME,
                "network",
                Status.FAIL,
                f"network names project {ref.project!r}; Vertex AI wants the project *number* there",
                "set network: projects/$(gcloud projects "
                f"describe {ref.project} --format='value(projectNumber)')/global/"
                f"networks/{ref.name}",
                "container",
            )
        )
    no_peering = sorted(
        {
            p.accelerator_type
            for p in spec.pools
            if p.accelerator_type
            and p.accelerator_type in catalog.ACCELERATORS
            and not catalog.ACCELERATORS[p.accelerator_type].vpc_peering
        }
    )
    if no_peering:
        out.append(
            CheckResult(
                NAME,
                "network peering with " + ", ".join(no_peering),
                Status.FAIL,
                f"Vertex AI training does not support VPC peering (network) with {', '.join(no_peering)}",
                "remove network (and reservedIpRanges) and use a Private Service "
                "Connect interface: pscInterfaceConfig.networkAttachment "
                "(gcloud compute network-attachments create NAME "
                f"--region={spec.region} --subnets=SUBNET "
                "--connection-preference=ACCEPT_AUTOMATIC)",
                "container",
            )
        )
    return out


def _attachment(spec: JobSpec) -> list[CheckResult]:
    name = spec.job_spec.psc_interface_config.network_attachment
    if not name:
        return []
    ref = parse_attachment(name, spec.project, spec.region)
    title = "PSC network attachment"
    if ref is None:
        return [
            CheckResult(
                NAME,
                title,
                Status.FAIL,
                f"pscInterfaceConfig.networkAttachment {name!r} is neither a name nor "
                "projects/P/regions/R/networkAttachments/NAME",
                "fix pscInterfaceConfig.networkAttachment",
                "container",
            )
        ]
    if ref.region != spec.region:
        return [
            CheckResult(
                NAME,
                title,
                Status.FAIL,
                f"network attachment {ref.name} is in {ref.region}, the job runs in "
                f"{spec.region}: it must be in the job's region",
                f"gcloud compute network-attachments create {ref.name} "
                f"--region={spec.region} --subnets=SUBNET "
                f"--connection-preference=ACCEPT_AUTOMATIC --project={ref.project}",
                "container",
            )
        ]
    return []


def _tensorboard(spec: JobSpec) -> list[CheckResult]:
    name = spec.job_spec.tensorboard
    if not name:
        return []
    out = []
    ref = parse_tensorboard(name)
    if ref is None:
        out.append(
            CheckResult(
                NAME,
                "tensorboard",
                Status.FAIL,
                f"tensorboard {name!r} is not projects/P/locations/L/tensorboards/ID",
                "set tensorboard to the instance's full name (gcloud ai "
                f"tensorboards list --region={spec.region})",
                "container",
            )
        )
    elif ref.location != spec.region:
        out.append(
            CheckResult(
                NAME,
                "tensorboard",
                Status.FAIL,
                f"TensorBoard instance {ref.id} is in {ref.location}, the job runs "
                f"in {spec.region}: it must be in the job's region",
                f"gcloud ai tensorboards create --display-name=NAME "
                f"--region={spec.region} --project={ref.project}, and point "
                "tensorboard at it",
                "container",
            )
        )
    if not spec.service_account:
        out.append(
            CheckResult(
                NAME,
                "tensorboard needs serviceAccount",
                Status.FAIL,
                "the spec sets tensorboard but no serviceAccount: Vertex AI "
                "uploads TensorBoard logs only for jobs that run as a service "
                "account",
                "set serviceAccount: NAME@PROJECT.iam.gserviceaccount.com"
                " (with roles/aiplatform.user and write access to the output "
                "bucket)",
                "permission",
            )
        )
    return out


def _affinity(spec: JobSpec, aff: Affinity) -> CheckResult | None:
    title = f"reservationAffinity of workerPoolSpecs[{aff.pool}]"
    path = f"workerPoolSpecs[{aff.pool}].machineSpec.reservationAffinity"
    if aff.kind != "SPECIFIC_RESERVATION":
        return None
    if aff.key != RESERVATION_KEY or not aff.values:
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"SPECIFIC_RESERVATION needs key {RESERVATION_KEY} and the "
            f"reservation's full name in values (got key {aff.key!r}, "
            f"values {list(aff.values)})",
            f"set {path}.key: {RESERVATION_KEY} and values: [projects/PROJECT/"
            f"zones/{spec.region}-a/reservations/NAME]",
            "capacity",
        )
    for value in aff.values:
        ref = parse_reservation(value)
        if ref is None:
            return CheckResult(
                NAME,
                title,
                Status.FAIL,
                f"{value!r} is not the full name of a reservation, reservation block or sub-block",
                f"set {path}.values to projects/PROJECT/zones/ZONE/reservations/NAME (or "
                ".../reservations/NAME/reservationBlocks/BLOCK[/reservationSubBlocks/SUB_BLOCK]; "
                f"gcloud compute reservations list --project={spec.project})",
                "capacity",
            )
        if ref.region != spec.region:
            return CheckResult(
                NAME,
                title,
                Status.FAIL,
                f"reservation {ref.name} is in zone {ref.zone}, outside the job's region {spec.region}",
                f"use a reservation in a zone of {spec.region} (gcloud compute "
                f"reservations list --project={ref.project} "
                f"--filter=zone~{spec.region})",
                "capacity",
            )
    return None


def check_references(spec: JobSpec) -> list[CheckResult]:
    """Names of the network, attachment, TensorBoard and reservations the spec sets (pure)."""
    out = _network(spec) + _attachment(spec) + _tensorboard(spec)
    for aff in affinities(spec):
        found = _affinity(spec, aff)
        if found is not None:
            out.append(found)
    return out
