"""The Hugging Face guard: a ``TrainerCallback`` that commits the ``Trainer``'s checkpoints
atomically, gives ``resume_from_checkpoint`` the newest complete one, saves on SIGTERM and writes the
history. Real ``Trainer.train`` runs on the CPU: a tiny BERT made from a config (no download) on a
tiny token set made here, 6 batches an epoch (hf_runs.py)."""

from __future__ import annotations

import importlib
import io
import json

import pytest

from tests.unit.runtime.framework_helpers import Evil, commit, crash, history, sigterm_self
from trainguard.errors import CheckpointError
from trainguard.runtime.checkpoint import CheckpointManager

pytestmark = pytest.mark.framework  # imports the framework in-process: one worker runs these


@pytest.fixture(scope="module")
def hf():
    """hf_runs, imported when a test here first runs, not when the suite is collected."""
    for name in ("torch", "transformers", "accelerate"):
        pytest.importorskip(name)
    return importlib.import_module("tests.unit.runtime.hf_runs")


@pytest.fixture(scope="module")
def baseline(hf, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("baseline")
    model, trainer, guard = hf.train(tmp)
    assert guard.resumed_step is None and trainer.state.global_step == 3 * hf.BATCHES
    return hf.weights(model), history(tmp / "history.jsonl"), tmp


def test_a_fresh_run_commits_each_trainer_checkpoint_without_the_pickled_arguments(hf, baseline):
    found = CheckpointManager(str(baseline[2] / "ckpt")).checkpoints()
    assert [c.step for c in found] == [12, 16, 18]  # the last 3 (18: the Trainer's final save)
    assert hf.STATE_FILE in found[-1].files and "optimizer.pt" in found[-1].files
    assert "training_args.bin" not in found[-1].files
    assert not (baseline[2] / "local" / ".trainguard-staging").exists()


def test_a_crashed_run_resumes_mid_epoch_to_the_same_weights_and_history(hf, tmp_path, baseline):
    with pytest.raises(RuntimeError, match="VM went away"):
        hf.train(tmp_path, hf.At(11, crash))  # committed 4 and 8; 8 is step 2 of epoch 1
    model, trainer, guard = hf.train(tmp_path)
    assert guard.resumed_step == 8 and trainer.state.global_step == 3 * hf.BATCHES
    assert hf.same(hf.weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_sigterm_saves_the_running_step_and_exits_143(hf, tmp_path, baseline):
    with pytest.raises(SystemExit) as stopped:
        hf.train(tmp_path, hf.At(9, sigterm_self))
    assert stopped.value.code == 143
    assert CheckpointManager(str(tmp_path / "ckpt")).restore_latest().step == 9
    model, _, guard = hf.train(tmp_path)
    assert guard.resumed_step == 9
    assert hf.same(hf.weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_a_resumed_run_preempted_again_saves_and_resumes_again(
    hf, tmp_path, baseline
):  # the in-process twin of tests/integration/test_framework_resume.py's preempted-twice run
    for at in (5, 14):  # mid-epoch 0, then mid-epoch 2 of the run resumed from 5
        with pytest.raises(SystemExit) as stopped:
            hf.train(tmp_path, hf.At(at, sigterm_self))
        assert stopped.value.code == 143
        assert CheckpointManager(str(tmp_path / "ckpt")).restore_latest().step == at
    model, _, guard = hf.train(tmp_path)
    assert guard.resumed_step == 14
    assert hf.same(hf.weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_a_save_on_an_epochs_last_step_waits_for_its_evaluation(hf, tmp_path, baseline):
    # save_steps=6 falls on every epoch's last step; the Trainer would save before evaluating.
    with pytest.raises(SystemExit):
        hf.train(tmp_path, hf.At(hf.BATCHES, sigterm_self), save_steps=6)
    records = history(tmp_path / "history.jsonl")
    assert records[-1][:2] == (hf.BATCHES, "val")
    model, _, guard = hf.train(tmp_path, save_steps=6)
    assert guard.resumed_step == hf.BATCHES
    assert hf.same(hf.weights(model), baseline[0])
    assert history(tmp_path / "history.jsonl") == baseline[1]


def test_the_history_has_train_and_val_splits_without_timings(hf, baseline):
    records = baseline[1]
    assert [r[0] for r in records if r[1] == "train"] == list(range(1, 3 * hf.BATCHES + 1))
    assert [(r[0], r[2]) for r in records if r[1] == "val"] == [(6, 0), (12, 1), (18, 2)]
    assert set(records[0][3]) == {"loss", "grad_norm", "learning_rate"}
    assert set(records[-1][3]) == {"loss"}


def test_resume_from_is_none_on_a_fresh_run(hf, tmp_path):
    assert hf.Guard(str(tmp_path / "ckpt")).resume_from() is None


def test_a_crafted_torch_file_is_refused_by_name_and_never_runs(hf, tmp_path):
    with pytest.raises(RuntimeError):
        hf.train(tmp_path, hf.At(6, crash))  # a complete checkpoint at step 4
    found = CheckpointManager(str(tmp_path / "ckpt")).restore_latest()
    marker = tmp_path / "pwned"
    buffer = io.BytesIO()
    hf.torch.save({"state": {}, "param_groups": [], "x": Evil(marker)}, buffer)
    files = {name: found.path(name) for name in found.files}
    data = {name: open(path, "rb").read() for name, path in files.items()}  # noqa: SIM115
    data["optimizer.pt"] = buffer.getvalue()
    commit(tmp_path / "ckpt" / "step-000000005", data)
    with pytest.raises(CheckpointError, match="step-000000005/optimizer.pt: refused"):
        hf.Guard(str(tmp_path / "ckpt")).resume_from()
    assert not marker.exists()


def test_another_frameworks_checkpoint_is_refused(hf, tmp_path):
    commit(tmp_path / "ckpt" / "step-000000004", {"lightning.ckpt": b"x"})
    with pytest.raises(CheckpointError, match="not written by trainguard's hf guard"):
        hf.Guard(str(tmp_path / "ckpt")).resume_from()
    assert json.loads((tmp_path / "ckpt" / "step-000000004" / "COMMIT").read_text())["step"] == 4
