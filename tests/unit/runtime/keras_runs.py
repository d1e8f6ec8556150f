"""The Keras runs the guard's tests make: a real ``model.fit`` on the torch backend (an MLP with
dropout, 6 shuffled batches an epoch) with the guard, and the callback that interrupts it.

Kept apart from the tests (test_keras.py, and the gs:// proof in test_framework_resume.py) so that
collecting them imports no Keras: every xdist worker imports every test module, and ``import keras``
costs each one ~1 s of CPU.
"""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from trainguard.runtime.keras import META_FILE, STATE_FILE, Guard  # noqa: E402, F401 - the files: for the tests

BATCHES = 6  # per epoch


class At(keras.callbacks.Callback):
    """Does ``action`` during the batch that would complete step ``step`` (1-based, whole run)."""

    def __init__(self, step: int, action) -> None:
        super().__init__()
        self.step, self.action, self.epoch = step, action, 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self.epoch * BATCHES + batch + 1 == self.step:
            self.action()


def build(hidden: int = 16) -> keras.Model:
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(hidden, activation="relu"),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(3),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def fit(
    tmp_path,
    *callbacks,
    epochs: int = 3,
    hidden: int = 16,
    directory: str = "",
    history_path: str = "",
    **options,
):
    keras.utils.set_random_seed(0)
    rs = np.random.RandomState(1)
    x, y = rs.randn(96, 8).astype("float32"), rs.randint(0, 3, 96)
    model = build(hidden)
    guard = Guard(
        directory or str(tmp_path / "ckpt"),
        history=history_path or str(tmp_path / "history.jsonl"),
        save=4,
        log_every=1,
        **options,
    )
    try:
        model.fit(
            x,
            y,
            batch_size=16,
            epochs=epochs,
            shuffle=True,
            validation_data=(x[:32], y[:32]),
            verbose=0,
            callbacks=[guard, *callbacks],
        )
    except RuntimeError:
        guard.core.close()  # as the guard's exit hook would when the exception ends the process
        raise
    return model, guard


def weights(model) -> list:
    return [np.array(keras.ops.convert_to_numpy(v.value)) for v in model.variables]


def same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(a, b, strict=True)
    )
