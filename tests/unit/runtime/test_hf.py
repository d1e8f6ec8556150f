"""The Hugging Face guard: a ``TrainerCallback`` that commits the ``Trainer``'s checkpoints
atomically, gives ``resume_from_checkpoint`` the newest complete one, saves on SIGTERM and writes the
history. Real ``Trainer.train`` runs on the CPU: a tiny BERT made from a config (no download) on a
tiny token set made here, 6 batches an epoch."""

from __future__ import annotations

import io
import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from transformers import (  # noqa: E402
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from tests.unit.runtime.framework_helpers import Evil, commit, history, sigterm_self  # noqa: E402
from trainguard.errors import CheckpointError  # noqa: E402
from trainguard.runtime.checkpoint import CheckpointManager  # noqa: E402
from trainguard.runtime.hf import STATE_FILE, Guard  # noqa: E402

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


def crash():
    raise RuntimeError("the VM went away")


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


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("baseline")
    model, trainer, guard = train(tmp)
    assert guard.resumed_step is None and trainer.state.global_step == 3 * BATCHES
    return weights(model), history(tmp / "history.jsonl"), tmp


def test_a_fresh_run_commits_each_trainer_checkpoint_without_the_pickled_arguments(baseline):
    found = CheckpointManager(str(baseline[2] / "ckpt")).checkpoints()
    assert [c.step for c in found] == [12, 16, 18]  # the last 3 (18: the Trainer's final save)
    assert STATE_FILE in found[-1].files and "optimizer.pt" in found[-1].files
    assert "training_args.bin" not in found[-1].files
    assert not (baseline[2] / "local" / ".trainguard-staging").exists()


def test_a_crashed_run_resumes_mid_epoch_to_the_same_weights_and_history(tmp_path, baseline):
    with pytest.raises(RuntimeError, match="VM went away"):
        train(tmp_path, At(11, crash))  # committed 4 and 8; 8 is step 2 of epoch 1
    model, trainer, guard = train(tmp_path)
    assert guard.resumed_step == 8 and trainer.state.global_step == 3 * BATCHES
    assert same(weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_sigterm_saves_the_running_step_and_exits_143(tmp_path, baseline):
    with pytest.raises(SystemExit) as stopped:
        train(tmp_path, At(9, sigterm_self))
    assert stopped.value.code == 143
    assert CheckpointManager(str(tmp_path / "ckpt")).restore_latest().step == 9
    model, _, guard = train(tmp_path)
    assert guard.resumed_step == 9
    assert same(weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_a_save_on_an_epochs_last_step_waits_for_its_evaluation(tmp_path, baseline):
    # save_steps=6 falls on every epoch's last step; the Trainer would save before evaluating.
    with pytest.raises(SystemExit):
        train(tmp_path, At(BATCHES, sigterm_self), save_steps=6)
    records = history(tmp_path / "history.jsonl")
    assert records[-1][:2] == (BATCHES, "val")
    model, _, guard = train(tmp_path, save_steps=6)
    assert guard.resumed_step == BATCHES
    assert same(weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_the_history_has_train_and_val_splits_without_timings(baseline):
    records = baseline[1]
    assert [r[0] for r in records if r[1] == "train"] == list(range(1, 3 * BATCHES + 1))
    assert [(r[0], r[2]) for r in records if r[1] == "val"] == [(6, 0), (12, 1), (18, 2)]
    assert set(records[0][3]) == {"loss", "grad_norm", "learning_rate"}
    assert set(records[-1][3]) == {"loss"}


def test_resume_from_is_none_on_a_fresh_run(tmp_path):
    assert Guard(str(tmp_path / "ckpt")).resume_from() is None


def test_a_crafted_torch_file_is_refused_by_name_and_never_runs(tmp_path):
    with pytest.raises(RuntimeError):
        train(tmp_path, At(6, crash))  # a complete checkpoint at step 4
    found = CheckpointManager(str(tmp_path / "ckpt")).restore_latest()
    marker = tmp_path / "pwned"
    buffer = io.BytesIO()
    torch.save({"state": {}, "param_groups": [], "x": Evil(marker)}, buffer)
    files = {name: found.path(name) for name in found.files}
    data = {name: open(path, "rb").read() for name, path in files.items()}  # noqa: SIM115
    data["optimizer.pt"] = buffer.getvalue()
    commit(tmp_path / "ckpt" / "step-000000005", data)
    with pytest.raises(CheckpointError, match="step-000000005/optimizer.pt: refused"):
        Guard(str(tmp_path / "ckpt")).resume_from()
    assert not marker.exists()


def test_another_frameworks_checkpoint_is_refused(tmp_path):
    commit(tmp_path / "ckpt" / "step-000000004", {"lightning.ckpt": b"x"})
    with pytest.raises(CheckpointError, match="not written by trainguard's hf guard"):
        Guard(str(tmp_path / "ckpt")).resume_from()
    assert json.loads((tmp_path / "ckpt" / "step-000000004" / "COMMIT").read_text())["step"] == 4
