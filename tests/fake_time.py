"""A clock that only moves when the code under test sleeps, and the train stage put on it.

Polling loops (the Vertex backend, the guard) take ``clock`` and ``sleep``; tests hand them this
clock so that hours of job time pass in milliseconds and every poll lands where the test says.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

__all__ = ["FakeTime", "train_stage_on"]


class FakeTime:
    """A clock that only moves when the backend sleeps; ``hook`` runs on every sleep."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.hook: Callable[[], None] | None = None

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds
        if self.hook is not None:
            self.hook()


def train_stage_on(fake: FakeTime, monkeypatch: pytest.MonkeyPatch, vertex_server=None) -> FakeTime:
    """Every Vertex backend the train stage makes runs on ``fake`` (and the test server's clock
    too, when given)."""
    from trainguard import stages

    real = stages._backend
    monkeypatch.setattr(
        stages,
        "_backend",
        lambda *a, **kw: dataclasses.replace(real(*a, **kw), clock=fake.clock, sleep=fake.sleep),
    )
    if vertex_server is not None:
        vertex_server.clock = fake.clock
    return fake
