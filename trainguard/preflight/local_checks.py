"""Checks for the local backend: can this machine run the job's command and write its outputs?"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from trainguard.errors import ConfigError
from trainguard.launch.local import MAX_LOCAL_REPLICAS, resolve_command
from trainguard.preflight.checks import PreflightContext, register
from trainguard.preflight.results import CheckResult, Status
from trainguard.spec import Pool

__all__ = ["check_command", "check_output_dir", "local"]

NAME = "local"


_FLAGS_WITH_VALUE = {"-W", "-X", "--check-hash-based-pycs"}


def _python_target(argv: list[str]) -> tuple[str, str] | None:
    """('module', name) or ('script', path) for a python command line, else None."""
    if Path(argv[0]).name not in ("python", "python3") and argv[0] != sys.executable:
        return None
    rest = argv[1:]
    while rest:
        head = rest[0]
        if head == "-m":
            return ("module", rest[1]) if len(rest) > 1 else None
        if head == "-c" or head == "-":
            return None  # inline code or stdin: nothing to look up
        if head in _FLAGS_WITH_VALUE:
            rest = rest[2:]
        elif head.startswith("-"):
            rest = rest[1:]  # -u, -O, -W<value>, -X<value>, -B, ...
        else:
            return "script", head
    return None


def check_command(pool: Pool, environ: dict | None = None) -> CheckResult:
    """The pool's command exists here (and a python script or module is found)."""
    title = f"command of workerPoolSpecs[{pool.index}]"
    try:
        argv = resolve_command(pool)
    except ConfigError as exc:
        return CheckResult(
            NAME, title, Status.FAIL, str(exc), "set containerSpec.command in the spec", "container"
        )
    path = (environ or {}).get("PATH", os.environ.get("PATH", ""))
    exe = argv[0] if os.path.isabs(argv[0]) else shutil.which(argv[0], path=path)
    if not exe or not os.access(exe, os.X_OK):
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"{argv[0]!r} is not an executable on this machine's PATH",
            "install it, or fix containerSpec.command",
            "container",
        )
    target = _python_target(argv)
    if target and target[0] == "script" and not Path(target[1]).is_file():
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"python script {target[1]!r} does not exist (cwd {os.getcwd()})",
            "give the script's absolute path in containerSpec.command/args",
            "container",
        )
    if target and target[0] == "module":
        found = _module_found(exe, target[1])
        if not found:
            return CheckResult(
                NAME,
                title,
                Status.FAIL,
                f"python module {target[1]!r} is not importable by {exe}",
                "install the package that provides it in this environment",
                "container",
            )
    return CheckResult(NAME, title, Status.PASS, " ".join(argv)[:200])


def _module_found(python: str, module: str) -> bool:
    if python == sys.executable:
        try:
            return importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            return False
    probe = f"import importlib.util,sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 1)"
    try:
        return subprocess.run([python, "-c", probe], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def check_output_dir(base: str) -> CheckResult:
    """The base output directory can be created and written to."""
    title = "output directory"
    if not base:
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            "no output directory: the spec has no baseOutputDirectory and none was given",
            "set baseOutputDirectory.outputUriPrefix or pass --output-dir",
            "container",
        )
    if base.startswith("gs://"):
        # The local backend writes there with this machine's own credentials; nothing here
        # checked the bucket, so say so rather than pass.
        return CheckResult(
            NAME,
            title,
            Status.UNKNOWN,
            f"{base} is on Cloud Storage: the local backend writes there with this "
            "machine's credentials, which preflight does not check",
            f"verify with: gcloud storage ls {base.rstrip('/')}/",
        )
    probe = Path(base) / f".trainguard-probe-{uuid.uuid4().hex[:8]}"
    try:
        Path(base).mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        return CheckResult(
            NAME,
            title,
            Status.FAIL,
            f"cannot write to {base}: {exc.strerror}",
            "choose a writable --output-dir",
            "permission",
        )
    free_gb = shutil.disk_usage(base).free / 1e9
    if free_gb < 1:
        return CheckResult(
            NAME,
            title,
            Status.WARN,
            f"{base} has {free_gb:.2f} GB free",
            "free disk space: checkpoints may not fit",
        )
    return CheckResult(NAME, title, Status.PASS, f"{base} is writable ({free_gb:.0f} GB free)")


@register(NAME)
def local(ctx: PreflightContext) -> list[CheckResult]:
    """Command resolvable, output directory writable, accelerators noted."""
    results = [check_command(pool, dict(ctx.environ) or None) for pool in ctx.spec.pools]
    results.append(check_output_dir(ctx.spec.base_output_dir or ctx.local_output_dir))
    accelerated = [p for p in ctx.spec.pools if p.accelerator_type]
    if accelerated and not shutil.which("nvidia-smi"):
        names = ", ".join(sorted({p.accelerator_type or "" for p in accelerated}))
        results.append(
            CheckResult(
                NAME,
                "accelerators",
                Status.PASS,
                f"the spec asks for {names}; this machine has no GPU, so the local run uses the CPU",
            )
        )
    replicas = sum(p.replica_count for p in ctx.spec.pools)
    if replicas > MAX_LOCAL_REPLICAS:
        results.append(
            CheckResult(
                NAME,
                "replicas",
                Status.FAIL,
                f"{replicas} replicas: the local backend runs at most "
                f"{MAX_LOCAL_REPLICAS}, each a process on this machine",
                "lower replicaCount for local runs (Vertex AI runs the full count)",
            )
        )
    elif replicas > (os.cpu_count() or 1) * 2:
        results.append(
            CheckResult(
                NAME,
                "replicas",
                Status.WARN,
                f"{replicas} replicas on {os.cpu_count()} cores will be slow",
                "lower replicaCount for local runs",
            )
        )
    return results
