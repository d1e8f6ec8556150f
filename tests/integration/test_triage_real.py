"""Error texts produced for real on this machine still classify as their stored fixtures do.

Each generator below makes a failure happen here (a bad entrypoint, a SIGKILL, a NaN from torch,
two gloo workers that disagree on the world size, a google-api-core client answered 403/429 by a
server on loopback) and returns the text a user would see. The test classifies the live text and
the stored fixture (tests/fixtures/triage/<name>.txt) and checks both name the same class with the
same evidence line (digits aside: pids, ports and timings change from run to run).

To refresh the fixtures after a deliberate change: ``TRAINGUARD_WRITE_TRIAGE_FIXTURES=1 pytest
tests/integration/test_triage_real.py``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import traceback
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from trainguard.triage import classify

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "triage"
WRITE = os.environ.get("TRAINGUARD_WRITE_TRIAGE_FIXTURES") == "1"
PY = sys.executable
SA = "trainer@my-project.iam.gserviceaccount.com"

Generator = Callable[[Path, str], str]
LIVE: dict[str, Generator] = {}


def live(name: str) -> Callable[[Generator], Generator]:
    """Registers a generator of the real text stored as fixture ``name``."""

    def register(fn: Generator) -> Generator:
        LIVE[name] = fn
        return fn

    return register


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Runs a command as a job would, returns stdout and stderr as the job log shows them."""
    proc = subprocess.run(
        args,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
        env=env,
    )
    return proc.stdout


def _script(tmp: Path, name: str, body: str) -> Path:
    path = tmp / name
    path.write_text(textwrap.dedent(body))
    return path


def _exception_text(call: Callable[[], object]) -> str:
    """Calls ``call``; returns its exception as Python prints it at the end of a traceback."""
    try:
        call()
    except Exception as exc:  # any client error is the text under test
        return "".join(traceback.format_exception_only(exc))
    raise AssertionError("the call was expected to fail")


# --- container ---------------------------------------------------------------------------------


@live("container-modulenotfound-local")
def _module_not_found(tmp: Path, _: str) -> str:
    _script(tmp, "task.py", "import trainer_utils  # not installed in the image\n")
    return _run([PY, "task.py", "--epochs", "3"], tmp)


@live("container-python-m-missing-local")
def _python_m_missing(tmp: Path, _: str) -> str:
    return _run([PY, "-m", "trainer.task", "--epochs", "3"], tmp)


@live("container-cant-open-file-local")
def _cant_open(tmp: Path, _: str) -> str:
    return _run([PY, "/app/trainer/task.py", "--epochs", "3"], tmp)


@live("container-command-not-found-local")
def _command_not_found(tmp: Path, _: str) -> str:
    return _run(["bash", "-c", 'trainer-entrypoint --epochs 3; echo "exit status $?"'], tmp)


@live("container-not-executable-local")
def _not_executable(tmp: Path, _: str) -> str:
    _script(tmp, "train.sh", "#!/bin/sh\npython -m trainer.task\n").chmod(0o644)
    return _run(["bash", "-c", './train.sh --epochs 3; echo "exit status $?"'], tmp)


@live("container-entrypoint-missing-local")
def _entrypoint_missing(tmp: Path, _: str) -> str:
    _script(
        tmp,
        "launch.py",
        """\
        import subprocess
        subprocess.run(["/opt/trainer/entrypoint.sh", "--epochs", "3"], check=True)
        """,
    )
    return _run([PY, "launch.py"], tmp)


@live("container-exec-format-local")
def _exec_format(tmp: Path, _: str) -> str:
    binary = tmp / "trainer"
    binary.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"built for another machine")
    binary.chmod(0o755)
    _script(
        tmp,
        "launch.py",
        """\
        import subprocess
        subprocess.run(["./trainer", "--epochs", "3"], check=True)
        """,
    )
    return _run([PY, "launch.py"], tmp)


@live("container-argparse-local")
def _argparse(tmp: Path, _: str) -> str:
    _script(
        tmp,
        "task.py",
        """\
        import argparse
        parser = argparse.ArgumentParser(prog="task.py")
        parser.add_argument("--learning-rate", type=float, default=1e-3)
        parser.add_argument("--epochs", type=int, required=True)
        parser.parse_args()
        """,
    )
    return _run([PY, "task.py", "--lr=0.1", "--epochs", "3"], tmp)


@live("container-absl-flags-local")
def _absl_flags(tmp: Path, _: str) -> str:
    _script(
        tmp,
        "task.py",
        """\
        from absl import app, flags
        flags.DEFINE_integer("epochs", 1, "number of epochs")
        app.run(lambda argv: None)
        """,
    )
    return _run([PY, "task.py", "--lr=0.1"], tmp)


# --- permission and quota: real google clients against a server on loopback --------------------


class _GoogleErrors(BaseHTTPRequestHandler):
    """Answers every request with the Google JSON error that its path asks for."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if "/projects/no-quota/" in self.path:
            code, status = 429, "RESOURCE_EXHAUSTED"
            message = (
                "The following quota metrics exceed quota limits: "
                "aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus"
            )
        elif "/projects/rate-limited/" in self.path:
            code, status = 429, "RESOURCE_EXHAUSTED"
            message = "Quota exceeded for aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus"
        elif "/projects/no-role/" in self.path:
            code, status = 403, "PERMISSION_DENIED"
            message = (
                "Permission 'aiplatform.customJobs.create' denied on resource "
                "'//aiplatform.googleapis.com/projects/no-role/locations/us-central1' "
                "(or it may not exist)."
            )
        else:
            code, status = 403, "PERMISSION_DENIED"
            message = (
                f"{SA} does not have storage.objects.create access to the Google Cloud Storage "
                "object. Permission 'storage.objects.create' denied on resource (or it may not "
                "exist)."
            )
        error = {"code": code, "message": message, "status": status}
        body = json.dumps({"error": error}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def google_errors() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _GoogleErrors)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def _job_client(base: str) -> object:
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    return aiplatform_v1.JobServiceClient(
        credentials=AnonymousCredentials(),
        transport="rest",
        client_options=ClientOptions(api_endpoint=base),
    )


def _create_job(base: str, project: str) -> object:
    from google.cloud import aiplatform_v1

    return _job_client(base).create_custom_job(
        parent=f"projects/{project}/locations/us-central1",
        custom_job=aiplatform_v1.CustomJob(display_name="guarded-training"),
    )


@live("permission-storage-upload-403-loopback")
def _storage_403(_: Path, base: str) -> str:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(
        project="my-project",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": base},
    )
    blob = client.bucket("my-bucket").blob("checkpoints/step-100.pt")
    return _exception_text(lambda: blob.upload_from_string(b"weights"))


@live("permission-aiplatform-403-loopback")
def _aiplatform_403(_: Path, base: str) -> str:
    return _exception_text(lambda: _create_job(base, "no-role"))


@live("quota-aiplatform-429-loopback")
def _aiplatform_429(_: Path, base: str) -> str:
    return _exception_text(lambda: _create_job(base, "no-quota"))


@live("quota-api-core-429-loopback")
def _api_core_429(_: Path, base: str) -> str:
    import requests
    from google.api_core import exceptions

    url = f"{base}/v1/projects/rate-limited/locations/us-central1/customJobs"
    response = requests.post(url, json={"displayName": "guarded-training"}, timeout=10)

    def fail() -> None:
        raise exceptions.from_http_response(response)

    return _exception_text(fail)


# --- host_oom -----------------------------------------------------------------------------------


@live("host_oom-shell-sigkill-local")
def _shell_sigkill(tmp: Path, _: str) -> str:
    _script(
        tmp,
        "task.py",
        """\
        import time
        rows = []
        for step in range(100):
            rows.append(bytearray(1024 * 1024))  # the in-memory dataset grows
            print(f"step {step} loaded {len(rows)} MiB", flush=True)
            if step == 3:
                open("growing", "w").close()
            time.sleep(0.05)
        """,
    )
    # The host's OOM killer sends SIGKILL; here we send it ourselves, once the task is growing (a
    # fixed sleep could land before a loaded machine has even started Python).
    cmd = (
        f"{PY} task.py & pid=$!; until [ -e growing ]; do sleep 0.05; done; "
        'kill -KILL $pid; wait $pid; echo "exit status $?"'
    )
    return _run(["bash", "-c", cmd], tmp)


@live("host_oom-dataloader-killed-local")
def _dataloader_killed(tmp: Path, _: str) -> str:
    _script(
        tmp,
        "task.py",
        """\
        import os, signal
        from torch.utils.data import DataLoader, Dataset

        class Shards(Dataset):
            def __len__(self):
                return 8

            def __getitem__(self, index):
                os.kill(os.getpid(), signal.SIGKILL)  # what the OOM killer does to a worker

        for batch in DataLoader(Shards(), num_workers=1):
            pass
        """,
    )
    return _run([PY, "task.py"], tmp)


_LIMIT_RAM = """\
import resource
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
"""


@live("host_oom-torch-cpu-alloc-local")
def _torch_cpu_alloc(tmp: Path, _: str) -> str:
    body = _LIMIT_RAM.format(limit=2 * 1024**3) + textwrap.dedent(
        """\
        import torch
        print("loading the dataset into host memory", flush=True)
        features = torch.empty(8 * 1024**3, dtype=torch.uint8)
        """
    )
    _script(tmp, "task.py", body)
    return _run([PY, "task.py"], tmp)


@live("host_oom-numpy-alloc-local")
def _numpy_alloc(tmp: Path, _: str) -> str:
    body = _LIMIT_RAM.format(limit=1024**3) + textwrap.dedent(
        """\
        import numpy as np
        features = np.zeros((1_000_000_000,), dtype=np.float64)
        """
    )
    _script(tmp, "task.py", body)
    return _run([PY, "task.py"], tmp)


@live("host_oom-memoryerror-local")
def _memory_error(tmp: Path, _: str) -> str:
    body = _LIMIT_RAM.format(limit=512 * 1024**2) + "cache = bytearray(2 * 1024**3)\n"
    _script(tmp, "task.py", body)
    return _run([PY, "task.py"], tmp)


# --- non_finite ---------------------------------------------------------------------------------


@live("non_finite-autograd-anomaly-local")
def _anomaly(tmp: Path, _: str) -> str:
    _script(
        tmp,
        "task.py",
        """\
        import torch
        scale = torch.tensor([-1.0], requires_grad=True)
        with torch.autograd.detect_anomaly():
            loss = torch.sqrt(scale * 0 + 1e-30 - 1).sum()  # sqrt of a negative: NaN
            loss.backward()
        """,
    )
    return _run([PY, "task.py"], tmp)


_DIVERGING = """\
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=1e30)  # far too high
x, y = torch.randn(64, 4) * 1e3, torch.randn(64, 1)
for step in range(8):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    print(f"step {step} loss {loss.item():.4f}", flush=True)
    loss.backward()
    {clip}
    optimizer.step()
"""


@live("non_finite-clip-grad-local")
def _clip_grad(tmp: Path, _: str) -> str:
    clip = "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)"
    _script(tmp, "task.py", _DIVERGING.replace("{clip}", clip))
    return _run([PY, "task.py"], tmp)


@live("non_finite-loss-nan-progress-local")
def _loss_nan_progress(tmp: Path, _: str) -> str:
    _script(tmp, "task.py", _DIVERGING.replace("{clip}", "pass"))
    return _run([PY, "task.py"], tmp)


# --- distributed_init ---------------------------------------------------------------------------

_RANK = """\
import datetime, sys
import torch.distributed as dist
rank, world_size, port, timeout = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
dist.init_process_group(
    "gloo",
    init_method=f"tcp://127.0.0.1:{port}",
    rank=rank,
    world_size=world_size,
    timeout=datetime.timedelta(seconds=float(timeout)),
)
print(f"rank {rank} of {world_size} ready", flush=True)
"""


def _free_port() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


@live("distributed_init-gloo-world-size-local")
def _gloo_world_size(tmp: Path, _: str) -> str:
    _script(tmp, "rank.py", _RANK)
    port = _free_port()
    # The spec says 3 workers; only 2 start (a worker pool with too few replicas).
    procs = [
        subprocess.Popen(
            [PY, "rank.py", str(rank), "3", port, "3"],
            cwd=tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in (0, 1)
    ]
    return "".join(proc.communicate(timeout=60)[0] for proc in procs)


@live("distributed_init-no-chief-local")
def _no_chief(tmp: Path, _: str) -> str:
    _script(tmp, "rank.py", _RANK)
    return _run([PY, "rank.py", "1", "2", _free_port(), "3"], tmp)


@live("distributed_init-master-addr-unset-local")
def _master_addr_unset(tmp: Path, _: str) -> str:
    _script(
        tmp,
        "task.py",
        """\
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="env://", rank=0, world_size=2)
        """,
    )
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}
    return _run([PY, "task.py"], tmp, env=env)


# --- preemption ---------------------------------------------------------------------------------

_STEPS = """\
import time
for step in range(1000):
    print(f"step {step} loss {1.0 / (step + 1):.4f}", flush=True)
    time.sleep(0.2)
"""


@live("preemption-torchrun-sigterm-local")
def _torchrun_sigterm(tmp: Path, _: str) -> str:
    _script(tmp, "task.py", _STEPS)
    proc = subprocess.Popen(
        [PY, "-m", "torch.distributed.run", "--nproc-per-node=1", "task.py"],
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    head = []
    # Once the worker trains, Vertex reclaims the Spot VM: the container gets SIGTERM.
    while len(head) < 5:
        line = proc.stdout.readline()
        if not line:
            break
        head.append(line)
    proc.terminate()
    return "".join(head) + proc.communicate(timeout=60)[0]


@live("preemption-shell-sigterm-local")
def _shell_sigterm(tmp: Path, _: str) -> str:
    _script(tmp, "task.py", _STEPS)
    cmd = f'{PY} task.py & pid=$!; sleep 1.5; kill -TERM $pid; wait $pid; echo "exit status $?"'
    return _run(["bash", "-c", cmd], tmp)


# --- healthy logs -------------------------------------------------------------------------------


@live("unknown-healthy-training-local")
def _healthy_training(tmp: Path, _: str) -> str:
    _script(
        tmp,
        "task.py",
        """\
        import torch
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        x = torch.randn(256, 4)
        y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1 * torch.randn(256, 1)
        best = float("inf")
        print(f"training 3 epochs, best val_loss so far: {best}", flush=True)
        for epoch in range(1, 4):
            for step in range(1, 11):
                batch = slice((step - 1) * 20, step * 20)
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x[batch]), y[batch])
                loss.backward()
                optimizer.step()
                if step % 5 == 0:
                    print(f"epoch {epoch}/3 step {step}/10 loss {loss.item():.4f}", flush=True)
            with torch.no_grad():
                val_loss = torch.nn.functional.mse_loss(model(x[200:]), y[200:]).item()
            best = min(best, val_loss)
            print(f"epoch {epoch}/3 val_loss {val_loss:.4f} best {best:.4f}", flush=True)
            print(f"saved checkpoint checkpoints/epoch-{epoch}.pt", flush=True)
        print("training finished", flush=True)
        """,
    )
    return _run([PY, "task.py"], tmp)


@live("unknown-healthy-gloo-allreduce-local")
def _healthy_gloo(tmp: Path, _: str) -> str:
    _script(
        tmp,
        "rank.py",
        _RANK
        + textwrap.dedent(
            """\
            import torch
            total = torch.tensor([float(rank + 1)])
            dist.all_reduce(total)
            print(f"rank {rank}: all_reduce -> {total.item()}", flush=True)
            dist.destroy_process_group()
            """
        ),
    )
    port = _free_port()
    procs = [
        subprocess.Popen(
            [PY, "rank.py", str(rank), "2", port, "60"],
            cwd=tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in (0, 1)
    ]
    return "".join(proc.communicate(timeout=60)[0] for proc in procs)


# --- the test -----------------------------------------------------------------------------------


def _shape(evidence: str) -> str:
    """The evidence with the parts that change between runs masked: the interpreter's path (the
    checkout's location and python vs python3), pids, ports, timings and their padding."""
    evidence = re.sub(r"\S*/python[\d.]*(?=[\s:]|$)", "PYTHON", evidence)
    return re.sub(r"\s+", " ", re.sub(r"\d+", "N", evidence))


# The generators that wait out a timeout or start torch twice: collected first (tests/conftest.py).
SLOW = {
    "distributed_init-no-chief-local",
    "distributed_init-gloo-world-size-local",
    "unknown-healthy-training-local",
    "non_finite-clip-grad-local",
    "non_finite-autograd-anomaly-local",
}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in sorted(LIVE)]
)
def test_live_text_classifies_as_its_fixture(name: str, tmp_path: Path, google_errors: str):
    expected_class = name.split("-", 1)[0]
    text = LIVE[name](tmp_path, google_errors)
    fixture = FIXTURES / f"{name}.txt"
    if WRITE:
        fixture.write_text(text)

    now = classify(text)
    stored = classify(fixture.read_text())

    assert now.failure_class == expected_class, (now.reason, text[-2000:])
    assert stored.failure_class == expected_class, stored.reason
    assert _shape(now.evidence) == _shape(stored.evidence)
    if expected_class == "unknown":
        assert now.confidence < 0.3
