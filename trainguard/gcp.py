"""Every Google client trainguard uses is made here: credentials, regional endpoints, overrides.

``TRAINGUARD_ENDPOINT_<API>=http://host:port`` (API ∈ ``ENDPOINT_APIS``) points that API at another
server — a test server on loopback, or a private endpoint — and makes its client use anonymous
credentials. Storage follows the library's own ``STORAGE_EMULATOR_HOST``; the image check speaks
plain http to the registries in ``TRAINGUARD_INSECURE_REGISTRIES=host:port,…``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from trainguard.errors import ConfigError

__all__ = [
    "ENDPOINT_APIS",
    "DEFAULT_HOSTS",
    "Endpoint",
    "endpoint",
    "credentials",
    "job_client",
    "quotas_client",
    "troubleshooter_client",
    "storage_client",
    "authorized_session",
    "insecure_registries",
    "CLOUD_PLATFORM_SCOPE",
]

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
ENDPOINT_APIS = (
    "AIPLATFORM", "CLOUDQUOTAS", "POLICYTROUBLESHOOTER", "MONITORING", "CLOUDRESOURCEMANAGER",
    "IAM", "IAMCREDENTIALS",
)
DEFAULT_HOSTS = {
    "AIPLATFORM": "{region}-aiplatform.googleapis.com",
    "CLOUDQUOTAS": "cloudquotas.googleapis.com",
    "POLICYTROUBLESHOOTER": "policytroubleshooter.googleapis.com",
    "MONITORING": "monitoring.googleapis.com",
    "CLOUDRESOURCEMANAGER": "cloudresourcemanager.googleapis.com",
    "IAM": "iam.googleapis.com",
    "IAMCREDENTIALS": "iamcredentials.googleapis.com",
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


def endpoint(api: str, region: str = "", environ: Mapping[str, str] | None = None) -> Endpoint:
    """Resolves ``api``'s endpoint, honouring ``TRAINGUARD_ENDPOINT_<API>``."""
    api = api.upper()
    if api not in DEFAULT_HOSTS:
        raise ConfigError(f"unknown API {api!r}; known: {', '.join(ENDPOINT_APIS)}")
    env = os.environ if environ is None else environ
    override = env.get(f"TRAINGUARD_ENDPOINT_{api}", "").strip()
    if override:
        if not override.startswith(("http://", "https://")):
            raise ConfigError(
                f"TRAINGUARD_ENDPOINT_{api}={override!r} must be a URL such as "
                "http://127.0.0.1:8080")
        return Endpoint(api, override.rstrip("/"), True)
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


def _gapic_options(ep: Endpoint) -> dict:
    # GAPIC REST transports accept a full URL (http:// for loopback) as api_endpoint.
    return {"api_endpoint": ep.base_url if ep.overridden else ep.host}


def job_client(region: str):
    """A Vertex AI JobServiceClient for ``region`` (REST transport)."""
    from google.cloud import aiplatform_v1

    ep = endpoint("AIPLATFORM", region)
    return aiplatform_v1.JobServiceClient(
        credentials=credentials(ep), transport="rest", client_options=_gapic_options(ep))


def quotas_client():
    """A Cloud Quotas client (REST transport)."""
    from google.cloud import cloudquotas_v1

    ep = endpoint("CLOUDQUOTAS")
    return cloudquotas_v1.CloudQuotasClient(
        credentials=credentials(ep), transport="rest", client_options=_gapic_options(ep))


def troubleshooter_client():
    """A Policy Troubleshooter (IAM v3) client (REST transport)."""
    from google.cloud import policytroubleshooter_iam_v3

    ep = endpoint("POLICYTROUBLESHOOTER")
    return policytroubleshooter_iam_v3.PolicyTroubleshooterClient(
        credentials=credentials(ep), transport="rest", client_options=_gapic_options(ep))


def storage_client(project: str | None = None):
    """A Cloud Storage client; anonymous when ``STORAGE_EMULATOR_HOST`` is set."""
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        return storage.Client(project=project or "test", credentials=AnonymousCredentials())
    return storage.Client(project=project)


def authorized_session(api: str, region: str = ""):
    """An ``AuthorizedSession`` and the base URL, for APIs whose clients are gRPC-only.

    Returns:
        (session, base_url): requests go to ``base_url + "/v3/…"``.
    """
    from google.auth.transport.requests import AuthorizedSession

    ep = endpoint(api, region)
    return AuthorizedSession(credentials(ep)), ep.base_url


def insecure_registries(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Registries (host:port) that the image check reaches over plain http."""
    env = os.environ if environ is None else environ
    raw = env.get("TRAINGUARD_INSECURE_REGISTRIES", "")
    return frozenset(h.strip() for h in raw.split(",") if h.strip())
