"""How long a Vertex job may wait to start, by scheduling strategy, and what a timeout means."""

from __future__ import annotations

import pytest

from trainguard.errors import ConfigError
from trainguard.launch.queueing import (
    DEFAULT_MAX_QUEUED_S,
    FLEX_MARGIN_S,
    parse_max_queued,
    queue_limit,
)
from trainguard.spec import JobSpec, parse_spec


def spec(strategy: str | None = None, max_wait: str | None = None) -> JobSpec:
    scheduling: dict = {}
    if strategy:
        scheduling["strategy"] = strategy
    if max_wait is not None:
        scheduling["maxWaitDuration"] = max_wait
    data: dict = {
        "workerPoolSpecs": [
            {
                "machineSpec": {
                    "machineType": "a2-highgpu-1g",
                    "acceleratorType": "NVIDIA_TESLA_A100",
                    "acceleratorCount": 1,
                },
                "containerSpec": {"imageUri": "img:1"},
            }
        ]
    }
    if scheduling:
        data["scheduling"] = scheduling
    return parse_spec(data, project="my-project", region="us-central1")


@pytest.mark.parametrize("strategy", [None, "STANDARD", "SPOT"])
def test_standard_and_spot_jobs_wait_30_minutes_and_a_timeout_is_quota(strategy):
    limit = queue_limit(spec(strategy))
    assert limit.seconds == DEFAULT_MAX_QUEUED_S == 1800
    assert limit.failure_class == "quota"
    assert limit.exceeded(1800, "us-central1") == (
        "stayed QUEUED for 1800 s: likely accelerator quota in us-central1; run trainguard preflight"
    )


def test_flex_start_waits_its_default_24_hours_plus_the_margin():
    limit = queue_limit(spec("FLEX_START"))
    assert limit.seconds == 24 * 3600 + FLEX_MARGIN_S
    assert limit.failure_class == "capacity"
    assert limit.flex_wait_s == 24 * 3600
    assert "maxWaitDuration 24h + 15m margin" in limit.source
    message = limit.exceeded(limit.seconds, "us-central1")
    assert "Flex-start" in message and "capacity" in message and "not quota" in message
    assert "stayed QUEUED" not in message  # triage reads that sentence as quota


def test_flex_start_follows_its_own_max_wait_duration():
    limit = queue_limit(spec("FLEX_START", "7200s"))
    assert limit.seconds == 2 * 3600 + FLEX_MARGIN_S
    assert limit.flex_wait_s == 7200


def test_flex_start_with_max_wait_duration_zero_is_never_cancelled():
    limit = queue_limit(spec("FLEX_START", "0s"))
    assert limit.seconds is None
    assert "waits forever" in limit.source


@pytest.mark.parametrize(
    "strategy, cls", [("STANDARD", "quota"), ("SPOT", "quota"), ("FLEX_START", "capacity")]
)
def test_max_queued_overrides_the_limit_and_the_class_follows_the_strategy(strategy, cls):
    limit = queue_limit(spec(strategy), 45 * 60)
    assert limit.seconds == 2700
    assert limit.failure_class == cls
    assert "--max-queued limit of 45m" in limit.source
    assert queue_limit(spec(strategy), 0).seconds is None  # 0 waits forever


def test_a_negative_max_queued_is_bad_input():
    with pytest.raises(ConfigError, match="--max-queued"):
        queue_limit(spec(), -1)


def test_a_flex_wait_ran_out_only_after_max_wait_duration():
    limit = queue_limit(spec("FLEX_START", "1800s"))
    assert limit.flex_wait_ran_out(1800, slack_s=60)
    assert limit.flex_wait_ran_out(1750, slack_s=60)  # our clock starts after the create
    assert not limit.flex_wait_ran_out(600, slack_s=60)
    assert not queue_limit(spec("SPOT")).flex_wait_ran_out(10**6, slack_s=60)
    assert "Vertex ended the wait" in limit.ran_out(1800, "us-central1")


@pytest.mark.parametrize(
    "text, seconds",
    [("", None), ("  ", None), (None, None), ("45m", 2700), ("90", 90), ("2h", 7200), ("0", 0), (600, 600)],
)
def test_parse_max_queued(text, seconds):
    assert parse_max_queued(text) == seconds


def test_parse_max_queued_names_the_option():
    with pytest.raises(ConfigError, match="--max-queued: 'soon' is not a duration"):
        parse_max_queued("soon")
