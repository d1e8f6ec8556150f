"""Backend names map to backends in one place; the launcher's own diagnosis; the watcher seam."""

from __future__ import annotations

import io

import pytest

from trainguard.choices import Backend as BackendName
from trainguard.errors import ConfigError
from trainguard.launch.backends import BACKEND_FACTORIES, LaunchOptions, make_backend
from trainguard.launch.base import Backend, RunningJob, Stop, TrainResult, diagnose_result
from trainguard.launch.local import LocalBackend
from trainguard.launch.vertex import VertexBackend
from trainguard.launch.watching import WatcherSeam, stop_error

JOB = RunningJob("local/x", "RUNNING", "/tmp/b", "/tmp/b/history.jsonl", "/tmp/b/logs/", 3.0)
TOKEN = "ya29.a0AfH6SMBsecretsecretsecret"


def test_every_backend_name_has_a_backend():
    assert set(BACKEND_FACTORIES) == set(BackendName)
    local = make_backend("local", LaunchOptions(output_dir="/tmp/o", preempt_after=(20.0,)))
    assert isinstance(local, LocalBackend) and list(local.preempt_after) == [20.0]
    vertex = make_backend(" Vertex ", LaunchOptions(gcp_resources_path="/tmp/g", max_queued_s=60))
    assert isinstance(vertex, VertexBackend)
    assert (vertex.gcp_resources_path, vertex.max_queued_s) == ("/tmp/g", 60)
    for backend in (local, vertex):  # both implement the protocol: run(spec, watcher=None)
        assert "watcher" in backend.run.__code__.co_varnames
        assert set(Backend.run.__code__.co_varnames[:3]) == {"self", "spec", "watcher"}


def test_an_unknown_backend_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="--backend 'gpu' is not one of: local, vertex"):
        make_backend("gpu")


def test_preemption_injection_is_refused_on_vertex():
    with pytest.raises(ConfigError, match="local runs only"):
        make_backend("vertex", LaunchOptions(preempt_after=(5.0,)))


def result(**kw) -> TrainResult:
    base = dict(
        state="CANCELLED",
        job_name="j",
        base_output_dir="b",
        model_dir="m",
        checkpoint_dir="c",
        history_path="h",
    )
    base.update(kw)
    return TrainResult(**base)


def test_diagnosis_uses_the_launchers_class_when_it_knows_one():
    d = diagnose_result(
        result(
            error="Flex-start (DWS) found no free accelerators in us-central1 within maxWaitDuration 24h …",
            failure_class="capacity",
        )
    )
    assert d.failure_class == "capacity"
    assert d.evidence.startswith("Flex-start (DWS) found no free accelerators")
    assert "maxWaitDuration" in d.remedy  # the capacity playbook's remedy
    assert "quota" in d.trap


def test_diagnosis_of_a_guard_stop_carries_its_evidence_and_remedy():
    stop = Stop("divergence", f"loss 1e9 at step 300 token={TOKEN}", "lower the learning rate")
    d = diagnose_result(result(error=stop_error(stop), failure_class="divergence", stopped=stop.to_dict()))
    assert d.failure_class == "divergence"
    assert d.remedy == "lower the learning rate"
    assert "step 300" in d.evidence and TOKEN not in d.evidence
    assert d.reason == "the in-flight guard stopped the job"


def test_diagnosis_without_a_known_class_reads_the_text():
    d = diagnose_result(
        result(
            state="FAILED",
            error="The replica workerpool0-0 exited with a non-zero status of 1.",
            log_tail="torch.OutOfMemoryError: CUDA out of memory.",
        )
    )
    assert d.failure_class == "device_oom"


def test_stop_error_says_the_guard_stopped_it_and_why_redacted():
    error = stop_error(
        Stop("non_finite", f"loss nan at step 12; Authorization: Bearer {TOKEN}", "clip gradients")
    )
    assert error.startswith("stopped by the trainguard guard [non_finite]: loss nan at step 12")
    assert TOKEN not in error
    assert stop_error(Stop("overfit", "val_loss up 5 evals", "early stop", success=True)).startswith(
        "ended early by the trainguard guard [overfit]"
    )
    assert len(stop_error(Stop("divergence", "x" * 100_000, "r"))) < 5_000


class Raises:
    def __init__(self) -> None:
        self.calls = 0

    def poll(self, job):
        self.calls += 1
        raise ValueError(f"cannot parse history line 7 (token={TOKEN})")


def test_a_watcher_that_raises_is_reported_once_and_never_called_again():
    lines: list[str] = []
    watcher = Raises()
    seam = WatcherSeam(watcher, lines.append)
    assert seam.active
    assert [seam.poll(JOB) for _ in range(5)] == [None] * 5
    assert watcher.calls == 1
    assert not seam.active
    (line,) = lines
    assert "stopped guarding" in line and "ValueError: cannot parse history line 7" in line
    assert TOKEN not in line and "unguarded" in line


def test_a_watcher_that_answers_nonsense_fails_open_too():
    class Odd:
        def poll(self, job):
            return "stop"

    lines: list[str] = []
    seam = WatcherSeam(Odd(), lines.append)
    assert seam.poll(JOB) is None and not seam.active
    assert "returned a str" in lines[0]


def test_no_watcher_is_never_active_and_a_stop_passes_through():
    assert not WatcherSeam(None, print).active
    stop = Stop("non_finite", "nan", "r")

    class Stops:
        def poll(self, job):
            assert job is JOB
            return stop

    assert WatcherSeam(Stops(), io.StringIO().write).poll(JOB) is stop
