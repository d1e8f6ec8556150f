"""Preflight benchmark (``make bench``): wall time of the online checks for a 4-pool spec.

Every API is on loopback (the test servers, gcp-storage-emulator, Debian's docker-registry with
token auth), the Google API servers answering after ``LATENCY_S`` to stand in for a real round
trip. Reported: the wall time of one full preflight (compat + quota + iam + image + storage,
concurrently) and of each family alone, and the ratio of the full run to the slowest single
family (goal: ≤ 1.3×, i.e. the families really overlap; wall ≤ 3 s). Medians of ``ROUNDS``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

LATENCY_S = 0.05  # a typical round trip to a Google API from a pipeline worker
ROUNDS = 5
FAMILIES = ("compat", "quota", "iam", "image", "storage")


def _setup(tmp: Path):
    """Starts every server, configures a healthy project, sets the env; returns (spec, stop)."""
    import os

    from tests.integration import conftest as c
    from tests.servers.iam import IamServer
    from tests.servers.monitoring import MonitoringServer
    from tests.servers.quotas import QuotasServer
    from tests.servers.troubleshooter import TroubleshooterServer

    state = c.healthy_state()
    servers = [QuotasServer(c.PROJECT, c.PROJECT_NUMBER), MonitoringServer(c.PROJECT),
               TroubleshooterServer(state), IamServer(state)]
    quotas, monitoring, troubleshooter, iam = servers
    for server in servers:
        server.delay_s = LATENCY_S
        server.start()
    quotas.set_limit(c.A100, 16, region=c.REGION)
    monitoring.set_usage(c.A100, c.REGION, 2)
    emulator = c.start_emulator()
    emulator.create_bucket(c.BUCKET, location="US-CENTRAL1", location_type="region")
    registry = c.start_registry(tmp)
    env = {"TRAINGUARD_ENDPOINT_CLOUDQUOTAS": quotas.url,
           "TRAINGUARD_ENDPOINT_MONITORING": monitoring.url,
           "TRAINGUARD_ENDPOINT_POLICYTROUBLESHOOTER": troubleshooter.url,
           "TRAINGUARD_ENDPOINT_CLOUDRESOURCEMANAGER": iam.url,
           "TRAINGUARD_ENDPOINT_IAM": iam.url, "TRAINGUARD_ENDPOINT_IAMCREDENTIALS": iam.url,
           "STORAGE_EMULATOR_HOST": emulator.url,
           "TRAINGUARD_INSECURE_REGISTRIES": registry.host}
    os.environ.update(env)

    def pool(machine: str, image: str, replicas: int = 1, accel: int = 0) -> dict:
        spec = {"machineType": machine}
        if accel:
            spec.update(acceleratorType="NVIDIA_TESLA_A100", acceleratorCount=accel)
        return {"machineSpec": spec, "replicaCount": replicas,
                "containerSpec": {"imageUri": registry.uri(f"bench/{image}:1.0")}}

    spec = c.make_spec("unused", pools=[
        pool("a2-highgpu-1g", "chief", 1, 1), pool("a2-highgpu-2g", "worker", 3, 2),
        pool("n1-standard-8", "ps", 2), pool("n1-standard-8", "eval")])

    def stop() -> None:
        for server in servers:
            server.stop()
        emulator.server.stop()
        c.stop_registry(registry)

    return spec, stop


def _timed(spec, only) -> tuple[float, object]:
    from trainguard.preflight import run_preflight

    t0 = time.perf_counter()
    report = run_preflight(spec, only=list(only), timeout_s=30, call_timeout_s=10)
    return time.perf_counter() - t0, report


def main() -> int:
    from tests.integration.conftest import registry_binary
    from trainguard.preflight import runner

    if registry_binary() is None:
        print("bench_preflight: skipped, docker-registry is not installed "
              "(apt-get install docker-registry)")
        return 0
    # The runner imports the families listed in CHECK_MODULES; make sure the online ones are in.
    runner.CHECK_MODULES = tuple(dict.fromkeys(runner.CHECK_MODULES + FAMILIES[1:]))
    with tempfile.TemporaryDirectory(prefix="tg-bench-preflight-") as tmp:
        spec, stop = _setup(Path(tmp))
        try:
            _timed(spec, FAMILIES)  # warm-up: imports, connection pools
            full, single = [], {f: [] for f in FAMILIES}
            for _ in range(ROUNDS):
                wall, report = _timed(spec, FAMILIES)
                bad = [f"{r.check}: {r.title}: {r.status.value} {r.evidence}"
                       for r in report.results if r.status.value != "PASS"]
                if bad:
                    print("bench_preflight: the healthy spec did not pass:\n  " + "\n  ".join(bad))
                    return 1
                full.append(wall)
                for family in FAMILIES:
                    single[family].append(_timed(spec, [family])[0])
        finally:
            stop()
    wall = statistics.median(full)
    alone = {f: statistics.median(v) for f, v in single.items()}
    slowest = max(alone, key=alone.get)
    ratio = wall / alone[slowest]
    print(f"preflight, 4 worker pools, every API on loopback with {LATENCY_S * 1000:.0f} ms latency "
          f"(median of {ROUNDS}):")
    for family in FAMILIES:
        print(f"  {family:<8} alone {alone[family] * 1000:6.0f} ms")
    print(f"  all five concurrently {wall * 1000:6.0f} ms (goal ≤ 3000 ms: "
          f"{'met' if wall <= 3 else 'MISSED'})")
    print(f"  ratio to the slowest single check ({slowest}): {ratio:.2f}× (goal ≤ 1.3×: "
          f"{'met' if ratio <= 1.3 else 'MISSED'})")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: tests.servers
    sys.exit(main())
