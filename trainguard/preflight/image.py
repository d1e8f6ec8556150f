"""Image: every worker pool's ``imageUri`` exists, has a linux/amd64 variant, and has something to
run (``Entrypoint``/``Cmd`` in its config, or ``command`` in the spec); and it is not stored on
another continent than the job runs on (every replica pulls it at start-up).

Registries are read through ``oci_client`` (registry v2 / OCI distribution, Bearer token flow;
``oauth2accesstoken`` + a Google access token for Artifact Registry and gcr.io, anonymous
elsewhere). Each distinct image is resolved once, all concurrently.
"""

from __future__ import annotations

import concurrent.futures as cf
import re

from trainguard import gcp
from trainguard.gcp import is_google_registry
from trainguard.preflight.checks import PreflightContext, register
from trainguard.preflight.common import role_for
from trainguard.preflight.oci_client import (
    AccessDenied,
    ImageInfo,
    ImageNotFound,
    ImageRef,
    PlatformMissing,
    RegistryClient,
    RegistryError,
    RegistryUnreachable,
)
from trainguard.preflight.results import CheckResult, Status
from trainguard.spec import Pool

__all__ = ["image_location", "geography", "is_google_registry", "assess_image", "image"]

NAME = "image"
PLATFORM = ("linux", "amd64")  # what Vertex AI training machines run

# Where a Google registry host stores images: gcr.io's hosts and multi-regions by name.
_GCR_LOCATIONS = {"gcr.io": "us", "us.gcr.io": "us", "eu.gcr.io": "europe", "asia.gcr.io": "asia"}
# Continent of a location, from its first word (regions: ``europe-west4``; multi-regions: ``eu``).
_GEOGRAPHY = {
    "us": "North America",
    "northamerica": "North America",
    "southamerica": "South America",
    "europe": "Europe",
    "eu": "Europe",
    "asia": "Asia",
    "australia": "Oceania",
    "me": "Middle East",
    "africa": "Africa",
}


def image_location(host: str) -> str | None:
    """The location images on ``host`` live in (``us-central1``, ``europe``…), None if unknown."""
    m = re.fullmatch(r"([a-z0-9-]+)-docker\.pkg\.dev", host)
    if m:
        return m.group(1)
    return _GCR_LOCATIONS.get(host)


def geography(location: str) -> str | None:
    """The continent of a region or multi-region, None if unknown."""
    return _GEOGRAPHY.get(location.split("-", 1)[0])


def _short(digest: str) -> str:
    return digest[:19] if digest.startswith("sha256:") else digest


def _title(pool: Pool) -> str:
    return f"image of workerPoolSpecs[{pool.index}]: {pool.image_uri}"


def _verify(uri: str, host: str) -> str:
    if is_google_registry(host):
        return f"gcloud artifacts docker images describe {uri}"
    return f"docker manifest inspect {uri}"


def assess_image(pool: Pool, region: str, found: ImageInfo | BaseException) -> CheckResult:
    """PASS / WARN / FAIL / UNKNOWN for one pool from what the registry said (pure)."""
    uri, title, path = pool.image_uri, _title(pool), f"workerPoolSpecs[{pool.index}].containerSpec"
    try:
        ref = ImageRef.parse(uri)
    except ValueError as exc:
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            str(exc),
            f"set {path}.imageUri to HOST/PROJECT/REPO/IMAGE:TAG",
            "container",
        )
    details: dict[str, object] = {
        "image": uri,
        "host": ref.host,
        "repository": ref.repository,
        "reference": ref.reference,
    }
    if isinstance(found, ImageNotFound):
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"{uri} does not exist: {found}; the job would fail pulling it",
            f"push it (docker push {uri}) or fix {path}.imageUri",
            "container",
            details=details,
        )
    if isinstance(found, PlatformMissing):
        details["platforms"] = found.platforms
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"{uri} has no linux/amd64 image (it has {', '.join(found.platforms)}); "
            "Vertex AI training machines are linux/amd64",
            f"docker buildx build --platform linux/amd64 -t {uri} --push .",
            "container",
            details=details,
        )
    if isinstance(found, AccessDenied):
        google = is_google_registry(ref.host)
        need = (
            f"; preflight needs {role_for('artifactregistry.repositories.downloadArtifacts')}"
            if google
            else ""
        )
        return CheckResult(
            NAME,
            title,
            Status.UNKNOWN,
            f"cannot read {uri} as the caller: {found} (the job's identity may still be able to pull it)",
            f"verify by hand: {_verify(uri, ref.host)}{need}",
            "container",
            details=details,
        )
    if isinstance(found, RegistryUnreachable | RegistryError):
        return CheckResult(
            NAME,
            title,
            Status.UNKNOWN,
            f"cannot check {uri}: {found}",
            f"verify by hand: {_verify(uri, ref.host)}",
            "container",
            details=details,
        )
    if isinstance(found, BaseException):
        text = str(found).strip().splitlines()[0][:200] if str(found).strip() else ""
        return CheckResult(
            NAME,
            title,
            Status.UNKNOWN,
            f"cannot check {uri}: {type(found).__name__}: {text}",
            f"verify by hand: {_verify(uri, ref.host)}",
            "container",
            details=details,
        )
    details.update(digest=found.digest, platforms=found.platforms, entrypoint=found.entrypoint, cmd=found.cmd)
    variant = (
        f"linux/amd64 of {len(found.platforms)} platforms" if len(found.platforms) > 1 else "linux/amd64"
    )
    where = f"{ref.reference} → {_short(found.digest)} ({variant})"
    if pool.command:
        runs = f"the spec's command {list(pool.command)}"
    elif found.entrypoint or found.cmd:
        runs = f"Entrypoint {found.entrypoint} Cmd {found.cmd}"
    else:
        hint = f"; args {list(pool.args)} alone would be run as the command" if pool.args else ""
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"{uri} ({where}) has no Entrypoint or Cmd and the spec gives no "
            f"command: the container has nothing to run{hint}",
            f'set {path}.command (for example ["python", "-m", "trainer.task"]) '
            "or add ENTRYPOINT to the Dockerfile",
            "container",
            details=details,
        )
    location = image_location(ref.host)
    if location and geography(location) and geography(region) and geography(location) != geography(region):
        project = ref.repository.split("/", 1)[0]
        return CheckResult(
            NAME,
            title,
            Status.WARN,
            f"{uri} ({where}) is stored in {location} ({geography(location)}), the "
            f"job runs in {region} ({geography(region)}): every replica pulls it "
            "across continents at start-up",
            f"push the image to {region}-docker.pkg.dev/{project}/REPO (gcloud "
            f"artifacts repositories create REPO --repository-format=docker "
            f"--location={region} --project={project}) and use that imageUri",
            details=details,
        )
    return CheckResult(NAME, title, Status.PASS, f"{where}; runs {runs}", details=details)


def _resolve(uri: str, timeout_s: float) -> ImageInfo | BaseException:
    """Asks the registry; every failure is returned (not raised) for ``assess_image``."""
    try:
        ref = ImageRef.parse(uri)
    except ValueError as exc:
        return exc
    credential = gcp.registry_credential(ref.host, timeout_s)
    insecure = ref.host in gcp.insecure_registries()
    try:
        with RegistryClient(ref.host, insecure=insecure, credential=credential, timeout=timeout_s) as client:
            return client.resolve(ref, *PLATFORM)
    except Exception as exc:  # reported as UNKNOWN with the reason, never raised
        return exc


COMPONENTS_TITLE = "components image"


def assess_components_image(uri: str, found: ImageInfo | BaseException | None) -> CheckResult:
    """The pipeline's components image (pure): it names a registry (else FAIL with the fix), and
    the registry has it for linux/amd64. Its command comes from the pipeline, so no entrypoint is
    needed. ``found`` None: the name was refused before asking any registry."""
    from trainguard.component_image import check_component_image
    from trainguard.errors import ConfigError

    title = f"{COMPONENTS_TITLE}: {uri or '(none)'}"
    try:
        check_component_image(uri, doing="a pipeline on Vertex AI")
    except ConfigError as exc:
        fix = str(exc).split("; ", 1)[-1]
        return CheckResult(NAME, title, Status.FAIL, str(exc).split("; ", 1)[0], fix, "container")
    details: dict[str, object] = {"image": uri}
    if isinstance(found, ImageInfo):
        details.update(digest=found.digest, platforms=found.platforms)
        return CheckResult(
            NAME, title, Status.PASS, f"{uri} → {_short(found.digest)} (linux/amd64)", details=details
        )
    if isinstance(found, ImageNotFound):
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"{uri} does not exist: {found}; every pipeline task would fail pulling it",
            "push it (make images REGISTRY=… or make cloud-images REGISTRY=…) or fix --image / "
            "TRAINGUARD_COMPONENT_IMAGE",
            "container",
            details=details,
        )
    if isinstance(found, PlatformMissing):
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"{uri} has no linux/amd64 image (it has {', '.join(found.platforms)}); Vertex AI "
            "Pipelines runs its tasks on linux/amd64",
            "docker buildx build --platform linux/amd64 -f containers/components/Dockerfile "
            f"-t {uri} --push .",
            "container",
            details=details,
        )
    host = ImageRef.parse(uri).host
    return CheckResult(
        NAME,
        title,
        Status.UNKNOWN,
        f"cannot check {uri}: {found}",
        f"verify by hand: {_verify(uri, host)}",
        "container",
        details=details,
    )


def check_components_image(uri: str, timeout_s: float = 10.0) -> CheckResult:
    """Resolves and assesses the components image (never raises)."""
    result = assess_components_image(uri, None)
    if result.status == Status.FAIL:
        return result
    return assess_components_image(uri, _resolve(uri, timeout_s))


@register(NAME)
def image(ctx: PreflightContext) -> list[CheckResult]:
    """Each worker pool's image: exists, linux/amd64, something to run, stored nearby; and the
    pipeline's components image, when one is named."""
    pools = [p for p in ctx.spec.pools if p.image_uri]
    uris = sorted({p.image_uri for p in pools} | ({ctx.components_image} if ctx.components_image else set()))
    if not uris:
        return []
    with cf.ThreadPoolExecutor(max_workers=len(uris), thread_name_prefix="preflight-image") as ex:
        found = dict(zip(uris, ex.map(lambda u: _resolve(u, ctx.call_timeout_s), uris), strict=True))
    results = [assess_image(p, ctx.spec.region, found[p.image_uri]) for p in pools]
    if ctx.components_image:
        unqualified = assess_components_image(ctx.components_image, None)
        results.append(
            unqualified
            if unqualified.status == Status.FAIL
            else assess_components_image(ctx.components_image, found[ctx.components_image])
        )
    return results
