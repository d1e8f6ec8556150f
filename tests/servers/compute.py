"""Loopback Compute Engine v1 (networks, global addresses, reservations, network attachments) and
Service Networking v1 (``services.connections.list``), over one ``NetworkState``.

Compute Engine speaks its own REST dialect, which these servers imitate:

- ``GET /compute/v1/projects/P/global/networks/N`` → ``compute#network`` with ``peerings[]``
  (``name``, ``network`` URL, ``state`` ACTIVE/INACTIVE, ``stateDetails``, route flags);
- ``GET /compute/v1/projects/P/global/addresses/A`` → ``compute#address`` (``address``,
  ``prefixLength``, ``purpose`` VPC_PEERING, ``addressType`` INTERNAL, ``network`` URL, ``status``);
- ``GET /compute/v1/projects/P/zones/Z/reservations/R`` → ``compute#reservation``
  (``specificReservation{count, inUseCount, instanceProperties{machineType, guestAccelerators[],
  localSsds[]}}`` with int64 as strings, ``status``, ``shareSettings``,
  ``reservationSharingPolicy.serviceShareType``);
- ``GET …/zones/Z/reservations/R/reservationBlocks/B`` and
  ``…/reservationBlocks/B/reservationSubBlocks/S`` → ``{"resource": compute#reservationBlock |
  compute#reservationSubBlock}`` (``reservationBlocks.get`` / ``reservationSubBlocks.get`` of the
  compute v1 discovery document, revision 20261106: ``count``, ``inUseCount``, ``inUseHostCount``
  are int32, so JSON *numbers*, unlike the reservation's int64 strings; ``status``
  CREATING/DELETING/INVALID/READY; ``healthInfo.healthStatus`` HEALTHY/DEGRADED with host or
  sub-block counts; ``physicalTopology``). A reservation with blocks is ``deploymentType: DENSE``
  with ``resourceStatus.reservationBlockCount``;
- ``GET /compute/v1/projects/P/regions/R/networkAttachments/N`` → ``compute#networkAttachment``;
- errors as Compute sends them: ``{"error": {"code", "message", "errors": [{"message", "domain":
  "global", "reason": "notFound"|"forbidden"}]}}`` (no ``status``, no ErrorInfo); enums are
  always names, and a project may be named by ID or number.

Service Networking (``servicenetworking.googleapis.com``, a Google REST API of the usual kind):
``GET /v1/services/servicenetworking.googleapis.com/connections?network=projects/NUMBER/global/
networks/N`` → ``{"connections": [{"network", "reservedPeeringRanges", "peering", "service"}]}``;
the network must name the project *number* (400 otherwise); no connection → ``{}``.

Example::

    state = NetworkState(projects={"tg-proj": "123456789012"})
    state.add_network("tg-proj", "vpc")
    state.add_range("tg-proj", "vertex-range", "vpc")
    state.connect("tg-proj", "vpc", ["vertex-range"])
    compute, sn = ComputeServer(state).start(), ServiceNetworkingServer(state).start()
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from tests.servers.googleapi import ApiError, GoogleApiServer, Request

__all__ = ["NetworkState", "ComputeServer", "ServiceNetworkingServer"]

_API = "https://www.googleapis.com/compute/v1"
_STAMP = "2025-03-04T05:06:07.890-08:00"


def _topology_hash(name: str) -> str:
    """A stable stand-in for the hashes ``physicalTopology`` gives blocks and sub-blocks."""
    return hashlib.sha256(name.encode()).hexdigest()[:16]


@dataclass
class NetworkState:
    """Networks, ranges, private connections, reservations and attachments of some projects.

    Attributes:
        projects: project ID → number (Compute accepts either in paths).
        denied: Compute permissions the caller lacks (``compute.networks.get``, …): 403.
    """

    projects: dict[str, str] = field(default_factory=lambda: {"tg-proj": "123456789012"})
    networks: dict[tuple[str, str], dict] = field(default_factory=dict)
    addresses: dict[tuple[str, str], dict] = field(default_factory=dict)
    connections: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    reservations: dict[tuple[str, str, str], dict] = field(default_factory=dict)
    attachments: dict[tuple[str, str, str], dict] = field(default_factory=dict)
    blocks: dict[tuple[str, str, str, str], dict] = field(default_factory=dict)
    sub_blocks: dict[tuple[str, str, str, str, str], dict] = field(default_factory=dict)
    denied: set[str] = field(default_factory=set)
    _ids: int = 4000000000000000000

    def project_id(self, key: str) -> str:
        return next((p for p, n in self.projects.items() if key in (p, n)), key)

    def _next_id(self) -> str:
        self._ids += 7919
        return str(self._ids)

    # -- configuration --

    def add_network(self, project: str, name: str) -> dict:
        network = {
            "kind": "compute#network",
            "id": self._next_id(),
            "creationTimestamp": _STAMP,
            "name": name,
            "selfLink": f"{_API}/projects/{project}/global/networks/{name}",
            "selfLinkWithId": f"{_API}/projects/{project}/global/networks/{self._ids}",
            "autoCreateSubnetworks": True,
            "subnetworks": [f"{_API}/projects/{project}/regions/us-central1/subnetworks/{name}"],
            "routingConfig": {"routingMode": "REGIONAL"},
            "mtu": 1460,
            "networkFirewallPolicyEnforcementOrder": "AFTER_CLASSIC_FIREWALL",
        }
        self.networks[(project, name)] = network
        return network

    def add_range(
        self,
        project: str,
        name: str,
        network: str,
        *,
        purpose: str = "VPC_PEERING",
        address: str = "10.8.0.0",
        prefix: int = 16,
    ) -> dict:
        record = {
            "kind": "compute#address",
            "id": self._next_id(),
            "creationTimestamp": _STAMP,
            "name": name,
            "address": address,
            "prefixLength": prefix,
            "status": "RESERVED",
            "addressType": "INTERNAL",
            "ipVersion": "IPV4",
            "selfLink": f"{_API}/projects/{project}/global/addresses/{name}",
            "network": f"{_API}/projects/{project}/global/networks/{network}",
            "labelFingerprint": "42WmSpB8rSM=",
        }
        if purpose:
            record["purpose"] = purpose
        self.addresses[(project, name)] = record
        return record

    def connect(self, project: str, network: str, ranges: list[str], *, state: str = "ACTIVE") -> None:
        """Private services access: the peering on the network and the connection's ranges."""
        peering = {
            "name": "servicenetworking-googleapis-com",
            "network": "https://www.googleapis.com/compute/v1/projects/"
            "s9a1f0c2e4b6d8f0p-tp/global/networks/servicenetworking",
            "state": state,
            "stateDetails": "[2025-03-04T05:06:07.890-08:00]: Connected."
            if state == "ACTIVE"
            else "[2025-03-05T01:02:03.000-08:00]: Peer network deleted.",
            "autoCreateRoutes": True,
            "exportCustomRoutes": False,
            "importCustomRoutes": False,
            "exchangeSubnetRoutes": True,
            "exportSubnetRoutesWithPublicIp": False,
            "importSubnetRoutesWithPublicIp": False,
            "stackType": "IPV4_ONLY",
        }
        self.networks[(project, network)].setdefault("peerings", []).append(peering)
        self.connections[(project, network)] = list(ranges)

    def add_reservation(
        self,
        project: str,
        zone: str,
        name: str,
        *,
        machine_type: str,
        accelerators: dict[str, int] | None = None,
        count: int = 2,
        in_use: int = 0,
        share_policy: str | None = "ALLOW_ALL",
        shared_with: tuple[str, ...] = (),
        status: str = "READY",
        local_ssds: int = 0,
    ) -> dict:
        props: dict[str, Any] = {"machineType": machine_type}
        if accelerators:
            props["guestAccelerators"] = [
                {"acceleratorType": a, "acceleratorCount": n} for a, n in accelerators.items()
            ]
        if local_ssds:
            props["localSsds"] = [{"diskSizeGb": "375", "interface": "NVME"}] * local_ssds
        record: dict[str, Any] = {
            "kind": "compute#reservation",
            "id": self._next_id(),
            "creationTimestamp": _STAMP,
            "name": name,
            "zone": f"{_API}/projects/{project}/zones/{zone}",
            "selfLink": f"{_API}/projects/{project}/zones/{zone}/reservations/{name}",
            "specificReservation": {
                "instanceProperties": props,
                "count": str(count),
                "inUseCount": str(in_use),
                "assuredCount": str(count),
            },
            "specificReservationRequired": True,
            "status": status,
            "shareSettings": (
                {"shareType": "SPECIFIC_PROJECTS", "projectMap": {p: {"projectId": p} for p in shared_with}}
                if shared_with
                else {"shareType": "LOCAL"}
            ),
            "resourceStatus": {"specificSkuAllocation": {"sourceInstanceTemplateId": ""}},
        }
        if share_policy:
            record["reservationSharingPolicy"] = {"serviceShareType": share_policy}
        self.reservations[(project, zone, name)] = record
        return record

    def add_block(
        self,
        project: str,
        zone: str,
        reservation: str,
        name: str,
        *,
        count: int,
        in_use: int = 0,
        status: str = "READY",
        degraded_sub_blocks: int = 0,
    ) -> dict:
        """A block of a (dense) reservation: ``count`` VMs, ``in_use`` of them running."""
        parent = self.reservations[(project, zone, reservation)]
        parent["deploymentType"] = "DENSE"
        url = f"{parent['selfLink']}/reservationBlocks/{name}"
        record = {
            "kind": "compute#reservationBlock",
            "id": self._next_id(),
            "creationTimestamp": _STAMP,
            "name": name,
            "selfLink": url,
            "selfLinkWithId": f"{parent['selfLink']}/reservationBlocks/{self._ids}",
            "zone": f"{_API}/projects/{project}/zones/{zone}",
            "count": count,
            "inUseCount": in_use,
            "inUseHostCount": in_use,
            "reservationSubBlockCount": 0,
            "reservationSubBlockInUseCount": 0,
            "status": status,
            "physicalTopology": {"cluster": "cluster-a", "block": _topology_hash(name)},
            "healthInfo": {
                "healthStatus": "DEGRADED" if degraded_sub_blocks else "HEALTHY",
                "healthySubBlockCount": 0,
                "degradedSubBlockCount": degraded_sub_blocks,
            },
        }
        self.blocks[(project, zone, reservation, name)] = record
        status_of = parent.setdefault("resourceStatus", {})
        status_of["reservationBlockCount"] = sum(
            1 for k in self.blocks if k[:3] == (project, zone, reservation)
        )
        return record

    def add_sub_block(
        self,
        project: str,
        zone: str,
        reservation: str,
        block: str,
        name: str,
        *,
        count: int,
        in_use: int = 0,
        status: str = "READY",
        degraded_hosts: int = 0,
    ) -> dict:
        """A sub-block of a block: ``count`` hosts, ``in_use`` VMs running on them."""
        parent = self.blocks[(project, zone, reservation, block)]
        record = {
            "kind": "compute#reservationSubBlock",
            "id": self._next_id(),
            "creationTimestamp": _STAMP,
            "name": name,
            "selfLink": f"{parent['selfLink']}/reservationSubBlocks/{name}",
            "selfLinkWithId": f"{parent['selfLink']}/reservationSubBlocks/{self._ids}",
            "zone": f"{_API}/projects/{project}/zones/{zone}",
            "count": count,
            "inUseCount": in_use,
            "inUseHostCount": in_use,
            "status": status,
            "physicalTopology": {
                "cluster": parent["physicalTopology"]["cluster"],
                "block": parent["physicalTopology"]["block"],
                "subBlock": _topology_hash(name),
            },
            "healthInfo": {
                "healthStatus": "DEGRADED" if degraded_hosts else "HEALTHY",
                "healthyHostCount": count - degraded_hosts,
                "degradedHostCount": degraded_hosts,
                "healthyInfraCount": 1,
                "degradedInfraCount": 0,
            },
        }
        self.sub_blocks[(project, zone, reservation, block, name)] = record
        parent["reservationSubBlockCount"] += 1
        if in_use:
            parent["reservationSubBlockInUseCount"] += 1
        return record

    def add_attachment(self, project: str, region: str, name: str, subnet: str = "psc-subnet") -> dict:
        record = {
            "kind": "compute#networkAttachment",
            "id": self._next_id(),
            "creationTimestamp": _STAMP,
            "name": name,
            "region": f"{_API}/projects/{project}/regions/{region}",
            "selfLink": f"{_API}/projects/{project}/regions/{region}/networkAttachments/{name}",
            "connectionPreference": "ACCEPT_AUTOMATIC",
            "subnetworks": [f"{_API}/projects/{project}/regions/{region}/subnetworks/{subnet}"],
            "network": f"{_API}/projects/{project}/global/networks/psc-vpc",
            "fingerprint": "dn6gRu8dT0E=",
        }
        self.attachments[(project, region, name)] = record
        return record


class ComputeServer(GoogleApiServer):
    """Compute Engine v1 over a ``NetworkState``, with Compute's error dialect."""

    domain = "compute.googleapis.com"
    service = "compute.googleapis.com"
    legacy_errors = True  # Compute answers a disabled API with errors[] accessNotConfigured too

    def __init__(self, state: NetworkState | None = None) -> None:
        self.state = state or NetworkState()
        super().__init__()

    def routes(self):
        base = r"/compute/v1/projects/(?P<project>[^/]+)"
        return [
            ("GET", base + r"/global/networks/(?P<name>[^/]+)", self._network),
            ("GET", base + r"/global/addresses/(?P<name>[^/]+)", self._address),
            ("GET", base + r"/zones/(?P<zone>[^/]+)/reservations/(?P<name>[^/]+)", self._reservation),
            (
                "GET",
                base + r"/zones/(?P<zone>[^/]+)/reservations/(?P<reservation>[^/]+)/reservationBlocks/"
                r"(?P<name>[^/]+)",
                self._block,
            ),
            (
                "GET",
                base + r"/zones/(?P<zone>[^/]+)/reservations/(?P<reservation>[^/]+)/reservationBlocks/"
                r"(?P<block>[^/]+)/reservationSubBlocks/(?P<name>[^/]+)",
                self._sub_block,
            ),
            (
                "GET",
                base + r"/regions/(?P<region>[^/]+)/networkAttachments/(?P<name>[^/]+)",
                self._attachment,
            ),
        ]

    # Compute's error bodies carry "errors" (domain/reason), not status/ErrorInfo.
    def _dispatch(self, request: Request) -> tuple[int, Any]:
        status, payload = super()._dispatch(request)
        disabled = status == 403 and "errors" in (payload.get("error") or {})
        if status >= 400 and isinstance(payload, dict) and "error" in payload and not disabled:
            error = payload["error"]
            reason = {
                403: "forbidden",
                404: "notFound",
                400: "invalid",
                429: "rateLimitExceeded",
                503: "backendError",
            }.get(status, "backendError")
            payload = {
                "error": {
                    "code": status,
                    "message": error.get("message", ""),
                    "errors": [{"message": error.get("message", ""), "domain": "global", "reason": reason}],
                }
            }
        return status, payload

    def _lookup(self, table: dict, key: tuple, permission: str, path: str) -> dict:
        if permission in self.state.denied:
            raise ApiError(403, f"Required '{permission}' permission for '{path}'")
        found = table.get(key)
        if found is None:
            raise ApiError(404, f"The resource '{path}' was not found")
        return found

    def _network(self, request: Request, m: re.Match) -> dict:
        project = self.state.project_id(m["project"])
        return self._lookup(
            self.state.networks,
            (project, m["name"]),
            "compute.networks.get",
            f"projects/{m['project']}/global/networks/{m['name']}",
        )

    def _address(self, request: Request, m: re.Match) -> dict:
        project = self.state.project_id(m["project"])
        return self._lookup(
            self.state.addresses,
            (project, m["name"]),
            "compute.globalAddresses.get",
            f"projects/{m['project']}/global/addresses/{m['name']}",
        )

    def _reservation(self, request: Request, m: re.Match) -> dict:
        project = self.state.project_id(m["project"])
        return self._lookup(
            self.state.reservations,
            (project, m["zone"], m["name"]),
            "compute.reservations.get",
            f"projects/{m['project']}/zones/{m['zone']}/reservations/{m['name']}",
        )

    def _block(self, request: Request, m: re.Match) -> dict:
        project = self.state.project_id(m["project"])
        path = (
            f"projects/{m['project']}/zones/{m['zone']}/reservations/{m['reservation']}/"
            f"reservationBlocks/{m['name']}"
        )
        block = self._lookup(
            self.state.blocks,
            (project, m["zone"], m["reservation"], m["name"]),
            "compute.reservationBlocks.get",
            path,
        )
        return {"resource": block}

    def _sub_block(self, request: Request, m: re.Match) -> dict:
        project = self.state.project_id(m["project"])
        path = (
            f"projects/{m['project']}/zones/{m['zone']}/reservations/{m['reservation']}/"
            f"reservationBlocks/{m['block']}/reservationSubBlocks/{m['name']}"
        )
        sub = self._lookup(
            self.state.sub_blocks,
            (project, m["zone"], m["reservation"], m["block"], m["name"]),
            "compute.reservationSubBlocks.get",
            path,
        )
        return {"resource": sub}

    def _attachment(self, request: Request, m: re.Match) -> dict:
        project = self.state.project_id(m["project"])
        return self._lookup(
            self.state.attachments,
            (project, m["region"], m["name"]),
            "compute.networkAttachments.get",
            f"projects/{m['project']}/regions/{m['region']}/networkAttachments/{m['name']}",
        )


class ServiceNetworkingServer(GoogleApiServer):
    """Service Networking v1 ``services.connections.list`` over a ``NetworkState``.

    Attributes:
        allowed: False answers 403 (the caller lacks ``servicenetworking.services.get``).
    """

    domain = "servicenetworking.googleapis.com"
    service = "servicenetworking.googleapis.com"

    def __init__(self, state: NetworkState | None = None) -> None:
        self.state = state or NetworkState()
        self.allowed = True
        super().__init__()

    def routes(self):
        return [("GET", r"/v1/services/(?P<service>[^/]+)/connections", self._list)]

    def _list(self, request: Request, m: re.Match) -> dict:
        if not self.allowed:
            raise self.forbidden("servicenetworking.services.get", f"services/{m['service']}")
        network = request.param("network")
        if not network:
            raise ApiError(400, "Network is required.", reason="INVALID_ARGUMENT")
        nm = re.fullmatch(r"projects/(?P<project>[^/]+)/global/networks/(?P<name>[^/]+)", network)
        if not nm or not nm["project"].isdigit():
            raise ApiError(
                400,
                f'Invalid network name "{network}": must be of the form '
                "projects/{project_number}/global/networks/{network_name}.",
                reason="INVALID_ARGUMENT",
            )
        key = (self.state.project_id(nm["project"]), nm["name"])
        if m["service"] != "servicenetworking.googleapis.com" or key not in self.state.connections:
            return {}
        return {
            "connections": [
                {
                    "network": network,
                    "reservedPeeringRanges": list(self.state.connections[key]),
                    "peering": "servicenetworking-googleapis-com",
                    "service": "services/servicenetworking.googleapis.com",
                }
            ]
        }
