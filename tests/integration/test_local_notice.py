"""The local backend tells its workers the preemption notice it really gives (its grace period
before SIGKILL), so the reference trainer's word on whether a preemption save fits, the history's
save records and the verdict are all about that notice."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tests.requires import require
from tests.trainer_job import trainer_job
from trainguard.errors import ConfigError
from trainguard.launch.local import LocalBackend
from trainguard.runtime.history import is_save_record, read_history_records
from trainguard.runtime.save_cost import NOTICE_ENV
from trainguard.spec import JobSpec
from trainguard.validation import validate

require("torch")
ARGS = ["--epochs=1", "--checkpoint-every=10"]


def run(base: Path, backend: LocalBackend, env: dict[str, str] | None = None) -> tuple[str, list[dict]]:
    spec = trainer_job(ARGS, base_output_dir=str(base), env=env or {})
    result = backend.run(spec)
    assert result.succeeded, result.log_tail[-3000:]
    saves = [
        r for r in read_history_records((base / "history.jsonl").read_text(), saves=True) if is_save_record(r)
    ]
    return result.log_tail, saves


@pytest.mark.slow
def test_a_local_run_is_told_its_grace_period_as_the_notice_and_the_verdict_judges_against_it(
    tmp_path, monkeypatch
):
    monkeypatch.setenv(NOTICE_ENV, "999")  # the shell's value is not what a local preemption gives
    out = io.StringIO()
    log, saves = run(tmp_path, LocalBackend(grace_s=7, stream=out))
    assert "a preemption save fits the 7 s notice" in log
    assert saves and {r["save"]["notice_s"] for r in saves} == {7.0}
    verdict = validate(str(tmp_path / "history.jsonl"))
    assert verdict.saves is not None and verdict.saves.notice_s == 7 and verdict.saves.fits is True


@pytest.mark.slow
def test_the_pools_own_notice_wins_over_the_grace_period(tmp_path):
    log, saves = run(tmp_path, LocalBackend(grace_s=7), env={NOTICE_ENV: "0.000001"})
    assert "does not fit the notice" in log and "the notice is 1e-06 s" in log
    assert {r["save"]["notice_s"] for r in saves} == {1e-06}
    verdict = validate(str(tmp_path / "history.jsonl"))
    assert [f.failure_class for f in verdict.warnings] == ["preemption"]


@pytest.mark.parametrize(
    ("backend", "told"),
    [
        (LocalBackend(grace_s=2.5), "2.5"),
        (LocalBackend(grace_s=0), "none"),  # SIGKILL at once: there is no notice to size
        (LocalBackend(grace_s=5, hard_kill=True), "none"),  # a VM that vanishes gives none
    ],
)
def test_each_worker_is_told_the_notice_a_preemption_gives_here(tmp_path, monkeypatch, backend, told):
    monkeypatch.delenv(NOTICE_ENV, raising=False)
    worker = tmp_path / "worker.py"
    worker.write_text(f"import os\nprint('NOTICE', os.environ.get({NOTICE_ENV!r}, 'none'))\n")
    spec = JobSpec.create(
        "my-project",
        "us-central1",
        machine_type="n1-standard-4",
        image_uri="img",
        command=["python", str(worker)],
        base_output_dir=str(tmp_path / "b"),
        replica_count=2,
    )
    result = backend.run(spec)
    assert result.succeeded and result.log_tail.count(f"NOTICE {told}") == 2, result.log_tail


def test_a_grace_period_that_is_not_a_duration_is_refused_with_what_to_pass():
    with pytest.raises(ConfigError, match="seconds between SIGTERM and SIGKILL"):
        LocalBackend(grace_s=-1)
