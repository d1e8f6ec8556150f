"""The Lightning guard: one callback, atomic saves, exact resume (mid-epoch too), SIGTERM, history.

Every run here is a real ``Trainer.fit`` on the CPU (a small MLP, 6 batches an epoch; see
lightning_runs.py); an interrupted run is resumed by a fresh ``Trainer`` in the same process and
must end with the same weights, bit for bit, and the same history as an uninterrupted one.
"""

from __future__ import annotations

import importlib
import io
import json
from pathlib import Path

import pytest

from tests.unit.runtime.framework_helpers import Evil, commit, crash, history, sigterm_self
from trainguard.errors import CheckpointError
from trainguard.runtime.checkpoint import CheckpointManager

pytestmark = pytest.mark.framework  # imports the framework in-process: one worker runs these


@pytest.fixture(scope="module")
def lt():
    """lightning_runs, imported when a test here first runs, not when the suite is collected."""
    pytest.importorskip("lightning")
    pytest.importorskip("torch")
    return importlib.import_module("tests.unit.runtime.lightning_runs")


@pytest.fixture(scope="module")
def baseline(lt, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("baseline")
    model, trainer, _ = lt.fit(tmp)
    assert trainer.global_step == 3 * lt.BATCHES
    return lt.weights(model), history(tmp / "history.jsonl")


def test_a_crashed_fit_resumes_mid_epoch_to_the_same_weights_and_history(lt, tmp_path, baseline):
    with pytest.raises(RuntimeError, match="VM went away"):
        lt.fit(tmp_path, lt.At(11, crash))  # saved at 4 and 8; 8 is batch 2 of epoch 1
    model, trainer, guard = lt.fit(tmp_path)
    assert guard.resumed_step == 8
    assert trainer.global_step == 3 * lt.BATCHES
    assert lt.same(lt.weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_sigterm_saves_the_running_step_and_exits_143(lt, tmp_path, baseline):
    with pytest.raises(SystemExit) as stopped:
        lt.fit(tmp_path, lt.At(9, sigterm_self))
    assert stopped.value.code == 143
    assert CheckpointManager(str(tmp_path / "ckpt")).restore_latest().step == 9
    model, _, guard = lt.fit(tmp_path)
    assert guard.resumed_step == 9
    assert lt.same(lt.weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_a_resumed_fit_preempted_again_saves_and_resumes_again(
    lt, tmp_path, baseline
):  # the in-process twin of tests/integration/test_framework_resume.py's preempted-twice run
    for at in (5, 14):  # mid-epoch 0, then mid-epoch 2 of the run resumed from 5
        with pytest.raises(SystemExit) as stopped:
            lt.fit(tmp_path, lt.At(at, sigterm_self))
        assert stopped.value.code == 143
        assert CheckpointManager(str(tmp_path / "ckpt")).restore_latest().step == at
    model, _, guard = lt.fit(tmp_path)
    assert guard.resumed_step == 14
    assert lt.same(lt.weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_sigterm_on_an_epochs_last_batch_saves_after_that_epochs_validation(lt, tmp_path, baseline):
    with pytest.raises(SystemExit):
        lt.fit(tmp_path, lt.At(lt.BATCHES, sigterm_self))
    records = history(tmp_path / "history.jsonl")
    assert records[-1][:2] == (lt.BATCHES, "val")  # validated, then saved
    assert CheckpointManager(str(tmp_path / "ckpt")).restore_latest().step == lt.BATCHES
    model, _, _ = lt.fit(tmp_path)
    assert lt.same(lt.weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_the_history_has_train_and_val_splits_at_global_steps(lt, baseline):
    records = baseline[1]
    assert [r[0] for r in records if r[1] == "train"] == list(range(1, 3 * lt.BATCHES + 1))
    assert [(r[0], r[2]) for r in records if r[1] == "val"] == [(6, 0), (12, 1), (18, 2)]
    assert set(records[0][3]) == {"loss"} and set(records[-1][3]) == {"loss"}


def test_a_finished_run_restarted_trains_no_more(lt, tmp_path, baseline):
    lt.fit(tmp_path)
    found = CheckpointManager(str(tmp_path / "ckpt")).restore_latest()
    assert found.step == 3 * lt.BATCHES  # the final step is saved too
    model, trainer, guard = lt.fit(tmp_path)
    assert guard.resumed_step == 3 * lt.BATCHES and trainer.global_step == 3 * lt.BATCHES
    assert lt.same(lt.weights(model), baseline[0])


def test_a_torn_save_is_passed_over(lt, tmp_path, baseline):
    with pytest.raises(RuntimeError):
        lt.fit(tmp_path, lt.At(6, crash))  # a complete checkpoint at step 4
    torn = tmp_path / "ckpt" / "step-000000008"
    torn.mkdir()
    (torn / lt.CHECKPOINT_FILE).write_bytes(b"half a checkpoint")  # no COMMIT: a save that died
    model, _, guard = lt.fit(tmp_path)
    assert guard.resumed_step == 4
    assert lt.same(lt.weights(model), baseline[0])


def test_the_checkpoint_is_a_standard_lightning_checkpoint(lt, tmp_path):
    lt.fit(tmp_path, epochs=1)
    path = lt.committed(tmp_path, lt.BATCHES)
    restored = lt.Tiny.load_from_checkpoint(path, weights_only=True)
    state = lt.torch.load(path, weights_only=True)
    assert state["global_step"] == lt.BATCHES and "optimizer_states" in state
    assert "rng" in state["callbacks"]["trainguard.Guard"]
    assert lt.torch.equal(restored.net[0].weight, state["state_dict"]["net.0.weight"])


def test_a_crafted_checkpoint_is_refused_by_name_and_never_runs(lt, tmp_path):
    marker = tmp_path / "pwned"
    buffer = io.BytesIO()
    lt.torch.save({"state_dict": {}, "loops": {}, "payload": Evil(marker)}, buffer)
    commit(tmp_path / "ckpt" / "step-000000004", {lt.CHECKPOINT_FILE: buffer.getvalue()})
    with pytest.raises(CheckpointError, match=f"step-000000004/{lt.CHECKPOINT_FILE}: refused"):
        lt.fit(tmp_path)
    assert not marker.exists()


def test_another_frameworks_checkpoint_is_refused_and_left_alone(lt, tmp_path):
    step_dir = tmp_path / "ckpt" / "step-000000004"
    commit(step_dir, {"keras-state.npz": b"PK", "keras-state.json": b"{}"})
    with pytest.raises(CheckpointError, match="not written by trainguard's lightning guard"):
        lt.fit(tmp_path)
    assert json.loads((step_dir / "COMMIT").read_text())["step"] == 4


def test_the_users_own_model_checkpoint_still_writes_its_files(lt, tmp_path):
    own = lt.L.pytorch.callbacks.ModelCheckpoint(
        dirpath=tmp_path / "own", every_n_train_steps=5, save_top_k=-1
    )
    lt.fit(tmp_path, own, epochs=1)
    assert sorted(p.name for p in (tmp_path / "own").iterdir()) == ["epoch=0-step=5.ckpt"]
    assert Path(lt.committed(tmp_path, 4)).exists()


def test_hyper_parameters_that_are_not_plain_data_do_not_stop_a_save(lt, tmp_path):
    class WithHparams(lt.Tiny):
        def __init__(self, where=None) -> None:
            super().__init__()
            self.save_hyperparameters()

    lt.L.seed_everything(0, verbose=False)
    guard = lt.Guard(str(tmp_path / "ckpt"), history=False, save=3)
    trainer = lt.L.Trainer(
        max_steps=3,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=[guard],
    )
    trainer.fit(WithHparams(where=tmp_path), *lt.loaders())
    state = lt.torch.load(lt.committed(tmp_path, 3), weights_only=True)
    assert state["hyper_parameters"]["where"] == repr(tmp_path)
