"""Multi-process PyTorch jobs for the sharded-checkpoint tests (gloo on CPU, forked workers).

Each job runs in ``world`` processes that meet through a file rendezvous in ``tmp``; ``run_job``
returns each rank's exit code and whatever the ranks wrote to ``tmp/result-<rank>.pt``.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

FEATURES, HIDDEN, OUT = 8, 16, 4


def build(kind: str, seed: int = 0):
    """The model (``ddp``, ``fsdp`` or ``plain``) and its Adam optimizer, same init everywhere."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Dropout(0.1),
        torch.nn.Linear(HIDDEN, OUT),
    )
    if kind == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer)
        fully_shard(model)
    elif kind == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    return model, optimizer


def train_step(model, optimizer, step: int, rank: int) -> float:
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(6, FEATURES, generator=g)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.item()


def full_state(model, optimizer) -> dict:
    """Full (unsharded) model and optimizer state, gathered on every rank."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    model_sd, optim_sd = get_state_dict(model, optimizer, options=options)
    return {
        "model": {k: v.clone() for k, v in model_sd.items()},
        "optim": {k: {n: t.clone() for n, t in s.items()} for k, s in optim_sd.get("state", {}).items()},
    }


def _entry(fn, rank: int, world: int, tmp: str, args: tuple, no_dist: bool) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    code = 0
    try:
        if not no_dist:
            dist.init_process_group(
                "gloo", init_method=f"file://{tmp}/rdv-{fn.__name__}-{world}", rank=rank, world_size=world
            )
        result = fn(rank, world, Path(tmp), *args)
        if result is not None:
            torch.save(result, f"{tmp}/result-{rank}.pt")
    except BaseException:  # noqa: BLE001 - reported through the exit code and the file
        Path(tmp, f"error-{rank}.txt").write_text(traceback.format_exc())
        code = 1
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    os._exit(code)


def run_job(
    fn, world: int, tmp: Path, *args, timeout: float = 120.0, kill_all_on_death=False, no_dist: bool = False
):
    """Runs ``fn(rank, world, tmp, *args)`` in ``world`` forked processes; returns
    (exit codes, results). With ``kill_all_on_death``, once one rank dies by a signal the others
    are killed too, as a launcher stops a job whose worker died. ``no_dist``: one process
    without ``torch.distributed``."""
    for stale in tmp.glob("rdv-*"):
        stale.unlink()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_entry, args=(fn, r, world, str(tmp), args, no_dist)) for r in range(world)]
    for p in procs:
        p.start()
    deadline = timeout
    import time

    started = time.monotonic()
    while any(p.is_alive() for p in procs) and time.monotonic() - started < deadline:
        if kill_all_on_death and any(p.exitcode is not None and p.exitcode < 0 for p in procs):
            break
        time.sleep(0.05)
    for p in procs:
        if p.is_alive():
            os.kill(p.pid, signal.SIGKILL)
        p.join()
    errors = [Path(tmp, f"error-{r}.txt") for r in range(world)]
    text = "\n".join(e.read_text() for e in errors if e.exists())
    for e in errors:
        e.unlink(missing_ok=True)
    results = {}
    for r in range(world):
        path = Path(tmp, f"result-{r}.pt")
        if path.exists():
            results[r] = torch.load(path, weights_only=False)
            path.unlink()
    return [p.exitcode for p in procs], results, text
