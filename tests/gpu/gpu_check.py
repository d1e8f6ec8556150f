"""The GPU proof of the PyTorch checkpoint runtime, in one call (``tests/gpu/run.sh``; < 5 min).

Needs only torch and ``trainguard.runtime`` (no kfp, no Google packages, no scikit-learn):

1. **kill and resume on CUDA** — a small synthetic-data trainer (dropout, AdamW, a scheduler) under
   ``TorchCheckpointer``, fp32 and bf16 autocast, stopped by SIGTERM (saves, exits 143) and by
   SIGKILL at a random step, restarted until done: its final weights must be byte-identical to an
   uninterrupted run's;
2. **DCP on CUDA** — the same with sharded checkpoints (``torch.distributed.checkpoint``), for a
   plain model and for an FSDP2 (``fully_shard``) one on a 1-process NCCL group;
3. **stall benchmark** — a ≥ 1.5 GB CUDA state (10 × Linear(4096, 4096) + Adam), saves every few
   seconds: wall time of the loop with saves ÷ wall time without, for our async and sync saves and
   for DCP's ``async_save`` and ``save`` with default options, side by side;
4. **gs:// one stream vs parallel** — a ~400 MB CUDA state saved to ``gs://`` and restored (byte
   for byte) through gcp-storage-emulator on loopback (served concurrently, as Cloud Storage
   does), with ``TransferConfig.single_stream()`` and with the parallel default, side by side: the
   runtime's own save measures (seconds, MB/s) and the restore's. It runs in a child process, the
   only one that may import the Google packages; where gcp-storage-emulator or
   google-cloud-storage is not importable it says ``skipped: …`` and the rest still counts.

``--cpu-dry-run`` runs every step on the CPU with tiny sizes (the test suite does, so the script is
known to work end to end where no GPU is). With ``$OUT`` set, the report also goes to
``$OUT/gpu_report.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.abc
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# What a GPU machine lacks; the run fails if any of it was imported. ``google.cloud`` itself is
# left out: some environments pre-import that namespace package at start-up.
BLOCKED = (
    "kfp",
    "google.cloud.storage",
    "google.cloud.aiplatform",
    "google.api_core",
    "google.auth",
    "typer",
)
FORBIDDEN = (*BLOCKED, "sklearn")  # not blocked: torch itself probes whether sklearn exists


class _Blocker(importlib.abc.MetaPathFinder):
    """Makes the packages a GPU machine lacks unimportable here too
    (``TRAINGUARD_GPU_BLOCK_IMPORTS=1``; the test suite sets it)."""

    def find_spec(self, name, path=None, target=None):
        if any(name == f or name.startswith(f + ".") for f in BLOCKED):
            raise ImportError(f"{name} is not available on the GPU machine")
        return None


if os.environ.get("TRAINGUARD_GPU_BLOCK_IMPORTS") == "1":
    sys.meta_path.insert(0, _Blocker())

import torch  # noqa: E402

from trainguard.runtime import RetentionPolicy, TorchCheckpointer  # noqa: E402

# --- 1, 2: the worker (a subprocess per run) ---------------------------------------------------


def build(device: torch.device, width: int):
    torch.manual_seed(0)
    random.seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, width),
        torch.nn.ReLU(),
        torch.nn.Dropout(0.1),
        torch.nn.Linear(width, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, 8),
    ).to(device)
    return model


def worker(args: argparse.Namespace) -> int:
    """One (possibly resumed) training run; writes the final weights to ``args.out``."""
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.deterministic = True
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True)
    if args.fsdp:
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard

        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=0, world_size=1)
        if device.type == "cuda":
            torch.cuda.set_device(device)
    model = build(device, args.width)
    if args.fsdp:
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer)
        fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 10))
    ckpt = TorchCheckpointer(
        model,
        optimizer,
        scheduler,
        directory=args.dir,
        save=args.every,
        sharded=args.sharded or args.fsdp,
        history=args.dir + ".jsonl",
        retention=RetentionPolicy(keep_last=2),
    )
    start = ckpt.restore()
    g = torch.Generator().manual_seed(1)
    x_all = torch.randn(4096, 32, generator=g)
    y_all = (x_all @ torch.randn(32, 8, generator=g)).argmax(1)
    print(f"start {start.step}", flush=True)
    for step in range(start.step + 1, args.steps + 1):
        idx = torch.randperm(len(x_all), generator=torch.Generator().manual_seed(step))[:256]
        x, y = x_all[idx].to(device), y_all[idx].to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16):
            loss = torch.nn.functional.cross_entropy(model(x).float(), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        print(f"step {step}", flush=True)
        if args.sleep:
            time.sleep(args.sleep)
        ckpt.step(step, loss=loss.item(), extra={"step": step})
    ckpt.close()
    if args.fsdp:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        weights = get_model_state_dict(
            model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
        )
    else:
        weights = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    torch.save(weights, args.out)
    return 0


class _Forked:
    """A worker forked from this process (CPU dry runs: no second torch import, seconds saved per
    run). CUDA cannot be forked once initialised, so GPU runs start a fresh interpreter."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        read, write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child
            os.close(read)
            os.dup2(write, 1)
            os.dup2(write, 2)
            os.environ.update(env)
            code = 1
            try:
                code = main(["worker", *argv])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # noqa: BLE001 - reported on the pipe
                import traceback

                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        os.close(write)
        self.stdout = os.fdopen(read, "r")

    def send_signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def wait(self) -> int:
        _, status = os.waitpid(self.pid, 0)
        self.stdout.close()
        return os.waitstatus_to_exitcode(status)


def run_worker(base: list[str], kill: tuple[int, int] | None, log: list[str], fork: bool = False) -> None:
    """Runs the worker to completion, sending ``kill`` = (signal, at step) once; restarts it."""
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}
    pending = kill
    for _ in range(4):
        if fork:
            proc = _Forked(base, {"MASTER_ADDR": env["MASTER_ADDR"], "MASTER_PORT": env["MASTER_PORT"]})
        else:
            proc = subprocess.Popen(
                [sys.executable, __file__, "worker", *base],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        sent = False
        for line in proc.stdout:
            log.append(line.rstrip())
            if pending and not sent and line.strip() == f"step {pending[1]}":
                proc.send_signal(pending[0])
                sent = True
        code = proc.wait()
        if sent:
            pending = None
            log.append(f"-- stopped by {signal.Signals(kill[0]).name} (exit {code}), restarting")
            env["MASTER_PORT"] = str(_free_port())
            continue
        if code != 0:
            raise RuntimeError(f"worker exited {code}: " + "\n".join(log[-30:]))
        return
    raise RuntimeError("worker did not finish")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def kill_and_resume(device: str, tmp: Path, dry: bool, rng: random.Random) -> list[dict]:
    """Byte-identical resume after SIGTERM and SIGKILL: fp32 and bf16, single file and DCP."""
    steps, every = (20, 4) if dry else (80, 8)
    common = [
        "--device",
        device,
        "--steps",
        str(steps),
        "--every",
        str(every),
        "--width",
        "64" if dry else "1024",
        "--sleep",
        "0.01",
    ]
    cases = [("fp32", []), ("bf16", ["--bf16"]), ("dcp", ["--sharded"]), ("fsdp", ["--fsdp"])]
    results = []
    for name, flags in cases:
        base_dir = tmp / f"{name}-base"
        run_worker(
            [*common, *flags, "--dir", str(base_dir / "ck"), "--out", str(base_dir / "model.pt")],
            None,
            [],
            fork=dry,
        )
        kills = [signal.SIGTERM, signal.SIGKILL] if name in ("fp32", "bf16") else [signal.SIGTERM]
        for sig in kills:
            out = tmp / f"{name}-{sig.name}"
            at = rng.randint(3 * every, steps - 3)  # after a save that has surely finished
            log: list[str] = []
            started = time.monotonic()
            run_worker(
                [*common, *flags, "--dir", str(out / "ck"), "--out", str(out / "model.pt")],
                (sig, at),
                log,
                fork=dry,
            )
            same = digest(out / "model.pt") == digest(base_dir / "model.pt")
            resumed = [line for line in log if line.startswith("start ") and line != "start 0"]
            results.append(
                {
                    "check": f"kill-resume {name} {sig.name}",
                    "at_step": at,
                    "resumed_from": resumed[-1][6:] if resumed else None,
                    "byte_identical": same,
                    "ok": same and bool(resumed),
                    "seconds": round(time.monotonic() - started, 1),
                }
            )
            print(f"{'PASS' if results[-1]['ok'] else 'FAIL'} {results[-1]}", flush=True)
    return results


# --- 3: the stall benchmark ----------------------------------------------------------------------


def _loop(
    mode: str, model, optimizer, train_step, sync, tmp: Path, every: int, steps: int
) -> tuple[float, float]:
    """(wall time of the loop, seconds the last save took to drain after it) for one mode."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    root = tmp / f"stall-{mode}"
    ckpt, future = None, None
    if mode in ("ours-async", "ours-sync"):
        ckpt = TorchCheckpointer(
            model,
            optimizer,
            directory=str(root),
            save=every,
            async_save=mode == "ours-async",
            handle_sigterm=False,
            retention=RetentionPolicy(keep_last=1),
        )
    sync()
    started = time.perf_counter()
    for step in range(1, steps + 1):
        train_step()
        if ckpt is not None:
            ckpt.step(step)
        elif mode.startswith("dcp") and step % every == 0:
            if future is not None:
                future.result()
            model_sd, optim_sd = get_state_dict(model, optimizer)
            state = {"model": model_sd, "optim": optim_sd}
            target = str(root / f"step-{step}")
            if mode == "dcp-async":
                future = dcp.async_save(state, checkpoint_id=target)
            else:
                dcp.save(state, checkpoint_id=target)
    sync()
    wall = time.perf_counter() - started
    drained = time.perf_counter()
    if ckpt is not None:
        ckpt.close()
    if future is not None:
        future.result()
    drain = time.perf_counter() - drained
    shutil.rmtree(root, ignore_errors=True)
    return wall, drain


def stall(device: str, tmp: Path, dry: bool) -> dict:
    """Wall time of a training loop with saves ÷ without, ours and DCP's, side by side."""
    width, layers, batch = (64, 2, 32) if dry else (4096, 10, 4096)
    dev = torch.device(device)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)]).to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randn(batch, width, device=dev)

    def train_step() -> None:
        loss = model(x).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(3):
        train_step()
    sync()
    t0 = time.perf_counter()
    for _ in range(5):
        train_step()
    sync()
    step_s = (time.perf_counter() - t0) / 5
    state_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values()) + sum(
        t.numel() * t.element_size()
        for s in optimizer.state.values()
        for t in s.values()
        if isinstance(t, torch.Tensor)
    )
    spacing = 0.15 if dry else 3.0  # seconds of training between saves
    every = max(2, round(spacing / step_s))
    saves = 3
    steps = every * saves + every // 2

    modes = ["none", "ours-async", "ours-sync", "dcp-async", "dcp-sync"]
    walls: dict[str, list[float]] = {m: [] for m in modes}
    drains: dict[str, float] = {}
    for mode in [*modes, "none"]:  # "none" again last: the baseline is its best of two
        wall, drain = _loop(mode, model, optimizer, train_step, sync, tmp, every, steps)
        walls[mode].append(wall)
        drains[mode] = drain
    base = min(walls["none"])
    report = {
        "state_gb": round(state_bytes / 1e9, 3),
        "device": device,
        "step_s": round(step_s, 4),
        "saves": saves,
        "save_every_steps": every,
        "save_every_s": round(every * step_s, 2),
        "wall_no_saves_s": round(base, 3),
    }
    for mode in modes[1:]:
        report[f"ratio_{mode}"] = round(min(walls[mode]) / base, 3)
        report[f"drain_{mode}_s"] = round(drains[mode], 3)
    print("stall: wall(with saves) / wall(no saves), same loop, same state, side by side", flush=True)
    for mode in modes[1:]:
        print(
            f"  {mode:<11} {report[f'ratio_{mode}']:.3f}x   (last save drained "
            f"{report[f'drain_{mode}_s']:.2f} s after the loop)",
            flush=True,
        )
    print(
        f"  state {report['state_gb']} GB, a save every {report['save_every_s']} s "
        f"({every} steps of {step_s * 1000:.1f} ms)",
        flush=True,
    )
    return report


# --- 4: gs:// one stream vs parallel (a child process: the only one with Google packages) ---------

GCS_PACKAGES = ("gcp_storage_emulator", "google.cloud.storage")


def gcs_worker(args: argparse.Namespace) -> int:
    """Saves and restores one state to gs:// per transfer mode; writes the figures to ``args.out``."""
    import importlib

    missing = []
    for name in GCS_PACKAGES:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing.append(f"{name} ({exc})")
    if missing:
        result = {
            "skipped": "not importable here: " + ", ".join(missing) + " (pip install "
            "gcp-storage-emulator google-cloud-storage to measure it)"
        }
        Path(args.out).write_text(json.dumps(result))
        return 0
    import statistics

    from tests.benchmarks.bench_checkpoint_gcs import start_emulator
    from trainguard.runtime.history import is_save_record, read_history_records
    from trainguard.runtime.storage import GCSStore
    from trainguard.runtime.transfer import MIN_PART_BYTES, TransferConfig

    dev = torch.device(args.device)
    width, layers = (512, 2) if args.dry else (4096, 2)
    torch.manual_seed(0)

    def build_state():
        model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)]).to(dev)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
        return model, optimizer

    model, optimizer = build_state()
    model(torch.randn(8, width, device=dev)).square().mean().backward()
    optimizer.step()  # Adam's moments exist: weights and optimizer state, ~3x the weights
    # The dry run's state is a few MB: parts as small as the transfer allows, so it goes in parts.
    small = {"part_bytes": MIN_PART_BYTES, "threshold_bytes": MIN_PART_BYTES} if args.dry else {}
    modes = {"one stream": TransferConfig(workers=1), "parallel": TransferConfig(**small)}
    repeats = 3
    srv = start_emulator(threaded=True)
    report: dict = {"modes": {}}
    try:
        for label, config in modes.items():
            store = GCSStore(transfer=config)
            where = f"gs://bench/gpu-{label.replace(' ', '-')}"
            history = Path(args.tmp, f"gcs-{label.replace(' ', '-')}.jsonl")
            ckpt = TorchCheckpointer(
                model,
                optimizer,
                directory=where,
                save=1,
                async_save=False,
                handle_sigterm=False,
                store=store,
                history=str(history),
                retention=RetentionPolicy(keep_last=1),
            )
            for step in range(1, repeats + 1):
                ckpt.step(step)
            ckpt.close()
            saves = [
                r["save"] for r in read_history_records(history.read_text(), saves=True) if is_save_record(r)
            ]
            restores = []
            same = True
            for _ in range(repeats):
                fresh, fresh_opt = build_state()
                back = TorchCheckpointer(fresh, fresh_opt, directory=where, store=store, handle_sigterm=False)
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                started = time.perf_counter()
                restored = back.restore()
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                restores.append(time.perf_counter() - started)
                back.close()
                same = (
                    same
                    and restored.step == repeats
                    and all(
                        torch.equal(a, b)
                        for a, b in zip(model.state_dict().values(), fresh.state_dict().values(), strict=True)
                    )
                )
            size = int(saves[-1]["bytes"])
            restore_s = statistics.median(restores)
            report["modes"][label] = {
                "workers": config.workers,
                "part_mb": round(config.part_bytes / 1e6, 3),
                "bytes": size,
                "saves": len(saves),
                "save_s": statistics.median(s["seconds"] for s in saves),
                "save_mb_s": statistics.median(s["mb_s"] for s in saves),
                "restore_s": round(restore_s, 4),
                "restore_mb_s": round(size / 1e6 / restore_s, 2),
                "restored_identical": same,
                "in_parts": config.parallel and size >= config.threshold_bytes,
            }
    finally:
        srv.stop()
    one, par = report["modes"]["one stream"], report["modes"]["parallel"]
    report["save_speedup"] = round(one["save_s"] / par["save_s"], 3)
    report["restore_speedup"] = round(one["restore_s"] / par["restore_s"], 3)
    report["ok"] = all(m["restored_identical"] and m["saves"] == repeats for m in (one, par)) and bool(
        par["in_parts"]
    )
    Path(args.out).write_text(json.dumps(report))
    return 0


def gcs_parallel(device: str, tmp: Path, dry: bool) -> dict:
    """Runs :func:`gcs_worker` in a fresh interpreter without the import blocker; its figures."""
    out = tmp / "gcs.json"
    env = {k: v for k, v in os.environ.items() if k != "TRAINGUARD_GPU_BLOCK_IMPORTS"}
    argv = [sys.executable, __file__, "gcs", "--device", device, "--tmp", str(tmp), "--out", str(out)]
    proc = subprocess.run(
        [*argv, *(["--dry"] if dry else [])], env=env, capture_output=True, text=True, timeout=240
    )
    if proc.returncode != 0 or not out.exists():
        report = {"ok": False, "error": f"exit {proc.returncode}: {(proc.stdout + proc.stderr)[-3000:]}"}
        print(f"FAIL gs:// one stream vs parallel: {report['error']}", flush=True)
        return report
    report = json.loads(out.read_text())
    if "skipped" in report:
        print(f"gs:// one stream vs parallel: skipped: {report['skipped']}", flush=True)
        return report
    print("gs:// one stream vs parallel (gcp-storage-emulator on loopback, served concurrently):", flush=True)
    for label, m in report["modes"].items():
        print(
            f"  {label:<11} {m['bytes'] / 1e6:8.1f} MB  save {m['save_s']:7.3f} s {m['save_mb_s']:8.1f} MB/s"
            f"   restore {m['restore_s']:7.3f} s {m['restore_mb_s']:8.1f} MB/s"
            f"   ({m['workers']} worker(s), {m['part_mb']:g} MB parts; "
            f"restored identical: {m['restored_identical']})",
            flush=True,
        )
    print(
        f"  parallel / one stream: save {report['save_speedup']:.2f}x, "
        f"restore {report['restore_speedup']:.2f}x (the emulator is a Python process here: "
        "the ratio is the figure, not the MB/s)",
        flush=True,
    )
    return report


def _prewarm() -> None:
    """Imports here, once, what each forked dry-run worker would import again: the workers'
    ``torch.use_deterministic_algorithms`` alone imports ``torch._inductor`` (~1 s a run)."""
    import torch._inductor.config  # noqa: F401
    import torch.distributed.checkpoint  # noqa: F401
    import torch.distributed.checkpoint.state_dict  # noqa: F401
    import torch.distributed.fsdp  # noqa: F401

    import trainguard.runtime.torch_dcp  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "worker":
        p = argparse.ArgumentParser()
        for flag in ("--dir", "--out", "--device"):
            p.add_argument(flag, required=True)
        p.add_argument("--steps", type=int, required=True)
        p.add_argument("--every", type=int, required=True)
        p.add_argument("--width", type=int, default=1024)
        p.add_argument("--sleep", type=float, default=0.0)
        for flag in ("--bf16", "--sharded", "--fsdp"):
            p.add_argument(flag, action="store_true")
        return worker(p.parse_args(argv[1:]))
    if argv and argv[0] == "gcs":
        p = argparse.ArgumentParser()
        for flag in ("--device", "--tmp", "--out"):
            p.add_argument(flag, required=True)
        p.add_argument("--dry", action="store_true")
        return gcs_worker(p.parse_args(argv[1:]))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu-dry-run", action="store_true", help="tiny sizes on the CPU")
    p.add_argument("--skip-stall", action="store_true")
    p.add_argument("--skip-gcs", action="store_true", help="skip gs:// one stream vs parallel")
    args = p.parse_args(argv)
    dry = args.cpu_dry_run
    if not dry and not torch.cuda.is_available():
        print("no CUDA device: run with --cpu-dry-run", file=sys.stderr)
        return 2
    device = "cpu" if dry else "cuda:0"
    started = time.monotonic()
    print(
        f"torch {torch.__version__}, device {device}"
        + (f" ({torch.cuda.get_device_name(0)})" if not dry else " (dry run)"),
        flush=True,
    )
    if dry:
        _prewarm()
    with tempfile.TemporaryDirectory(prefix="tg-gpu-") as tmp:
        checks = kill_and_resume(device, Path(tmp), dry, random.Random(5))
        report = {"torch": torch.__version__, "device": device, "dry_run": dry, "checks": checks}
        if not args.skip_stall:
            report["stall"] = stall(device, Path(tmp), dry)
        if not args.skip_gcs:
            report["gcs"] = gcs_parallel(device, Path(tmp), dry)
    imported = sorted({m for m in sys.modules for f in FORBIDDEN if m == f or m.startswith(f + ".")})
    report["forbidden_imports"] = imported
    report["seconds"] = round(time.monotonic() - started, 1)
    # A gs:// measure skipped for want of its packages does not fail the run; one that broke does.
    ok = all(c["ok"] for c in checks) and not imported and report.get("gcs", {}).get("ok", True) is not False
    report["ok"] = ok
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_report.json").write_text(json.dumps(report, indent=2))
    print(
        f"{'ALL PASS' if ok else 'FAILED'} in {report['seconds']} s"
        + (f"; imported {imported}" if imported else ""),
        flush=True,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
