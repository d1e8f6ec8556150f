"""Fallback alternatives and retry budgets: what a user types, what the job becomes."""

from __future__ import annotations

import pytest

from trainguard.errors import ConfigError, SpecError
from trainguard.launch.alternatives import Alternative, parse_fallbacks, shape_of
from trainguard.launch.attempts import DEFAULT_RETRIES, RetryBudget, attempt_class
from trainguard.launch.base import TrainResult
from trainguard.spec import JobSpec, parse_spec


def a100(**kw) -> JobSpec:
    args = dict(
        machine_type="a2-highgpu-1g",
        image_uri="us-central1-docker.pkg.dev/p/r/trainer:1",
        accelerator_type="NVIDIA_TESLA_A100",
        accelerator_count=1,
        base_output_dir="gs://bucket/run",
    )
    args.update(kw)
    return JobSpec.create("my-project", "us-central1", **args)


def test_a_region_fallback_changes_only_the_region():
    spec = a100(spot=True, replica_count=3)
    [alt] = parse_fallbacks(["region=us-east4"])
    moved = alt.apply(spec)
    assert shape_of(moved) == {**shape_of(spec), "region": "us-east4"}
    assert moved.base_output_dir == spec.base_output_dir  # the same checkpoints: it resumes
    assert moved.pools[0].image_uri == spec.pools[0].image_uri and moved.display_name == spec.display_name


def test_a_machine_that_bundles_its_gpus_brings_their_type_and_count_to_every_training_pool():
    spec = a100(replica_count=3)  # a chief and a pool of 2 workers of the same shape
    [alt] = parse_fallbacks("machine=a3-highgpu-2g,strategy=flex_start")
    moved = alt.apply(spec)
    assert [(p.machine_type, p.accelerator_type, p.accelerator_count) for p in moved.pools] == [
        ("a3-highgpu-2g", "NVIDIA_H100_80GB", 2)
    ] * 2
    assert moved.strategy == "FLEX_START"
    assert alt.label() == "machine=a3-highgpu-2g,strategy=FLEX_START"


def test_a_pool_of_another_shape_is_left_as_it_is():
    data = a100().to_dict()
    data["workerPoolSpecs"].append({})  # no workers
    data["workerPoolSpecs"].append(
        {
            "machineSpec": {"machineType": "n1-highmem-8"},
            "replicaCount": 2,
            "containerSpec": {"imageUri": "ps:1"},
        }
    )
    spec = parse_spec(data, project="my-project", region="us-central1")
    moved = Alternative(accelerator="NVIDIA_A100_80GB", machine="a2-ultragpu-1g").apply(spec)
    assert [p.machine_type for p in moved.pools] == ["a2-ultragpu-1g", "n1-highmem-8"]
    assert moved.pools[1].accelerator_type is None


def test_leaving_flex_start_drops_its_max_wait():
    data = a100().to_dict()
    data["scheduling"] = {"strategy": "FLEX_START", "maxWaitDuration": "3600s"}
    spec = parse_spec(data, project="my-project", region="us-central1")
    moved = Alternative(strategy="SPOT").apply(spec)
    assert moved.strategy == "SPOT" and "maxWaitDuration" not in moved.to_dict().get("scheduling", {})


def test_a_kfp_string_separates_alternatives_with_semicolons():
    got = parse_fallbacks("region=us-east4; region=europe-west4,strategy=FLEX_START;")
    assert [a.label() for a in got] == ["region=us-east4", "region=europe-west4,strategy=FLEX_START"]
    assert parse_fallbacks(None) == parse_fallbacks("") == parse_fallbacks([]) == ()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("regoin=us-east4", "unknown key 'regoin'; use region, machine, accelerator, count, strategy"),
        ("region=us-east4-a", "a zone like us-central1-a is not a region"),
        ("region", "'region' is not key=value"),
        ("count=0", "accelerators per replica is 1, 2, 4, 8"),
        ("strategy=cheap", "use one of STANDARD, SPOT, FLEX_START"),
        ("region=us-east4,region=us-west1", "region is given twice"),
        ("accelerator=h100!", "not an accelerator type such as NVIDIA_H100_80GB"),
        ("machine=A3 HIGH", "not a machine type such as a2-highgpu-1g"),
        (",", "names no change to the job"),
    ],
)
def test_a_bad_alternative_says_what_to_pass(text, needle):
    with pytest.raises(ConfigError) as info:
        parse_fallbacks([text])
    assert needle in str(info.value)


def test_an_alternative_that_makes_the_job_invalid_is_named_with_the_field():
    with pytest.raises(SpecError) as info:
        Alternative(accelerator="NVIDIA_TESLA_A1000").apply(a100())
    assert "--fallback accelerator=NVIDIA_TESLA_A1000" in str(info.value)
    assert "acceleratorType" in str(info.value)


def test_retry_budgets_parse_and_refuse_the_users_classes():
    assert RetryBudget.parse("").counts == DEFAULT_RETRIES == {"preemption": 3, "hang": 1}
    assert RetryBudget.parse(["preemption=3,capacity=2", "unknown=1"]).counts == {
        "preemption": 3,
        "capacity": 2,
        "unknown": 1,
    }
    assert RetryBudget.parse("none").counts == {}
    for text, needle in (
        ("container=1", "container is the job's own to fix"),
        ("non_finite=2", "non_finite is the job's own to fix"),
        ("preemtion=3", "preemtion: not a failure class"),
        ("preemption", "use CLASS=N items"),
        ("preemption=-1", "use CLASS=N items"),
        ("hang=1,hang=2", "hang is given twice"),
    ):
        with pytest.raises(ConfigError) as info:
            RetryBudget.parse(text)
        assert needle in str(info.value), text


def _failed(error: str, running_s: float) -> TrainResult:
    return TrainResult("FAILED", "j", "", "", "", "", error=error, running_s=running_s)


def test_a_stockout_after_a_spot_job_ran_is_a_reclaim_and_before_it_ran_a_stockout():
    spot, standard = a100(spot=True), a100()
    assert attempt_class(_failed("STOCKOUT", running_s=600), spot) == "preemption"
    assert attempt_class(_failed("STOCKOUT", running_s=0), spot) == "capacity"
    assert attempt_class(_failed("Resources are insufficient in region: us-central1", 0), spot) == "capacity"
    # A STANDARD job is never reclaimed: a stockout after it ran (a restart on another VM that
    # found none) is still capacity.
    assert attempt_class(_failed("STOCKOUT", running_s=600), standard) == "capacity"
