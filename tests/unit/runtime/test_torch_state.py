"""The PyTorch adapter: a restored state continues exactly like the original."""

from __future__ import annotations

import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trainguard.errors import CheckpointError  # noqa: E402
from trainguard.runtime.torch_state import (  # noqa: E402
    begin_snapshot,
    load_state,
    plain,
    restore,
    serialize,
    snapshot,
)


def setup(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.5), torch.nn.Linear(16, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    return model, opt, sched


def step(model, opt, sched):
    x = torch.randn(4, 8)  # consumes the torch RNG, as data augmentation would
    loss = model(x).pow(2).mean() + random.random() * 0 + float(np.random.rand()) * 0
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()


@pytest.mark.parametrize("overlapped", [False, True])
def test_a_restored_run_matches_the_uninterrupted_one_bit_for_bit(overlapped):
    model, opt, sched = setup()
    for _ in range(5):
        step(model, opt, sched)
    if overlapped:  # training goes on while the copy runs; step() waits for it
        pending = begin_snapshot(model, opt, sched, {"epoch": 2})
        for _ in range(5):
            step(model, opt, sched)
        blob = serialize(pending.result())
    else:
        blob = serialize(snapshot(model, opt, sched, {"epoch": 2}))
        for _ in range(5):
            step(model, opt, sched)
    expected = [p.clone() for p in model.parameters()]

    model2, opt2, sched2 = setup(seed=123)  # a fresh process with other RNG state
    extra = restore(blob, model2, opt2, sched2)
    for _ in range(5):
        step(model2, opt2, sched2)
    assert extra == {"epoch": 2}
    assert all(torch.equal(a, b) for a, b in zip(expected, model2.parameters(), strict=True))
    assert sched2.get_last_lr() == sched.get_last_lr()


def test_a_snapshot_does_not_change_when_training_goes_on():
    model, opt, sched = setup()
    step(model, opt, sched)
    state = snapshot(model, opt, sched)
    before = state["model"]["0.weight"].clone()
    step(model, opt, sched)
    assert torch.equal(state["model"]["0.weight"], before)


def test_the_next_optimizer_step_waits_for_the_background_copy(monkeypatch):
    import threading

    import trainguard.runtime.torch_state as ts

    model, opt, sched = setup()
    step(model, opt, sched)
    release = threading.Event()
    real = ts._detach

    def slow(*args):
        release.wait(5)
        return real(*args)

    monkeypatch.setattr(ts, "_detach", slow)
    expected = model[0].weight.detach().clone()
    pending = begin_snapshot(model, opt, sched)
    threading.Timer(0.3, release.set).start()
    step(model, opt, sched)  # blocks in the pre-hook until the copy is done
    assert release.is_set()
    assert torch.equal(pending.result()["model"]["0.weight"], expected)
    assert not torch.equal(model[0].weight.detach(), expected)


def test_the_stager_reuses_its_buffers_between_snapshots():
    from trainguard.runtime.torch_state import Stager

    model, opt, sched = setup()
    stager = Stager()
    first = stager.begin(model, opt).result()["model"]["0.weight"]
    step(model, opt, sched)
    second = stager.begin(model, opt).result()["model"]["0.weight"]
    assert second.data_ptr() == first.data_ptr()
    assert torch.equal(second, model[0].weight.detach())


def test_buffers_are_copied_at_once_since_forward_changes_them():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(8, 4))
    before = model[1].running_mean.clone()
    pending = begin_snapshot(model, opt)
    model(torch.randn(8, 4) + 5)  # a forward pass updates the running statistics
    assert torch.equal(pending.result()["model"]["1.running_mean"], before)


def test_a_saver_thread_waiting_for_the_copy_does_not_count_as_a_training_stall():
    import threading

    model, opt, sched = setup()
    step(model, opt, sched)
    pending = begin_snapshot(model, opt, sched)
    got = []
    saver = threading.Thread(target=lambda: got.append(pending.result()))
    saver.start()
    saver.join(5)
    step(model, opt, sched)  # the hook runs on this thread, finds the copy done
    assert got and pending.blocked_s == 0.0
    step(model, opt, sched)  # and was removed: later steps run as before


def test_other_step_hooks_and_several_snapshots_in_flight_are_fine():
    model, opt, sched = setup()
    calls = []
    opt.register_step_pre_hook(lambda *a: calls.append("theirs"))
    first = begin_snapshot(model, opt, sched)
    second = begin_snapshot(model, opt, sched)
    opt.register_step_pre_hook(lambda *a: calls.append("later"))
    for _ in range(3):
        step(model, opt, sched)
    assert calls == ["theirs", "later"] * 3
    assert torch.equal(first.result()["model"]["0.weight"], second.result()["model"]["0.weight"])


def test_rng_states_stay_on_the_cpu_whatever_map_location_says():
    # On a GPU, map_location="cuda" moved the saved RNG states too and set_rng_state raised
    # "RNG state must be a torch.ByteTensor". "meta" moves tensors the same way on a CPU machine.
    model, opt, sched = setup()
    step(model, opt, sched)
    blob = serialize(snapshot(model, opt, sched, {"epoch": 1}))
    expected = (torch.rand(3), random.random(), float(np.random.rand()))
    with torch.device("meta"):
        meta_model = torch.nn.Sequential(
            torch.nn.Linear(8, 16), torch.nn.Dropout(0.5), torch.nn.Linear(16, 2)
        )
    meta_opt = torch.optim.Adam(meta_model.parameters(), lr=0.01)
    torch.manual_seed(99)
    random.seed(99)
    np.random.seed(99)
    extra = restore(blob, meta_model, meta_opt, map_location="meta")
    assert extra == {"epoch": 1}
    got = (torch.rand(3), random.random(), float(np.random.rand()))
    assert torch.equal(got[0], expected[0]) and got[1:] == expected[1:]
    state = load_state(blob, map_location="meta")
    assert state["model"]["0.weight"].device.type == "meta"
    assert state["rng"]["torch"].device.type == "cpu"


class Planted:
    """What an attacker pickles into state.pt: code that runs on unpickling."""

    def __reduce__(self):
        import os

        return (os.system, ("touch planted-ran",))


def test_a_crafted_state_file_is_refused_without_running_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    crafted = tmp_path / "state.pt"
    torch.save({"model": {}, "rng": Planted()}, crafted)
    model, opt, sched = setup()
    with pytest.raises(
        CheckpointError, match=f"{crafted}: not a checkpoint this runtime loads safely.*could run code"
    ):
        restore(str(crafted), model, opt, sched)
    assert not (tmp_path / "planted-ran").exists()


def test_garbage_and_foreign_files_get_one_clear_error(tmp_path):
    model, opt, sched = setup()
    (tmp_path / "junk.pt").write_bytes(b"\x00garbage" * 100)
    with pytest.raises(CheckpointError, match="junk.pt: not a checkpoint"):
        restore(str(tmp_path / "junk.pt"), model, opt, sched)
    torch.save(model.state_dict(), tmp_path / "weights.pt")  # a plain state dict, not ours
    with pytest.raises(CheckpointError, match="not a trainguard PyTorch checkpoint"):
        restore(str(tmp_path / "weights.pt"), model, opt, sched)


def test_only_plain_values_go_into_a_checkpoint():
    assert plain({"epoch": np.int64(3), "loss": np.float32(0.5), "ids": np.arange(3)})["epoch"] == 3
    with pytest.raises(CheckpointError, match=r"extra\['fn'\] holds a builtins.function"):
        plain({"fn": lambda: 1})
