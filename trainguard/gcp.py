"""Every Google client trainguard uses is made here: credentials, regional endpoints, overrides.

``TRAINGUARD_ENDPOINT_<API>=http://host:port`` (API ∈ ``ENDPOINT_APIS``) points that API at another
server — a test server on loopback, or a private endpoint — and makes its client use anonymous
credentials. Storage follows the library's own ``STORAGE_EMULATOR_HOST``; the image check speaks
plain http to the registries in ``TRAINGUARD_INSECURE_REGISTRIES=host:port,…``.

Also here: the credentials preflight acts with (``impersonated_credentials``, the registry token of
``registry_credential``) and the call helpers the online checks share (``timed_request``,
``rest_json``, which retries with ``trainguard.retry.RetryPolicy``, the one retry policy).

Which client talks to which API: a GAPIC client with REST transport where importing it is cheap
(Cloud Quotas, Policy Troubleshooter, Cloud KMS, Vertex CustomJobs); plain REST through
``authorized_session`` where the library is gRPC-only (Monitoring, IAM) or where using it would
cost more than the whole preflight may take (``google.cloud.compute_v1`` takes ~1.4 s to import,
``google.cloud.aiplatform_v1`` ~1.1 s: Compute Engine and Vertex persistentResources and
tensorboards are read over REST; google-cloud-billing's REST transport decodes the Cloud Billing
Catalog's 32,000 Compute Engine SKUs in 16 s, against 3.5 s over REST; Service Networking has no
Python client).

``trainguard/runtime`` makes its own storage client on purpose: it ships inside training images
without the rest of trainguard.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from trainguard.errors import ConfigError

__all__ = [
    "ENDPOINT_APIS",
    "DEFAULT_HOSTS",
    "Endpoint",
    "endpoint",
    "check_overrides",
    "credentials",
    "job_client",
    "quotas_client",
    "kms_client",
    "troubleshooter_client",
    "storage_client",
    "authorized_session",
    "impersonated_credentials",
    "timed_request",
    "rest_json",
    "insecure_registries",
    "is_google_registry",
    "registry_credential",
    "CLOUD_PLATFORM_SCOPE",
]

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
ENDPOINT_APIS = (
    "AIPLATFORM",
    "CLOUDQUOTAS",
    "POLICYTROUBLESHOOTER",
    "MONITORING",
    "CLOUDRESOURCEMANAGER",
    "IAM",
    "IAMCREDENTIALS",
    "LOGGING",
    "COMPUTE",
    "CLOUDKMS",
    "SERVICENETWORKING",
    "CLOUDBILLING",
)
DEFAULT_HOSTS = {
    "AIPLATFORM": "{region}-aiplatform.googleapis.com",
    "CLOUDQUOTAS": "cloudquotas.googleapis.com",
    "POLICYTROUBLESHOOTER": "policytroubleshooter.googleapis.com",
    "MONITORING": "monitoring.googleapis.com",
    "CLOUDRESOURCEMANAGER": "cloudresourcemanager.googleapis.com",
    "IAM": "iam.googleapis.com",
    "IAMCREDENTIALS": "iamcredentials.googleapis.com",
    "LOGGING": "logging.googleapis.com",
    "COMPUTE": "compute.googleapis.com",
    "CLOUDKMS": "cloudkms.googleapis.com",
    "SERVICENETWORKING": "servicenetworking.googleapis.com",
    "CLOUDBILLING": "cloudbilling.googleapis.com",
}


@dataclass(frozen=True)
class Endpoint:
    """Where an API is reached: ``base_url`` (scheme + host[:port]) and whether it is overridden."""

    api: str
    base_url: str
    overridden: bool

    @property
    def host(self) -> str:
        """host[:port] without the scheme (what GAPIC's api_endpoint takes for https)."""
        return self.base_url.split("://", 1)[1]


def _base_url(variable: str, value: str) -> str:
    """``value`` as scheme://host[:port], the only form every client takes (GAPIC wants a host).

    Raises:
        ConfigError: anything else (no scheme, no host, a bad port, a path or a query).
    """
    from urllib.parse import urlsplit

    url = value.rstrip("/")
    try:
        parts = urlsplit(url)
        ok = (
            parts.scheme in ("http", "https")
            and bool(parts.hostname)
            and not (parts.path or parts.query or parts.fragment)
            and parts.port != 0
        )
    except ValueError:  # a port that is not a number or out of range, a broken [IPv6]
        ok = False
    if not ok:
        raise ConfigError(
            f"{variable}={value[:200]!r} must be a URL such as "
            "http://127.0.0.1:8080 (scheme, host and port, nothing after); fix or "
            "unset it"
        )
    return url


def check_overrides(environ: Mapping[str, str] | None = None) -> None:
    """Refuses a malformed ``TRAINGUARD_ENDPOINT_*`` or ``STORAGE_EMULATOR_HOST`` up front, so a
    typo is bad input (exit 2) rather than every check that uses it reporting UNKNOWN.

    Raises:
        ConfigError: the first malformed override, named.
    """
    env = os.environ if environ is None else environ
    for api in ENDPOINT_APIS:
        endpoint(api, environ=env)
    if env.get("STORAGE_EMULATOR_HOST", "").strip():
        _base_url("STORAGE_EMULATOR_HOST", env["STORAGE_EMULATOR_HOST"].strip())


def endpoint(api: str, region: str = "", environ: Mapping[str, str] | None = None) -> Endpoint:
    """Resolves ``api``'s endpoint, honouring ``TRAINGUARD_ENDPOINT_<API>``."""
    api = api.upper()
    if api not in DEFAULT_HOSTS:
        raise ConfigError(f"unknown API {api!r}; known: {', '.join(ENDPOINT_APIS)}")
    env = os.environ if environ is None else environ
    override = env.get(f"TRAINGUARD_ENDPOINT_{api}", "").strip()
    if override:
        return Endpoint(api, _base_url(f"TRAINGUARD_ENDPOINT_{api}", override), True)
    host = DEFAULT_HOSTS[api].format(region=region or "us-central1")
    return Endpoint(api, f"https://{host}", False)


def credentials(ep: Endpoint):
    """Anonymous credentials for an overridden endpoint, else Application Default Credentials.

    Raises:
        google.auth.exceptions.DefaultCredentialsError: no ADC on this machine; callers turn it
            into UNKNOWN with "run gcloud auth application-default login".
    """
    if ep.overridden:
        from google.auth.credentials import AnonymousCredentials

        return AnonymousCredentials()
    import google.auth

    creds, _ = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
    return creds


# For functions whose ``credentials`` parameter hides the function above.
_endpoint_credentials = credentials


def _gapic_options(ep: Endpoint) -> dict:
    # GAPIC REST transports accept a full URL (http:// for loopback) as api_endpoint.
    return {"api_endpoint": ep.base_url if ep.overridden else ep.host}


def job_client(region: str):
    """A Vertex AI JobServiceClient for ``region`` (REST transport)."""
    from google.cloud import aiplatform_v1

    ep = endpoint("AIPLATFORM", region)
    return aiplatform_v1.JobServiceClient(
        credentials=credentials(ep), transport="rest", client_options=_gapic_options(ep)
    )


def quotas_client():
    """A Cloud Quotas client (REST transport)."""
    from google.cloud import cloudquotas_v1

    ep = endpoint("CLOUDQUOTAS")
    return cloudquotas_v1.CloudQuotasClient(
        credentials=credentials(ep), transport="rest", client_options=_gapic_options(ep)
    )


def kms_client():
    """A Cloud KMS KeyManagementServiceClient (REST transport)."""
    from google.cloud import kms_v1

    ep = endpoint("CLOUDKMS")
    return kms_v1.KeyManagementServiceClient(
        credentials=credentials(ep), transport="rest", client_options=_gapic_options(ep)
    )


def troubleshooter_client():
    """A Policy Troubleshooter (IAM v3) client (REST transport)."""
    from google.cloud import policytroubleshooter_iam_v3

    ep = endpoint("POLICYTROUBLESHOOTER")
    return policytroubleshooter_iam_v3.PolicyTroubleshooterClient(
        credentials=credentials(ep), transport="rest", client_options=_gapic_options(ep)
    )


def storage_client(project: str | None = None, credentials=None):
    """A Cloud Storage client; anonymous when ``STORAGE_EMULATOR_HOST`` is set.

    Args:
        project: the project the client bills and lists in.
        credentials: act with these (for example ``impersonated_credentials``) instead; the
            library still sends them to ``STORAGE_EMULATOR_HOST`` when that is set.
    """
    from google.cloud import storage

    if credentials is not None:
        return storage.Client(project=project, credentials=credentials)
    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        return storage.Client(project=project or "test", credentials=AnonymousCredentials())
    return storage.Client(project=project)


def authorized_session(api: str, region: str = "", credentials=None):
    """An ``AuthorizedSession`` and the base URL, for APIs whose clients are gRPC-only.

    Args:
        api: one of ``ENDPOINT_APIS``.
        region: the region, for regional endpoints.
        credentials: act with these (for example ``impersonated_credentials``) instead of the
            endpoint's own (anonymous when overridden, else Application Default Credentials).

    Returns:
        (session, base_url): requests go to ``base_url + "/v3/…"``.
    """
    from google.auth.transport.requests import AuthorizedSession

    ep = endpoint(api, region)
    if credentials is None:
        credentials = _endpoint_credentials(ep)
    return AuthorizedSession(credentials), ep.base_url


def impersonated_credentials(email: str, lifetime_s: int = 300):
    """Credentials that act as ``email`` (the caller needs iam.serviceAccounts.getAccessToken).

    Honours ``TRAINGUARD_ENDPOINT_IAMCREDENTIALS``: the token is then minted there, and the source
    credentials are anonymous.

    Args:
        email: the service account to act as.
        lifetime_s: how long the minted access token lives.

    Returns:
        google.auth.impersonated_credentials.Credentials (not yet refreshed).
    """
    from google.auth import credentials as ga_credentials
    from google.auth import impersonated_credentials as ga_impersonated

    ep = endpoint("IAMCREDENTIALS")
    override = None
    if ep.overridden:
        override = f"{ep.base_url}/v1/projects/-/serviceAccounts/{email}:generateAccessToken"

        class _Anonymous(ga_credentials.AnonymousCredentials):
            # AnonymousCredentials has no token, so impersonation would try to refresh it (and
            # fail); toward an overridden endpoint there is nothing to refresh.
            @property
            def token_state(self):
                return ga_credentials.TokenState.FRESH

        source = _Anonymous()
    else:
        source = credentials(ep)
    return ga_impersonated.Credentials(
        source_credentials=source,
        target_principal=email,
        target_scopes=[CLOUD_PLATFORM_SCOPE],
        lifetime=lifetime_s,
        iam_endpoint_override=override,
    )


def timed_request(timeout_s: float):
    """A google-auth transport request with a time limit (its default is 120 s).

    Args:
        timeout_s: the time limit of each request, in seconds (a caller's own is replaced).

    Returns:
        A callable with the signature of ``google.auth.transport.requests.Request``, for
        ``credentials.refresh``.
    """
    from google.auth.transport.requests import Request

    request = Request()
    return lambda *args, **kwargs: request(*args, **{**kwargs, "timeout": timeout_s})


def rest_json(
    session, method: str, url: str, *, timeout: float, retry=None, params=None, body: dict | None = None
) -> dict:
    """One JSON call through an ``AuthorizedSession``; HTTP errors raise google.api_core's classes.

    Args:
        session: a ``requests.Session`` (usually ``AuthorizedSession``, see ``authorized_session``).
        method: the HTTP method.
        url: the full URL.
        timeout: the time limit of one attempt, in seconds.
        retry: a ``trainguard.retry.RetryPolicy``: 429 and 5xx answers are retried until its
            deadline; None for one attempt. A call nothing answers fails at once (a refused
            connection does not heal in seconds); the caller reports the endpoint.
        params: query parameters.
        body: the JSON body, or None for none.

    Returns:
        The decoded JSON answer ({} for an empty one).

    Raises:
        google.api_core.exceptions.GoogleAPICallError: the API answered an error (``Forbidden``,
            ``NotFound``, …).
        trainguard.errors.TransientError: it answered only 429/5xx until the retry deadline.
        requests.exceptions.RequestException: no answer (time-out, connection refused).
    """
    from google.api_core import exceptions

    def call() -> dict:
        response = session.request(method, url, params=params, json=body, timeout=timeout)
        if response.status_code >= 400:
            raise exceptions.from_http_response(response)
        return response.json() if response.content else {}

    if retry is None:
        return call()
    return retry.call(
        call,
        transient=(
            exceptions.TooManyRequests,
            exceptions.InternalServerError,
            exceptions.ServiceUnavailable,
            exceptions.GatewayTimeout,
        ),
        what=f"{method} {url.split('?', 1)[0]}",
        where="",
    )


def insecure_registries(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Registries (host:port) that the image check reaches over plain http."""
    env = os.environ if environ is None else environ
    raw = env.get("TRAINGUARD_INSECURE_REGISTRIES", "")
    return frozenset(h.strip() for h in raw.split(",") if h.strip())


def is_google_registry(host: str) -> bool:
    """Artifact Registry (``*-docker.pkg.dev``) and Container Registry (``gcr.io``, ``*.gcr.io``)."""
    return bool(re.search(r"(^|[.-])docker\.pkg\.dev$|(^|\.)gcr\.io$", host))


def registry_credential(host: str, timeout_s: float) -> Callable[[], tuple[str, str] | None] | None:
    """The credential a registry client presents to ``host``, fetched only when first asked for.

    Args:
        host: the registry host[:port].
        timeout_s: the time limit of the token refresh, in seconds.

    Returns:
        For Google registries (``is_google_registry``), a callable returning
        ``("oauth2accesstoken", ADC access token)``, or None when there are no Application Default
        Credentials; for any other registry None (anonymous).

    Raises:
        google.auth.exceptions.RefreshError: from the callable, when the token cannot be minted.
    """
    if not is_google_registry(host):
        return None

    def get() -> tuple[str, str] | None:
        import google.auth
        from google.auth import exceptions

        try:
            creds, _ = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
            creds.refresh(timed_request(timeout_s))
        except exceptions.DefaultCredentialsError:
            return None
        return ("oauth2accesstoken", creds.token)

    return get
