"""The suite's own order (tests/schedule.py): each xdist worker's share starts with slow tests."""

from __future__ import annotations

import doctest
import random

import pytest

from tests import schedule
from tests.schedule import slow_at_the_heads


def worksteal_runs(items: list, workers: int) -> list[list]:
    """The contiguous runs pytest-xdist's worksteal scheduler sends the workers at the start."""
    runs, left, start = [], len(items), 0
    for k in range(workers):
        size = left // (workers - k)
        runs.append(items[start : start + size])
        start, left = start + size, left - size
    return runs


def test_the_module_example_holds():
    assert doctest.testmod(schedule).failed == 0


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("seed", range(20))
def test_every_run_starts_with_its_share_of_the_slow_tests_and_nothing_is_lost(workers, seed):
    rng = random.Random(seed)
    items = [(i, rng.random() < 0.1) for i in range(rng.randint(0, 300))]
    ordered = slow_at_the_heads(items, lambda item: item[1], workers)
    assert sorted(ordered) == sorted(items)  # a permutation: no test dropped or run twice
    slow_total = sum(slow for _, slow in items)
    for run in worksteal_runs(ordered, workers):
        heads = [slow for _, slow in run[: slow_total // workers]]
        assert all(heads)  # the run begins with at least its even share of slow tests
    fast = [i for i, slow in ordered if not slow]
    assert fast == sorted(fast)  # the others keep their order (a module's tests stay together)


def test_more_slow_tests_than_a_run_holds_are_all_kept():
    items = [(i, i != 3) for i in range(5)]
    ordered = slow_at_the_heads(items, lambda item: item[1], 4)
    assert sorted(ordered) == items


@pytest.mark.parametrize("workers", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", range(20))
def test_tests_that_import_a_framework_share_one_run_right_after_its_slow_tests(workers, seed):
    rng = random.Random(seed)
    # (index, slow, together): a framework test may be slow too; then it is dealt as a slow one.
    items = [(i, rng.random() < 0.1, rng.random() < 0.15) for i in range(rng.randint(0, 300))]
    ordered = slow_at_the_heads(items, lambda item: item[1], workers, together=lambda item: item[2])
    assert sorted(ordered) == sorted(items)
    runs = worksteal_runs(ordered, workers)
    grouped = [item for item in items if item[2] and not item[1]]
    slow_total = sum(1 for item in items if item[1])
    if len(grouped) + -(-slow_total // workers) > len(items) // workers:
        return  # more than one run holds: they cannot share one (the suite's ~40 of ~1,850 can)
    holding = [k for k, run in enumerate(runs) if any(item in grouped for item in run)]
    assert len(holding) <= 1  # one worker imports the frameworks
    if grouped:
        last = runs[holding[0]]
        slow_there = sum(1 for item in last if item[1])
        assert last[slow_there : slow_there + len(grouped)] == grouped  # before anything stealable


class Item:
    """What the scheduler reads of a collected test: its marks (as ``pytest.Item`` gives them)."""

    def __init__(self, name: str, *marks: str) -> None:
        self.name, self.marks = name, set(marks)

    def get_closest_marker(self, name: str) -> object | None:
        return pytest.mark.__getattr__(name) if name in self.marks else None

    def __repr__(self) -> str:
        return self.name


def test_make_test_long_deals_its_long_tests_to_every_worker_first():
    # `make test-long` selects only `long` tests, few of them marked `slow`: in file order the
    # longest (whole modules of random SIGKILLs) sat in one or two runs and one worker ran them
    # end to end while the others idled.
    items = [Item(f"resume{i}", "long") for i in range(4)] + [Item(f"jax{i}", "long") for i in range(4)]
    items += [Item("fuzz", "long", "slow"), Item("quick")]
    ordered = slow_at_the_heads(items, schedule.is_slow, 4)
    runs = worksteal_runs(ordered, 4)
    assert [run[0].name for run in runs] == ["resume0", "resume1", "resume2", "resume3"]
    assert [run[1].name for run in runs] == ["jax0", "jax1", "jax2", "jax3"]
    assert ordered[-1].name == "quick" and not schedule.is_slow(ordered[-1])
