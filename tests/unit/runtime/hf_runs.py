"""The Hugging Face runs the guard's tests make: a real ``Trainer.train`` on the CPU (a tiny BERT
made from a config, no download, on a tiny token set made here, 6 batches an epoch) with the guard,
and the callbacks that interrupt it.

Kept apart from the tests (test_hf.py, and the gs:// proof in test_framework_resume.py) so that
collecting them imports no transformers: every xdist worker imports every test module, and
transformers with accelerate costs each one ~1.5 s of CPU.
"""

from __future__ import annotations

import torch
import transformers
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from trainguard.runtime.hf import STATE_FILE, Guard  # noqa: F401 - STATE_FILE: for the tests

BATCHES = 6  # per epoch


def dataset(n: int, seed: int) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, 30, (n, 10), generator=g)
    labels = (ids[:, :3].sum(1) % 2).long()
    return [
        {"input_ids": ids[i], "attention_mask": torch.ones(10, dtype=torch.long), "labels": labels[i]}
        for i in range(n)
    ]


class At(TrainerCallback):
    """Does ``action`` during the step that would complete ``step``."""

    def __init__(self, step: int, action) -> None:
        self.step, self.action = step, action

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == self.step - 1:
            self.action()


def train(
    tmp_path,
    *callbacks,
    epochs: int = 3,
    save_steps: int = 4,
    directory: str = "",
    history_path: str = "",
    **options,
):
    transformers.set_seed(0)
    config = BertConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)
    args = TrainingArguments(
        output_dir=str(tmp_path / "local"),
        num_train_epochs=epochs,
        learning_rate=5e-3,
        per_device_train_batch_size=8,
        per_device_eval_batch_size=16,
        eval_strategy="epoch",
        save_strategy="steps",
        save_steps=save_steps,
        save_total_limit=1,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
    )
    guard = Guard(
        directory or str(tmp_path / "ckpt"),
        history=history_path or str(tmp_path / "history.jsonl"),
        **options,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=dataset(8 * BATCHES, 1),
        eval_dataset=dataset(16, 2),
        callbacks=[guard, *callbacks],
    )
    try:
        trainer.train(resume_from_checkpoint=guard.resume_from())
    except RuntimeError:
        guard.core.close()  # as the guard's exit hook would when the exception ends the process
        raise
    return model, trainer, guard


def weights(model) -> dict:
    return {k: v.clone() for k, v in model.state_dict().items()}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
