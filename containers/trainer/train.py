"""trainguard's reference trainer: a PyTorch MLP on scikit-learn's digits, checkpointed and resumable.

Runs on CUDA when present (``--bf16`` for autocast), on the CPU otherwise. It follows Vertex AI's
environment contract: checkpoints go to ``AIP_CHECKPOINT_DIR``, the model to ``AIP_MODEL_DIR``, the
history (JSONL) to ``TRAINGUARD_HISTORY``. A run that is preempted (SIGTERM) saves and exits; the
restarted run resumes from the newest complete checkpoint and ends with the same weights, byte for
byte, as an uninterrupted run. With ``WORLD_SIZE`` > 1 it trains data-parallel over gloo (CPU) or
NCCL (CUDA), with ``--fsdp`` fully sharded (FSDP2); checkpoints are then sharded (each rank writes
its shards through ``torch.distributed.checkpoint``). Checkpointing is ``TorchCheckpointer``: three
calls (``from_env``, ``restore``, ``step``) around the loop.

Scenario flags (for validation fixtures): ``--lr`` high enough diverges, ``--repeat-batch`` feeds the
same batch forever (a stalled input pipeline), ``--train-fraction`` small + big ``--hidden``
overfits, ``--dropout`` makes validation loss sit below training loss, ``--val-resample`` makes
validation noisy (a small set drawn afresh each epoch), ``--lr-spike`` makes a spike the run recovers
from.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import random
import sys
import time

# MKL's results can depend on buffer alignment, which differs between a fresh process and a resumed
# one; conditional numerical reproducibility makes a resumed CPU run bit-identical.
os.environ.setdefault("MKL_CBWR", "COMPATIBLE")

import digits  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402

from trainguard.errors import UserError  # noqa: E402
from trainguard.runtime import RetentionPolicy, VertexEnv  # noqa: E402
from trainguard.runtime.storage import join, store_for  # noqa: E402
from trainguard.runtime.torch_checkpointer import TorchCheckpointer  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--activation", choices=("relu", "tanh"), default="relu")
    p.add_argument(
        "--naive-loss",
        action="store_true",
        help="log(softmax(x)) computed naively, as custom losses often are: log(0) -> inf",
    )
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument(
        "--train-fraction",
        type=float,
        default=0.8,
        help="fraction of the data used for training (the rest validates)",
    )
    p.add_argument(
        "--label-noise",
        type=float,
        default=0.0,
        help="fraction of training labels replaced at random (helps overfitting show)",
    )
    p.add_argument(
        "--raw-inputs",
        action="store_true",
        help="skip input normalisation (pixels 0..16): with a high LR the loss explodes",
    )
    p.add_argument(
        "--repeat-batch",
        action="store_true",
        help="feed the first batch forever (simulates a broken input pipeline)",
    )
    p.add_argument("--clip-grad", type=float, default=0.0, help="clip gradients by global norm")
    p.add_argument("--warmup-steps", type=int, default=0, help="linear LR warm-up steps")
    p.add_argument(
        "--lr-spike",
        default="",
        help="STEP:FACTOR[:STEPS]: the LR times FACTOR for STEPS steps (default 1) from "
        "STEP, a bad stretch the run recovers from",
    )
    p.add_argument(
        "--val-resample",
        type=int,
        default=0,
        help="evaluate each epoch on N examples drawn with replacement from the "
        "validation split (a small, resampled validation set)",
    )
    p.add_argument("--bf16", action="store_true", help="bf16 autocast on CUDA")
    p.add_argument(
        "--fsdp",
        action="store_true",
        help="shard parameters and optimizer state over the ranks (FSDP2 fully_shard; "
        "checkpoints are sharded through torch.distributed.checkpoint)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=5, help="log the train loss every N steps")
    p.add_argument("--checkpoint-every", type=int, default=50, help="checkpoint every N steps")
    p.add_argument("--keep-last", type=int, default=3)
    p.add_argument("--sync-checkpoints", action="store_true", help="save on the training thread")
    p.add_argument(
        "--step-sleep",
        type=float,
        default=0.0,
        help="seconds to sleep per step (to make preemption tests land mid-run)",
    )
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument(
        "--output-dir",
        default="./trainguard-output",
        help="base output directory when AIP_* variables are not set",
    )
    return p.parse_args(argv)


def load_data(train_fraction: float, seed: int, label_noise: float, raw: bool = False):
    x_train, y_train, x_val, y_val = digits.load(train_fraction, seed, label_noise, raw)
    return tuple(torch.from_numpy(a) for a in (x_train, y_train, x_val, y_val))


def lr_spike(text: str) -> tuple[int, float, int]:
    """``--lr-spike STEP:FACTOR[:STEPS]`` as (first step, factor, steps); (0, 1.0, 0) when unset."""
    if not text:
        return 0, 1.0, 0
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise SystemExit(f"--lr-spike {text!r}: use STEP:FACTOR[:STEPS]")
    return int(parts[0]), float(parts[1]), int(parts[2]) if len(parts) == 3 else 1


def build_model(hidden: int, layers: int, dropout: float, activation: str = "relu") -> nn.Module:
    blocks, width = [], 64
    for _ in range(layers):
        blocks += [nn.Linear(width, hidden), nn.Tanh() if activation == "tanh" else nn.ReLU()]
        if dropout > 0:
            blocks.append(nn.Dropout(dropout))
        width = hidden
    blocks.append(nn.Linear(width, 10))
    return nn.Sequential(*blocks)


def batches_for_epoch(
    n: int, batch_size: int, seed: int, epoch: int, rank: int, world: int, repeat: bool
) -> list[torch.Tensor]:
    """The epoch's batches of indices: a fixed permutation per (seed, epoch), sharded by rank."""
    if repeat:
        first = torch.arange(min(batch_size, n))
        return [first] * max(1, n // (batch_size * world))
    g = torch.Generator().manual_seed(seed * 1000 + epoch)
    perm = torch.randperm(n, generator=g)
    per_rank = n // world
    mine = perm[rank * per_rank : (rank + 1) * per_rank]
    return [mine[i : i + batch_size] for i in range(0, len(mine), batch_size)]


def loss_fn(logits: torch.Tensor, y: torch.Tensor, naive: bool) -> torch.Tensor:
    if naive:  # the textbook formula; underflows to log(0) = -inf once logits grow
        return -torch.log(torch.softmax(logits, dim=1)[torch.arange(len(y)), y]).mean()
    return nn.functional.cross_entropy(logits, y)


def evaluate(model, x, y, device, autocast, naive: bool = False) -> tuple[float, float]:
    model.eval()
    with torch.no_grad(), autocast():
        logits = model(x.to(device)).float()
        loss = loss_fn(logits, y.to(device), naive).item()
        acc = (logits.argmax(1).cpu() == y).float().mean().item()
    model.train()
    return loss, acc


def wrap(model: nn.Module, fsdp: bool, distributed: bool) -> nn.Module:
    """FSDP2 (``fully_shard`` each layer, then the whole) or DDP, or the model as it is."""
    if fsdp:
        from torch.distributed.fsdp import fully_shard

        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        return fully_shard(model)
    return nn.parallel.DistributedDataParallel(model) if distributed else model


def final_weights(model: nn.Module, fsdp: bool) -> dict | None:
    """The whole model's weights on the chief (gathered from the shards under FSDP)."""
    if fsdp:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return getattr(model, "module", model).state_dict()


def main(argv=None) -> int:
    try:
        return train(parse_args(argv))
    except UserError as exc:  # a checkpoint that cannot be used, a full disk: say it, exit 2
        print(f"trainguard: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code


def setup_device(args: argparse.Namespace, env: VertexEnv, distributed: bool) -> torch.device:
    """The device, the process group when distributed, and deterministic kernels."""
    device = torch.device(
        "cuda"
        if args.device == "auto" and torch.cuda.is_available()
        else ("cpu" if args.device == "auto" else args.device)
    )
    if distributed:
        dist.init_process_group(
            "nccl" if device.type == "cuda" else "gloo", rank=env.rank, world_size=env.world_size
        )
        if device.type == "cuda":
            device = torch.device("cuda", env.rank % torch.cuda.device_count())
            torch.cuda.set_device(device)
        else:
            # Replicas on one machine (the local backend) would fight over its cores, and each
            # collective waits for the slowest: one thread each keeps them in step. Tiny model.
            torch.set_num_threads(1)
    if device.type == "cuda":
        # The CPU kernels this model uses are deterministic already; the switch (which also
        # imports torch._inductor: ~1 s at every start and restart) matters on CUDA.
        torch.backends.cudnn.deterministic = True
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.use_deterministic_algorithms(True, warn_only=True)
    return device


def train(args: argparse.Namespace) -> int:
    env = VertexEnv.from_environ(default_base=args.output_dir)
    distributed = env.world_size > 1 or args.fsdp
    device = setup_device(args, env, distributed)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    x_train, y_train, x_val, y_val = load_data(
        args.train_fraction, args.seed, args.label_noise, args.raw_inputs
    )
    model = build_model(args.hidden, args.layers, args.dropout, args.activation).to(device)
    model = wrap(model, args.fsdp, distributed)
    if args.optimizer == "adam":
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    else:
        optimizer = torch.optim.SGD(
            model.parameters(), lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay
        )
    warmup = max(0, args.warmup_steps)
    spike_at, spike_factor, spike_steps = lr_spike(args.lr_spike)

    def lr_factor(s: int) -> float:
        factor = min(1.0, (s + 1) / warmup) if warmup else 1.0
        return factor * (spike_factor if spike_at <= s + 1 < spike_at + spike_steps else 1.0)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)

    # Saves every N steps and at each validation (the best by val_loss is kept besides the last
    # ones: it is what the guard ships as the model), in the background; SIGTERM saves and exits.
    ckpt = TorchCheckpointer.from_env(
        model,
        optimizer,
        scheduler,
        default_base=args.output_dir,
        save=args.checkpoint_every,
        retention=RetentionPolicy(keep_last=args.keep_last, keep_best=1, metric="val_loss"),
        async_save=not args.sync_checkpoints,
        log_every=args.log_every,
    )
    start = ckpt.restore()
    start_epoch, start_batch, step = start.extra.get("epoch", 0), start.extra.get("batch", 0), start.step
    steps_per_epoch = len(
        batches_for_epoch(
            len(x_train), args.batch_size, args.seed, 0, env.rank, env.world_size, args.repeat_batch
        )
    )
    ckpt.plan(args.epochs * steps_per_epoch)  # the guard sizes what a stop saves by it
    if start.resumed:
        print(f"resumed from checkpoint step {step} (epoch {start_epoch}, batch {start_batch})", flush=True)

    def autocast():
        return torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16 and device.type == "cuda")

    print(
        f"training on {device} (rank {env.rank}/{env.world_size}): {len(x_train)} train, "
        f"{len(x_val)} val, lr={args.lr}",
        flush=True,
    )
    started = time.time()
    for epoch in range(start_epoch, args.epochs):
        batches = batches_for_epoch(
            len(x_train), args.batch_size, args.seed, epoch, env.rank, env.world_size, args.repeat_batch
        )
        for b in range(start_batch if epoch == start_epoch else 0, len(batches)):
            idx = batches[b]
            xb, yb = x_train[idx].to(device), y_train[idx].to(device)
            with autocast():
                loss = loss_fn(model(xb).float(), yb, args.naive_loss)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if args.clip_grad > 0:
                nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad)
            optimizer.step()
            scheduler.step()
            step += 1
            if args.step_sleep:
                time.sleep(args.step_sleep)
            position = {"epoch": epoch, "batch": b + 1}
            val = None
            if b + 1 == len(batches):
                position = {"epoch": epoch + 1, "batch": 0}
                xv, yv = x_val, y_val
                if args.val_resample:  # a fresh draw per epoch, reproducible from the seed
                    g = torch.Generator().manual_seed(args.seed * 7919 + epoch)
                    pick = torch.randint(len(x_val), (args.val_resample,), generator=g)
                    xv, yv = x_val[pick], y_val[pick]
                val_loss, val_acc = evaluate(model, xv, yv, device, autocast, args.naive_loss)
                val = {"loss": val_loss, "accuracy": val_acc}
                print(
                    f"epoch {epoch} step {step}: train loss {loss.item():.4f} "
                    f"val loss {val_loss:.4f} val acc {val_acc:.3f}",
                    flush=True,
                )
            ckpt.step(
                step, loss=loss.item(), lr=scheduler.get_last_lr()[0], epoch=epoch, extra=position, val=val
            )
            if not math.isfinite(loss.item()) and os.environ.get("TRAINER_STOP_ON_NAN"):
                print(f"non-finite loss at step {step}", flush=True)
                ckpt.close()
                return 1
    ckpt.close()
    weights = final_weights(model, args.fsdp)
    if env.is_chief:
        buffer = io.BytesIO()
        torch.save(weights, buffer)
        store_for(env.model_dir).write_bytes(join(env.model_dir, "model.pt"), buffer.getvalue())
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
    print(f"done: {step} steps in {time.time() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
