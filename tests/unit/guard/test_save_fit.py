"""The guard reads the job's checkpoint saves from its history: the cost, the work a preemption
would lose, and a warning at the first save that does not fit the preemption notice."""

from __future__ import annotations

import json

from tests.unit.guard.test_watcher import Job, guard, line
from trainguard.save_fit import SaveFit, notice_for
from trainguard.spec import JobSpec, parse_spec


def save(step: int, t: float, seconds: float, size: int = 6_000_000_000, blocking: bool = False) -> bytes:
    record = {
        "step": step,
        "split": "checkpoint",
        "time": t,
        "save": {"bytes": size, "seconds": seconds, "blocking": blocking},
    }
    return (json.dumps(record) + "\n").encode()


def test_a_save_slower_than_the_notice_is_warned_at_the_first_save_naming_the_fixes(tmp_path):
    g = guard(preemption_notice_s=30.0)
    job = Job(tmp_path, g)
    assert job.poll(b"".join(line(s, loss=2.0 - 0.01 * s) for s in range(1, 20))) is None
    assert "preemption save" not in g.out.getvalue()
    assert job.poll(line(20, loss=1.8) + save(20, 1000.0, 31.5)) is None  # a save does not stop the job
    out = g.out.getvalue()
    assert (
        "WARNING: a preemption save does not fit the notice: a save takes 31.5 s, the notice is 30 s" in out
    )
    assert "shard the state across ranks" in out and "local SSD" in out
    job.poll(save(40, 1900.0, 33.0))
    assert g.out.getvalue().count("does not fit the notice") == 1  # said once
    summary = g.finish(job.running())
    saves = summary["checkpoint_saves"]
    assert saves["saves"] == 2 and saves["fits"] is False and saves["interval_s"] == 900.0
    assert (
        "does NOT fit the 30 s notice; a preemption loses the work since the last save (every 900 s)"
        in g.out.getvalue()
    )


def test_a_save_inside_the_notice_is_reported_as_fitting_and_not_warned(tmp_path):
    g = guard(preemption_notice_s=30.0)
    job = Job(tmp_path, g)
    job.poll(
        b"".join(line(s, loss=2.0 - 0.01 * s) for s in range(1, 20)) + save(19, 50.0, 2.0, 400_000_000, True)
    )
    g.finish(job.running())
    out = g.out.getvalue()
    assert "WARNING" not in out
    assert "checkpoint saves: 1, 400.0 MB each, 2.00 s (200.0 MB/s" in out
    assert "a preemption save fits the 30 s notice; a preemption loses the step in flight" in out


def test_without_a_known_notice_the_fit_is_unknown_and_said_so():
    fit = SaveFit.from_records([json.loads(save(5, 10.0, 40.0))], notice_s=None)
    assert fit.fits is None and fit.warning() == ""
    assert "no preemption notice known (set TRAINGUARD_PREEMPTION_NOTICE" in fit.line()


def test_the_notice_follows_the_strategy_or_the_jobs_own_setting():
    def spec(strategy: str | None, env: dict | None = None) -> JobSpec:
        container: dict = {"imageUri": "img"}
        if env:
            container["env"] = [{"name": k, "value": v} for k, v in env.items()]
        data: dict = {
            "workerPoolSpecs": [
                {
                    "machineSpec": {
                        "machineType": "g2-standard-8",
                        "acceleratorType": "NVIDIA_L4",
                        "acceleratorCount": 1,
                    },
                    "replicaCount": 1,
                    "containerSpec": container,
                }
            ]
        }
        if strategy:
            data["scheduling"] = {"strategy": strategy}
        return parse_spec(data, project="my-project", region="us-central1")

    assert notice_for(spec("SPOT")) == 30.0
    assert notice_for(spec("FLEX_START")) == 30.0
    assert notice_for(spec(None)) is None
    assert notice_for(spec(None, {"TRAINGUARD_PREEMPTION_NOTICE": "2m"})) == 120.0
