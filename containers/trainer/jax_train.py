"""trainguard's reference JAX trainer: an MLP on scikit-learn's digits, sharded, checkpointed with orbax.

Plain JAX + optax. The parameters, the optimizer state and each batch are sharded over all devices
(a one-axis ``data`` mesh: the TPU chips on a TPU VM; on a CPU, as many fake devices as
``XLA_FLAGS=--xla_force_host_platform_device_count=8`` asks for): batches split across devices,
weight matrices split along a dimension the device count divides. It follows Vertex AI's
environment contract: checkpoints go to ``AIP_CHECKPOINT_DIR`` (``JaxCheckpointer``: orbax writes
them in the background; the best by ``val_loss`` is kept beside the last ones), the model to
``AIP_MODEL_DIR/model.npz``, the history (JSONL, train and val) to ``TRAINGUARD_HISTORY``. A run that
is preempted (SIGTERM) saves and exits; the restarted run resumes from the newest complete checkpoint
and ends with the same weights, byte for byte, as an uninterrupted run. With ``WORLD_SIZE`` > 1 it
joins a multi-process JAX job (``jax.distributed``, coordinator at ``MASTER_ADDR:MASTER_PORT``).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
import zipfile

import digits
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from trainguard.errors import ConfigError, UserError
from trainguard.runtime import RetentionPolicy, VertexEnv
from trainguard.runtime.jax_checkpointer import JaxCheckpointer
from trainguard.runtime.storage import join, store_for

AXIS = "data"
MODEL_FILE = "model.npz"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=64, help="divisible by the device count")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument(
        "--train-fraction",
        type=float,
        default=0.8,
        help="fraction of the data used for training (the rest validates)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=5, help="log the train loss every N steps")
    p.add_argument("--checkpoint-every", type=int, default=50, help="checkpoint every N steps")
    p.add_argument("--keep-last", type=int, default=3)
    p.add_argument("--sync-checkpoints", action="store_true", help="save on the training thread")
    p.add_argument(
        "--step-sleep",
        type=float,
        default=float(os.environ.get("TRAINER_STEP_SLEEP") or 0),
        help="seconds to sleep per step (to make preemption tests land mid-run; "
        "default $TRAINER_STEP_SLEEP or 0)",
    )
    p.add_argument(
        "--output-dir",
        default="./trainguard-output",
        help="base output directory when AIP_* variables are not set",
    )
    return p.parse_args(argv)


def load_data(train_fraction: float, seed: int):
    """The digits (8x8 images, 10 classes), scaled to [0, 1], split as the PyTorch trainer does."""
    x_train, y_train, x_val, y_val = digits.load(train_fraction, seed)
    return x_train, y_train.astype(np.int32), x_val, y_val.astype(np.int32)


def spec_for(shape: tuple[int, ...], devices: int) -> P:
    """Shards a weight matrix along the dimension the device count divides (the output one
    first), a vector when it divides; replicates the rest."""
    if len(shape) == 2:
        if shape[1] % devices == 0:
            return P(None, AXIS)
        if shape[0] % devices == 0:
            return P(AXIS, None)
    if len(shape) == 1 and shape[0] % devices == 0:
        return P(AXIS)
    return P()


def init_params(key, hidden: int, layers: int) -> dict:
    params, width = {}, 64
    sizes = [hidden] * layers + [10]
    for index, out in enumerate(sizes):
        key, sub = jax.random.split(key)
        limit = float(np.sqrt(6.0 / (width + out)))
        name = "out" if index == len(sizes) - 1 else f"dense_{index}"
        params[name] = {
            "w": jax.random.uniform(sub, (width, out), jnp.float32, -limit, limit),
            "b": jnp.zeros((out,), jnp.float32),
        }
        width = out
    return params


def forward(params: dict, x, key=None, dropout: float = 0.0):
    names = sorted(k for k in params if k != "out")
    for name in names:
        x = jax.nn.relu(x @ params[name]["w"] + params[name]["b"])
        if key is not None and dropout > 0:
            key, sub = jax.random.split(key)
            keep = jax.random.bernoulli(sub, 1.0 - dropout, x.shape)
            x = jnp.where(keep, x / (1.0 - dropout), 0.0)
    return x @ params["out"]["w"] + params["out"]["b"]


def build(args: argparse.Namespace, mesh: Mesh):
    """The sharded initial state and the jitted train and eval steps."""
    devices = mesh.devices.size
    optimizer = optax.adam(args.lr)
    params = init_params(jax.random.PRNGKey(args.seed), args.hidden, args.layers)
    state = {"params": params, "opt_state": optimizer.init(params), "key": jax.random.PRNGKey(args.seed + 1)}
    shardings = jax.tree.map(lambda a: NamedSharding(mesh, spec_for(a.shape, devices)), state)
    state = jax.device_put(state, shardings)
    batch = NamedSharding(mesh, P(AXIS))
    replicated = NamedSharding(mesh, P())

    def loss_fn(p, x, y, key):
        logits = forward(p, x, key, args.dropout)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    def train_step(state, x, y):
        key, sub = jax.random.split(state["key"])
        loss, grads = jax.value_and_grad(loss_fn)(state["params"], x, y, sub)
        updates, opt_state = optimizer.update(grads, state["opt_state"], state["params"])
        return {
            "params": optax.apply_updates(state["params"], updates),
            "opt_state": opt_state,
            "key": key,
        }, loss

    def evaluate(params, x, y):
        logits = forward(params, x)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        return loss, (logits.argmax(-1) == y).mean()

    # The old state's buffers are donated to the new one (saves copy them to host memory first).
    step = jax.jit(
        train_step,
        in_shardings=(shardings, batch, batch),
        out_shardings=(shardings, replicated),
        donate_argnums=0,
    )
    return state, step, jax.jit(evaluate), batch


def batches_for_epoch(n: int, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """The epoch's batches of indices: a fixed permutation per (seed, epoch); full batches only
    (each one splits evenly over the devices)."""
    perm = np.random.RandomState(seed * 1000 + epoch).permutation(n)
    return [perm[i : i + batch_size] for i in range(0, n - batch_size + 1, batch_size)]


def model_bytes(params: dict) -> bytes:
    """The weights as ``.npz`` (NumPy's format, read with ``np.load``), byte-stable: fixed entry
    order and timestamps, so equal weights give equal files."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for layer in sorted(params):
            for name in sorted(params[layer]):
                array = io.BytesIO()
                np.lib.format.write_array(array, np.asarray(params[layer][name]), allow_pickle=False)
                info = zipfile.ZipInfo(f"{layer}.{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                archive.writestr(info, array.getvalue())
    return buffer.getvalue()


def main(argv=None) -> int:
    try:
        return train(parse_args(argv))
    except UserError as exc:  # a checkpoint that cannot be used, a full disk: say it, exit 2
        print(f"trainguard: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code


def train(args: argparse.Namespace) -> int:
    env = VertexEnv.from_environ(default_base=args.output_dir)
    if env.world_size > 1:
        jax.distributed.initialize(
            f"{os.environ.get('MASTER_ADDR', '127.0.0.1')}:{os.environ.get('MASTER_PORT', '1234')}",
            num_processes=env.world_size,
            process_id=env.rank,
        )
    mesh = Mesh(np.array(jax.devices()), (AXIS,))
    devices = mesh.devices.size
    if args.batch_size % devices:
        raise ConfigError(
            f"--batch-size {args.batch_size} does not split over {devices} devices: "
            f"use a multiple of {devices}"
        )
    x_train, y_train, x_val, y_val = load_data(args.train_fraction, args.seed)
    state, train_step, evaluate, batch_sharding = build(args, mesh)

    # Saves every N steps and at each validation (the best by val_loss is kept besides the last
    # ones: it is what the guard ships as the model), in the background; SIGTERM saves and exits.
    ckpt = JaxCheckpointer.from_env(
        default_base=args.output_dir,
        save=args.checkpoint_every,
        retention=RetentionPolicy(keep_last=args.keep_last, keep_best=1, metric="val_loss"),
        async_save=not args.sync_checkpoints,
        log_every=args.log_every,
    )
    start = ckpt.restore(state)
    state = start.state
    start_epoch, start_batch, step = start.extra.get("epoch", 0), start.extra.get("batch", 0), start.step
    if start.resumed:
        print(f"resumed from checkpoint step {step} (epoch {start_epoch}, batch {start_batch})", flush=True)
    print(
        f"training on {devices} {jax.default_backend()} device(s) (process {env.rank}/"
        f"{env.world_size}): {len(x_train)} train, {len(x_val)} val, lr={args.lr}",
        flush=True,
    )
    started = time.time()
    for epoch in range(start_epoch, args.epochs):
        batches = batches_for_epoch(len(x_train), args.batch_size, args.seed, epoch)
        for b in range(start_batch if epoch == start_epoch else 0, len(batches)):
            idx = batches[b]
            xb = jax.device_put(x_train[idx], batch_sharding)
            yb = jax.device_put(y_train[idx], batch_sharding)
            state, loss = train_step(state, xb, yb)
            step += 1
            if args.step_sleep:
                time.sleep(args.step_sleep)
            position, val = {"epoch": epoch, "batch": b + 1}, None
            if b + 1 == len(batches):
                position = {"epoch": epoch + 1, "batch": 0}
                val_loss, val_acc = (float(v) for v in evaluate(state["params"], x_val, y_val))
                val = {"loss": val_loss, "accuracy": val_acc}
                print(
                    f"epoch {epoch} step {step}: train loss {float(loss):.4f} "
                    f"val loss {val_loss:.4f} val acc {val_acc:.3f}",
                    flush=True,
                )
            ckpt.step(step, loss=loss, state=state, epoch=epoch, extra=position, val=val)
    ckpt.close()
    params = state["params"]
    if env.world_size > 1:  # every process holds only its shards: gather the whole weights
        from jax.experimental import multihost_utils

        params = multihost_utils.process_allgather(params, tiled=True)
    if env.is_chief:
        store_for(env.model_dir).write_bytes(
            join(env.model_dir, MODEL_FILE), model_bytes(jax.device_get(params))
        )
    print(f"done: {step} steps in {time.time() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
