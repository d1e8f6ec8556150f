"""The Keras guard: one callback, ``BackupAndRestore`` semantics plus mid-epoch resume, SIGTERM,
history, safe loading. Real ``model.fit`` runs on the torch backend (an MLP with dropout, 6 shuffled
batches an epoch; keras_runs.py); an interrupted run, resumed by a fresh model in the same process,
must end with the same weights, bit for bit, and the same history as an uninterrupted one."""

from __future__ import annotations

import importlib.util
import io
import json

import pytest

from tests.unit.runtime.framework_helpers import commit, crash, history, sigterm_self
from trainguard.errors import CheckpointError
from trainguard.runtime.checkpoint import CheckpointManager

pytestmark = pytest.mark.framework  # imports the framework in-process: one worker runs these


@pytest.fixture(scope="module")
def ks():
    """keras_runs, imported when a test here first runs, not when the suite is collected."""
    if importlib.util.find_spec("keras") is None:
        pytest.skip("keras is not installed")
    runs = importlib.import_module("tests.unit.runtime.keras_runs")  # sets KERAS_BACKEND first
    if runs.keras.backend.backend() not in ("torch", "jax"):
        pytest.skip("the guard supports the torch and jax backends")
    return runs


@pytest.fixture(scope="module")
def baseline(ks, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("baseline")
    model, _ = ks.fit(tmp)
    return ks.weights(model), history(tmp / "history.jsonl")


def test_a_crashed_fit_resumes_mid_epoch_to_the_same_weights_and_history(ks, tmp_path, baseline):
    with pytest.raises(RuntimeError, match="VM went away"):
        ks.fit(tmp_path, ks.At(11, crash))  # saved at 4 and 8; 8 is batch 2 of epoch 1
    model, guard = ks.fit(tmp_path)
    assert guard.resumed_step == 8
    assert ks.same(ks.weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_sigterm_saves_the_running_batch_and_exits_143(ks, tmp_path, baseline):
    with pytest.raises(SystemExit) as stopped:
        ks.fit(tmp_path, ks.At(9, sigterm_self))
    assert stopped.value.code == 143
    assert CheckpointManager(str(tmp_path / "ckpt")).restore_latest().step == 9
    model, guard = ks.fit(tmp_path)
    assert guard.resumed_step == 9
    assert ks.same(ks.weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_a_resumed_fit_preempted_again_saves_and_resumes_again(
    ks, tmp_path, baseline
):  # the in-process twin of tests/integration/test_framework_resume.py's preempted-twice run
    for at in (5, 14):  # mid-epoch 0, then mid-epoch 2 of the run resumed from 5
        with pytest.raises(SystemExit) as stopped:
            ks.fit(tmp_path, ks.At(at, sigterm_self))
        assert stopped.value.code == 143
        assert CheckpointManager(str(tmp_path / "ckpt")).restore_latest().step == at
    model, guard = ks.fit(tmp_path)
    assert guard.resumed_step == 14
    assert ks.same(ks.weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_sigterm_on_an_epochs_last_batch_resumes_into_its_validation(ks, tmp_path, baseline):
    with pytest.raises(SystemExit):
        ks.fit(tmp_path, ks.At(ks.BATCHES, sigterm_self))
    assert [r[1] for r in history(tmp_path / "history.jsonl")].count("val") == 0
    model, _ = ks.fit(tmp_path)
    assert ks.same(ks.weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_the_history_has_train_and_val_splits(ks, baseline):
    records = baseline[1]
    assert [r[0] for r in records if r[1] == "train"] == list(range(1, 3 * ks.BATCHES + 1))
    assert [(r[0], r[2]) for r in records if r[1] == "val"] == [(6, 0), (12, 1), (18, 2)]
    assert set(records[0][3]) == {"loss", "accuracy"}
    assert set(records[-1][3]) == {"loss", "accuracy"}


def test_an_epoch_boundary_checkpoint_resumes_exactly_and_a_finished_run_stays_finished(
    ks, tmp_path, baseline
):
    with pytest.raises(RuntimeError):
        ks.fit(tmp_path, ks.At(15, crash), **{})  # the epoch-end save at 12 (save=4) is the newest
    model, guard = ks.fit(tmp_path)
    assert guard.resumed_step == 12
    assert ks.same(ks.weights(model), baseline[0])
    model, guard = ks.fit(tmp_path)  # restarted after the end: the final save says it is done
    assert guard.resumed_step == 3 * ks.BATCHES
    assert ks.same(ks.weights(model), baseline[0])


def test_an_array_that_would_need_pickle_is_refused_by_name(ks, tmp_path):
    buffer = io.BytesIO()
    ks.np.savez(buffer, **{"model.0": ks.np.array([{"payload": 1}], dtype=object)})
    meta = {"epoch": 0, "batch": 4, "rng": {}, "paths": {"model": ["x"], "optimizer": []}}
    commit(
        tmp_path / "ckpt" / "step-000000004",
        {ks.STATE_FILE: buffer.getvalue(), ks.META_FILE: json.dumps(meta).encode()},
    )
    with pytest.raises(CheckpointError, match=f"step-000000004/{ks.STATE_FILE}: not a readable"):
        ks.fit(tmp_path)


def test_a_checkpoint_of_another_model_is_refused_naming_the_variable(ks, tmp_path):
    with pytest.raises(RuntimeError):
        ks.fit(tmp_path, ks.At(6, crash))
    with pytest.raises(CheckpointError, match="kernel.* has shape .* resume with the model"):
        ks.fit(tmp_path, hidden=32)
