"""A loopback Cloud Monitoring v3 server: ``timeSeries.list`` for quota allocation usage.

Answers ``GET /v3/projects/P/timeSeries?filter=…&interval.startTime&interval.endTime&aggregation.*``
as Monitoring does: the filter is an AND of ``key = "value"`` terms, ``interval.endTime`` is
required, matching series come back with ``metricKind``/``valueType`` as names (plain REST JSON),
points newest first and int64 values as strings; no matching series → ``{}``.

A series is only returned when its newest sample falls inside ``[interval.startTime,
interval.endTime]``: allocation usage is written when it changes and otherwise "the last value is
repeated at least every 24 hours" (the metric's description in Google's metrics list,
https://cloud.google.com/monitoring/api/metrics_gcp_p_z#gcp-serviceruntime), so a sample may be up
to a day old (``set_usage(…, age_s=…)``), and a window of exactly 24 h can miss it.

Example::

    server = MonitoringServer(project="my-proj").start()
    server.set_usage("aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus",
                     "us-central1", 6)
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from tests.servers.googleapi import ApiError, GoogleApiServer, Request

__all__ = ["MonitoringServer", "USAGE_METRIC"]

USAGE_METRIC = "serviceruntime.googleapis.com/quota/allocation/usage"
_TERM = re.compile(r'^\s*([\w.]+)\s*=\s*"([^"]*)"\s*$')


def _parse_filter(text: str) -> dict[str, str]:
    terms = {}
    for part in re.split(r"\s+AND\s+", text.strip()):
        m = _TERM.match(part)
        if not m:
            raise ApiError(
                400,
                f"The provided filter doesn't refer to any known metric or is malformed: {part!r}.",
                reason="INVALID_ARGUMENT",
            )
        terms[m[1]] = m[2]
    return terms


def _parse_time(value: str, field: str) -> datetime:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(
            400,
            f'Field {field} had an invalid value of "{value}": Invalid time format: Failed to parse input',
            reason="INVALID_ARGUMENT",
        ) from None


class MonitoringServer(GoogleApiServer):
    """Monitoring for quota usage series.

    Attributes:
        usage: (metric, region) → the current allocation usage.
        previous: (metric, region) → an older value, returned as the second (older) point, so a
            client that reads the wrong end of ``points`` is caught.
    """

    domain = "monitoring.googleapis.com"
    service = "monitoring.googleapis.com"

    def __init__(self, project: str = "tg-proj") -> None:
        super().__init__()
        self.project = project
        self.usage: dict[tuple[str, str], int] = {}
        self.previous: dict[tuple[str, str], int] = {}
        self.age_s: dict[tuple[str, str], float] = {}

    def set_usage(
        self, metric: str, region: str, value: int, previous: int | None = None, age_s: float = 60.0
    ) -> None:
        """Sets the current usage of ``metric`` in ``region`` (and an older sample).

        Args:
            age_s: how long ago the newest sample was written (up to a day when usage has not
                changed: the last value is repeated at least every 24 hours).
        """
        self.usage[(metric, region)] = value
        self.age_s[(metric, region)] = age_s
        if previous is not None:
            self.previous[(metric, region)] = previous

    def routes(self):
        return [("GET", r"/v3/projects/(?P<project>[^/]+)/timeSeries", self._list)]

    def _list(self, request: Request, m: re.Match) -> dict:
        if m["project"] != self.project:
            raise self.forbidden("monitoring.timeSeries.list", f"projects/{m['project']}")
        if not request.param("filter"):
            raise ApiError(
                400, 'Field filter had an invalid value of "": must be specified.', reason="INVALID_ARGUMENT"
            )
        terms = _parse_filter(request.param("filter"))
        if "metric.type" not in terms:
            raise ApiError(400, "A metric.type must be specified in the filter.", reason="INVALID_ARGUMENT")
        if not request.param("interval.endTime"):
            raise ApiError(
                400,
                'Field interval.endTime had an invalid value of "": must be specified.',
                reason="INVALID_ARGUMENT",
            )
        end = _parse_time(request.param("interval.endTime"), "interval.endTime")
        start = end
        if request.param("interval.startTime"):
            start = _parse_time(request.param("interval.startTime"), "interval.startTime")
        if (
            terms["metric.type"] != USAGE_METRIC
            or terms.get("resource.type", "consumer_quota") != "consumer_quota"
        ):
            return {}
        period = request.param("aggregation.alignmentPeriod", "60s").rstrip("s")
        step = timedelta(seconds=float(period or 60))
        series = []
        for (metric, region), value in sorted(self.usage.items()):
            labels = {
                "metric.label.quota_metric": metric,
                "resource.label.location": region,
                "resource.label.service": metric.split("/", 1)[0],
                "resource.label.project_id": self.project,
            }
            if any(terms.get(k, v) != v for k, v in labels.items()):
                continue
            sampled = datetime.now(UTC) - timedelta(seconds=self.age_s.get((metric, region), 60.0))
            if not start <= sampled <= end:
                continue  # its newest sample is older than the window: the series is not returned
            points = [self._point(end, value)]
            if (metric, region) in self.previous:
                points.append(self._point(end - step, self.previous[(metric, region)]))
            series.append(
                {
                    "metric": {"type": USAGE_METRIC, "labels": {"quota_metric": metric}},
                    "resource": {
                        "type": "consumer_quota",
                        "labels": {
                            "project_id": self.project,
                            "location": region,
                            "service": metric.split("/", 1)[0],
                        },
                    },
                    "metricKind": "GAUGE",
                    "valueType": "INT64",
                    "points": points,
                }
            )
        return {"timeSeries": series, "unit": "1"} if series else {}

    @staticmethod
    def _point(at: datetime, value: int) -> dict:
        stamp = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return {"interval": {"startTime": stamp, "endTime": stamp}, "value": {"int64Value": str(value)}}
