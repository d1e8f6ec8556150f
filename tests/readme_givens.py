"""What a user's own code supplies to the README's checkpointing snippets.

A snippet such as ``ckpt = TorchCheckpointer.from_env(model, optimizer, scheduler, save=200)`` is run
by tests/unit/test_readme.py exactly as the README prints it, after the prelude named in its marker
(``<!-- test: given torch -->``): the model, optimizer and data a user would have. Each prelude is the
smallest honest stand-in — a real model that trains, real batches — never a stub that fakes what the
snippet does. The snippet itself is never edited.
"""

from __future__ import annotations

__all__ = ["GIVENS"]

_TORCH = """
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
total_steps, epoch = 12, 0
_x = torch.randn(64, 4)
_y = _x.sum(dim=1, keepdim=True)

def batch_at(step):
    i = (step * 8) % 64
    return _x[i : i + 8], _y[i : i + 8]

def train_step(batch):
    x, y = batch
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    scheduler.step()
    return loss
"""

_JAX = """
import jax
import jax.numpy as jnp
state = {"w": jnp.zeros((4,)), "b": jnp.zeros(())}
total, epoch, b = 12, 0, 0
_x = jax.random.normal(jax.random.PRNGKey(0), (64, 4))
_y = _x.sum(axis=1)

def batch_at(extra, step):
    i = (step * 8) % 64
    return _x[i : i + 8], _y[i : i + 8]

@jax.jit
def _loss(state, x, y):
    return jnp.mean((x @ state["w"] + state["b"] - y) ** 2)

def train_step(state, batch):
    loss, grads = jax.value_and_grad(_loss)(state, *batch)
    return jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, state, grads), float(loss)
"""

_LIGHTNING = """
import torch
import lightning as L

class _Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(4, 1)

    def training_step(self, batch, _):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("loss", loss)
        return loss

    def validation_step(self, batch, _):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)

torch.manual_seed(0)
_x = torch.randn(64, 4)
_data = torch.utils.data.TensorDataset(_x, _x.sum(dim=1, keepdim=True))
model = _Model()
train_loader = torch.utils.data.DataLoader(_data, batch_size=8)
val_loader = torch.utils.data.DataLoader(_data, batch_size=32)
"""

_KERAS = """
import os
os.environ.setdefault("KERAS_BACKEND", "torch")  # as the README says: before keras is imported
import numpy as np
import keras
np.random.seed(0)
x = np.random.randn(64, 4).astype("float32")
y = x.sum(axis=1)
x_val, y_val = x[:16], y[:16]
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
"""

_HF = """
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
torch.manual_seed(0)
model = BertForSequenceClassification(
    BertConfig(vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=16, max_position_embeddings=16, num_labels=2)
)
_ids = torch.randint(0, 32, (16, 8))
train = [{"input_ids": i, "labels": int(i[0]) % 2} for i in _ids]
args = TrainingArguments(
    output_dir="hf-output", max_steps=4, per_device_train_batch_size=4, save_steps=2,
    report_to=[], logging_steps=1, disable_tqdm=True, use_cpu=True,
)
"""

#: marker name -> the code that runs before the snippet
GIVENS: dict[str, str] = {
    "torch": _TORCH,
    "jax": _JAX,
    "lightning": _LIGHTNING,
    "keras": _KERAS,
    "hf": _HF,
}
