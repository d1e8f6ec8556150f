"""The Lightning runs the guard's tests make: a real ``Trainer.fit`` on the CPU (a small MLP, 6
batches an epoch) with the guard, and the callbacks that interrupt it.

Kept apart from the tests (test_lightning.py, and the gs:// proof in test_framework_resume.py) so
that collecting them imports no Lightning: every xdist worker imports every test module, and
``import lightning`` costs each one ~1.5 s of CPU.
"""

from __future__ import annotations

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from trainguard.runtime.checkpoint import CheckpointManager
from trainguard.runtime.lightning import CHECKPOINT_FILE, Guard

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


def committed(tmp_path, step: int) -> str:
    """Where the committed checkpoint of ``step`` keeps its Lightning file (its attempt dir)."""
    return CheckpointManager(str(tmp_path / "ckpt")).checkpoint(step).path(CHECKPOINT_FILE)
