"""trainguard's Keras example: an MLP on scikit-learn's digits, guarded by one callback.

``model.fit(..., callbacks=[Guard()])`` is all the checkpointing code: the guard saves to
``AIP_CHECKPOINT_DIR`` (atomic ``COMMIT``), resumes from the newest complete checkpoint (mid-epoch
too), saves and exits on SIGTERM, and writes the JSONL history to ``TRAINGUARD_HISTORY``. A
preempted or killed run ends with the same weights, byte for byte, as an uninterrupted one. The
final weights go to ``AIP_MODEL_DIR/model.weights.h5``. Runs on the torch backend unless
``KERAS_BACKEND`` says otherwise (``jax`` works too).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "torch")
# MKL's results can depend on buffer alignment, which differs between a fresh process and a resumed
# one; conditional numerical reproducibility makes a resumed CPU run bit-identical.
os.environ.setdefault("MKL_CBWR", "COMPATIBLE")

import digits  # noqa: E402
import keras  # noqa: E402

from trainguard.runtime import VertexEnv  # noqa: E402
from trainguard.runtime.keras import Guard  # noqa: E402
from trainguard.runtime.storage import join, store_for  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
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
    p.add_argument("--checkpoint-every", type=int, default=20, help="save every N steps")
    p.add_argument("--log-every", type=int, default=5, help="log train metrics every N steps")
    p.add_argument(
        "--step-sleep",
        type=float,
        default=0.0,
        help="seconds to sleep per step (to make preemption tests land mid-run)",
    )
    p.add_argument(
        "--output-dir",
        default="./trainguard-output",
        help="base output directory when AIP_* variables are not set",
    )
    return p.parse_args(argv)


class Report(keras.callbacks.Callback):
    """Prints each epoch's validation loss; sleeps per step when asked (preemption tests)."""

    def __init__(self, step_sleep: float) -> None:
        super().__init__()
        self.step_sleep = step_sleep

    def on_train_batch_end(self, batch, logs=None):
        if self.step_sleep:
            time.sleep(self.step_sleep)

    def on_epoch_end(self, epoch, logs=None):
        print(f"epoch {epoch}: val loss {logs['val_loss']:.4f}", flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    env = VertexEnv.from_environ(default_base=args.output_dir)
    keras.utils.set_random_seed(args.seed)
    x, y, x_val, y_val = digits.load(args.train_fraction, args.seed, args.label_noise)
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(args.hidden, activation="relu"),
            keras.layers.Dropout(args.dropout),
            keras.layers.Dense(args.hidden, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(args.lr),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    print(f"training on {keras.backend.backend()}: {len(x)} train, {len(x_val)} val", flush=True)
    started = time.time()
    model.fit(
        x,
        y,
        batch_size=args.batch_size,
        epochs=args.epochs,
        shuffle=True,
        validation_data=(x_val, y_val),
        verbose=0,
        callbacks=[
            Guard(save=args.checkpoint_every, log_every=args.log_every),  # the line
            Report(args.step_sleep),
        ],
    )
    if env.is_chief:
        with tempfile.TemporaryDirectory() as tmp:
            local = os.path.join(tmp, "model.weights.h5")
            model.save_weights(local)
            store_for(env.model_dir).upload_file(local, join(env.model_dir, "model.weights.h5"))
    print(f"done in {time.time() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
