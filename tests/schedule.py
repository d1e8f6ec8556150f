"""The order the suite runs in: slow tests at the head of every xdist worker's share.

``--dist worksteal`` cuts the collected tests into one contiguous run per worker (worker k gets
``left // (workers - k)`` of what is left) and lets an idle worker steal from the end of the
longest queue. Collected in file order, the ~40 tests that start trainers (a third of the suite's
time) sat in one or two runs, and one worker ended the suite alone on them. Dealt round-robin to
the heads of the runs, they start first on every worker; the short tests fill in behind them and
are what gets stolen at the end. Without xdist (one worker): slow tests first.

Tests that import Lightning, Keras or transformers into the worker itself (``together``) go to one
run, right after its slow tests, where they run before anything is stolen. Spread over the runs,
each of three or four workers imported those frameworks (~6 s of CPU each time) and built each
module's in-process baseline again.

>>> slow_at_the_heads(list("aBcdEfgHij"), str.isupper, 3)
['B', 'a', 'c', 'E', 'd', 'f', 'H', 'g', 'i', 'j']
>>> slow_at_the_heads(list("aBcdEfgHij"), str.isupper, 3, together=lambda c: c in "ci")
['B', 'a', 'd', 'E', 'f', 'g', 'H', 'c', 'i', 'j']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import islice
from typing import Protocol, TypeVar

__all__ = ["SLOW_MARKS", "is_slow", "slow_at_the_heads"]

T = TypeVar("T")

# Marks that say a test takes seconds: ``slow`` ones start trainers; every ``long`` one (``make
# test-long``) runs for tens of seconds to minutes. In file order the long ones sat in a few
# contiguous runs, and worksteal moves only tests that have not started.
SLOW_MARKS = ("slow", "long")


class _Marked(Protocol):
    def get_closest_marker(self, name: str) -> object | None: ...


def is_slow(item: _Marked) -> bool:
    """Whether a collected test carries one of ``SLOW_MARKS`` (on itself, its class or module)."""
    return any(item.get_closest_marker(mark) is not None for mark in SLOW_MARKS)


def slow_at_the_heads(
    items: Sequence[T],
    is_slow: Callable[[T], bool],
    workers: int,
    together: Callable[[T], bool] = lambda item: False,
) -> list[T]:
    """``items`` reordered so each of worksteal's runs starts with its share of the slow items,
    dealt round-robin, and the last run then holds every ``together`` item that is not slow; the
    others keep their order (a module's tests stay together, sharing its fixtures)."""
    workers = max(1, workers)
    slow = [item for item in items if is_slow(item)]
    grouped = [item for item in items if not is_slow(item) and together(item)]
    fill = iter([item for item in items if not is_slow(item) and not together(item)])
    sizes, left = [], len(items)
    for k in range(workers):
        sizes.append(left // (workers - k))
        left -= sizes[-1]
    runs: list[list[T]] = [[] for _ in range(workers)]
    # Dealt round-robin to the runs with room: when most tests are slow (``make test-long``), a
    # run never holds more than worksteal sends it, so every run still starts with its share.
    # The sizes add up to len(items) >= len(slow): some run always has room.
    k = 0
    for item in slow:
        while len(runs[k]) >= sizes[k]:
            k = (k + 1) % workers
        runs[k].append(item)
        k = (k + 1) % workers
    runs[-1].extend(grouped)
    for run, size in zip(runs, sizes, strict=True):
        run.extend(islice(fill, max(0, size - len(run))))
    runs[-1].extend(fill)  # only when the grouped tests overfill the last run
    return [item for run in runs for item in run]
