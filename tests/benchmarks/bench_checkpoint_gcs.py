"""gs:// checkpoint throughput (``make bench``): one stream vs parallel parts, side by side.

Through gcp-storage-emulator on loopback, a checkpoint of SIZE MB is saved (``CheckpointManager``,
``COMMIT`` and all) and restored (read back whole), with ``TransferConfig.single_stream()`` (one
request per file, the resumable upload of old) and with the parallel default (32 MiB parts,
8 workers: composite upload, concurrent ranged reads). The same state saved and restored on local
disk gives the machine's own figure.

Two emulators: the one the tests use (``http.server.HTTPServer``: one request at a time, so
parallel parts cannot overlap there and the figure shows what parts cost, not what they buy) and
the same handler behind ``ThreadingHTTPServer`` (requests served concurrently, as Cloud Storage
does). Both are a Python process on this machine: the MB/s are the emulator's, not Cloud
Storage's (~200 MiB/s per stream, far more in parallel, per the Cloud Storage docs); the ratio
between the two columns is the figure to read.

    python tests/benchmarks/bench_checkpoint_gcs.py [SIZE_MB ...]   (default 64 256)
"""

from __future__ import annotations

import os
import socket
import statistics
import sys
import tempfile
import time
from functools import partial
from http import server as http_server

from trainguard.runtime.checkpoint import CheckpointManager, RetentionPolicy
from trainguard.runtime.storage import GCSStore, LocalStore
from trainguard.runtime.transfer import TransferConfig

MB = 1_000_000
REPEATS = 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_emulator(threaded: bool):
    """gcp-storage-emulator in this process; ``threaded`` serves requests concurrently."""
    from gcp_storage_emulator import server as emu

    port = free_port()
    srv = emu.create_server("127.0.0.1", port, in_memory=True)
    if threaded:
        api = srv._api  # the emulator's own thread; only the HTTP server class changes

        def run() -> None:
            api._httpd = http_server.ThreadingHTTPServer(
                (api._host, api._port), partial(emu.RequestHandler, api._storage)
            )
            api.is_running.set()
            api._httpd.serve_forever()

        api.run = run
    srv.start()
    url = f"http://127.0.0.1:{port}"
    os.environ["STORAGE_EMULATOR_HOST"] = url
    import requests

    requests.post(f"{url}/storage/v1/b", params={"project": "test"}, json={"name": "bench"}, timeout=10)
    return srv


def measure(store, directory: str, payload: bytes) -> tuple[float, float]:
    """Median (save s, restore s) of REPEATS saves of step 1..N and reads of the newest."""
    saves, restores = [], []
    mgr = CheckpointManager(directory, store=store, async_save=False, retention=RetentionPolicy(keep_last=1))
    for step in range(1, REPEATS + 1):
        start = time.perf_counter()
        mgr.save(step, {"state.bin": payload})
        saves.append(time.perf_counter() - start)
        start = time.perf_counter()
        latest = mgr.restore_latest()
        data = latest.read("state.bin", store)
        restores.append(time.perf_counter() - start)
        assert len(data) == len(payload)
    return statistics.median(saves), statistics.median(restores)


def row(label: str, size: int, save_s: float, restore_s: float) -> str:
    return (
        f"  {label:<34} {size / MB:>6.0f} MB   save {save_s:7.2f} s {size / MB / save_s:8.1f} MB/s"
        f"   restore {restore_s:7.2f} s {size / MB / restore_s:8.1f} MB/s"
    )


def main(argv: list[str]) -> int:
    sizes = [int(a) for a in argv] or [64, 256]
    results: dict[tuple[str, int], tuple[float, float]] = {}
    for threaded in (False, True):
        srv = start_emulator(threaded)
        name = "threaded emulator" if threaded else "emulator (tests')"
        try:
            print(f"gs:// through {name}:")
            for size_mb in sizes:
                payload = os.urandom(size_mb * MB)
                for label, config in (
                    ("one stream", TransferConfig.single_stream()),
                    ("parallel", TransferConfig()),
                ):
                    key = f"{name}, {label}"
                    res = measure(GCSStore(transfer=config), f"gs://bench/{label}/{size_mb}", payload)
                    results[(key, size_mb)] = res
                    print(row(key, len(payload), *res), flush=True)
                single = results[(f"{name}, one stream", size_mb)]
                par = results[(f"{name}, parallel", size_mb)]
                print(
                    f"  {'':<34} parallel / one stream: save {single[0] / par[0]:.2f}x, "
                    f"restore {single[1] / par[1]:.2f}x"
                )
        finally:
            srv.stop()
    print("local disk (no parallel path: one write per file, written out while written):")
    with tempfile.TemporaryDirectory() as tmp:
        for size_mb in sizes:
            payload = os.urandom(size_mb * MB)
            print(row("local", len(payload), *measure(LocalStore(), f"{tmp}/{size_mb}", payload)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
