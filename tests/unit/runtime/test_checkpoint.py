"""CheckpointManager: atomic commits, retention, async errors surfacing, preemption flag."""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest

from trainguard.runtime.checkpoint import (
    COMMIT_MARKER,
    Checkpoint,
    CheckpointManager,
    RetentionPolicy,
    SavePolicy,
)
from trainguard.runtime.storage import LocalStore


def test_save_and_restore_latest(tmp_path):
    mgr = CheckpointManager(str(tmp_path), async_save=False)
    assert mgr.restore_latest() is None
    mgr.save(10, {"state": b"ten"}, {"val_loss": 0.5})
    mgr.save(20, {"state": lambda: b"twenty"})
    latest = mgr.restore_latest()
    assert latest.step == 20 and latest.read("state") == b"twenty"
    assert [c.step for c in mgr.checkpoints()] == [10, 20]
    assert mgr.checkpoints()[0].metrics == {"val_loss": 0.5}


def test_an_uncommitted_checkpoint_is_ignored_and_cleaned_up(tmp_path):
    mgr = CheckpointManager(str(tmp_path), async_save=False)
    mgr.save(10, {"state": b"ok"})
    torn = tmp_path / "step-000000020"
    torn.mkdir()
    (torn / "state").write_bytes(b"half")  # a crash before the marker
    assert mgr.restore_latest().step == 10
    mgr.save(30, {"state": b"next"})
    assert not torn.exists()


def test_a_marker_naming_missing_files_is_not_a_checkpoint(tmp_path):
    mgr = CheckpointManager(str(tmp_path), async_save=False)
    mgr.save(10, {"a": b"1"})
    step = tmp_path / "step-000000020"
    step.mkdir()
    (step / COMMIT_MARKER).write_text(json.dumps({"step": 20, "files": ["a", "b"]}))
    (step / "a").write_bytes(b"x")
    assert mgr.restore_latest().step == 10


def test_retention_keeps_last_k_and_best(tmp_path):
    mgr = CheckpointManager(str(tmp_path), async_save=False,
                            retention=RetentionPolicy(keep_last=2, keep_best=1, metric="val_loss"))
    losses = {10: 0.9, 20: 0.1, 30: 0.5, 40: 0.7, 50: 0.6}
    for step, loss in losses.items():
        mgr.save(step, {"s": b"x"}, {"val_loss": loss})
    assert [c.step for c in mgr.checkpoints()] == [20, 40, 50]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "step-000000020", "step-000000040", "step-000000050"]


def test_retention_policy_is_pure():
    cps = [Checkpoint(s, f"u{s}", ("a",), {"acc": a}) for s, a in ((1, .5), (2, .9), (3, .6))]
    keep_max = RetentionPolicy(keep_last=1, keep_best=1, metric="acc", mode="max")
    assert [c.step for c in keep_max.to_delete(cps)] == [1]


def test_save_policy():
    p = SavePolicy(every_steps=50)
    assert p.due(50, 0, None, 0) and not p.due(51, 0, None, 0) and not p.due(50, 0, 50, 0)
    t = SavePolicy(every_seconds=10)
    assert t.due(3, 100.0, 2, 85.0) and not t.due(3, 100.0, 2, 95.0)


def test_a_failed_background_save_surfaces_on_the_next_call(tmp_path):
    class Broken(LocalStore):
        def write_bytes(self, uri, data):
            raise OSError("disk full")

    mgr = CheckpointManager(str(tmp_path), store=Broken(), async_save=True)
    mgr.save(1, {"s": b"x"})
    with pytest.raises(RuntimeError, match="disk full"):
        mgr.save(2, {"s": b"y"})


def test_at_most_one_save_in_flight(tmp_path):
    release = threading.Event()
    order = []

    def slow():
        release.wait(5)
        order.append("first done")
        return b"1"

    mgr = CheckpointManager(str(tmp_path), async_save=True)
    mgr.save(1, {"s": slow})
    threading.Timer(0.2, release.set).start()
    mgr.save(2, {"s": lambda: order.append("second") or b"2"})
    mgr.wait()
    assert order == ["first done", "second"]


def test_sigterm_sets_the_preempted_flag_and_forces_a_save(tmp_path):
    mgr = CheckpointManager(str(tmp_path), save=SavePolicy(every_steps=1000))
    mgr.install_sigterm_handler()
    try:
        assert not mgr.should_save(7)
        os.kill(os.getpid(), signal.SIGTERM)
        assert mgr.preempted and mgr.should_save(7)
    finally:
        mgr.close()
    assert signal.getsignal(signal.SIGTERM) is not None


def test_non_chief_writes_nothing(tmp_path):
    mgr = CheckpointManager(str(tmp_path), async_save=False, is_chief=False)
    mgr.save(5, {"s": b"x"})
    assert list(tmp_path.iterdir()) == []


def test_no_directory_says_what_to_do(monkeypatch):
    monkeypatch.delenv("AIP_CHECKPOINT_DIR", raising=False)
    with pytest.raises(ValueError, match="AIP_CHECKPOINT_DIR"):
        CheckpointManager()


def test_a_relative_or_doubled_slash_directory_still_resumes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mgr = CheckpointManager("./out//checkpoints/", async_save=False,
                            retention=RetentionPolicy(keep_last=2))
    for step in (1, 2, 3):
        mgr.save(step, {"s": str(step).encode()})
    latest = CheckpointManager("./out//checkpoints/").restore_latest()
    assert latest is not None and latest.step == 3 and latest.read("s") == b"3"
    assert sorted(p.name for p in (tmp_path / "out" / "checkpoints").iterdir()) == [
        "step-000000002", "step-000000003"]


def test_saving_a_committed_step_again_never_mixes_old_and_new_files(tmp_path):
    class DiesAfterFirstFile(LocalStore):
        writes = 0

        def write_bytes(self, uri, data):
            super().write_bytes(uri, data)
            if "step-000000005" in uri and data.startswith(b"v2"):
                raise OSError("killed mid-save")

    mgr = CheckpointManager(str(tmp_path), async_save=False)
    mgr.save(5, {"model": b"v1-model", "optim": b"v1-optim"})
    crashing = CheckpointManager(str(tmp_path), async_save=False, store=DiesAfterFirstFile())
    with pytest.raises(OSError):
        crashing.save(5, {"model": b"v2-model", "optim": b"v2-optim"})
    latest = CheckpointManager(str(tmp_path)).restore_latest()
    assert latest is None or {latest.read("model")[:2], latest.read("optim")[:2]} == {b"v1"}
