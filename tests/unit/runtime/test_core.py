"""CheckpointCore: the one place of save decisions, SIGTERM/SIGINT, the history and closing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from trainguard.errors import CheckpointError
from trainguard.runtime.core import CheckpointCore
from trainguard.runtime.policies import RetentionPolicy, SavePolicy

ANY = {"accepts": lambda c: True, "reader": "a test", "reads": "anything"}


def test_sigterm_sets_the_preempted_flag_and_close_restores_the_previous_handler(tmp_path):
    seen = []

    def previous(signum, frame):
        seen.append(signum)

    before = signal.signal(signal.SIGTERM, previous)
    try:
        core = CheckpointCore(str(tmp_path), save=SavePolicy(every_steps=1000))
        core.install_signal_handlers()
        assert not core.due(7)
        os.kill(os.getpid(), signal.SIGTERM)
        assert core.preempted and core.due(7) and seen == []
        assert core.stop_exit_code == 143
        core.close()
        assert signal.getsignal(signal.SIGTERM) is previous
        os.kill(os.getpid(), signal.SIGTERM)
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, before)


def test_saves_are_due_by_the_policy_counted_from_the_checkpoint_resumed(tmp_path):
    first = CheckpointCore(str(tmp_path), save=5, async_save=False)
    for step in range(1, 11):
        if first.due(step):
            first.commit(step, {"s": str(step).encode()})
    assert [c.step for c in first.manager.checkpoints()] == [5, 10]
    again = CheckpointCore(str(tmp_path), save=5, async_save=False)
    assert again.restore_point(**ANY).step == 10
    assert not again.due(10)  # the step resumed from is not saved again
    assert again.due(15)


def test_validation_steps_are_due_only_while_the_best_checkpoints_are_kept(tmp_path):
    plain = CheckpointCore(str(tmp_path / "a"), save=1000)
    best = CheckpointCore(str(tmp_path / "b"), save=1000, retention=RetentionPolicy(keep_best=1))
    assert not plain.due(3, validated=True)
    assert best.due(3, validated=True) and not best.due(3)


def test_another_readers_checkpoint_is_refused_naming_what_it_holds(tmp_path):
    core = CheckpointCore(str(tmp_path), async_save=False)
    core.commit(4, {"model.bin": b"x"}, format="other")
    with pytest.raises(
        CheckpointError,
        match=r"format 'other'\), holding model.bin: not written by a test, which reads state.pt",
    ):
        core.restore_point(accepts=lambda c: "state.pt" in c.files, reader="a test", reads="state.pt")


def test_a_foreign_checkpoint_directory_is_refused_only_when_asked(tmp_path):
    (tmp_path / "epoch=3.ckpt").write_bytes(b"lightning")
    core = CheckpointCore(str(tmp_path))
    assert core.restore_point(**ANY) is None
    with pytest.raises(CheckpointError, match="holds a PyTorch Lightning checkpoint"):
        core.restore_point(**ANY, refuse_foreign=True)


def test_commit_makes_the_history_durable_and_close_may_be_called_again(tmp_path):
    history = tmp_path / "history.jsonl"
    core = CheckpointCore(str(tmp_path / "ckpt"), async_save=False, history=str(history))
    core.open_history(None)
    core.log(1, "train", 0, {"loss": 0.5})
    core.commit(1, {"s": b"1"}, {"loss": 0.5, "note": "text", "flag": True})
    first, saved = (json.loads(line) for line in history.read_text().splitlines())
    assert first["metrics"] == {"loss": 0.5}
    assert saved["split"] == "checkpoint" and saved["save"]["bytes"] == 1  # the save, measured
    assert core.manager.checkpoints()[0].metrics == {"loss": 0.5}  # words and flags left out
    core.close()
    core.close()
    core.open_history(1)  # a framework's second fit uses the core again
    core.log(2, "train", 0, {"loss": 0.4})
    core.close()
    records = [json.loads(line) for line in history.read_text().splitlines()]
    assert [(r["step"], r["split"]) for r in records] == [(1, "train"), (1, "checkpoint"), (2, "train")]


@pytest.mark.parametrize(
    ("signum", "code", "reason"), [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl-C")]
)
def test_stop_exits_with_128_plus_the_signal_after_saying_so(tmp_path, capsys, signum, code, reason):
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own: the core takes it
    try:
        core = CheckpointCore(str(tmp_path))
        core.install_signal_handlers()
        os.kill(os.getpid(), signum)
        assert core.preempted
        with pytest.raises(SystemExit) as stopped:
            core.stop(12)
        assert stopped.value.code == code
        assert f"{reason}" in capsys.readouterr().err
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    finally:
        signal.signal(signal.SIGINT, before)


def test_with_finish_at_exit_the_save_in_flight_completes_when_the_process_ends(tmp_path):
    """A framework's exception ends the process with a background save in flight: it still lands."""
    code = (
        "import sys, time\n"
        "from trainguard.runtime.core import CheckpointCore\n"
        f"core = CheckpointCore({str(tmp_path)!r}, finish_at_exit=True)\n"
        "core.commit(3, {'s': lambda: time.sleep(1) or b'late'})\n"
        "raise SystemExit(1)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert CheckpointCore(str(tmp_path)).restore_point(**ANY).read("s") == b"late"
