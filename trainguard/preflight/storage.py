"""Storage: where the job's outputs go. The output bucket of ``baseOutputDirectory`` exists, is
regional, and sits in the job's region (cross-region reads and writes of checkpoints are slow and
billed as egress); the Vertex AI TensorBoard instance the spec names (``tensorboard``) exists
(``GET …/v1/projects/P/locations/L/tensorboards/ID`` over REST: ``aiplatform_v1``'s client would
cost a second of imports). Its name, region and the service account it needs are checked offline
by ``compat``.
"""

from __future__ import annotations

import concurrent.futures as cf
import os

from trainguard import gcp
from trainguard.preflight.checks import PreflightContext, register
from trainguard.preflight.common import (
    api_retry,
    bucket_of,
    call_policy,
    endpoint_of,
    unknown_result,
)
from trainguard.preflight.references import parse_tensorboard
from trainguard.preflight.results import CheckResult, Status

__all__ = ["assess_bucket", "check_tensorboard", "storage"]

NAME = "storage"


def assess_bucket(
    bucket: str, *, region: str, location: str, location_type: str, data_locations: list[str] | None = None
) -> CheckResult:
    """PASS when the bucket is regional in ``region``; WARN otherwise (pure).

    Args:
        location: the bucket's ``location`` (``US-CENTRAL1``, ``US``, ``NAM4``…).
        location_type: ``region``, ``dual-region`` or ``multi-region``.
        data_locations: the regions of a configurable dual-region
            (``customPlacementConfig.dataLocations``).
    """
    title = f"output bucket gs://{bucket}"
    loc = (location or "").lower()
    kind = (location_type or "").lower()
    details = {"bucket": bucket, "location": location, "location_type": location_type, "job_region": region}
    create = (
        f"gcloud storage buckets create gs://BUCKET --location={region} "
        "--uniform-bucket-level-access, then point baseOutputDirectory.outputUriPrefix at it"
    )
    if kind == "region" and loc == region:
        return CheckResult(
            NAME, title, Status.PASS, f"gs://{bucket} is regional in {loc}, the job's region", details=details
        )
    if kind == "region":
        return CheckResult(
            NAME,
            title,
            Status.WARN,
            f"gs://{bucket} is in {loc}, the job runs in {region}: every checkpoint "
            "and model write crosses regions (slower, billed as egress)",
            create,
            details=details,
        )
    placed = [d.lower() for d in data_locations or []]
    where = f"{kind or 'non-regional'} {location}"
    if placed:
        where += f" ({', '.join(placed)})"
    note = " which includes the job's region" if region in placed else ""
    return CheckResult(
        NAME,
        title,
        Status.WARN,
        f"gs://{bucket} is {where}{note}, not regional in {region}: writes replicate "
        "across regions and reads may come from afar",
        create,
        details=details,
    )


def check_tensorboard(ctx: PreflightContext) -> list[CheckResult]:
    """The TensorBoard instance the spec names exists ([] when it names none or a bad name,
    which ``compat`` reports)."""
    from google.api_core import exceptions

    ref = parse_tensorboard(ctx.spec.job_spec.tensorboard)
    if ref is None:
        return []
    name = ctx.spec.job_spec.tensorboard
    title = f"TensorBoard {name}"
    try:
        session, base = gcp.authorized_session("AIPLATFORM", ref.location)
        found = gcp.rest_json(
            session,
            "GET",
            f"{base}/v1/{name}",
            timeout=ctx.call_timeout_s,
            retry=call_policy(ctx.call_timeout_s),
        )
    except exceptions.NotFound:
        return [
            CheckResult(
                NAME,
                title,
                Status.FAIL,
                f"TensorBoard instance {ref.id} does not exist in {ref.location}; the "
                "job would fail to upload its logs",
                f"gcloud ai tensorboards create --display-name=NAME "
                f"--region={ref.location} --project={ref.project}, then point "
                "tensorboard at the name it prints",
                "container",
            )
        ]
    except Exception as exc:
        return [
            unknown_result(
                NAME,
                title,
                exc,
                api="Vertex AI TensorBoard",
                permission="aiplatform.tensorboards.get",
                verify=f"gcloud ai tensorboards describe {ref.id} "
                f"--region={ref.location} --project={ref.project}",
                timeout_s=ctx.call_timeout_s,
                project=ctx.spec.project,
                where=endpoint_of("AIPLATFORM", ref.location),
            )
        ]
    shown = found.get("displayName") or ref.id
    return [
        CheckResult(
            NAME,
            title,
            Status.PASS,
            f"TensorBoard {shown!r} exists in {ref.location} ({found.get('runCount', 0)} runs)",
        )
    ]


@register(NAME)
def storage(ctx: PreflightContext) -> list[CheckResult]:
    """The output bucket exists in the job's region; the TensorBoard instance exists."""
    if not ctx.spec.job_spec.tensorboard:
        return _bucket(ctx)
    with cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="preflight-tensorboard") as pool:
        board = pool.submit(check_tensorboard, ctx)
        return _bucket(ctx) + board.result()


def _bucket(ctx: PreflightContext) -> list[CheckResult]:
    from google.api_core import exceptions

    spec = ctx.spec
    bucket = bucket_of(spec.base_output_dir)
    if not spec.base_output_dir:
        return [
            CheckResult(
                NAME, "output bucket", Status.PASS, "the spec sets no baseOutputDirectory; no bucket to check"
            )
        ]
    if not bucket:
        return []  # not a gs:// URI: the compat check fails it with the fix
    title = f"output bucket gs://{bucket}"
    verify = f"gcloud storage buckets describe gs://{bucket} --format='value(location,location_type)'"
    try:
        client = gcp.storage_client(spec.project)
        found = client.get_bucket(bucket, timeout=ctx.call_timeout_s, retry=api_retry(ctx.call_timeout_s))
    except exceptions.NotFound:
        return [
            CheckResult(
                NAME,
                title,
                Status.FAIL,
                f"bucket gs://{bucket} of baseOutputDirectory does not exist; Vertex "
                "cannot write the model or checkpoints",
                f"gcloud storage buckets create gs://{bucket} --project={spec.project} "
                f"--location={spec.region} --uniform-bucket-level-access",
                "permission",
                details={"bucket": bucket},
            )
        ]
    except Exception as exc:
        return [
            unknown_result(
                NAME,
                title,
                exc,
                api="Cloud Storage",
                permission="storage.buckets.get",
                verify=verify,
                timeout_s=ctx.call_timeout_s,
                project=ctx.spec.project,
                where=os.environ.get("STORAGE_EMULATOR_HOST") or "https://storage.googleapis.com",
            )
        ]
    return [
        assess_bucket(
            bucket,
            region=spec.region,
            location=found.location or "",
            location_type=found.location_type or "",
            data_locations=list(found.data_locations or []),
        )
    ]
