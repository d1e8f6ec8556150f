"""The checkpoint invariant under SIGKILL at random moments, on a local disk (gs:// is in
tests/integration/test_checkpoint_gcs.py): re-saves of the restored step, keep_last=1, sync and
async saves."""

from __future__ import annotations

import pytest

from tests.unit.runtime.kill_loop import kill_loop

CONFIGS = [
    pytest.param(dict(async_save=False, keep_last=1), id="sync-keep1"),
    pytest.param(dict(async_save=True, keep_last=1), id="async-keep1"),
    pytest.param(dict(async_save=True, keep_last=3), id="async-keep3"),
]


@pytest.mark.parametrize("config", CONFIGS)
def test_random_sigkills_never_lose_the_newest_complete_checkpoint(tmp_path, config):
    runs = kill_loop(str(tmp_path / "ck"), kills=5, seed=hash(str(config)) % 1000, size=1 << 20, **config)
    assert sum(1 for r in runs if r["done"]) >= 2, runs  # the kills landed among saves


@pytest.mark.long
@pytest.mark.parametrize("config", CONFIGS)
def test_many_random_sigkills_never_lose_the_newest_complete_checkpoint(tmp_path, config):
    kill_loop(str(tmp_path / "ck"), kills=20, seed=7, size=1 << 20, **config)
