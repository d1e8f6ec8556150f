"""A directory built once per test run, whichever xdist worker asks first.

The kill-and-resume proofs compare a resumed run with an uninterrupted one (the baseline); a
module-scoped fixture builds it once per worker, so when the scheduler spreads a module's tests
over three workers, three workers train the same baseline. ``built_once`` builds it once for the
whole run: the first worker to ask builds it under a lock in the run's shared temporary directory
(pytest-xdist's own recipe for session work done once); the others wait, then use it.

A build that fails leaves no ``.done`` mark: the next worker to ask builds it again and fails on
its own, with its own message.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

__all__ = ["built_once"]


def _shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.getbasetemp()
    # Under xdist each worker's basetemp is <run>/popen-gwN: the run's directory is the parent. A
    # run without xdist has no such parent to share (and must not reuse an older run's directory).
    return base.parent if base.name.startswith("popen-gw") else base


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """``<run>/once-<name>``, made by ``build(path)`` the first time any worker asks for it."""
    target = _shared_root(tmp_path_factory) / f"once-{name}"
    done = target / ".done"
    with FileLock(f"{target}.lock"):
        if not done.exists():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            build(target)
            done.touch()
    return target
