"""trainguard.gcp: endpoint overrides, credentials, and the call helpers, against a loopback server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from google.api_core import exceptions
from google.auth import credentials as ga_credentials

from trainguard import gcp
from trainguard.errors import ConfigError

SA = "trainer@p-proj.iam.gserviceaccount.com"


class Loopback:
    """A tiny HTTP server on 127.0.0.1: answers queued (status, JSON body, delay_s), records calls."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, dict | None, float]] = []
        self.calls: list[tuple[str, str, dict | None, dict[str, str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                server.calls.append(
                    (self.command, self.path, json.loads(raw) if raw else None, dict(self.headers))
                )
                status, body, delay_s = server.answers.pop(0) if server.answers else (200, {}, 0.0)
                time.sleep(delay_s)
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def answer(self, status: int, body: dict | None = None, delay_s: float = 0.0) -> None:
        self.answers.append((status, body, delay_s))

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Loopback]:
    s = Loopback()
    yield s
    s.close()


def _error(code: int, status: str, message: str) -> dict:
    return {"error": {"code": code, "status": status, "message": message}}


# --- endpoints and credentials ----------------------------------------------------------------


def test_endpoint_defaults_and_regional_host():
    ep = gcp.endpoint("aiplatform", "europe-west4", environ={})
    assert ep == gcp.Endpoint("AIPLATFORM", "https://europe-west4-aiplatform.googleapis.com", False)
    assert ep.host == "europe-west4-aiplatform.googleapis.com"
    assert gcp.endpoint("AIPLATFORM", environ={}).host == "us-central1-aiplatform.googleapis.com"
    assert gcp.endpoint("CLOUDQUOTAS", environ={}).base_url == "https://cloudquotas.googleapis.com"


def test_endpoint_override_resolution():
    env = {"TRAINGUARD_ENDPOINT_MONITORING": " http://127.0.0.1:8080/ "}
    ep = gcp.endpoint("MONITORING", environ=env)
    assert ep.overridden and ep.base_url == "http://127.0.0.1:8080"
    assert ep.host == "127.0.0.1:8080"
    # Only the named API is overridden.
    assert not gcp.endpoint("IAM", environ=env).overridden


def test_endpoint_rejects_bad_override_and_unknown_api():
    with pytest.raises(ConfigError, match="must be a URL"):
        gcp.endpoint("IAM", environ={"TRAINGUARD_ENDPOINT_IAM": "127.0.0.1:8080"})
    with pytest.raises(ConfigError, match="unknown API 'STORAGE'"):
        gcp.endpoint("storage", environ={})


@pytest.mark.parametrize(
    "value",
    [
        "http://",
        "http://127.0.0.1:99999",
        "ftp://x",
        "http://[::1",
        "http://127.0.0.1:9/v1?x=1",
        "http://u:p@:80",
        "http://h:0",
    ],
)
def test_an_override_that_is_no_host_and_port_is_refused(value):
    # Each of these once got as far as a client and came back as an UNKNOWN check and exit 0.
    with pytest.raises(ConfigError, match="TRAINGUARD_ENDPOINT_IAM=.* must be a URL"):
        gcp.endpoint("IAM", environ={"TRAINGUARD_ENDPOINT_IAM": value})
    with pytest.raises(ConfigError, match="STORAGE_EMULATOR_HOST"):
        gcp.check_overrides({"STORAGE_EMULATOR_HOST": value})
    assert (
        gcp.endpoint("IAM", environ={"TRAINGUARD_ENDPOINT_IAM": "https://[::1]:8443/"}).host == "[::1]:8443"
    )


def test_overridden_endpoint_gets_anonymous_credentials():
    ep = gcp.endpoint("IAM", environ={"TRAINGUARD_ENDPOINT_IAM": "http://127.0.0.1:1"})
    assert isinstance(gcp.credentials(ep), ga_credentials.AnonymousCredentials)


def test_impersonated_credentials_with_override(monkeypatch, server):
    monkeypatch.setenv("TRAINGUARD_ENDPOINT_IAMCREDENTIALS", server.url)
    creds = gcp.impersonated_credentials(SA, lifetime_s=120)
    source = creds._source_credentials
    assert isinstance(source, ga_credentials.AnonymousCredentials)
    assert source.token_state == ga_credentials.TokenState.FRESH  # nothing to refresh first
    assert creds._iam_endpoint_override == (
        f"{server.url}/v1/projects/-/serviceAccounts/{SA}:generateAccessToken"
    )
    assert creds._target_scopes == [gcp.CLOUD_PLATFORM_SCOPE]
    assert creds._lifetime == 120

    # The token is minted at the override, through the timed request.
    server.answer(200, {"accessToken": "minted-token", "expireTime": "2999-01-01T00:00:00Z"})
    creds.refresh(gcp.timed_request(5))
    assert creds.token == "minted-token"
    method, path, body, _ = server.calls[0]
    assert (method, path) == ("POST", f"/v1/projects/-/serviceAccounts/{SA}:generateAccessToken")
    assert body["scope"] == [gcp.CLOUD_PLATFORM_SCOPE] and body["lifetime"] == "120s"


def test_timed_request_enforces_its_time_limit(server):
    from google.auth import exceptions as auth_exceptions

    server.answer(200, {}, delay_s=1.0)
    request = gcp.timed_request(0.2)
    started = time.monotonic()
    with pytest.raises(auth_exceptions.TransportError):
        request(url=f"{server.url}/slow", method="GET", timeout=60)  # the caller's is replaced
    assert time.monotonic() - started < 0.9


def test_storage_client_credentials(monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:1")
    anonymous = gcp.storage_client()
    assert isinstance(anonymous._credentials, ga_credentials.AnonymousCredentials)
    assert anonymous.project == "test"
    given = ga_credentials.AnonymousCredentials()
    client = gcp.storage_client("p-proj", credentials=given)
    assert client._credentials is given and client.project == "p-proj"


def test_authorized_session_override_and_given_credentials(monkeypatch, server):
    monkeypatch.setenv("TRAINGUARD_ENDPOINT_CLOUDRESOURCEMANAGER", server.url)
    session, base = gcp.authorized_session("CLOUDRESOURCEMANAGER")
    assert base == server.url
    assert isinstance(session.credentials, ga_credentials.AnonymousCredentials)
    given = ga_credentials.AnonymousCredentials()
    session, base = gcp.authorized_session("CLOUDRESOURCEMANAGER", credentials=given)
    assert session.credentials is given and base == server.url


def test_registry_credential(monkeypatch):
    import google.auth
    from google.auth import exceptions as auth_exceptions

    assert gcp.registry_credential("registry-1.docker.io", 5) is None
    assert gcp.registry_credential("127.0.0.1:5000", 5) is None
    assert gcp.is_google_registry("europe-west4-docker.pkg.dev")
    assert gcp.is_google_registry("eu.gcr.io") and not gcp.is_google_registry("notgcr.io")

    class Token:
        token = "adc-token"

        def refresh(self, request):
            self.refreshed = True

    asked: list = []

    def adc(scopes=None):
        asked.append(scopes)
        return Token(), "p-proj"

    monkeypatch.setattr(google.auth, "default", adc)
    get = gcp.registry_credential("us-docker.pkg.dev", 5)
    assert asked == []  # nothing is fetched until the registry asks
    assert get() == ("oauth2accesstoken", "adc-token")
    assert asked == [[gcp.CLOUD_PLATFORM_SCOPE]]

    def no_adc(scopes=None):
        raise auth_exceptions.DefaultCredentialsError("no ADC")

    monkeypatch.setattr(google.auth, "default", no_adc)
    assert gcp.registry_credential("gcr.io", 5)() is None


# --- rest_json and retry_policy ---------------------------------------------------------------


def test_rest_json_returns_json_and_sends_body(server):
    import requests

    server.answer(200, {"permissions": ["a.b.c"]})
    server.answer(200, None)
    with requests.Session() as session:
        data = gcp.rest_json(
            session,
            "POST",
            f"{server.url}/v3/projects/p:testIamPermissions",
            timeout=5,
            body={"permissions": ["a.b.c", "d.e.f"]},
            params={"x": "1"},
        )
        assert data == {"permissions": ["a.b.c"]}
        assert gcp.rest_json(session, "GET", f"{server.url}/empty", timeout=5) == {}
    method, path, body, _ = server.calls[0]
    assert (method, path) == ("POST", "/v3/projects/p:testIamPermissions?x=1")
    assert body == {"permissions": ["a.b.c", "d.e.f"]}


def test_rest_json_raises_api_core_errors(server):
    import requests

    server.answer(403, _error(403, "PERMISSION_DENIED", "caller lacks monitoring.timeSeries.list"))
    server.answer(429, _error(429, "RESOURCE_EXHAUSTED", "slow down"))
    with requests.Session() as session:
        with pytest.raises(exceptions.Forbidden) as forbidden:
            gcp.rest_json(session, "GET", f"{server.url}/v3/projects/p/timeSeries", timeout=5)
        assert forbidden.value.code == 403
        assert "monitoring.timeSeries.list" in forbidden.value.message
        with pytest.raises(exceptions.TooManyRequests):
            gcp.rest_json(session, "GET", f"{server.url}/v3/projects/p/timeSeries", timeout=5)
    assert len(server.calls) == 2  # no retry without a policy


def test_rest_json_retries_503_with_the_retry_policy_then_succeeds(server):
    import requests

    from trainguard.retry import RetryPolicy

    server.answer(503, _error(503, "UNAVAILABLE", "try again"))
    server.answer(200, {"ok": True})
    with requests.Session() as session:
        data = gcp.rest_json(
            session,
            "GET",
            f"{server.url}/v1/thing",
            timeout=5,
            retry=RetryPolicy(initial_s=0.01, deadline_s=5),
        )
    assert data == {"ok": True}
    assert len(server.calls) == 2


def test_rest_json_does_not_retry_a_refusal(server):
    import requests

    from trainguard.retry import RetryPolicy

    server.answer(403, _error(403, "PERMISSION_DENIED", "no"))
    with requests.Session() as session, pytest.raises(exceptions.Forbidden):
        gcp.rest_json(
            session,
            "GET",
            f"{server.url}/v1/thing",
            timeout=5,
            retry=RetryPolicy(initial_s=0.01, deadline_s=5),
        )
    assert len(server.calls) == 1


def test_rest_json_retries_a_rate_limit_but_not_a_quota_limit(server):
    import requests

    from trainguard.retry import RetryPolicy

    policy = RetryPolicy(initial_s=0.01, deadline_s=5)
    # a rate limit (GoogleCloudPlatform/vertex-ai-samples#1000): passes within a minute, retried
    server.answer(
        429,
        _error(
            429,
            "RESOURCE_EXHAUSTED",
            "Quota exceeded for quota metric 'Resource management (CRUD) requests' and limit "
            "'Resource management (CRUD) requests per minute per region' of service "
            "'aiplatform.googleapis.com' for consumer 'project_number:1'.",
        ),
    )
    server.answer(200, {"ok": True})
    with requests.Session() as session:
        assert gcp.rest_json(session, "GET", f"{server.url}/v1/a", timeout=5, retry=policy) == {"ok": True}
    assert len(server.calls) == 2
    # over a quota limit (GoogleCloudPlatform/stable-diffusion-on-gcp#12): refused until raised
    server.answer(
        429,
        _error(
            429,
            "RESOURCE_EXHAUSTED",
            "The following quota metrics exceed quota limits: "
            "aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus",
        ),
    )
    with requests.Session() as session, pytest.raises(exceptions.TooManyRequests, match="exceed quota"):
        gcp.rest_json(session, "GET", f"{server.url}/v1/b", timeout=5, retry=policy)
    assert len(server.calls) == 3


def test_rest_json_gives_up_on_503_at_the_deadline_with_a_transient_error(server):
    import requests

    from trainguard.errors import TransientError
    from trainguard.retry import RetryPolicy

    for _ in range(20):
        server.answer(503, _error(503, "UNAVAILABLE", "try again"))
    started = time.monotonic()
    with requests.Session() as session, pytest.raises(TransientError, match="kept failing"):
        gcp.rest_json(
            session,
            "GET",
            f"{server.url}/v1/thing",
            timeout=5,
            retry=RetryPolicy(initial_s=0.05, max_delay_s=0.1, deadline_s=0.4),
        )
    assert time.monotonic() - started < 5
    assert 2 <= len(server.calls) < 20


def test_rest_json_does_not_retry_a_dead_endpoint():
    import requests

    from trainguard.retry import RetryPolicy

    started = time.monotonic()
    with requests.Session() as session, pytest.raises(requests.exceptions.ConnectionError):
        gcp.rest_json(
            session, "GET", "http://127.0.0.1:9/v1/thing", timeout=5, retry=RetryPolicy(deadline_s=10)
        )
    assert time.monotonic() - started < 5  # refused at once, not retried for 10 s


def test_the_new_apis_have_overrides_and_default_hosts(monkeypatch):
    for api, host in (
        ("COMPUTE", "https://compute.googleapis.com"),
        ("CLOUDKMS", "https://cloudkms.googleapis.com"),
        ("SERVICENETWORKING", "https://servicenetworking.googleapis.com"),
    ):
        monkeypatch.delenv(f"TRAINGUARD_ENDPOINT_{api}", raising=False)
        assert gcp.endpoint(api).base_url == host
        monkeypatch.setenv(f"TRAINGUARD_ENDPOINT_{api}", "http://127.0.0.1:8123/")
        ep = gcp.endpoint(api)
        assert (ep.base_url, ep.overridden) == ("http://127.0.0.1:8123", True)
