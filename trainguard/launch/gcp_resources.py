"""The ``gcp_resources`` file: how a KFP task names the Vertex AI job it launched.

Google Cloud Pipeline Components' launchers write a ``GcpResources`` proto as JSON to the task's
``gcp_resources`` output; the Vertex AI Pipelines UI links the job from it and cancels it with the
run, and a restarted attempt of the same task reads it to resume the job instead of launching a
second one. trainguard writes and reads the same format.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from trainguard.errors import ConfigError

__all__ = ["RESOURCE_TYPE", "resource_uri", "write_gcp_resources", "read_gcp_resources"]

RESOURCE_TYPE = "CustomJob"
_URI_RE = re.compile(
    r"^https://(?P<host_region>[a-z0-9-]+)-aiplatform\.googleapis\.com/v1/"
    r"(?P<name>projects/[^/]+/locations/(?P<region>[^/]+)/customJobs/(?P<id>[^/:?#]+))$"
)


def resource_uri(job_name: str) -> str:
    """The ``gcp_resources`` URI of a CustomJob: always the public regional endpoint, as GCPC."""
    region = job_name.split("/")[3]
    return f"https://{region}-aiplatform.googleapis.com/v1/{job_name}"


_MAX_BYTES = 1 << 20  # GCPC's JSON for one CustomJob is a few hundred bytes


def write_gcp_resources(path: str | os.PathLike[str], job_name: str) -> None:
    """Writes GCPC's ``GcpResources`` JSON naming ``job_name`` (atomically: a restart never sees
    half a file)."""
    from google.protobuf import json_format
    from google_cloud_pipeline_components.proto import gcp_resources_pb2

    resources = gcp_resources_pb2.GcpResources()
    resource = resources.resources.add()
    resource.resource_type = RESOURCE_TYPE
    resource.resource_uri = resource_uri(job_name)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json_format.MessageToJson(resources), encoding="utf-8")
    os.replace(tmp, target)


def read_gcp_resources(path: str | os.PathLike[str]) -> str | None:
    """The CustomJob name an earlier attempt wrote to ``path``; None if there is none yet.

    Raises:
        ConfigError: the file exists but is not GCPC's ``GcpResources`` JSON naming one CustomJob.
    """
    from google.protobuf import json_format
    from google_cloud_pipeline_components.proto import gcp_resources_pb2

    p = Path(path)
    try:
        if p.exists() and not p.is_file():  # a FIFO would block the read for ever
            raise ConfigError(
                f"gcp_resources file {str(p)!r} is not a regular file (a "
                "directory, a FIFO, a device); give a file path"
            )
        with p.open("rb") as handle:
            raw = handle.read(_MAX_BYTES + 1)
        if len(raw) > _MAX_BYTES:
            raise ConfigError(
                f"gcp_resources file {str(p)!r} is larger than {_MAX_BYTES >> 10} "
                "KiB, not GcpResources JSON; delete it to launch a new job"
            )
        text = raw.decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read gcp_resources file {str(p)!r}: {exc}") from None
    if not text.strip():  # KFP creates the output file empty before the first attempt
        return None
    try:
        resources = json_format.Parse(text, gcp_resources_pb2.GcpResources())
    except json_format.ParseError as exc:
        raise ConfigError(
            f"gcp_resources file {str(p)!r} is not GcpResources JSON "
            f"({str(exc)[:200]}); delete it to launch a new job"
        ) from None
    jobs = [r for r in resources.resources if r.resource_type == RESOURCE_TYPE]
    if len(jobs) != 1:
        raise ConfigError(
            f"gcp_resources file {str(p)!r} names {len(jobs)} CustomJobs, expected "
            "one; delete it to launch a new job"
        )
    m = _URI_RE.match(jobs[0].resource_uri)
    if not m or m["host_region"] != m["region"]:
        raise ConfigError(
            f"gcp_resources file {str(p)!r}: {jobs[0].resource_uri[:200]!r} is not "
            "a CustomJob URI such as https://us-central1-aiplatform.googleapis.com/v1/"
            "projects/P/locations/us-central1/customJobs/ID"
        )
    return m["name"]
