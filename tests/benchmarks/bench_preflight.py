"""Preflight benchmark (``make bench``): how fast preflight answers, as a user sees it.

Every API is on loopback (the test servers, gcp-storage-emulator, Debian's docker-registry with
token auth), the Google API servers answering after ``LATENCY_S`` to stand in for a real round
trip. The spec has 4 worker pools and references every kind of resource a family looks up (a VPC
with a reserved range, a reservation, a CMEK key, a TensorBoard), so every family does real work.
Reported, medians of ``ROUNDS``:

1. whole processes (``subprocess``, process start included), as a user runs them:
   ``trainguard preflight examples/a100-spot.yaml --only compat`` (goal ≤ 1.0 s),
   ``trainguard preflight SPEC`` with every family against the loopback servers (goal ≤ 1.3 s),
   and ``trainguard --help`` (goal ≤ 0.3 s) for scale;
2. in one process: one full preflight (all families concurrently) against each family alone, and
   their ratio to the slowest single family (goal ≤ 1.3×: the families really overlap).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LATENCY_S = 0.05  # a typical round trip to a Google API from a pipeline worker
ROUNDS = 5
FAMILIES = ("compat", "quota", "iam", "image", "storage", "network", "capacity", "cost")
ROOT = Path(__file__).resolve().parents[2]
# The console script a user runs (``pip install`` makes it), else the module.
_SCRIPT = Path(sys.executable).with_name("trainguard")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "trainguard.cli"]


def _servers(tmp: Path):
    """Starts every server, seeds a healthy project; returns (env, spec body, stop)."""
    from tests.integration import conftest as c
    from tests.servers.billing import BillingServer
    from tests.servers.compute import ComputeServer, NetworkState, ServiceNetworkingServer
    from tests.servers.iam import IamServer
    from tests.servers.kms import KmsServer
    from tests.servers.monitoring import MonitoringServer
    from tests.servers.quotas import QuotasServer
    from tests.servers.troubleshooter import TroubleshooterServer
    from tests.servers.vertex_resources import VertexResourcesServer

    state = c.healthy_state()
    net = NetworkState(projects={c.PROJECT: c.PROJECT_NUMBER})
    world = c.Loopback(
        quotas=QuotasServer(c.PROJECT, c.PROJECT_NUMBER),
        monitoring=MonitoringServer(c.PROJECT),
        troubleshooter=TroubleshooterServer(state),
        iam=IamServer(state),
        state=state,
        emulator=c.start_emulator(),
        compute=ComputeServer(net),
        servicenetworking=ServiceNetworkingServer(net),
        kms=KmsServer(state),
        vertex=VertexResourcesServer({c.PROJECT: c.PROJECT_NUMBER}),
    )
    servers = [
        world.quotas,
        world.monitoring,
        world.troubleshooter,
        world.iam,
        world.compute,
        world.servicenetworking,
        world.kms,
        world.vertex,
        BillingServer(max_page_size=5000),
    ]
    for server in servers:
        server.delay_s = LATENCY_S
        server.start()
    c.seed_resources(world)
    world.quotas.set_limit(c.A100, 16, region=c.REGION)
    world.monitoring.set_usage(c.A100, c.REGION, 2)
    world.emulator.create_bucket(c.BUCKET, location="US-CENTRAL1", location_type="region")
    registry = c.start_registry(tmp)
    env = {
        "TRAINGUARD_ENDPOINT_CLOUDQUOTAS": world.quotas.url,
        "TRAINGUARD_ENDPOINT_MONITORING": world.monitoring.url,
        "TRAINGUARD_ENDPOINT_POLICYTROUBLESHOOTER": world.troubleshooter.url,
        "TRAINGUARD_ENDPOINT_CLOUDRESOURCEMANAGER": world.iam.url,
        "TRAINGUARD_ENDPOINT_IAM": world.iam.url,
        "TRAINGUARD_ENDPOINT_IAMCREDENTIALS": world.iam.url,
        "TRAINGUARD_ENDPOINT_COMPUTE": world.compute.url,
        "TRAINGUARD_ENDPOINT_SERVICENETWORKING": world.servicenetworking.url,
        "TRAINGUARD_ENDPOINT_CLOUDKMS": world.kms.url,
        "TRAINGUARD_ENDPOINT_AIPLATFORM": world.vertex.url,
        "TRAINGUARD_ENDPOINT_CLOUDBILLING": servers[-1].url,
        "STORAGE_EMULATOR_HOST": world.emulator.url,
        "TRAINGUARD_INSECURE_REGISTRIES": registry.host,
    }

    def pool(machine: str, image: str, replicas: int = 1, accel: int = 0) -> dict:
        spec: dict = {"machineType": machine}
        if accel:
            spec.update(acceleratorType="NVIDIA_TESLA_A100", acceleratorCount=accel)
        return {
            "machineSpec": spec,
            "replicaCount": replicas,
            "containerSpec": {"imageUri": registry.uri(f"bench/{image}:1.0")},
        }

    chief = pool("a2-highgpu-1g", "chief", 1, 1)
    chief["machineSpec"]["reservationAffinity"] = {
        "reservationAffinityType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": [c.RESERVATION],
    }
    body = {
        "jobSpec": {
            "workerPoolSpecs": [
                chief,
                pool("a2-highgpu-1g", "worker", 2, 1),
                pool("n1-standard-8", "ps", 2),
                pool("n1-standard-8", "eval"),
            ],
            "serviceAccount": c.SA,
            "baseOutputDirectory": {"outputUriPrefix": f"gs://{c.BUCKET}/runs/r1"},
            "network": c.NETWORK,
            "reservedIpRanges": [c.IP_RANGE],
            "tensorboard": c.TENSORBOARD,
        },
        "encryptionSpec": {"kmsKeyName": c.KMS_KEY},
    }

    def stop() -> None:
        for server in servers:
            server.stop()
        world.emulator.server.stop()
        c.stop_registry(registry)

    return env, body, stop


def _wall(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    started = time.perf_counter()
    done = subprocess.run(
        argv, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=120
    )
    return time.perf_counter() - started, done.returncode, done.stdout + done.stderr


def _median_wall(argv: list[str], env: dict[str, str] | None = None) -> float:
    _wall(argv, env)  # warm the file cache
    walls = []
    for _ in range(ROUNDS):
        wall, rc, out = _wall(argv, env)
        if rc != 0:
            raise SystemExit(f"bench_preflight: {' '.join(argv[1:])} exited {rc}:\n{out[-2000:]}")
        walls.append(wall)
    return statistics.median(walls)


def _in_process(body: dict, env: dict[str, str]) -> tuple[float, dict[str, float]]:
    from trainguard.preflight import run_preflight
    from trainguard.spec import parse_spec

    os.environ.update(env)
    spec = parse_spec(body, project="tg-proj", region="us-central1")

    def timed(only) -> float:
        started = time.perf_counter()
        report = run_preflight(spec, only=list(only), timeout_s=30, call_timeout_s=10)
        bad = [
            f"{r.check}: {r.title}: {r.status.value} {r.evidence}"
            for r in report.results
            if r.status.value != "PASS"
        ]
        if bad:
            raise SystemExit("bench_preflight: the healthy spec did not pass:\n  " + "\n  ".join(bad))
        return time.perf_counter() - started

    timed(FAMILIES)  # warm-up: imports, connection pools
    full, single = [], {f: [] for f in FAMILIES}
    for _ in range(ROUNDS):
        full.append(timed(FAMILIES))
        for family in FAMILIES:
            single[family].append(timed([family]))
    return statistics.median(full), {f: statistics.median(v) for f, v in single.items()}


def main() -> int:
    from tests.integration.conftest import registry_binary

    if registry_binary() is None:
        print("bench_preflight: skipped, docker-registry is not installed (apt-get install docker-registry)")
        return 0
    project = ["--project", "tg-proj", "--region", "us-central1"]
    with tempfile.TemporaryDirectory(prefix="tg-bench-preflight-") as tmp:
        env, body, stop = _servers(Path(tmp))
        try:
            spec_file = Path(tmp) / "job.json"
            spec_file.write_text(json.dumps(body))
            helps = _median_wall(CLI + ["--help"])
            spec_import = _median_wall([sys.executable, "-c", "import trainguard.spec"])
            compat = _median_wall(
                CLI
                + [
                    "preflight",
                    "examples/a100-spot.yaml",
                    "--only",
                    "compat",
                    "--project",
                    "my-project",
                    "--region",
                    "us-central1",
                ]
            )
            everything = _median_wall(CLI + ["preflight", str(spec_file), *project], env)
            wall, alone = _in_process(body, env)
        finally:
            stop()
    slowest = max(alone, key=alone.get)
    ratio = wall / alone[slowest]
    mark = lambda ok: "met" if ok else "MISSED"  # noqa: E731
    print(f"preflight, whole processes (median of {ROUNDS}, process start included):")
    print(
        f"  trainguard --help                        {helps * 1000:6.0f} ms "
        f"(goal ≤ 300 ms: {mark(helps <= 0.3)})"
    )
    print(
        f"  preflight a100-spot.yaml --only compat   {compat * 1000:6.0f} ms "
        f"(goal ≤ 1000 ms: {mark(compat <= 1.0)})"
    )
    print(f"    of which a process that only imports trainguard.spec {spec_import * 1000:6.0f} ms")
    print(
        f"  preflight, all {len(FAMILIES)} families, loopback     {everything * 1000:6.0f} ms "
        f"(goal ≤ 1300 ms: {mark(everything <= 1.3)}; {LATENCY_S * 1000:.0f} ms per API call)"
    )
    print(
        f"preflight in one process, 4 worker pools, every API on loopback with "
        f"{LATENCY_S * 1000:.0f} ms latency (median of {ROUNDS}):"
    )
    for family in FAMILIES:
        print(f"  {family:<8} alone {alone[family] * 1000:6.0f} ms")
    print(f"  all {len(FAMILIES)} concurrently {wall * 1000:6.0f} ms")
    print(
        f"  ratio to the slowest single check ({slowest}): {ratio:.2f}× (goal ≤ 1.3×: {mark(ratio <= 1.3)})"
    )
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # the repo root: tests.servers
    sys.exit(main())
