"""A small, read-only registry v2 / OCI distribution client: resolve an image to its config.

Why not ``oras`` or ``python-dxf``: preflight needs four GETs (manifest, maybe a platform manifest,
the config blob), the Bearer challenge flow with a pluggable Basic credential
(``oauth2accesstoken`` + a Google access token for Artifact Registry and gcr.io), per-call time
limits, 429/502/503 backoff (``trainguard.retry.RetryPolicy``, the one retry policy) and errors that
name what is missing. Those libraries bring push/pull
machinery and their own auth stores without the Google flow; this module is that flow and nothing
more, on ``requests``.

Protocol (distribution spec): a request answered ``401`` with ``WWW-Authenticate: Bearer
realm=…,service=…,scope=…`` is retried with ``Authorization: Bearer`` after ``GET
realm?service=…&scope=…`` (Basic auth when a credential is given) returns ``{"token"}`` or
``{"access_token"}``. ``GET /v2/NAME/manifests/REF`` with the index and manifest media types in
``Accept``; an index lists ``manifests[]{digest, platform}`` (attestations are ``unknown/unknown``);
an image manifest names ``config.digest``; ``GET /v2/NAME/blobs/DIGEST`` (may redirect) is the config.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import requests

from trainguard.errors import TransientError
from trainguard.retry import RetryPolicy

__all__ = [
    "ImageRef",
    "ImageInfo",
    "RegistryClient",
    "RegistryError",
    "ImageNotFound",
    "AccessDenied",
    "RegistryUnreachable",
    "PlatformMissing",
    "INDEX_TYPES",
    "MANIFEST_TYPES",
]

INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
DOCKER_HUB = "registry-1.docker.io"
_DOCKER_HUB_ALIASES = {"docker.io", "index.docker.io", DOCKER_HUB}
_RETRYABLE = (429, 502, 503)
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


class RegistryError(Exception):
    """A registry answered something preflight cannot use; ``status`` is the HTTP status."""

    def __init__(self, message: str, status: int | None = None, code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class ImageNotFound(RegistryError):
    """The repository, tag or digest does not exist (404 NAME_UNKNOWN / MANIFEST_UNKNOWN)."""


class AccessDenied(RegistryError):
    """The registry refused the credential preflight has (or anonymous access)."""


class RegistryUnreachable(RegistryError):
    """No answer: connection refused, DNS, TLS or a time-out."""


class _Retryable(Exception):
    """A 429/502/503 answer, retried by the policy."""


class PlatformMissing(RegistryError):
    """The image has no variant for the wanted platform; ``platforms`` lists what it has."""

    def __init__(self, message: str, platforms: list[str]) -> None:
        super().__init__(message)
        self.platforms = platforms


@dataclass(frozen=True)
class ImageRef:
    """``host/repository:tag`` or ``…@digest``, normalised as docker does."""

    host: str
    repository: str
    reference: str

    @classmethod
    def parse(cls, uri: str) -> ImageRef:
        """Parses an image URI; one-part Docker Hub names get ``library/``.

        Raises:
            ValueError: not an image reference.
        """
        uri = uri.strip()
        if not uri or any(c.isspace() for c in uri) or uri.startswith(("http://", "https://")):
            raise ValueError(
                f"{uri!r} is not an image reference such as us-central1-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG"
            )
        first, _, rest = uri.partition("/")
        if rest and ("." in first or ":" in first or first == "localhost"):
            host, path = first, rest
        else:
            host, path = DOCKER_HUB, uri
        if host in _DOCKER_HUB_ALIASES:
            host = DOCKER_HUB
            if "/" not in path.split("@")[0].split(":")[0]:
                path = "library/" + path
        if "@" in path:
            path, reference = path.split("@", 1)
            path = path.rsplit(":", 1)[0] if ":" in path.rsplit("/", 1)[-1] else path
        elif ":" in path.rsplit("/", 1)[-1]:
            path, reference = path.rsplit(":", 1)
        else:
            reference = "latest"
        if not re.fullmatch(r"[a-z0-9]+(?:(?:[._]|__|-+|/)[a-z0-9]+)*", path) or not reference:
            raise ValueError(f"{uri!r} is not a valid image reference (repository {path!r})")
        return cls(host, path, reference)

    @property
    def is_digest(self) -> bool:
        return self.reference.startswith("sha256:")

    def __str__(self) -> str:
        sep = "@" if self.is_digest else ":"
        return f"{self.host}/{self.repository}{sep}{self.reference}"


@dataclass(frozen=True)
class ImageInfo:
    """What the registry says about an image, resolved to one platform.

    Attributes:
        digest: the digest ``reference`` resolves to (the index's, for a multi-platform image).
        manifest_digest: the platform image manifest's digest.
        media_type: the top-level media type (index or manifest).
        platforms: ``os/arch[/variant]`` of every runnable entry (attestations left out).
        config: the image config's ``config`` object (``Entrypoint``, ``Cmd``, ``Env``, …).
        os, architecture: from the config blob.
    """

    digest: str
    manifest_digest: str
    media_type: str
    platforms: list[str]
    config: dict = field(default_factory=dict)
    os: str = ""
    architecture: str = ""

    @property
    def entrypoint(self) -> list[str]:
        return list(self.config.get("Entrypoint") or [])

    @property
    def cmd(self) -> list[str]:
        return list(self.config.get("Cmd") or [])


def _platform(entry: dict) -> str:
    p = entry.get("platform") or {}
    parts = [p.get("os", "unknown"), p.get("architecture", "unknown")]
    if p.get("variant"):
        parts.append(p["variant"])
    return "/".join(parts)


def _is_attestation(entry: dict) -> bool:
    annotations = entry.get("annotations") or {}
    return annotations.get("vnd.docker.reference.type") == "attestation-manifest" or _platform(
        entry
    ).startswith("unknown/unknown")


class RegistryClient:
    """Read-only client for one registry host.

    Args:
        host: ``host[:port]``.
        insecure: speak plain http (``TRAINGUARD_INSECURE_REGISTRIES``).
        credential: returns (username, password) for the token realm or a Basic challenge, or None
            for anonymous; called lazily, at most once.
        timeout: the per-call time limit (seconds).
        retry: how 429/502/503 answers are retried (default: ``RetryPolicy.from_env()`` with its
            deadline capped at twice ``timeout``).
    """

    def __init__(
        self,
        host: str,
        *,
        insecure: bool = False,
        credential: Callable[[], tuple[str, str] | None] | None = None,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.host = host
        self.base = f"{'http' if insecure else 'https'}://{host}"
        self.timeout = timeout
        if retry is None:
            retry = RetryPolicy.from_env(initial_s=0.2, max_delay_s=2.0)
            retry = retry.with_deadline(min(retry.deadline_s, max(2 * timeout, 1.0)))
        self.retry = retry
        self._credential = credential
        self._resolved_credential: tuple[str, str] | None = None
        self._credential_done = False
        self._tokens: dict[str, str] = {}
        self._basic = False
        self._lock = threading.Lock()
        self._session = requests.Session()

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- auth --

    def _get_credential(self) -> tuple[str, str] | None:
        with self._lock:
            if not self._credential_done:
                self._credential_done = True
                self._resolved_credential = self._credential() if self._credential else None
            return self._resolved_credential

    def _token(self, challenge: str, scope: str) -> str:
        params = dict(_CHALLENGE.findall(challenge))
        realm = params.pop("realm", "")
        if not realm:
            raise AccessDenied(f"{self.host} sent a Bearer challenge without a realm", 401)
        query = {"service": params.get("service", "")} if params.get("service") else {}
        query["scope"] = params.get("scope") or scope
        credential = self._get_credential()
        try:
            response = self._send("GET", realm, params=query, auth=credential)
        except RegistryUnreachable as exc:
            raise RegistryUnreachable(f"token service of {self.host}: {exc}") from None
        if response.status_code in (401, 403):
            who = "the given credential" if credential else "anonymous access"
            raise AccessDenied(
                f"{self.host} refused a pull token for {query['scope']} to {who}",
                response.status_code,
                _error_code(response),
            )
        if response.status_code >= 400:
            raise RegistryError(
                f"token service of {self.host} answered {response.status_code}", response.status_code
            )
        data = response.json()
        token = data.get("token") or data.get("access_token")
        if not token:
            raise RegistryError(f"token service of {self.host} returned no token", 200)
        return token

    # -- transport --

    def _send(
        self,
        method: str,
        url: str,
        *,
        headers: dict | None = None,
        params: dict | None = None,
        auth: tuple[str, str] | None = None,
    ) -> requests.Response:
        last: list[requests.Response] = []

        def attempt() -> requests.Response:
            try:
                response = self._session.request(
                    method, url, headers=headers, params=params, auth=auth, timeout=self.timeout
                )
            except requests.exceptions.Timeout:
                raise RegistryUnreachable(f"{self.host} did not answer within {self.timeout:g} s") from None
            except requests.exceptions.RequestException as exc:
                reason = type(exc).__name__
                raise RegistryUnreachable(f"cannot reach {self.host} ({reason})") from None
            if response.status_code in _RETRYABLE:
                last[:] = [response]
                raise _Retryable(response.status_code)
            return response

        try:
            return self.retry.call(
                attempt, transient=(_Retryable,), what="registry", where=self.host, unreachable=()
            )
        except TransientError:
            return last[0]  # still 429/5xx at the deadline: the caller reports the status

    def _get(self, path: str, scope: str, accept: tuple[str, ...] = ()) -> requests.Response:
        url = self.base + path
        headers = {"Accept": ", ".join(accept)} if accept else {}
        for _ in range(2):
            auth = None
            token = self._tokens.get(scope)
            if token:
                headers["Authorization"] = f"Bearer {token}"
            elif self._basic:
                auth = self._get_credential()
            response = self._send("GET", url, headers=headers, auth=auth)
            if response.status_code != 401:
                return response
            challenge = response.headers.get("WWW-Authenticate", "")
            if challenge.lower().startswith("bearer") and not token:
                self._tokens[scope] = self._token(challenge, scope)
                continue
            if challenge.lower().startswith("basic") and not self._basic and self._get_credential():
                self._basic = True
                continue
            return response
        return response

    # -- API --

    def manifest(self, repository: str, reference: str) -> tuple[str, dict, str]:
        """(media type, manifest JSON, digest) of ``repository:reference``.

        Raises:
            ImageNotFound, AccessDenied, RegistryUnreachable, RegistryError.
        """
        scope = f"repository:{repository}:pull"
        response = self._get(f"/v2/{repository}/manifests/{reference}", scope, INDEX_TYPES + MANIFEST_TYPES)
        _raise_for(response, self.host, f"{repository}:{reference}")
        body = response.json()
        media_type = response.headers.get("Content-Type", "").split(";")[0].strip() or body.get(
            "mediaType", ""
        )
        if media_type in ("application/json", "") and body.get("mediaType"):
            media_type = body["mediaType"]
        digest = response.headers.get("Docker-Content-Digest", "")
        return media_type, body, digest or (reference if reference.startswith("sha256:") else "")

    def blob_json(self, repository: str, digest: str) -> dict:
        """A JSON blob (the image config); redirects are followed, without the token."""
        response = self._get(f"/v2/{repository}/blobs/{digest}", f"repository:{repository}:pull")
        _raise_for(response, self.host, f"{repository}@{digest}")
        return response.json()

    def resolve(self, ref: ImageRef, os: str = "linux", architecture: str = "amd64") -> ImageInfo:
        """Resolves ``ref`` to the ``os/architecture`` image and reads its config.

        Raises:
            PlatformMissing: no ``os/architecture`` variant (``platforms`` says what there is).
            ImageNotFound, AccessDenied, RegistryUnreachable, RegistryError.
        """
        media_type, body, digest = self.manifest(ref.repository, ref.reference)
        wanted = f"{os}/{architecture}"
        platforms: list[str] = []
        manifest_digest = digest
        if media_type in INDEX_TYPES or body.get("manifests") is not None:
            entries = [m for m in body.get("manifests") or [] if not _is_attestation(m)]
            platforms = [_platform(m) for m in entries]
            chosen = next((m for m in entries if _platform(m).startswith(wanted)), None)
            if chosen is None:
                raise PlatformMissing(
                    f"{ref} has no {wanted} image; it has {', '.join(platforms) or 'no runnable images'}",
                    platforms,
                )
            manifest_digest = chosen["digest"]
            media_type_inner, body, _ = self.manifest(ref.repository, manifest_digest)
            if media_type_inner in INDEX_TYPES:
                raise RegistryError(f"{ref}: nested index for {wanted} is not supported")
        elif media_type not in MANIFEST_TYPES and not body.get("config"):
            raise RegistryError(
                f"{ref} has an unsupported manifest type {media_type or '(none)'} "
                "(schema 1 images cannot run on Vertex AI)"
            )
        config_digest = (body.get("config") or {}).get("digest")
        if not config_digest:
            raise RegistryError(f"{ref}: the manifest names no config blob")
        blob = self.blob_json(ref.repository, config_digest)
        found = f"{blob.get('os', '')}/{blob.get('architecture', '')}"
        if not platforms:
            platforms = [found]
        if found != wanted and blob.get("architecture"):
            raise PlatformMissing(f"{ref} is a {found} image, not {wanted}", platforms)
        return ImageInfo(
            digest=digest,
            manifest_digest=manifest_digest,
            media_type=media_type,
            platforms=platforms,
            config=blob.get("config") or {},
            os=blob.get("os", ""),
            architecture=blob.get("architecture", ""),
        )


def _error_code(response: requests.Response) -> str:
    try:
        errors = response.json().get("errors") or []
        return errors[0].get("code", "") if errors else ""
    except ValueError:
        return ""


def _raise_for(response: requests.Response, host: str, what: str) -> None:
    status = response.status_code
    if status < 400:
        return
    code = _error_code(response)
    if status == 404:
        kind = {
            "NAME_UNKNOWN": "repository",
            "MANIFEST_UNKNOWN": "tag or digest",
            "BLOB_UNKNOWN": "blob",
        }.get(code, "image")
        raise ImageNotFound(f"{kind} not found ({code or 404})", status, code)
    if status in (401, 403):
        raise AccessDenied(f"{host} denied access to {what} ({status} {code})".rstrip(), status, code)
    if status in _RETRYABLE:
        raise RegistryError(f"{host} still answered {status} after retries", status, code)
    raise RegistryError(f"{host} answered {status} {code} for {what}".replace("  ", " "), status, code)
