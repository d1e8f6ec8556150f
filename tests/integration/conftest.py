"""Fixtures for the online preflight checks: every Google API on loopback, real clients.

- Cloud Quotas, Monitoring, Policy Troubleshooter, Resource Manager/IAM/IAM Credentials: the
  protocol-faithful servers under ``tests/servers`` (one fresh set per test; they start in ms).
- Cloud Storage: ``gcp-storage-emulator``, in-process, one per session (buckets wiped per test).
- Registry: Debian's ``docker-registry`` (the distribution registry) with *token* auth, so every
  pull goes through the real Bearer challenge flow. Its token service is a small server here: it
  grants anonymous pull on ``public/*`` and pull on ``private/*`` only to Basic
  ``oauth2accesstoken:<PRIVATE_TOKEN>`` (as Artifact Registry does with a Google access token).
  Test images are pushed once per session with plain HTTP POST/PUT of blobs and manifests.

The ``loopback`` fixture sets ``TRAINGUARD_ENDPOINT_*``, ``STORAGE_EMULATOR_HOST`` and
``TRAINGUARD_INSECURE_REGISTRIES`` with monkeypatch and returns handles to configure each server.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from tests.servers.compute import ComputeServer, NetworkState, ServiceNetworkingServer
from tests.servers.iam import IamServer, IamState
from tests.servers.kms import KmsServer
from tests.servers.monitoring import MonitoringServer
from tests.servers.quotas import QuotasServer
from tests.servers.troubleshooter import TroubleshooterServer
from tests.servers.vertex_resources import VertexResourcesServer

PROJECT = "tg-proj"
PROJECT_NUMBER = "123456789012"
REGION = "us-central1"
BUCKET = "tg-out"
SA = f"trainer@{PROJECT}.iam.gserviceaccount.com"
AGENT = f"service-{PROJECT_NUMBER}@gcp-sa-aiplatform-cc.iam.gserviceaccount.com"
CALLER = "user:alice@example.com"
A100 = "aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus"
A100_SPOT = "aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_a100_gpus"
# What a spec may reference (seeded healthy by ``seed_resources``).
NETWORK = f"projects/{PROJECT_NUMBER}/global/networks/tg-vpc"
IP_RANGE = "tg-vertex-range"
ATTACHMENT = "tg-psc"
RESERVATION = f"projects/{PROJECT}/zones/{REGION}-a/reservations/tg-a100"
KMS_KEY = f"projects/{PROJECT}/locations/{REGION}/keyRings/tg-ring/cryptoKeys/tg-key"
TENSORBOARD = f"projects/{PROJECT}/locations/{REGION}/tensorboards/42"
PERSISTENT_RESOURCE = "tg-warm"
VERTEX_AGENT = f"service-{PROJECT_NUMBER}@gcp-sa-aiplatform.iam.gserviceaccount.com"
PRIVATE_TOKEN = "ya29.registry-private-secret"  # the "Google access token" for private/*
REGISTRY_SERVICE = "trainguard-test-registry"
REGISTRY_ISSUER = "trainguard-test-token-issuer"


def registry_binary() -> str | None:
    """Debian's ``docker-registry`` (apt package docker-registry), or ``registry`` upstream."""
    return (
        os.environ.get("TRAINGUARD_TEST_REGISTRY_BIN")
        or shutil.which("docker-registry")
        or shutil.which("registry")
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def dead_host():
    """``127.0.0.1:PORT`` where nothing answers (connections are refused) for the whole test: the
    port stays bound, never listening. A port only found free and closed again could be taken by
    another worker's test server before the test connected: the "dead" endpoint then answered
    (a 404 from a storage emulator), or held the connection open past the retry deadline."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{s.getsockname()[1]}"


# --- registry with token auth -----------------------------------------------------------------


class TokenIssuer:
    """Signs registry JWTs (ES256, the certificate in the ``x5c`` header)."""

    def __init__(self, directory: Path) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, REGISTRY_ISSUER)])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.cert_path = directory / "token-cert.pem"
        self.cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self._x5c = base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()

    def token(self, repository: str, actions: list[str]) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, utils

        def b64(raw: bytes) -> str:
            return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

        now = int(time.time())
        header = {"typ": "JWT", "alg": "ES256", "x5c": [self._x5c]}
        claims = {
            "iss": REGISTRY_ISSUER,
            "sub": "",
            "aud": REGISTRY_SERVICE,
            "exp": now + 600,
            "nbf": now - 10,
            "iat": now,
            "jti": os.urandom(8).hex(),
            "access": [{"type": "repository", "name": repository, "actions": actions}],
        }
        signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
        der = self._key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = utils.decode_dss_signature(der)
        return f"{signing_input}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


class TokenServer:
    """The registry's token realm: anonymous pull on public/*, Basic for private/*.

    ``fail_next`` answers the next N token requests with that status (429/503 backoff tests);
    ``requests`` counts token requests per scope.
    """

    def __init__(self, issuer: TokenIssuer) -> None:
        self.issuer = issuer
        self.fail_next: list[int] = []
        self.requests: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                owner._serve(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()
        self.realm = f"http://127.0.0.1:{self._httpd.server_address[1]}/token"

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        query = parse_qs(urlsplit(handler.path).query)
        scope = (query.get("scope") or [""])[0]
        self.requests.append(scope)
        status, body = 200, {}
        if self.fail_next:
            status = self.fail_next.pop(0)
            body = {"errors": [{"code": "TOOMANYREQUESTS", "message": "slow down"}]}
        else:
            _, _, rest = scope.partition(":")
            repository, _, actions = rest.rpartition(":")
            auth = handler.headers.get("Authorization", "")
            basic = ""
            if auth.startswith("Basic "):
                basic = base64.b64decode(auth[6:]).decode()
            if repository.startswith("private/") and basic != f"oauth2accesstoken:{PRIVATE_TOKEN}":
                status, body = (
                    401,
                    {"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]},
                )
            else:
                token = self.issuer.token(repository, ["pull"])
                body = {"token": token, "access_token": token, "expires_in": 600}
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@dataclass
class Registry:
    """A running docker-registry; ``uri(name)`` gives an image URI on it."""

    host: str
    issuer: TokenIssuer
    tokens: TokenServer
    process: subprocess.Popen
    digests: dict[str, str] = field(default_factory=dict)

    def uri(self, name: str) -> str:
        return f"{self.host}/{name}"

    # -- pushing (plain HTTP, as a client would) --

    def _headers(self, repository: str) -> dict[str, str]:
        return {"Authorization": "Bearer " + self.issuer.token(repository, ["pull", "push"])}

    def push_blob(self, repository: str, data: bytes) -> dict:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        base = f"http://{self.host}"
        r = requests.post(
            f"{base}/v2/{repository}/blobs/uploads/", headers=self._headers(repository), timeout=10
        )
        assert r.status_code == 202, r.text
        location = r.headers["Location"]
        url = location if location.startswith("http") else base + location
        r = requests.put(
            url,
            params={"digest": digest},
            data=data,
            timeout=10,
            headers={**self._headers(repository), "Content-Type": "application/octet-stream"},
        )
        assert r.status_code == 201, r.text
        return {"digest": digest, "size": len(data)}

    def push_manifest(self, repository: str, reference: str, manifest: dict) -> dict:
        data = json.dumps(manifest).encode()
        r = requests.put(
            f"http://{self.host}/v2/{repository}/manifests/{reference}",
            data=data,
            headers={**self._headers(repository), "Content-Type": manifest["mediaType"]},
            timeout=10,
        )
        assert r.status_code == 201, r.text
        return {
            "mediaType": manifest["mediaType"],
            "digest": r.headers["Docker-Content-Digest"],
            "size": len(data),
        }

    def push_image(
        self,
        repository: str,
        reference: str,
        *,
        config: dict | None,
        architecture: str = "amd64",
        variant: str = "",
        docker_types: bool = False,
    ) -> dict:
        """Pushes config + one layer + manifest; returns the manifest descriptor."""
        blob = {"architecture": architecture, "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}
        if variant:
            blob["variant"] = variant
        if config is not None:
            blob["config"] = config
        cfg = self.push_blob(repository, json.dumps(blob).encode())
        layer = self.push_blob(repository, os.urandom(64))
        if docker_types:
            media, cfg_type = (
                "application/vnd.docker.distribution.manifest.v2+json",
                "application/vnd.docker.container.image.v1+json",
            )
            layer_type = "application/vnd.docker.image.rootfs.diff.tar.gzip"
        else:
            media, cfg_type = (
                "application/vnd.oci.image.manifest.v1+json",
                "application/vnd.oci.image.config.v1+json",
            )
            layer_type = "application/vnd.oci.image.layer.v1.tar+gzip"
        manifest = {
            "schemaVersion": 2,
            "mediaType": media,
            "config": {"mediaType": cfg_type, **cfg},
            "layers": [{"mediaType": layer_type, **layer}],
        }
        desc = self.push_manifest(repository, reference, manifest)
        return {
            **desc,
            "platform": {
                "architecture": architecture,
                "os": "linux",
                **({"variant": variant} if variant else {}),
            },
        }

    def push_attestation(self, repository: str, subject: str) -> dict:
        """A BuildKit-style attestation manifest (platform unknown/unknown)."""
        cfg = self.push_blob(repository, b"{}")
        statement = self.push_blob(
            repository, json.dumps({"_type": "https://in-toto.io/Statement/v0.1"}).encode()
        )
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **cfg},
            "layers": [
                {
                    "mediaType": "application/vnd.in-toto+json",
                    **statement,
                    "annotations": {"in-toto.io/predicate-type": "https://spdx.dev/Document"},
                }
            ],
        }
        digest = "sha256:" + hashlib.sha256(json.dumps(manifest).encode()).hexdigest()
        desc = self.push_manifest(repository, digest, manifest)
        return {
            **desc,
            "platform": {"architecture": "unknown", "os": "unknown"},
            "annotations": {
                "vnd.docker.reference.digest": subject,
                "vnd.docker.reference.type": "attestation-manifest",
            },
        }

    def push_index(self, repository: str, tag: str, entries: list[dict]) -> str:
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": entries,
        }
        return self.push_manifest(repository, tag, index)["digest"]


ENTRYPOINT = ["python", "-m", "trainer.task"]


def _push_test_images(reg: Registry) -> None:
    """The images the tests read (see the module docstring)."""
    d = reg.push_image("public/trainer", "1.0", config={"Entrypoint": ENTRYPOINT, "Env": ["PATH=/usr/bin"]})
    reg.digests["public/trainer:1.0"] = d["digest"]
    amd = reg.push_image("public/multi", "amd64-only-tag-unused", config={"Cmd": ["python", "train.py"]})
    arm = reg.push_image(
        "public/multi",
        "arm64-tag-unused",
        config={"Cmd": ["python", "train.py"]},
        architecture="arm64",
        variant="v8",
    )
    att = reg.push_attestation("public/multi", amd["digest"])
    reg.digests["public/multi:2.0"] = reg.push_index("public/multi", "2.0", [amd, arm, att])
    reg.push_image(
        "public/noentry",
        "1.0",
        config={"Entrypoint": None, "Cmd": None, "Env": ["PATH=/usr/bin"]},
        docker_types=True,
    )
    arm64 = reg.push_image(
        "public/armonly", "arm64-unused", config={"Cmd": ["train"]}, architecture="arm64", variant="v8"
    )
    arm7 = reg.push_image(
        "public/armonly", "arm7-unused", config={"Cmd": ["train"]}, architecture="arm", variant="v7"
    )
    reg.push_index(
        "public/armonly", "1.0", [arm64, arm7, reg.push_attestation("public/armonly", arm64["digest"])]
    )
    reg.push_image("public/armimage", "1.0", config={"Cmd": ["train"]}, architecture="arm64")
    reg.push_image("private/trainer", "1.0", config={"Entrypoint": ENTRYPOINT})
    for name in ("bench/chief", "bench/worker", "bench/ps", "bench/eval"):
        reg.push_image(name, "1.0", config={"Entrypoint": ENTRYPOINT})


def start_registry(directory: Path) -> Registry:
    """Starts docker-registry with token auth on a free loopback port and pushes test images."""
    binary = registry_binary()
    if binary is None:
        raise FileNotFoundError("docker-registry not installed (apt-get install docker-registry)")
    issuer = TokenIssuer(directory)
    tokens = TokenServer(issuer)
    port = free_port()
    config = directory / "registry.yml"
    config.write_text(f"""version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {directory / "data"}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
  secret: trainguard-test
auth:
  token:
    realm: {tokens.realm}
    service: {REGISTRY_SERVICE}
    issuer: {REGISTRY_ISSUER}
    rootcertbundle: {issuer.cert_path}
""")
    log = open(directory / "registry.log", "wb")  # noqa: SIM115 - lives as long as the process
    process = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=log)
    host = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 15
    while True:
        try:
            requests.get(f"http://{host}/v2/", timeout=1)
            break
        except requests.exceptions.ConnectionError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"docker-registry did not start: {(directory / 'registry.log').read_text()[-2000:]}"
                ) from None
            time.sleep(0.05)
    reg = Registry(host, issuer, tokens, process)
    _push_test_images(reg)
    return reg


def stop_registry(reg: Registry) -> None:
    reg.process.terminate()
    try:
        reg.process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        reg.process.kill()
    reg.tokens.stop()


@pytest.fixture(scope="session")
def registry():
    """docker-registry with token auth and the test images; skips when it is not installed."""
    if registry_binary() is None:
        message = "Debian's docker-registry is not installed (apt-get install docker-registry)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: CI must run the image checks, not skip them")
        pytest.skip(message)
    with tempfile.TemporaryDirectory(prefix="tg-registry-") as tmp:
        reg = start_registry(Path(tmp))
        try:
            yield reg
        finally:
            stop_registry(reg)


# --- storage emulator -------------------------------------------------------------------------


@dataclass
class Emulator:
    """gcp-storage-emulator, in-process; ``url`` is the STORAGE_EMULATOR_HOST value."""

    server: object
    url: str

    def create_bucket(
        self,
        name: str,
        *,
        location: str = "",
        location_type: str = "",
        data_locations: list[str] | None = None,
    ) -> None:
        """Creates a bucket through the real JSON API, then sets where it lives.

        The emulator ignores ``location`` on insert (every bucket is ``US``/``multi-region``) and
        cannot change ``locationType`` through PATCH; real GCS reports both from creation on, so
        the test seeds them into the emulator's bucket record (what GET then returns).
        """
        r = requests.post(
            f"{self.url}/storage/v1/b", params={"project": PROJECT}, json={"name": name}, timeout=5
        )
        assert r.status_code == 200, r.text
        record = self.server._storage.buckets[name]  # the emulator's own record; see the docstring
        if location:
            record["location"] = location
        if location_type:
            record["locationType"] = location_type
        if data_locations:
            record["customPlacementConfig"] = {"dataLocations": data_locations}


def start_emulator() -> Emulator:
    from gcp_storage_emulator.server import create_server

    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True)
    server.start()
    return Emulator(server, f"http://127.0.0.1:{port}")


@pytest.fixture(scope="session")
def emulator_session():
    emulator = start_emulator()
    try:
        yield emulator
    finally:
        emulator.server.stop()


@pytest.fixture
def emulator(emulator_session):
    emulator_session.server.wipe()
    yield emulator_session


# --- the Google API servers -------------------------------------------------------------------


@dataclass
class Loopback:
    """Every loopback server of one test, configured healthy; tests break one thing each."""

    quotas: QuotasServer
    monitoring: MonitoringServer
    troubleshooter: TroubleshooterServer
    iam: IamServer
    state: IamState
    emulator: Emulator
    # Compute Engine + Service Networking (one NetworkState), Cloud KMS, Vertex resources.
    compute: ComputeServer | None = None
    servicenetworking: ServiceNetworkingServer | None = None
    kms: KmsServer | None = None
    vertex: VertexResourcesServer | None = None

    @property
    def network(self) -> NetworkState:
        return self.compute.state

    def grant(self, member: str, role: str, resource: str, **kw) -> None:
        self.state.grant(member, role, resource, **kw)


def healthy_state() -> IamState:
    """The job SA and the service agent may write the bucket; the caller may launch and actAs."""
    state = IamState(
        projects={PROJECT: PROJECT_NUMBER}, buckets={BUCKET: PROJECT}, service_accounts={SA}, caller=CALLER
    )
    bucket = state.bucket_resource(BUCKET)
    project = state.project_resource(PROJECT)
    state.grant(f"serviceAccount:{SA}", "roles/storage.objectAdmin", bucket)
    state.grant(f"serviceAccount:{AGENT}", "roles/storage.objectAdmin", bucket)
    state.grant(CALLER, "roles/aiplatform.user", project)
    state.grant(CALLER, "roles/browser", project)
    state.grant(CALLER, "roles/iam.serviceAccountUser", state.sa_resource(SA))
    return state


def seed_resources(servers: Loopback) -> None:
    """A VPC with private services access and a range, a PSC attachment, an A100 reservation, a
    CMEK key the Vertex AI Service Agent may use, a TensorBoard and a persistent resource."""
    net = servers.network
    net.add_network(PROJECT, "tg-vpc")
    net.add_range(PROJECT, IP_RANGE, "tg-vpc")
    net.connect(PROJECT, "tg-vpc", [IP_RANGE])
    net.add_attachment(PROJECT, REGION, ATTACHMENT)
    net.add_reservation(
        PROJECT,
        f"{REGION}-a",
        "tg-a100",
        machine_type="a2-highgpu-1g",
        accelerators={"nvidia-tesla-a100": 1},
        count=4,
        in_use=1,
    )
    servers.kms.add_key(KMS_KEY)
    servers.grant(
        f"serviceAccount:{VERTEX_AGENT}",
        "roles/cloudkms.cryptoKeyEncrypterDecrypter",
        servers.state.kms_resource(KMS_KEY),
    )
    servers.grant(f"serviceAccount:{SA}", "roles/aiplatform.user", servers.state.project_resource(PROJECT))
    servers.vertex.add_tensorboard(PROJECT, REGION, "42")
    servers.vertex.add_persistent_resource(
        PROJECT,
        REGION,
        PERSISTENT_RESOURCE,
        pools=[
            {
                "id": "a100",
                "machineSpec": {
                    "machineType": "a2-highgpu-1g",
                    "acceleratorType": "NVIDIA_TESLA_A100",
                    "acceleratorCount": 1,
                },
                "replicaCount": "4",
            },
            {"id": "cpu", "machineSpec": {"machineType": "n1-standard-8"}, "replicaCount": "2"},
        ],
    )


@pytest.fixture
def loopback(monkeypatch, emulator):
    """All Google APIs on loopback, healthy; env overrides set for the real clients."""
    state = healthy_state()
    servers = Loopback(
        quotas=QuotasServer(PROJECT, PROJECT_NUMBER).start(),
        monitoring=MonitoringServer(PROJECT).start(),
        troubleshooter=TroubleshooterServer(state).start(),
        iam=IamServer(state).start(),
        state=state,
        emulator=emulator,
    )
    network_state = NetworkState(projects={PROJECT: PROJECT_NUMBER})
    servers.compute = ComputeServer(network_state).start()
    servers.servicenetworking = ServiceNetworkingServer(network_state).start()
    servers.kms = KmsServer(state).start()
    servers.vertex = VertexResourcesServer({PROJECT: PROJECT_NUMBER}).start()
    servers.quotas.set_limit(A100, 8, region=REGION)
    servers.quotas.set_limit(A100, 16, region="us-east1")
    servers.quotas.set_limit(A100_SPOT, 32, region=REGION)
    servers.monitoring.set_usage(A100, REGION, 2)
    # A project that has run jobs has a usage series for each metric they used; a metric with no
    # series at all is unknown usage (WARN), not 0 (see trainguard.preflight.quota).
    servers.monitoring.set_usage(A100_SPOT, REGION, 0)
    servers.monitoring.set_usage("aiplatform.googleapis.com/custom_model_training_cpus", REGION, 0)
    emulator.create_bucket(BUCKET, location="US-CENTRAL1", location_type="region")
    for api, server in (
        ("CLOUDQUOTAS", servers.quotas),
        ("MONITORING", servers.monitoring),
        ("POLICYTROUBLESHOOTER", servers.troubleshooter),
        ("CLOUDRESOURCEMANAGER", servers.iam),
        ("IAM", servers.iam),
        ("IAMCREDENTIALS", servers.iam),
        ("COMPUTE", servers.compute),
        ("SERVICENETWORKING", servers.servicenetworking),
        ("CLOUDKMS", servers.kms),
        ("AIPLATFORM", servers.vertex),
    ):
        monkeypatch.setenv(f"TRAINGUARD_ENDPOINT_{api}", server.url)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.url)
    try:
        yield servers
    finally:
        for server in (
            servers.quotas,
            servers.monitoring,
            servers.troubleshooter,
            servers.iam,
            servers.compute,
            servers.servicenetworking,
            servers.kms,
            servers.vertex,
        ):
            server.stop()


@pytest.fixture
def insecure_registry(monkeypatch, registry):
    """The test registry, reachable over plain http."""
    monkeypatch.setenv("TRAINGUARD_INSECURE_REGISTRIES", registry.host)
    return registry


@pytest.fixture
def all_checks():
    """The check families ``run_preflight`` knows (the registry loads each when it runs)."""
    from trainguard.preflight.checks import FAMILIES

    return tuple(FAMILIES)


# --- specs ------------------------------------------------------------------------------------


def make_spec(
    image: str,
    *,
    pools: list[dict] | None = None,
    region: str = REGION,
    service_account: str | None = SA,
    output: str | None = f"gs://{BUCKET}/runs/r1",
    strategy: str = "",
    **extra,
):
    """A validated JobSpec: one A100 pool running ``image`` unless ``pools`` says otherwise."""
    from trainguard.spec import parse_spec

    data: dict = {
        "workerPoolSpecs": pools
        or [
            {
                "machineSpec": {
                    "machineType": "a2-highgpu-1g",
                    "acceleratorType": "NVIDIA_TESLA_A100",
                    "acceleratorCount": 1,
                },
                "replicaCount": 1,
                "containerSpec": {"imageUri": image},
            }
        ]
    }
    if service_account:
        data["serviceAccount"] = service_account
    if output:
        data["baseOutputDirectory"] = {"outputUriPrefix": output}
    if strategy:
        data["scheduling"] = {"strategy": strategy}
    data.update(extra)
    return parse_spec(data, project=PROJECT, region=region)


def context(spec, call_timeout_s: float = 5.0):
    """The PreflightContext a family function receives from the runner."""
    from trainguard.preflight.checks import PreflightContext

    return PreflightContext(spec=spec, call_timeout_s=call_timeout_s)
