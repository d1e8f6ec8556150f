"""The Lightning guard: one callback, atomic saves, exact resume (mid-epoch too), SIGTERM, history.

Every run here is a real ``Trainer.fit`` on the CPU (a small MLP, 6 batches an epoch); an
interrupted run is resumed by a fresh ``Trainer`` in the same process and must end with the same
weights, bit for bit, and the same history as an uninterrupted one.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

L = pytest.importorskip("lightning")
torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from tests.unit.runtime.framework_helpers import Evil, commit, history, sigterm_self  # noqa: E402
from trainguard.errors import CheckpointError  # noqa: E402
from trainguard.runtime.checkpoint import CheckpointManager  # noqa: E402
from trainguard.runtime.lightning import CHECKPOINT_FILE, Guard  # noqa: E402

BATCHES = 6  # per epoch


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=0.01)
        return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.5)]


def loaders():
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(96, 8, generator=g), torch.randint(0, 3, (96,), generator=g)
    return (
        DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True),
        DataLoader(TensorDataset(x[:32], y[:32]), batch_size=16),
    )


class At(L.Callback):
    """Does ``action`` during the batch that would complete step ``step``."""

    def __init__(self, step: int, action) -> None:
        self.step, self.action = step, action

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.step - 1:
            self.action()


def crash():
    raise RuntimeError("the VM went away")


def fit(
    tmp_path,
    *callbacks,
    epochs: int = 3,
    save: int = 4,
    directory: str = "",
    history_path: str = "",
    **options,
):
    L.seed_everything(0, verbose=False)
    model = Tiny()
    guard = Guard(
        directory or str(tmp_path / "ckpt"),
        history=history_path or str(tmp_path / "history.jsonl"),
        save=save,
        **options,
    )
    own = any(isinstance(c, L.pytorch.callbacks.ModelCheckpoint) for c in callbacks)
    trainer = L.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=own,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=1,
        num_sanity_val_steps=0,
        callbacks=[guard, *callbacks],
    )
    trainer.fit(model, *loaders())
    return model, trainer, guard


def weights(model) -> dict:
    return {k: v.clone() for k, v in model.state_dict().items()}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("baseline")
    model, trainer, _ = fit(tmp)
    assert trainer.global_step == 3 * BATCHES
    return weights(model), history(tmp / "history.jsonl")


def committed(tmp_path, step: int) -> str:
    """Where the committed checkpoint of ``step`` keeps its Lightning file (its attempt dir)."""
    return CheckpointManager(str(tmp_path / "ckpt")).checkpoint(step).path(CHECKPOINT_FILE)


def test_a_crashed_fit_resumes_mid_epoch_to_the_same_weights_and_history(tmp_path, baseline):
    with pytest.raises(RuntimeError, match="VM went away"):
        fit(tmp_path, At(11, crash))  # saved at 4 and 8; 8 is batch 2 of epoch 1
    model, trainer, guard = fit(tmp_path)
    assert guard.resumed_step == 8
    assert trainer.global_step == 3 * BATCHES
    assert same(weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_sigterm_saves_the_running_step_and_exits_143(tmp_path, baseline):
    with pytest.raises(SystemExit) as stopped:
        fit(tmp_path, At(9, sigterm_self))
    assert stopped.value.code == 143
    assert CheckpointManager(str(tmp_path / "ckpt")).restore_latest().step == 9
    model, _, guard = fit(tmp_path)
    assert guard.resumed_step == 9
    assert same(weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_sigterm_on_an_epochs_last_batch_saves_after_that_epochs_validation(tmp_path, baseline):
    with pytest.raises(SystemExit):
        fit(tmp_path, At(BATCHES, sigterm_self))
    records = history(tmp_path / "history.jsonl")
    assert records[-1][:2] == (BATCHES, "val")  # validated, then saved
    assert CheckpointManager(str(tmp_path / "ckpt")).restore_latest().step == BATCHES
    model, _, _ = fit(tmp_path)
    assert same(weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_the_history_has_train_and_val_splits_at_global_steps(baseline):
    records = baseline[1]
    assert [r[0] for r in records if r[1] == "train"] == list(range(1, 3 * BATCHES + 1))
    assert [(r[0], r[2]) for r in records if r[1] == "val"] == [(6, 0), (12, 1), (18, 2)]
    assert set(records[0][3]) == {"loss"} and set(records[-1][3]) == {"loss"}


def test_a_finished_run_restarted_trains_no_more(tmp_path, baseline):
    fit(tmp_path)
    found = CheckpointManager(str(tmp_path / "ckpt")).restore_latest()
    assert found.step == 3 * BATCHES  # the final step is saved too
    model, trainer, guard = fit(tmp_path)
    assert guard.resumed_step == 3 * BATCHES and trainer.global_step == 3 * BATCHES
    assert same(weights(model), baseline[0])


def test_a_torn_save_is_passed_over(tmp_path, baseline):
    with pytest.raises(RuntimeError):
        fit(tmp_path, At(6, crash))  # a complete checkpoint at step 4
    torn = tmp_path / "ckpt" / "step-000000008"
    torn.mkdir()
    (torn / CHECKPOINT_FILE).write_bytes(b"half a checkpoint")  # no COMMIT: a save that died
    model, _, guard = fit(tmp_path)
    assert guard.resumed_step == 4
    assert same(weights(model), baseline[0])


def test_the_checkpoint_is_a_standard_lightning_checkpoint(tmp_path):
    fit(tmp_path, epochs=1)
    path = committed(tmp_path, BATCHES)
    restored = Tiny.load_from_checkpoint(path, weights_only=True)
    state = torch.load(path, weights_only=True)
    assert state["global_step"] == BATCHES and "optimizer_states" in state
    assert "rng" in state["callbacks"]["trainguard.Guard"]
    assert torch.equal(restored.net[0].weight, state["state_dict"]["net.0.weight"])


def test_a_crafted_checkpoint_is_refused_by_name_and_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    buffer = io.BytesIO()
    torch.save({"state_dict": {}, "loops": {}, "payload": Evil(marker)}, buffer)
    commit(tmp_path / "ckpt" / "step-000000004", {CHECKPOINT_FILE: buffer.getvalue()})
    with pytest.raises(CheckpointError, match=f"step-000000004/{CHECKPOINT_FILE}: refused"):
        fit(tmp_path)
    assert not marker.exists()


def test_another_frameworks_checkpoint_is_refused_and_left_alone(tmp_path):
    step_dir = tmp_path / "ckpt" / "step-000000004"
    commit(step_dir, {"keras-state.npz": b"PK", "keras-state.json": b"{}"})
    with pytest.raises(CheckpointError, match="not written by trainguard's lightning guard"):
        fit(tmp_path)
    assert json.loads((step_dir / "COMMIT").read_text())["step"] == 4


def test_the_users_own_model_checkpoint_still_writes_its_files(tmp_path):
    own = L.pytorch.callbacks.ModelCheckpoint(dirpath=tmp_path / "own", every_n_train_steps=5, save_top_k=-1)
    fit(tmp_path, own, epochs=1)
    assert sorted(p.name for p in (tmp_path / "own").iterdir()) == ["epoch=0-step=5.ckpt"]
    assert Path(committed(tmp_path, 4)).exists()


def test_hyper_parameters_that_are_not_plain_data_do_not_stop_a_save(tmp_path):
    class WithHparams(Tiny):
        def __init__(self, where=None) -> None:
            super().__init__()
            self.save_hyperparameters()

    L.seed_everything(0, verbose=False)
    guard = Guard(str(tmp_path / "ckpt"), history=False, save=3)
    trainer = L.Trainer(
        max_steps=3,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=[guard],
    )
    trainer.fit(WithHparams(where=tmp_path), *loaders())
    state = torch.load(committed(tmp_path, 3), weights_only=True)
    assert state["hyper_parameters"]["where"] == repr(tmp_path)
