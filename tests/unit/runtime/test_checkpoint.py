"""CheckpointManager: atomic commits, retention, async errors surfacing (the preemption flag: test_core)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from trainguard.errors import CheckpointError, ConfigError
from trainguard.runtime.checkpoint import (
    COMMIT_MARKER,
    Checkpoint,
    CheckpointManager,
    RetentionPolicy,
    SavePolicy,
    Sharded,
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


def test_a_marker_naming_missing_files_is_refused_not_skipped(tmp_path):
    mgr = CheckpointManager(str(tmp_path), async_save=False)
    mgr.save(10, {"a": b"1"})
    step = tmp_path / "step-000000020"
    step.mkdir()
    (step / COMMIT_MARKER).write_text(json.dumps({"step": 20, "files": ["a", "b"]}))
    (step / "a").write_bytes(b"x")
    with pytest.raises(
        CheckpointError,
        match=r"step-000000020 is damaged: b is missing.*resume "
        r"from step 10",
    ):
        mgr.restore_latest()
    assert (step / "a").exists()  # nothing deleted: the user decides
    step.rename(tmp_path.parent / f"{tmp_path.name}-moved")
    assert mgr.restore_latest().read("a") == b"1"


def test_a_file_shorter_than_its_commit_says_is_damaged(tmp_path):
    mgr = CheckpointManager(str(tmp_path), async_save=False)
    mgr.save(10, {"a": b"1"})
    mgr.save(20, {"a": b"twenty"})
    latest = mgr.checkpoints()[-1]
    Path(latest.path("a")).write_bytes(b"tw")
    with pytest.raises(CheckpointError, match="a is 2 bytes but COMMIT says 6"):
        mgr.restore_latest()


def test_retention_keeps_last_k_and_best(tmp_path):
    mgr = CheckpointManager(
        str(tmp_path),
        async_save=False,
        retention=RetentionPolicy(keep_last=2, keep_best=1, metric="val_loss"),
    )
    losses = {10: 0.9, 20: 0.1, 30: 0.5, 40: 0.7, 50: 0.6}
    for step, loss in losses.items():
        mgr.save(step, {"s": b"x"}, {"val_loss": loss})
    assert [c.step for c in mgr.checkpoints()] == [20, 40, 50]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "step-000000020",
        "step-000000040",
        "step-000000050",
    ]


def test_retention_policy_is_pure():
    cps = [Checkpoint(s, f"u{s}", ("a",), {"acc": a}) for s, a in ((1, 0.5), (2, 0.9), (3, 0.6))]
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


def test_non_chief_writes_nothing(tmp_path):
    mgr = CheckpointManager(str(tmp_path), async_save=False, is_chief=False)
    mgr.save(5, {"s": b"x"})
    assert list(tmp_path.iterdir()) == []


def test_no_directory_says_what_to_do(monkeypatch):
    monkeypatch.delenv("AIP_CHECKPOINT_DIR", raising=False)
    with pytest.raises(ConfigError, match="AIP_CHECKPOINT_DIR"):
        CheckpointManager()


def test_a_relative_or_doubled_slash_directory_still_resumes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mgr = CheckpointManager("./out//checkpoints/", async_save=False, retention=RetentionPolicy(keep_last=2))
    for step in (1, 2, 3):
        mgr.save(step, {"s": str(step).encode()})
    latest = CheckpointManager("./out//checkpoints/").restore_latest()
    assert latest is not None and latest.step == 3 and latest.read("s") == b"3"
    assert sorted(p.name for p in (tmp_path / "out" / "checkpoints").iterdir()) == [
        "step-000000002",
        "step-000000003",
    ]


class DiesOnStep(LocalStore):
    """Fails (as a SIGKILL or ENOSPC would stop it) once it has written ``after`` payload files of
    the save whose payload starts with ``marker``."""

    def __init__(self, marker: bytes, after: int = 1) -> None:
        self.marker, self.after, self.written = marker, after, 0

    def write_stream(self, uri, writer):
        size = super().write_stream(uri, writer)
        if Path(uri).read_bytes().startswith(self.marker):
            self.written += 1
            if self.written >= self.after:
                raise OSError("killed mid-save")
        return size


@pytest.mark.parametrize("keep_last", [1, 3])
@pytest.mark.parametrize("after", [1, 2])
def test_a_failed_re_save_of_the_restored_step_keeps_the_old_one_complete(tmp_path, keep_last, after):
    mgr = CheckpointManager(str(tmp_path), async_save=False, retention=RetentionPolicy(keep_last=keep_last))
    mgr.save(5, {"model": b"v1-model", "optim": b"v1-optim"})
    crashing = CheckpointManager(
        str(tmp_path),
        async_save=False,
        store=DiesOnStep(b"v2", after),
        retention=RetentionPolicy(keep_last=keep_last),
    )
    assert crashing.restore_latest().step == 5
    with pytest.raises(OSError, match="killed mid-save"):
        crashing.save(5, {"model": b"v2-model", "optim": b"v2-optim"})
    latest = CheckpointManager(str(tmp_path)).restore_latest()
    assert latest is not None and latest.step == 5
    assert (latest.read("model"), latest.read("optim")) == (b"v1-model", b"v1-optim")


def test_a_re_save_replaces_the_step_and_leaves_no_old_files(tmp_path):
    mgr = CheckpointManager(str(tmp_path), async_save=False, retention=RetentionPolicy(keep_last=1))
    mgr.save(5, {"model": b"v1"})
    mgr.save(5, {"model": b"v2"})
    (only,) = mgr.checkpoints()
    assert only.step == 5 and only.read("model") == b"v2"
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert files == ["step-000000005/COMMIT", f"step-000000005/{only.meta['dir']}/model"]


def test_debris_of_a_dead_re_save_is_removed_by_the_next_save(tmp_path):
    mgr = CheckpointManager(str(tmp_path), async_save=False)
    mgr.save(5, {"model": b"v1"})
    stale = tmp_path / "step-000000005" / "a-000000000bad"
    stale.mkdir()
    (stale / "model").write_bytes(b"half")
    assert mgr.restore_latest().read("model") == b"v1"
    mgr.save(6, {"model": b"v2"})
    assert not stale.exists()
    assert mgr.checkpoint(5).read("model") == b"v1"


def test_a_linked_file_inside_a_committed_step_is_not_followed(tmp_path):
    outside = tmp_path / "secret"
    outside.write_bytes(b"not yours")
    root = tmp_path / "ck"
    mgr = CheckpointManager(str(root), async_save=False)
    mgr.save(1, {"a": b"one"})
    mgr.save(2, {"a": b"two"})
    second = mgr.checkpoint(2)
    target = Path(second.path("a"))
    target.unlink()
    target.symlink_to(outside)
    with pytest.raises(CheckpointError, match="not a regular file"):
        mgr.restore_latest()
    with pytest.raises(OSError), LocalStore().open_read(str(target)):
        pass


@pytest.mark.parametrize(
    "marker",
    [
        {"step": 3, "files": ["../../secret"]},
        {"step": 3, "files": ["/etc/passwd"]},
        {"step": 3, "files": ["a"], "dir": ".."},
        {"step": 3, "files": ["a"], "dir": "x/../../.."},
    ],
)
def test_a_commit_pointing_outside_the_checkpoint_is_refused(tmp_path, marker):
    (tmp_path / "secret").write_bytes(b"x")
    root = tmp_path / "ck"
    mgr = CheckpointManager(str(root), async_save=False)
    mgr.save(1, {"a": b"one"})
    step = root / "step-000000003"
    step.mkdir()
    (step / COMMIT_MARKER).write_text(json.dumps(marker))
    with pytest.raises(CheckpointError, match="step-000000003 is damaged.*(plain relative|not a plain name)"):
        mgr.restore_latest()
    with pytest.raises(CheckpointError, match="no file"):
        Checkpoint(3, str(step), ("a",)).path("../secret")


def test_a_sharded_payload_is_written_by_every_rank_and_committed_by_the_chief(tmp_path):
    def writer(rank):
        def write(uri):
            Path(uri).mkdir(parents=True, exist_ok=True)
            Path(uri, f"shard-{rank}").write_bytes(b"r" * (rank + 1))

        return Sharded(write)

    other = CheckpointManager(str(tmp_path), async_save=False, is_chief=False)
    chief = CheckpointManager(str(tmp_path), async_save=False)
    other.save(4, writer(1), attempt="a-000000000004")
    assert chief.checkpoints() == []  # no COMMIT until the chief's write returned
    chief.save(4, writer(0), attempt="a-000000000004", format="test", meta={"world_size": 2})
    (found,) = chief.checkpoints()
    assert found.files == ("shard-0", "shard-1") and found.sizes == {"shard-0": 1, "shard-1": 2}
    assert found.format == "test" and found.meta["world_size"] == 2


def test_the_runtime_needs_neither_kfp_nor_google_clients_nor_torch(tmp_path):
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("kfp", "torch", "typer") or name.startswith(
                        ("google.cloud.storage", "google.api_core", "google.auth")):
                    raise ImportError(name + " is not in a training image")
        sys.meta_path.insert(0, Block())
        from trainguard.runtime import CheckpointManager, HistoryWriter, VertexEnv
        mgr = CheckpointManager(sys.argv[1], async_save=True)
        mgr.save(1, {"s": b"one"})
        mgr.wait()
        assert CheckpointManager(sys.argv[1]).restore_latest().read("s") == b"one"
        with HistoryWriter(sys.argv[1] + "/h.jsonl") as h:
            h.log(1, loss=0.5)
        print("ok")
    """)
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "ok", result.stderr[-2000:]
