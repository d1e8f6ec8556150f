"""The Keras guard: one callback, ``BackupAndRestore`` semantics plus mid-epoch resume, SIGTERM,
history, safe loading. Real ``model.fit`` runs on the torch backend (an MLP with dropout, 6 shuffled
batches an epoch); an interrupted run, resumed by a fresh model in the same process, must end with
the same weights, bit for bit, and the same history as an uninterrupted one."""

from __future__ import annotations

import io
import json
import os

import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras")
np = pytest.importorskip("numpy")

from tests.unit.runtime.framework_helpers import commit, history, sigterm_self  # noqa: E402
from trainguard.errors import CheckpointError  # noqa: E402
from trainguard.runtime.checkpoint import CheckpointManager  # noqa: E402
from trainguard.runtime.keras import META_FILE, STATE_FILE, Guard  # noqa: E402

BATCHES = 6  # per epoch
pytestmark = pytest.mark.skipif(
    keras.backend.backend() not in ("torch", "jax"), reason="the guard supports the torch and jax backends"
)


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


def crash():
    raise RuntimeError("the VM went away")


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


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("baseline")
    model, _ = fit(tmp)
    return weights(model), history(tmp / "history.jsonl")


def test_a_crashed_fit_resumes_mid_epoch_to_the_same_weights_and_history(tmp_path, baseline):
    with pytest.raises(RuntimeError, match="VM went away"):
        fit(tmp_path, At(11, crash))  # saved at 4 and 8; 8 is batch 2 of epoch 1
    model, guard = fit(tmp_path)
    assert guard.resumed_step == 8
    assert same(weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_sigterm_saves_the_running_batch_and_exits_143(tmp_path, baseline):
    with pytest.raises(SystemExit) as stopped:
        fit(tmp_path, At(9, sigterm_self))
    assert stopped.value.code == 143
    assert CheckpointManager(str(tmp_path / "ckpt")).restore_latest().step == 9
    model, guard = fit(tmp_path)
    assert guard.resumed_step == 9
    assert same(weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_sigterm_on_an_epochs_last_batch_resumes_into_its_validation(tmp_path, baseline):
    with pytest.raises(SystemExit):
        fit(tmp_path, At(BATCHES, sigterm_self))
    assert [r[1] for r in history(tmp_path / "history.jsonl")].count("val") == 0
    model, _ = fit(tmp_path)
    assert same(weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_the_history_has_train_and_val_splits(baseline):
    records = baseline[1]
    assert [r[0] for r in records if r[1] == "train"] == list(range(1, 3 * BATCHES + 1))
    assert [(r[0], r[2]) for r in records if r[1] == "val"] == [(6, 0), (12, 1), (18, 2)]
    assert set(records[0][3]) == {"loss", "accuracy"}
    assert set(records[-1][3]) == {"loss", "accuracy"}


def test_an_epoch_boundary_checkpoint_resumes_exactly_and_a_finished_run_stays_finished(tmp_path, baseline):
    with pytest.raises(RuntimeError):
        fit(tmp_path, At(15, crash), **{})  # the epoch-end save at 12 (save=4) is the newest
    model, guard = fit(tmp_path)
    assert guard.resumed_step == 12
    assert same(weights(model), baseline[0])
    model, guard = fit(tmp_path)  # restarted after the end: the final save says it is done
    assert guard.resumed_step == 3 * BATCHES
    assert same(weights(model), baseline[0])


def test_an_array_that_would_need_pickle_is_refused_by_name(tmp_path):
    buffer = io.BytesIO()
    np.savez(buffer, **{"model.0": np.array([{"payload": 1}], dtype=object)})
    meta = {"epoch": 0, "batch": 4, "rng": {}, "paths": {"model": ["x"], "optimizer": []}}
    commit(
        tmp_path / "ckpt" / "step-000000004",
        {STATE_FILE: buffer.getvalue(), META_FILE: json.dumps(meta).encode()},
    )
    with pytest.raises(CheckpointError, match=f"step-000000004/{STATE_FILE}: not a readable"):
        fit(tmp_path)


def test_a_checkpoint_of_another_model_is_refused_naming_the_variable(tmp_path):
    with pytest.raises(RuntimeError):
        fit(tmp_path, At(6, crash))
    with pytest.raises(CheckpointError, match="kernel.* has shape .* resume with the model"):
        fit(tmp_path, hidden=32)
