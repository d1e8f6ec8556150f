"""A loopback Cloud Quotas v1 server: ``quotaInfos`` list/get for one project.

Speaks what ``google-cloud-quotas`` (``cloudquotas_v1.CloudQuotasClient``, REST transport) sends:
``GET /v1/projects/P/locations/global/services/SERVICE/quotaInfos?pageSize&pageToken`` and
``GET …/quotaInfos/QUOTA_ID``, answering QuotaInfo JSON in the real shape (camelCase, int64 as
strings, enums as numbers under ``enum-encoding=int``), with ``dimensionsInfos`` ordered most
specific first and the region-less default entry last.

Example::

    server = QuotasServer(project="my-proj", project_number="123456789012").start()
    server.set_limit("aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus", 8,
                     region="us-central1")
    server.set_limit("aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus", 0)  # default
"""

from __future__ import annotations

import base64
import re

from tests.servers.googleapi import ApiError, GoogleApiServer, Request

__all__ = ["QuotasServer", "REGIONS"]

#: Regions the server lists as ``applicableLocations`` (a realistic subset).
REGIONS = (
    "us-central1",
    "us-east1",
    "us-east4",
    "us-west1",
    "us-west4",
    "europe-west1",
    "europe-west4",
    "asia-east1",
    "asia-northeast1",
    "asia-southeast1",
)
_CONTAINER_TYPES = {0: "CONTAINER_TYPE_UNSPECIFIED", 1: "PROJECT", 2: "FOLDER", 3: "ORGANIZATION"}
_BASE = r"/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/services/(?P<service>[^/]+)"


def _quota_id(metric: str) -> str:
    """A QuotaInfo ID in the service's style (IDs are opaque; clients must match on metric)."""
    tail = metric.split("/", 1)[1]
    return "".join(p.capitalize() for p in tail.split("_")) + "PerProjectPerRegion"


class QuotasServer(GoogleApiServer):
    """Cloud Quotas for one project; limits are set per metric and region.

    Attributes:
        limits: metric → {region or None (the default entry): limit}; -1 means unlimited.
        max_page_size: the most QuotaInfos one page holds (small, to exercise paging).
    """

    domain = "cloudquotas.googleapis.com"
    service = "cloudquotas.googleapis.com"

    def __init__(
        self, project: str = "tg-proj", project_number: str = "123456789012", max_page_size: int = 3
    ) -> None:
        super().__init__()
        self.project = project
        self.project_number = project_number
        self.max_page_size = max_page_size
        self.limits: dict[str, dict[str | None, int]] = {}
        # Unrelated quotas of the same service, so a client must match on ``metric``.
        self.set_limit("aiplatform.googleapis.com/custom_model_training_cpus", 24)
        self.set_limit("aiplatform.googleapis.com/online_prediction_requests_per_base_model", 600)
        self.set_limit("aiplatform.googleapis.com/custom_model_serving_nvidia_t4_gpus", 4)

    def set_limit(self, metric: str, value: int, region: str | None = None) -> None:
        """Sets the limit of ``metric`` in ``region`` (None: the default for all other regions)."""
        self.limits.setdefault(metric, {})[region] = value
        self.limits[metric].setdefault(None, 0)

    def routes(self):
        return [
            ("GET", _BASE + r"/quotaInfos", self._list),
            ("GET", _BASE + r"/quotaInfos/(?P<quota_id>[^/]+)", self._get),
        ]

    # -- handlers --

    def _check_parent(self, m: re.Match) -> None:
        if m["project"] not in (self.project, self.project_number):
            raise self.forbidden("cloudquotas.quotas.get", f"projects/{m['project']}")
        if m["location"] != "global":
            raise ApiError(
                400, "Location must be 'global' for QuotaInfo resources.", reason="INVALID_ARGUMENT"
            )

    def _infos(self, request: Request, m: re.Match) -> list[dict]:
        service = m["service"]
        return [
            self._info(request, service, metric)
            for metric in sorted(self.limits)
            if metric.startswith(service + "/")
        ]

    def _list(self, request: Request, m: re.Match) -> dict:
        self._check_parent(m)
        infos = self._infos(request, m)
        size = int(request.param("pageSize") or 0) or self.max_page_size
        size = min(size, self.max_page_size)
        token = request.param("pageToken")
        try:
            start = int(base64.urlsafe_b64decode(token.encode()).decode()) if token else 0
        except ValueError:
            raise ApiError(400, "Invalid page token.", reason="INVALID_ARGUMENT") from None
        page = infos[start : start + size]
        out: dict = {"quotaInfos": page}
        if start + size < len(infos):
            out["nextPageToken"] = base64.urlsafe_b64encode(str(start + size).encode()).decode()
        return out

    def _get(self, request: Request, m: re.Match) -> dict:
        self._check_parent(m)
        for info in self._infos(request, m):
            if info["quotaId"] == m["quota_id"]:
                return info
        raise ApiError(404, f"QuotaInfo {m['quota_id']} not found.", reason="NOT_FOUND")

    def _info(self, request: Request, service: str, metric: str) -> dict:
        limits = self.limits[metric]
        specific = [r for r in limits if r is not None]
        dims_infos = [
            {"dimensions": {"region": r}, "details": {"value": str(limits[r])}, "applicableLocations": [r]}
            for r in sorted(specific)
        ]
        dims_infos.append(
            {
                "details": {"value": str(limits[None])},
                "applicableLocations": [r for r in REGIONS if r not in specific],
            }
        )
        quota_id = _quota_id(metric)
        label = metric.split("/", 1)[1].replace("_", " ").capitalize() + " per region"
        return {
            "name": f"projects/{self.project_number}/locations/global/services/{service}/"
            f"quotaInfos/{quota_id}",
            "quotaId": quota_id,
            "metric": metric,
            "service": service,
            "isPrecise": True,
            "containerType": self.enum(request, _CONTAINER_TYPES, 1),
            "dimensions": ["region"],
            "metricDisplayName": label,
            "quotaDisplayName": label,
            "metricUnit": "1",
            "quotaIncreaseEligibility": {"isEligible": True},
            "dimensionsInfos": dims_infos,
        }
