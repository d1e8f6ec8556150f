"""Each save measured into the history, and the first save's word on the preemption notice."""

from __future__ import annotations

import json

import pytest

from trainguard.errors import ConfigError
from trainguard.runtime.core import CheckpointCore
from trainguard.runtime.history import read_history_records
from trainguard.runtime.save_cost import FIXES, NOTICE_ENV, notice_from_env


def run(tmp_path, saves: int = 3) -> list[dict]:
    history = tmp_path / "history.jsonl"
    core = CheckpointCore(str(tmp_path / "ckpt"), save=2, async_save=True, history=str(history))
    core.open_history(None)
    for step in range(1, 2 * saves + 1):
        core.log(step, "train", None, {"loss": 1.0 / step})
        if core.due(step):
            core.commit(step, {"weights": b"w" * 50_000, "opt": lambda: b"o" * 30_000})
    core.close()
    return [json.loads(line) for line in history.read_text().splitlines()]


def test_every_save_lands_in_the_history_with_its_bytes_seconds_and_speed(tmp_path, monkeypatch):
    monkeypatch.delenv(NOTICE_ENV, raising=False)
    records = run(tmp_path)
    saves = [r for r in records if r["split"] == "checkpoint"]
    assert [r["step"] for r in saves] == [2, 4, 6]
    for r in saves:
        assert r["save"]["bytes"] == 80_000 and r["save"]["seconds"] > 0 and r["save"]["mb_s"] > 0
        assert "metrics" not in r  # curve readers skip it
    # The documented reader gives the metric records only unless asked.
    text = (tmp_path / "history.jsonl").read_text()
    assert {r["split"] for r in read_history_records(text)} == {"train"}
    assert len(read_history_records(text, saves=True)) == len(records)


def test_a_save_slower_than_the_notice_is_said_at_the_first_save_with_the_fixes(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv(NOTICE_ENV, "1e-9")  # no save is that fast
    run(tmp_path)
    err = capsys.readouterr().err
    assert err.count("does not fit the notice") == 1  # the first save, once
    assert "WARNING: checkpoint step 2: saved 0.1 MB" in err
    assert all(fix in err for fix in FIXES)


def test_a_save_inside_the_notice_says_it_fits(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(NOTICE_ENV, "1h")
    run(tmp_path, saves=1)
    assert "a preemption save fits the 3600 s notice" in capsys.readouterr().err


def test_a_bad_notice_is_refused_with_what_to_pass():
    with pytest.raises(ConfigError, match="TRAINGUARD_PREEMPTION_NOTICE: 'soon' is not a duration"):
        notice_from_env({NOTICE_ENV: "soon"})
    with pytest.raises(ConfigError, match="seconds of notice"):
        notice_from_env({NOTICE_ENV: "0"})
    assert notice_from_env({NOTICE_ENV: "30s"}) == 30.0 and notice_from_env({}) is None
