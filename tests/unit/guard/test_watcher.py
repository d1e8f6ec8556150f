"""The in-flight guard on local files: when it stops a job, when it never does, how it fails open."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from trainguard.errors import ConfigError
from trainguard.guard import HistoryGuard, JobCost
from trainguard.guard import watcher as watcher_module
from trainguard.launch.base import RunningJob, Stop

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "histories"


def line(step, split="train", **metrics) -> bytes:
    return (
        json.dumps({"step": step, "split": split, "metrics": metrics}, allow_nan=True, separators=(",", ":"))
        + "\n"
    ).encode()


class Job:
    """A job whose history grows in ``tmp_path``; ``poll`` appends bytes, then polls the guard."""

    def __init__(self, tmp_path: Path, guard: HistoryGuard) -> None:
        self.base = tmp_path
        self.history = tmp_path / "history.jsonl"
        self.logs = tmp_path / "logs"
        self.guard = guard
        self.polls = 0
        self.now = [0.0]

    def running(self) -> RunningJob:
        return RunningJob(
            "local/test", "RUNNING", str(self.base), str(self.history), f"{self.logs}/", 60.0 * self.polls
        )

    def poll(self, data: bytes = b"") -> Stop | None:
        if data:
            with open(self.history, "ab") as handle:
                handle.write(data)
        self.polls += 1
        self.now[0] += 1.0
        return self.guard.poll(self.running())


def guard(mode="fail", **kw) -> HistoryGuard:
    out = io.StringIO()
    g = HistoryGuard(mode, cost=kw.pop("cost", JobCost(8, 2, 10 * 3600, True)), stream=out, **kw)
    g.out = out
    return g


def healthy_then_exploding(healthy: int, exploding: int) -> list[bytes]:
    """One record per step: a loss falling from 2.3 to ~0.5, then far above it, and staying."""
    lines = [line(5 * (i + 1), loss=2.3 * 0.97**i + 0.5) for i in range(healthy)]
    lines += [line(5 * (healthy + i + 1), loss=40.0 + (i % 3)) for i in range(exploding)]
    return lines


def chunks_cut_mid_line(lines: list[bytes], per_poll: int) -> list[bytes]:
    """Each poll's bytes end 17 bytes into the next line: a writer caught mid-line every time."""
    data = b"".join(lines)
    ends = [sum(map(len, lines[:i])) + 17 for i in range(per_poll, len(lines), per_poll)]
    ends.append(len(data))
    out, start = [], 0
    for end in ends:
        out.append(data[start:end])
        start = end
    return out


def test_a_diverging_history_is_stopped_within_two_polls_of_the_divergence(tmp_path):
    lines = healthy_then_exploding(healthy=30, exploding=30)
    chunks = chunks_cut_mid_line(lines, per_poll=3)
    first_bad_poll = 30 // 3 + 1  # the poll that sees the first exploded records
    g = guard()
    job = Job(tmp_path, g)
    stop = None
    for data in chunks:
        stop = job.poll(data)
        if stop is not None:
            break
    assert stop is not None and stop.failure_class == "divergence" and not stop.success
    assert first_bad_poll <= job.polls <= first_bad_poll + 1
    assert "rose from its best" in stop.evidence and "learning rate" in stop.remedy
    # 8 accelerators, 10 h timeout, 60 s a poll so far.
    assert stop.details["accelerator_hours_saved"] == pytest.approx(8 * (36000 - 60 * job.polls) / 3600)
    assert stop.details["savings_basis"] == "timeout"
    assert "accelerator-hours saved" in g.out.getvalue()
    assert job.poll() is stop  # asked again until the backend has stopped the job


def test_a_healthy_growing_history_is_never_stopped(tmp_path):
    data = (FIXTURES / "healthy" / "history.jsonl").read_bytes()
    g = guard()
    job = Job(tmp_path, g)
    for i in range(0, len(data), 211):  # pieces that cut lines anywhere
        assert job.poll(data[i : i + 211]) is None
    summary = g.finish(job.running())
    assert summary["stopped"] is None and not summary["stopped_guarding"]
    assert summary["points"] > 0 and summary["format"] == "jsonl"
    assert summary["judgements"] >= job.polls // 2
    assert "STOPPED GUARDING" not in g.out.getvalue()


def test_a_nan_in_the_line_being_appended_stops_the_job_once_the_line_is_whole(tmp_path):
    g = guard()
    job = Job(tmp_path, g)
    nan_line = line(40, loss=float("nan"))
    head = b"".join(line(5 * (i + 1), loss=2.0 - 0.05 * i) for i in range(7))
    assert job.poll(head + nan_line[:25]) is None  # half a line: normal, not garbage
    assert "STOPPED GUARDING" not in g.out.getvalue()
    stop = job.poll(nan_line[25:])
    assert stop is not None and stop.failure_class == "non_finite"
    assert "NaN at step 40" in stop.evidence


def test_nonfinite_mode_lets_a_divergence_run_and_stops_on_nan(tmp_path):
    g = guard("nonfinite")
    job = Job(tmp_path, g)
    for data in chunks_cut_mid_line(healthy_then_exploding(30, 30), 3):
        assert job.poll(data) is None
    stop = job.poll(line(400, loss=float("inf")))
    assert stop is not None and stop.failure_class == "non_finite"


def test_off_follows_nothing(tmp_path):
    g = guard("off")
    job = Job(tmp_path, g)
    assert job.poll(line(1, loss=float("nan"))) is None
    assert g.finish(job.running())["polls"] == 0 and g.out.getvalue() == ""


def test_a_confirmed_overfit_is_an_early_stop_that_succeeds(tmp_path):
    data = (FIXTURES / "overfit" / "history.jsonl").read_bytes()
    # A clock that only moves when told: on a loaded machine one slow judgement would otherwise
    # postpone the next ones past the polls where the overfit is confirmed.
    g = guard(clock=lambda: 0.0)
    job = Job(tmp_path, g)
    stop = None
    for i in range(0, len(data), 400):
        stop = job.poll(data[i : i + 400])
        if stop is not None:
            break
    assert stop is not None and stop.failure_class == "overfit" and stop.success
    assert stop.details["best_step"] == 81
    assert i + 400 < len(data)  # before the end of the run
    assert "early stop" in g.out.getvalue()


def test_garbage_makes_it_stop_guarding_loudly_and_never_stop_the_job(tmp_path):
    g = guard()
    job = Job(tmp_path, g)
    assert job.poll(line(1, loss=2.0) + line(2, loss=1.9)) is None
    assert job.poll(b"<html>502 Bad Gateway</html>\n") is None
    said = g.out.getvalue()
    assert said.count("STOPPED GUARDING") == 1 and "not JSON" in said and "line 3" in said
    assert g.disabled
    assert job.poll(line(3, loss=float("nan"))) is None  # no longer guarding: never a stop
    assert g.finish(job.running())["stopped_guarding"]


def test_an_internal_error_fails_open(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug in the guard")

    monkeypatch.setattr(watcher_module, "judge", broken)
    g = guard()
    job = Job(tmp_path, g)
    assert job.poll(line(1, loss=float("nan"))) is None
    assert "STOPPED GUARDING" in g.out.getvalue() and "ZeroDivisionError" in g.out.getvalue()


def test_a_job_that_writes_no_history_gets_one_line_and_no_stop(tmp_path):
    g = guard()
    job = Job(tmp_path, g)
    for _ in range(5):
        assert job.poll() is None
    g.finish(job.running())
    said = g.out.getvalue()
    assert said.count("the job wrote no history") == 1 and "nothing was guarded" in said


def test_a_history_that_stops_growing_is_not_an_error(tmp_path):
    g = guard()
    job = Job(tmp_path, g)
    job.poll(b"".join(line(5 * (i + 1), loss=2.0 - 0.1 * i) for i in range(10)))
    judged = g.judgements
    for _ in range(20):
        assert job.poll() is None
    assert g.judgements == judged and not g.disabled  # nothing new: nothing judged, no complaint


def test_storage_that_cannot_be_read_is_retried_then_given_up_loudly(tmp_path):
    g = guard(max_failed_reads=3)
    job = Job(tmp_path, g)
    job.history.mkdir()  # unreadable as a file
    for _ in range(3):
        assert job.poll() is None
    said = g.out.getvalue()
    assert said.count("trying again next poll") == 1 and said.count("STOPPED GUARDING") == 1


def test_a_rewritten_history_is_read_again_without_duplicates(tmp_path):
    g = guard()
    job = Job(tmp_path, g)
    job.poll(b"".join(line(s, loss=2.0 - 0.01 * s) for s in range(1, 21)))
    # Resumed from a checkpoint at step 10: records after 10 are dropped, then logged again.
    job.history.write_bytes(b"".join(line(s, loss=2.0 - 0.01 * s) for s in range(1, 11)))
    job.poll(b"".join(line(s, loss=1.9 - 0.01 * s) for s in range(11, 16)))
    series = g.history().series["train/loss"]
    assert list(series.steps) == list(range(1, 16))
    assert "was rewritten" in g.out.getvalue()


def test_the_planned_steps_a_history_declares_size_the_savings(tmp_path):
    g = guard()
    job = Job(tmp_path, g)
    plan = b'{"step": 0, "split": "plan", "planned_steps": 3000}\n'
    stop = job.poll(plan + b"".join(healthy_then_exploding(30, 6)))
    assert stop is not None and stop.details["savings_basis"] == "planned_steps"
    assert stop.details["planned_steps"] == 3000 and "left to step 3000" in stop.details["saved"]


def test_tensorboard_events_are_followed_when_there_is_no_jsonl(tmp_path):
    g = guard()
    job = Job(tmp_path, g)
    (event,) = (FIXTURES / "nan" / "tb_torch").glob("*tfevents*")
    data = event.read_bytes()
    job.logs.mkdir()
    stop = None
    for i in range(0, len(data), 500):
        with open(job.logs / event.name, "ab") as handle:
            handle.write(data[i : i + 500])
        stop = job.poll()
        if stop is not None:
            break
    assert stop is not None and stop.failure_class in ("non_finite", "divergence")
    assert g.kind == "tensorboard" and i + 500 < len(data)


def test_a_new_nan_is_judged_at_once_even_when_judging_is_rationed(tmp_path):
    g = guard(cpu_share=1e-6, free_judge_s=0.0)  # after one judgement, the next is far off
    job = Job(tmp_path, g)
    job.poll(line(1, loss=2.0) + line(2, loss=1.9))
    rationed = g.judgements
    for s in range(3, 10):
        assert job.poll(line(s, loss=2.0 - 0.05 * s)) is None
    assert g.judgements == rationed  # finite points wait for the budget
    stop = job.poll(line(10, loss=float("nan")))
    assert stop is not None and stop.failure_class == "non_finite"


def test_bad_options_are_bad_input_before_any_job_starts():
    with pytest.raises(ConfigError, match="--guard"):
        HistoryGuard("sometimes")
    with pytest.raises(ConfigError, match="threshold"):
        HistoryGuard("fail", thresholds={"no_such_threshold": 1})


def test_a_history_copied_from_a_finished_run_is_judged_like_validate_judges_it(tmp_path):
    shutil.copy(FIXTURES / "oscillate" / "history.jsonl", tmp_path / "history.jsonl")
    g = guard()
    stop = Job(tmp_path, g).poll()
    assert stop is not None and stop.failure_class == "instability"


def test_a_history_rewritten_while_its_first_line_was_half_written_is_not_garbage(tmp_path):
    g = guard()
    job = Job(tmp_path, g)
    job.poll(b'{"step": 1, "split": "train", "metr')  # half a line, then the run restarts
    job.history.write_bytes(b"")
    assert job.poll(line(1, loss=2.0) + line(2, loss=1.9)) is None
    assert not g.disabled and g.history().series["train/loss"].steps.tolist() == [1, 2]
