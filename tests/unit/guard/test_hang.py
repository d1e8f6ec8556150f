"""Hang detection: when a RUNNING job's silent history is a hang, and when it is not."""

from __future__ import annotations

import pytest

from trainguard.errors import ConfigError
from trainguard.guard.hang import DEFAULT_FLOOR_S, HangDetector, HangPolicy


def grown(detector: HangDetector, times: list[float], points: int = 1) -> HangDetector:
    for t in times:
        detector.observe(t, points)
    return detector


def test_the_automatic_limit_is_k_times_the_median_interval_above_its_floor():
    d = grown(HangDetector(HangPolicy(k=10, floor_s=60)), [0, 20, 40, 60, 80, 100])  # a record every 20 s
    assert d.median_interval() == 20
    assert d.check(100 + 199) is None
    found = d.check(100 + 200)
    assert found is not None and found.limit_s == 200 and "10 × the median interval" in found.basis
    assert found.silent_s == 200 and found.records == 6


def test_a_fast_history_is_held_to_the_floor():
    d = grown(HangDetector(), [i * 0.5 for i in range(100)], points=10)  # 20 records a second
    assert d.median_interval() == pytest.approx(0.05)
    assert d.check(49.5 + DEFAULT_FLOOR_S - 1) is None
    found = d.check(49.5 + DEFAULT_FLOOR_S)
    assert found is not None and found.limit_s == DEFAULT_FLOOR_S and "floor" in found.basis


def test_one_long_pause_does_not_move_the_median():
    times = [0, 10, 20, 30, 40, 1040, 1050, 1060]  # a 1000 s checkpoint save among 10 s steps
    d = grown(HangDetector(HangPolicy(k=10, floor_s=0)), times)
    assert d.median_interval() == 10
    assert d.check(1060 + 150) is not None


def test_nothing_is_a_hang_before_the_first_record_or_with_too_few_intervals():
    assert HangDetector(HangPolicy(after_s=5)).check(1e9) is None  # no record yet: start-up
    d = grown(HangDetector(HangPolicy(k=1, floor_s=0)), [0, 1, 2])  # 2 intervals
    assert d.check(1e6) is None
    d.observe(3, 1)
    assert d.check(1e6) is not None


def test_a_fixed_limit_counts_from_the_first_record_and_zero_is_off():
    d = grown(HangDetector(HangPolicy.parse("90")), [0])
    assert d.check(89) is None and d.check(90).basis == "--hang-after"
    off = grown(HangDetector(HangPolicy.parse("0")), [0, 1, 2, 3])
    assert off.check(1e9) is None and off.policy.describe() == "hang detection off (--hang-after 0)"
    assert HangPolicy.parse("").after_s is None


def test_a_bad_hang_after_is_bad_input():
    with pytest.raises(ConfigError, match="'soon' is not a duration"):
        HangPolicy.parse("soon")
