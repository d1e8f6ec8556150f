"""TorchCheckpointer in one process: three calls resume bit-identically; bad checkpoints get one
clear CheckpointError and leave the intact ones usable."""

from __future__ import annotations

import enum
import io
import json
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trainguard.errors import CheckpointError  # noqa: E402
from trainguard.runtime import RetentionPolicy, TorchCheckpointer, read_history_records  # noqa: E402
from trainguard.runtime.checkpoint import COMMIT_MARKER  # noqa: E402
from trainguard.runtime.torch_state import STATE_FILE  # noqa: E402


def setup(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.3), torch.nn.Linear(16, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)
    return model, opt, sched


def train(directory, steps=12, stop_at=None, history=None, **kwargs):
    """Trains ``steps`` steps under a TorchCheckpointer; with ``stop_at``, a SIGTERM arrives at that
    step (the run saves and stops). Returns the model."""
    model, opt, sched = setup(seed=123)  # a fresh process: other weights until restored
    ckpt = TorchCheckpointer(
        model,
        opt,
        sched,
        directory=str(directory),
        history=history,
        exit_on_preemption=False,
        **{"save": 5, **kwargs},
    )
    start = ckpt.restore()
    if not start.resumed:
        torch.manual_seed(0)
        model.load_state_dict(setup(seed=0)[0].state_dict())
        random.seed(0)
        np.random.seed(0)
    for step in range(start.step + 1, steps + 1):
        x = torch.randn(4, 8) + random.random() + float(np.random.rand())
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step == stop_at:
            os.kill(os.getpid(), signal.SIGTERM)
        val = {"loss": float(loss) * 2} if step % 4 == 0 else None
        if not ckpt.step(step, loss=loss.item(), extra={"seen": step}, val=val):
            return None
    ckpt.close()
    return model


def weights(model):
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("async_save", [True, False])
def test_a_preempted_loop_resumes_bit_identical(tmp_path, async_save):
    expected = weights(train(tmp_path / "a", history=str(tmp_path / "a.jsonl")))
    assert train(tmp_path / "b", stop_at=7, async_save=async_save, history=str(tmp_path / "b.jsonl")) is None
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back after the save
    got = weights(train(tmp_path / "b", async_save=async_save, history=str(tmp_path / "b.jsonl")))
    assert all(torch.equal(a, b) for a, b in zip(expected, got, strict=True))

    def rows(name):
        return [
            (r["step"], r["split"], r["metrics"]) for r in read_history_records((tmp_path / name).read_text())
        ]

    assert rows("b.jsonl") == rows("a.jsonl")


def test_sigterm_saves_then_exits_143(tmp_path):
    model, opt, _ = setup()
    ckpt = TorchCheckpointer(model, opt, directory=str(tmp_path), save=1000)
    ckpt.restore()
    os.kill(os.getpid(), signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped:
        ckpt.step(3, loss=1.0, extra={"batch": 3})
    assert stopped.value.code == 143
    assert ckpt.manager.checkpoints()[-1].step == 3


def test_the_best_checkpoint_by_val_loss_is_kept_with_its_metric(tmp_path):
    train(tmp_path, steps=12, retention=RetentionPolicy(keep_last=1, keep_best=1, metric="val_loss"))
    kept = TorchCheckpointer(*setup(), directory=str(tmp_path)).manager.checkpoints()
    scored = [c for c in kept if "val_loss" in c.metrics]
    assert kept[-1].step == 12 and scored
    # Saved at each validation (steps 4, 8, 12), the best of them survives with its val_loss.
    assert all(c.step % 4 == 0 for c in scored)


def plant(path: Path, data: bytes) -> None:
    """Replaces a committed file and fixes its COMMIT, as someone with write access could."""
    path.write_bytes(data)
    commit = path.parent.parent / COMMIT_MARKER
    meta = json.loads(commit.read_text())
    meta["sizes"][path.name] = len(data)
    commit.write_text(json.dumps(meta))


class Planted:
    def __reduce__(self):
        return (os.system, ("touch planted-ran",))


def test_a_crafted_newest_checkpoint_is_refused_and_the_previous_still_restores(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    train(tmp_path / "ck", steps=10)
    ckpt = TorchCheckpointer(*setup(), directory=str(tmp_path / "ck"))
    newest = Path(ckpt.manager.checkpoint(10).path(STATE_FILE))
    crafted = tmp_path / "crafted.pt"
    torch.save({"model": {}, "rng": Planted()}, crafted)
    plant(newest, crafted.read_bytes())
    with pytest.raises(CheckpointError) as refused:
        ckpt.restore()
    message = str(refused.value)
    assert str(newest) in message and "could run code" in message
    assert "To resume from step 5" in message
    assert not (tmp_path / "planted-ran").exists()
    start = TorchCheckpointer(*setup(), directory=str(tmp_path / "ck")).restore(step=5)
    assert start.step == 5 and start.extra == {"seen": 5}


def one_sharded_step(directory: Path):
    """Trains one step and saves it as a sharded (DCP) checkpoint with ``extra={"batch": 1}``."""
    model, opt, sched = setup()
    ckpt = TorchCheckpointer(model, opt, sched, directory=str(directory), sharded=True, save=1)
    ckpt.restore()
    model(torch.randn(2, 8)).sum().backward()
    opt.step()
    ckpt.step(1, loss=1.0, extra={"batch": 1})
    ckpt.close()
    return model, ckpt


def test_a_crafted_sharded_metadata_is_refused_without_running_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_sharded_step(tmp_path / "ck")
    again = TorchCheckpointer(*setup(), directory=str(tmp_path / "ck"), sharded=True)
    assert again.restore().extra == {"batch": 1}  # the sharded round trip works
    found = again.manager.checkpoint(1)
    assert found.format == "torch-dcp" and ".metadata" in found.files
    plant(Path(found.path(".metadata")), pickle.dumps(Planted()))
    with pytest.raises(
        CheckpointError,
        match=r"\.metadata: not torch.distributed.checkpoint "
        "metadata that loads safely",
    ):
        TorchCheckpointer(*setup(), directory=str(tmp_path / "ck"), sharded=True).restore()
    assert not (tmp_path / "planted-ran").exists()


class _ByName(pickle.Pickler):
    """Pickles enum members by name, as Python 3.11.2 (Debian 12's python3) does."""

    def reducer_override(self, obj):
        if isinstance(obj, enum.Enum):
            return getattr, (type(obj), obj.name)
        return NotImplemented


def by_name(obj) -> bytes:
    out = io.BytesIO()
    _ByName(out, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return out.getvalue()


def test_a_sharded_checkpoint_written_by_python_3_11_2_restores(tmp_path):
    model, ckpt = one_sharded_step(tmp_path / "ck")
    metadata = Path(ckpt.manager.checkpoint(1).path(".metadata"))
    written = by_name(pickle.loads(metadata.read_bytes()))
    assert b"getattr" in written and b"TORCH_CONTIGUOUS_FORMAT" in written  # as 3.11.2 writes it
    plant(metadata, written)
    again, *_ = restored = setup(seed=1)
    assert TorchCheckpointer(*restored, directory=str(tmp_path / "ck"), sharded=True).restore().extra == {
        "batch": 1
    }
    for saved, loaded in zip(model.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(saved, loaded)


class _Getattr:
    def __init__(self, owner, name):
        self.owner, self.name = owner, name

    def __reduce__(self):
        return getattr, (self.owner, self.name)


@pytest.mark.parametrize(
    "owner, name",
    [
        (Path, "home"),
        (torch.Size, "__init__"),
        ("_MEM_FORMAT_ENCODING", "__class__"),
        ("_MEM_FORMAT_ENCODING", "_missing_"),
    ],
)
def test_getattr_in_sharded_metadata_reaches_enum_members_only(owner, name):
    from torch.distributed.checkpoint.metadata import _MEM_FORMAT_ENCODING

    from trainguard.runtime.torch_dcp import safe_metadata

    owner = _MEM_FORMAT_ENCODING if owner == "_MEM_FORMAT_ENCODING" else owner
    with pytest.raises(CheckpointError, match="not an enum member") as refused:
        safe_metadata(pickle.dumps({"x": _Getattr(owner, name)}), "ck/.metadata")
    assert "refused without running anything" in str(refused.value)


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("epoch=3-step=100.ckpt", "Lightning"),
        ("100/_CHECKPOINT_METADATA", "orbax"),
        ("model.safetensors", "safetensors"),
        ("dcp/.metadata", "DCP"),
    ],
)
def test_another_frameworks_checkpoint_in_the_directory_is_refused(tmp_path, name, what):
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_bytes(b"x")
    with pytest.raises(CheckpointError, match=f"holds .*{what}.*no trainguard checkpoint"):
        TorchCheckpointer(*setup(), directory=str(tmp_path)).restore()
    assert (tmp_path / name).exists()


def test_a_checkpoint_of_another_checkpointer_is_refused(tmp_path):
    train(tmp_path, steps=5)
    commit = next(tmp_path.glob("step-*/COMMIT"))
    meta = json.loads(commit.read_text())
    commit.write_text(json.dumps({**meta, "format": "orbax"}))
    with pytest.raises(CheckpointError, match="saved by another checkpointer \\(format 'orbax'\\)"):
        TorchCheckpointer(*setup(), directory=str(tmp_path)).restore()


def test_a_checkpoint_without_optimizer_state_needs_strict_false(tmp_path):
    model, _, _ = setup()
    ckpt = TorchCheckpointer(model, directory=str(tmp_path), save=1)
    ckpt.step(1, loss=1.0)
    ckpt.close()
    model, opt, _ = setup(seed=3)
    with pytest.raises(CheckpointError, match="holds no optimizer state.*strict=False"):
        TorchCheckpointer(model, opt, directory=str(tmp_path)).restore()
    assert TorchCheckpointer(model, opt, directory=str(tmp_path)).restore(strict=False).step == 1


def test_a_torn_save_alone_starts_afresh_with_a_note(tmp_path, capsys):
    torn = tmp_path / "step-000000040" / "a-00000000beef"
    torn.mkdir(parents=True)
    (torn / STATE_FILE).write_bytes(b"half a checkpoint")
    start = TorchCheckpointer(*setup(), directory=str(tmp_path)).restore()
    assert not start.resumed and start.step == 0
    assert "ignored 1 incomplete save(s)" in capsys.readouterr().err


def test_a_full_disk_says_so_and_keeps_the_previous_checkpoint(tmp_path):
    if not shutil.which("unshare"):
        pytest.skip("needs unshare (util-linux) to mount a small tmpfs without root")
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("user namespaces are not available here")
    disk = tmp_path / "disk"
    disk.mkdir()
    script = textwrap.dedent("""
        import sys, torch
        from trainguard.errors import CheckpointError
        from trainguard.runtime import RetentionPolicy, TorchCheckpointer
        model = torch.nn.Linear(300, 1000)            # ~1.2 MB of weights
        ckpt = TorchCheckpointer(model, directory=sys.argv[1], save=1, async_save=False,
                                 retention=RetentionPolicy(keep_last=1))
        ckpt.step(1)                                  # fits on the 2 MB disk
        try:
            ckpt.step(2)                              # needs a second copy: does not fit
        except CheckpointError as exc:
            print("ERROR", exc)
        print("LATEST", TorchCheckpointer(model, directory=sys.argv[1]).restore().step)
    """)
    result = subprocess.run(
        [
            "unshare",
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            'mount -t tmpfs -o size=2m tmpfs "$1" && exec "$2" -c "$3" "$1"',
            "sh",
            str(disk),
            sys.executable,
            script,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "ERROR checkpoint step 2: no space left on " + str(disk) in result.stdout, result.stderr
    assert "unexpected pos" not in result.stdout
    assert "LATEST 1" in result.stdout, result.stdout + result.stderr


def test_a_checkpoint_from_before_formats_were_recorded_still_restores(tmp_path):
    from trainguard.runtime.torch_state import serialize, snapshot

    model, opt, sched = setup()
    step = tmp_path / "step-000000007"
    step.mkdir()
    (step / STATE_FILE).write_bytes(serialize(snapshot(model, opt, sched, {"batch": 7})))
    (step / COMMIT_MARKER).write_text(json.dumps({"step": 7, "files": [STATE_FILE]}))
    start = TorchCheckpointer(*setup(seed=4), directory=str(tmp_path)).restore()
    assert (start.step, start.extra) == (7, {"batch": 7})
