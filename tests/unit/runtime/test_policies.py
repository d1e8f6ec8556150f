"""The save and retention policies refuse, when made, what would silently do something else."""

from __future__ import annotations

import re

import pytest

from trainguard.choices import Mode
from trainguard.errors import ConfigError
from trainguard.runtime.checkpoint import Checkpoint
from trainguard.runtime.policies import RetentionPolicy, SavePolicy, save_policy


def scored(*values: float) -> list[Checkpoint]:
    return [Checkpoint(step, f"step-{step}", ("a",), {"acc": v}) for step, v in enumerate(values, 1)]


@pytest.mark.parametrize("mode", ["max", "MAX", " Max "])
def test_mode_max_in_any_case_keeps_the_highest_values(mode):
    policy = RetentionPolicy(keep_last=1, keep_best=2, metric="acc", mode=mode)
    assert policy.mode is Mode.MAX
    kept = {c.step for c in scored(0.9, 0.2, 0.8, 0.1)} - {
        c.step for c in policy.to_delete(scored(0.9, 0.2, 0.8, 0.1))
    }
    assert kept == {1, 3, 4}  # the two best and the newest


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"keep_last": -2}, "keep_last=-2): pass a whole number >= 1"),
        ({"keep_last": 0}, "keep_last=0): pass a whole number >= 1"),
        ({"keep_last": 2.5}, "keep_last=2.5"),
        ({"keep_best": -1}, "keep_best=-1): pass a whole number >= 0"),
        ({"keep_best": True}, "keep_best=True"),
        ({"metric": ""}, "metric=''): pass the name of a metric"),
        ({"mode": "maximum"}, "'maximum' is not one of: min, max"),
    ],
)
def test_a_retention_policy_out_of_range_says_what_to_pass(kwargs, says):
    with pytest.raises(ConfigError, match=re.escape(says)):
        RetentionPolicy(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({}, "SavePolicy() would never save: pass every_steps=N"),
        ({"every_steps": 0}, "every_steps=0): pass a whole number of steps >= 1"),
        ({"every_steps": True}, "every_steps=True"),
        ({"every_seconds": -5}, "every_seconds=-5): pass a number of seconds > 0"),
        ({"every_seconds": float("nan")}, "every_seconds=nan"),
    ],
)
def test_a_save_policy_that_would_never_save_is_refused(kwargs, says):
    with pytest.raises(ConfigError, match=re.escape(says)):
        SavePolicy(**kwargs)


def test_save_n_means_every_n_steps_and_none_the_documented_default():
    assert save_policy(None) == SavePolicy(every_steps=100)
    assert save_policy(7).due(14, 0.0, None, 0.0) and not save_policy(7).due(15, 0.0, None, 0.0)


def test_the_checkpointers_and_guards_check_their_options_when_made(tmp_path):
    from trainguard.runtime.checkpoint import CheckpointManager
    from trainguard.runtime.core import CheckpointCore
    from trainguard.runtime.guard_base import GuardOptions

    with pytest.raises(ConfigError, match="retention=3: pass a RetentionPolicy"):
        CheckpointManager(str(tmp_path), retention=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="deadline_s=0: pass a number of seconds > 0"):
        CheckpointCore(str(tmp_path), deadline_s=0)
    with pytest.raises(ConfigError, match="save='10'"):
        GuardOptions(save="10")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="history=3"):
        GuardOptions(history=3)  # type: ignore[arg-type]
