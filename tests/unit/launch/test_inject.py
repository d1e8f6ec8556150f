"""--inject: the faults a local run can be given, checked before anything runs."""

from __future__ import annotations

import pytest

from trainguard.errors import ConfigError
from trainguard.launch.inject import Fault, InjectionPlan, parse_injections


def test_faults_parse_in_order():
    assert parse_injections("stockout@0, quota@1,hang@5s,reclaim@1.5m") == (
        Fault("stockout", attempt=0),
        Fault("quota", attempt=1),
        Fault("hang", after_s=5.0),
        Fault("reclaim", after_s=90.0),
    )
    assert parse_injections("") == parse_injections(None) == ()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("stockout", "use KIND@WHEN items"),
        ("outage@0", "use KIND@WHEN items"),
        ("stockout@first", "stockout takes the attempt it refuses"),
        ("hang@soon", "--inject hang: 'soon' is not a duration"),
        ("stockout@0,quota@0", "attempt 0 is given both stockout and quota"),
    ],
)
def test_a_bad_fault_says_what_to_pass(text, needle):
    with pytest.raises(ConfigError) as info:
        parse_injections(text)
    assert needle in str(info.value)


def test_refusals_hit_their_attempt_and_running_faults_the_next_attempts_that_run():
    plan = InjectionPlan(parse_injections("hang@5s,stockout@1,reclaim@2s"))
    launches = [plan.launch() for _ in range(4)]
    assert launches == [
        (None, Fault("hang", after_s=5.0)),
        (Fault("stockout", attempt=1), None),  # refused: it never runs, so no running fault
        (None, Fault("reclaim", after_s=2.0)),
        (None, None),
    ]
