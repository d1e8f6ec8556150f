"""trainguard's Lightning example: an MLP on scikit-learn's digits, guarded by one callback.

``Trainer(callbacks=[Guard()])`` is all the checkpointing code: the guard saves to
``AIP_CHECKPOINT_DIR`` (atomic ``COMMIT``), resumes from the newest complete checkpoint, saves and
exits on SIGTERM, and writes the JSONL history to ``TRAINGUARD_HISTORY``. A preempted or killed run
ends with the same weights, byte for byte, as an uninterrupted one. The final weights go to
``AIP_MODEL_DIR/model.pt``.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time

# MKL's results can depend on buffer alignment, which differs between a fresh process and a resumed
# one; conditional numerical reproducibility makes a resumed CPU run bit-identical.
os.environ.setdefault("MKL_CBWR", "COMPATIBLE")

import digits  # noqa: E402
import lightning as L  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from trainguard.runtime import VertexEnv  # noqa: E402
from trainguard.runtime.lightning import Guard  # noqa: E402
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


def datasets(seed: int, train_fraction: float, label_noise: float):
    x, y, x_val, y_val = digits.load(train_fraction, seed, label_noise)
    train = TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    return train, TensorDataset(torch.from_numpy(x_val), torch.from_numpy(y_val))


class Classifier(L.LightningModule):
    def __init__(self, hidden: int, dropout: float, lr: float, step_sleep: float = 0.0) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(64, hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 10),
        )

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        if self.hparams.step_sleep:
            time.sleep(self.hparams.step_sleep)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        self.log("val_loss", nn.functional.cross_entropy(logits, y))
        self.log("val_accuracy", (logits.argmax(1) == y).float().mean())

    def on_validation_epoch_end(self) -> None:
        metrics = self.trainer.callback_metrics
        if not self.trainer.sanity_checking:
            print(
                f"epoch {self.current_epoch} step {self.global_step}: val loss "
                f"{float(metrics['val_loss']):.4f}",
                flush=True,
            )

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.7)
        return [optimizer], [scheduler]


def main(argv=None) -> int:
    args = parse_args(argv)
    env = VertexEnv.from_environ(default_base=args.output_dir)
    L.seed_everything(args.seed, verbose=False)
    torch.use_deterministic_algorithms(True, warn_only=True)
    train, val = datasets(args.seed, args.train_fraction, args.label_noise)
    model = Classifier(args.hidden, args.dropout, args.lr, args.step_sleep)
    trainer = L.Trainer(
        max_epochs=args.epochs,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=args.log_every,
        num_sanity_val_steps=0,
        default_root_dir=args.output_dir,
        callbacks=[Guard(save=args.checkpoint_every)],  # the one line
    )
    print(f"training: {len(train)} train, {len(val)} val", flush=True)
    started = time.time()
    trainer.fit(
        model, DataLoader(train, batch_size=args.batch_size, shuffle=True), DataLoader(val, batch_size=256)
    )
    if env.is_chief:
        buffer = io.BytesIO()
        torch.save(model.state_dict(), buffer)
        store_for(env.model_dir).write_bytes(join(env.model_dir, "model.pt"), buffer.getvalue())
    print(f"done: {trainer.global_step} steps in {time.time() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
