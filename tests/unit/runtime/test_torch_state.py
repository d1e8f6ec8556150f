"""The PyTorch adapter: a restored state continues exactly like the original."""

from __future__ import annotations

import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trainguard.runtime.torch_state import begin_snapshot, restore, serialize, snapshot  # noqa: E402


def setup(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.5),
                                torch.nn.Linear(16, 2))
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
