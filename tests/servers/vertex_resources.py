"""A loopback Vertex AI v1 server for the resources a CustomJob may name: persistentResources and
tensorboards (``GET /v1/projects/P/locations/L/persistentResources/ID``, ``…/tensorboards/ID``).

Answers in the REST JSON Vertex sends (camelCase; int64 as strings; enums as names unless the
client asks for ``$alt=json;enum-encoding=int``; resource names with the project *number*, as
Vertex returns them whatever the request used). Errors are Google's: a missing resource is a 404
``… not found``; a denied caller (``denied`` holds the permission) a 403 with ErrorInfo; a request
for another location than the server's is a 400, as a regional endpoint answers.

Example::

    server = VertexResourcesServer(projects={"tg-proj": "123456789012"}).start()
    server.add_tensorboard("tg-proj", "us-central1", "42", display_name="runs")
    server.add_persistent_resource("tg-proj", "us-central1", "warm-pool", pools=[{
        "id": "a100", "machineSpec": {"machineType": "a2-highgpu-1g",
        "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 1}, "replicaCount": "2"}])
"""

from __future__ import annotations

import re

from tests.servers.googleapi import ApiError, GoogleApiServer, Request

__all__ = ["VertexResourcesServer"]

_STATES = {
    0: "STATE_UNSPECIFIED",
    1: "PROVISIONING",
    3: "RUNNING",
    4: "STOPPING",
    5: "ERROR",
    6: "REBOOTING",
    7: "UPDATING",
}
_BASE = r"/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"


class VertexResourcesServer(GoogleApiServer):
    """Vertex AI persistent resources and TensorBoard instances of some projects.

    Attributes:
        projects: project ID → number.
        denied: permissions the caller lacks (``aiplatform.tensorboards.get``,
            ``aiplatform.persistentResources.get``).
    """

    domain = "aiplatform.googleapis.com"
    service = "aiplatform.googleapis.com"

    def __init__(self, projects: dict[str, str] | None = None) -> None:
        self.projects = dict(projects or {"tg-proj": "123456789012"})
        self.tensorboards: dict[tuple[str, str, str], dict] = {}
        self.resources: dict[tuple[str, str, str], dict] = {}
        self.denied: set[str] = set()
        super().__init__()

    def _number(self, project: str) -> str:
        return self.projects.get(project, project)

    def _key(self, project: str, location: str, rid: str) -> tuple[str, str, str]:
        number = self._number(next((p for p, n in self.projects.items() if project in (p, n)), project))
        return (number, location, rid)

    # -- configuration --

    def add_tensorboard(
        self, project: str, location: str, tid: str, *, display_name: str = "experiments"
    ) -> dict:
        name = f"projects/{self._number(project)}/locations/{location}/tensorboards/{tid}"
        record = {
            "name": name,
            "displayName": display_name,
            "blobStoragePathPrefix": f"cloud-ai-platform-{tid}",
            "runCount": 3,
            "createTime": "2025-01-10T08:00:00.000000Z",
            "updateTime": "2025-01-12T08:00:00.000000Z",
            "etag": "AMEw9yN2",
            "isDefault": False,
        }
        self.tensorboards[self._key(project, location, tid)] = record
        return record

    def add_persistent_resource(
        self,
        project: str,
        location: str,
        rid: str,
        *,
        pools: list[dict],
        state: int = 3,
        network: str = "",
        kms_key: str = "",
    ) -> dict:
        name = f"projects/{self._number(project)}/locations/{location}/persistentResources/{rid}"
        record = {
            "name": name,
            "displayName": rid,
            "resourcePools": [
                {
                    "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
                    "usedReplicaCount": "0",
                    **pool,
                }
                for pool in pools
            ],
            "state": state,
            "createTime": "2025-02-01T09:00:00.000000Z",
            "startTime": "2025-02-01T09:05:00.000000Z",
            "updateTime": "2025-02-01T09:05:00.000000Z",
            "resourceRuntimeSpec": {"serviceAccountSpec": {"enableCustomServiceAccount": False}},
        }
        if network:
            record["network"] = network
        if kms_key:
            record["encryptionSpec"] = {"kmsKeyName": kms_key}
        self.resources[self._key(project, location, rid)] = record
        return record

    # -- routes --

    def routes(self):
        return [
            ("GET", _BASE + r"/tensorboards/(?P<id>[^/:]+)", self._tensorboard),
            ("GET", _BASE + r"/persistentResources/(?P<id>[^/:]+)", self._resource),
        ]

    def _find(self, table: dict, m: re.Match, kind: str, permission: str) -> dict:
        path = f"projects/{m['project']}/locations/{m['location']}/{kind}/{m['id']}"
        if permission in self.denied:
            raise self.forbidden(permission, path)
        found = table.get(self._key(m["project"], m["location"], m["id"]))
        if found is None:
            label = {"tensorboards": "Tensorboard", "persistentResources": "PersistentResource"}
            raise ApiError(404, f"{label[kind]} {path} not found.", reason="NOT_FOUND")
        return found

    def _tensorboard(self, request: Request, m: re.Match) -> dict:
        return self._find(self.tensorboards, m, "tensorboards", "aiplatform.tensorboards.get")

    def _resource(self, request: Request, m: re.Match) -> dict:
        record = dict(
            self._find(self.resources, m, "persistentResources", "aiplatform.persistentResources.get")
        )
        record["state"] = self.enum(request, _STATES, record["state"])
        return record
