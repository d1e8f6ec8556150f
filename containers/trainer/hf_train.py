"""trainguard's Hugging Face example: a tiny BERT, randomly initialised, classifying a tiny text set.

Everything is made here (the sentences, the word-level vocabulary, the model from a config): no
hub download, no internet. ``callbacks=[guard]`` and ``resume_from_checkpoint=guard.resume_from()``
are all the checkpointing code: the ``Trainer``'s checkpoints are committed to
``AIP_CHECKPOINT_DIR`` (atomic ``COMMIT``), a restarted run resumes from the newest complete one, a
SIGTERM saves and exits, and the history goes to ``TRAINGUARD_HISTORY``. A preempted or killed run
ends with the same weights, byte for byte, as an uninterrupted one. The final model goes to
``AIP_MODEL_DIR`` (``model.safetensors`` and ``config.json``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

# MKL's results can depend on buffer alignment, which differs between a fresh process and a resumed
# one; conditional numerical reproducibility makes a resumed CPU run bit-identical.
os.environ.setdefault("MKL_CBWR", "COMPATIBLE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import (  # noqa: E402
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)

from trainguard.runtime import VertexEnv  # noqa: E402
from trainguard.runtime.hf import Guard  # noqa: E402
from trainguard.runtime.storage import join, store_for  # noqa: E402

POSITIVE = ["good", "great", "fine", "happy", "bright", "calm", "kind", "warm", "sweet", "clean"]
NEGATIVE = ["bad", "awful", "poor", "sad", "dark", "noisy", "cruel", "cold", "bitter", "dirty"]
NEUTRAL = [
    "the",
    "a",
    "day",
    "film",
    "food",
    "room",
    "trip",
    "book",
    "song",
    "idea",
    "was",
    "is",
    "very",
    "quite",
]
LENGTH = 12


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--samples", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-every", type=int, default=10, help="save every N steps")
    p.add_argument("--log-every", type=int, default=1, help="log train metrics every N steps")
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


def text_set(samples: int, seed: int) -> tuple[list[dict], list[dict], int]:
    """Sentences of neutral words with a few sentiment words; label 1 when positive ones win."""
    vocab = {w: i + 2 for i, w in enumerate(POSITIVE + NEGATIVE + NEUTRAL)}  # 0 pad, 1 [CLS]
    rs = np.random.RandomState(seed)
    rows = []
    for _ in range(samples):
        label = int(rs.rand() < 0.5)
        strong = POSITIVE if label else NEGATIVE
        weak = NEGATIVE if label else POSITIVE
        words = list(rs.choice(NEUTRAL, LENGTH - 4)) + list(rs.choice(strong, 2))
        words += list(rs.choice(weak if rs.rand() < 0.5 else NEUTRAL, 1))
        rs.shuffle(words)
        ids = [1] + [vocab[w] for w in words]
        ids += [0] * (LENGTH - len(ids))
        rows.append(
            {
                "input_ids": torch.tensor(ids),
                "attention_mask": torch.tensor([int(i != 0) for i in ids]),
                "labels": torch.tensor(label),
            }
        )
    split = int(samples * 0.8)
    return rows[:split], rows[split:], len(vocab) + 2


class Sleep(TrainerCallback):
    """Sleeps per step when asked (preemption tests); prints each evaluation."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_step_end(self, args, state, control, **kwargs):
        if self.seconds:
            time.sleep(self.seconds)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        print(
            f"epoch {round(state.epoch or 0) - 1} step {state.global_step}: eval loss "
            f"{metrics['eval_loss']:.4f}",
            flush=True,
        )


def main(argv=None) -> int:
    args = parse_args(argv)
    env = VertexEnv.from_environ(default_base=args.output_dir)
    set_seed(args.seed)
    train, val, vocab_size = text_set(args.samples, args.seed)
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)
    # The Trainer's own checkpoints go to a local disk: beside the outputs when they are local,
    # else (gs://, as on Vertex) in the container's temporary directory.
    base = os.path.dirname(env.model_dir.rstrip("/")) or "."
    if not base.startswith("gs://"):
        os.makedirs(base, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="trainer-scratch-", dir=None if base.startswith("gs://") else base)
    training = TrainingArguments(
        output_dir=scratch,
        num_train_epochs=args.epochs,
        learning_rate=args.lr,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=64,
        eval_strategy="epoch",
        save_strategy="steps",
        save_steps=args.checkpoint_every,
        save_total_limit=2,
        logging_steps=args.log_every,
        report_to=[],
        use_cpu=True,
        seed=args.seed,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    guard = Guard()  # the two lines: the callback, and resume_from() below
    trainer = Trainer(
        model=model,
        args=training,
        train_dataset=train,
        eval_dataset=val,
        callbacks=[guard, Sleep(args.step_sleep)],
    )
    print(f"training: {len(train)} train, {len(val)} val", flush=True)
    started = time.time()
    trainer.train(resume_from_checkpoint=guard.resume_from())
    if env.is_chief:
        final = os.path.join(scratch, "final")
        trainer.save_model(final)
        for name in ("model.safetensors", "config.json"):
            store_for(env.model_dir).upload_file(os.path.join(final, name), join(env.model_dir, name))
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"done: {trainer.state.global_step} steps in {time.time() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
