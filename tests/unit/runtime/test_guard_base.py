"""What the framework guards share: RNG states as plain data, metric splits, options."""

from __future__ import annotations

import io
import json
import random

import pytest

from trainguard.errors import ConfigError
from trainguard.runtime.checkpoint import SavePolicy, safe_relative_name
from trainguard.runtime.guard_base import (
    rng_state,
    save_policy,
    set_rng_state,
    split_metric,
)


def draws() -> tuple:
    import numpy as np

    out = (random.random(), float(np.random.rand()))
    torch = pytest.importorskip("torch")
    return (*out, float(torch.rand(1)))


def test_rng_states_survive_json_and_a_safe_torch_load_and_replay_the_same_draws():
    torch = pytest.importorskip("torch")
    state = rng_state()
    expected = draws()
    buffer = io.BytesIO()
    torch.save({"rng": state}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)["rng"]
    draws()  # move every generator on
    set_rng_state(json.loads(json.dumps(loaded)))
    assert draws() == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("val_loss", ("val", "loss")),
        ("val/acc", ("val", "acc")),
        ("eval_loss", ("val", "loss")),
        ("validation_loss", ("val", "loss")),
        ("train_loss", ("train", "loss")),
        ("train/loss_step", ("train", "loss_step")),
        ("loss", ("train", "loss")),
        ("learning_rate", ("train", "learning_rate")),
        ("test_acc", ("test", "acc")),
    ],
)
def test_metric_names_are_split_by_their_prefix(name, expected):
    assert split_metric(name) == expected


def test_save_accepts_a_step_count_or_a_policy_and_refuses_the_rest():
    assert save_policy(None) == SavePolicy(every_steps=100)
    assert save_policy(25) == SavePolicy(every_steps=25)
    assert save_policy(SavePolicy(every_seconds=60)) == SavePolicy(every_seconds=60)
    for bad in (0, -3, True, "10", 2.5):
        with pytest.raises(ConfigError, match="save="):
            save_policy(bad)


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("model.safetensors", True),
        ("shard/part-0.bin", True),
        ("../x", False),
        ("/etc/x", False),
        ("a//b", False),
        ("a/./b", False),
        ("", False),
        ("a b", False),
        (None, False),
    ],
)
def test_checkpoint_file_names_are_plain_relative_names(name, ok):
    assert safe_relative_name(name) is ok
