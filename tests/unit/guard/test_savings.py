"""Accelerator-hours saved: accelerators × time left to the planned steps or to the timeout."""

from __future__ import annotations

import pytest

from trainguard.guard.savings import VERTEX_DEFAULT_TIMEOUT_S, JobCost, estimate
from trainguard.spec import JobSpec


def spec(**kw) -> JobSpec:
    args = dict(
        machine_type="a2-highgpu-4g",
        image_uri="img",
        accelerator_type="NVIDIA_TESLA_A100",
        accelerator_count=4,
        replica_count=2,
    )
    args.update(kw)
    return JobSpec.create("my-project", "us-central1", **args)


def test_the_cost_counts_every_accelerator_of_every_replica_and_the_timeout():
    cost = JobCost.from_spec(spec(timeout_s=10 * 3600))
    assert (cost.accelerators, cost.replicas, cost.timeout_s, cost.timeout_set) == (8, 2, 36000, True)
    default = JobCost.from_spec(spec())
    assert default.timeout_s == VERTEX_DEFAULT_TIMEOUT_S == 7 * 86400 and not default.timeout_set


def test_time_left_to_the_timeout():
    saved = estimate(JobCost(8, 2, 10 * 3600, True), elapsed_s=2 * 3600)
    assert saved.basis == "timeout"
    assert saved.hours_left == pytest.approx(8) and saved.accelerator_hours == pytest.approx(64)
    assert "64 accelerator-hours" in saved.sentence() and "timeout" in saved.sentence()


def test_planned_steps_give_the_time_left_at_the_pace_so_far():
    # 300 of 30 000 steps in 1 h: 99 h to go, but the timeout (10 h) comes first.
    capped = estimate(JobCost(8, 2, 10 * 3600, True), 3600, last_step=300, planned_steps=30000)
    assert capped.basis == "planned_steps" and capped.hours_left == pytest.approx(9)
    # 1 000 of 3 000 steps in 1 h: 2 h to go.
    saved = estimate(JobCost(8, 2, 10 * 3600, True), 3600, last_step=1000, planned_steps=3000)
    assert saved.hours_left == pytest.approx(2) and saved.accelerator_hours == pytest.approx(16)
    assert "left to step 3000" in saved.sentence()


def test_without_a_timeout_the_default_is_an_upper_bound_and_said_so():
    saved = estimate(JobCost(1, 1), elapsed_s=86400)
    assert saved.basis == "default_timeout" and saved.upper_bound
    assert saved.hours_left == pytest.approx(6 * 24)
    assert saved.sentence().startswith("up to 144 accelerator-hours")


def test_a_cpu_job_saves_machine_hours():
    saved = estimate(JobCost(0, 3, 7200, True), elapsed_s=3600)
    assert saved.accelerator_hours == 0 and saved.machine_hours == pytest.approx(3)
    assert "3 machine-hours" in saved.sentence()


def test_a_local_run_is_never_said_to_save_vertexs_seven_days():
    cost = JobCost.from_spec(
        spec(accelerator_type="", accelerator_count=0, machine_type="n1-standard-4"), local=True
    )
    unsized = estimate(cost, elapsed_s=7.0, last_step=40)
    assert unsized.basis == "unsized" and unsized.machine_hours == 0
    assert "168" not in unsized.sentence() and "not spent" in unsized.sentence()
    planned = estimate(cost, elapsed_s=10.0, last_step=50, planned_steps=300)
    assert planned.basis == "planned_steps" and planned.hours_left == pytest.approx(50 / 3600)
    assert "× 50 s left to step 300" in planned.sentence()


def test_a_long_planned_run_on_this_machine_is_not_capped_by_vertexs_timeout():
    cost = JobCost.from_spec(spec(), local=True)
    far = estimate(cost, elapsed_s=86400.0, last_step=1, planned_steps=100)
    assert far.hours_left == pytest.approx(99 * 24)
