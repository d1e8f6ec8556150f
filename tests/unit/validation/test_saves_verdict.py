"""The verdict says what the run's checkpoint saves cost, the work a preemption would lose, and
whether a preemption save fits the notice, from the save records the real runtime writes."""

from __future__ import annotations

import json
import math

import pytest

from tests.unit.test_cli import cli, no_traceback
from trainguard.runtime.core import CheckpointCore
from trainguard.runtime.save_cost import FIXES, NOTICE_ENV
from trainguard.validation import validate
from trainguard.validation.jsonl_reader import parse_lines_arrow, parse_lines_json


def train(tmp_path, monkeypatch, notice: str | None, checkpoints: bool = True) -> str:
    """A short healthy run through the runtime, saving every 5 steps; its history's path."""
    if notice is None:
        monkeypatch.delenv(NOTICE_ENV, raising=False)
    else:
        monkeypatch.setenv(NOTICE_ENV, notice)
    history = tmp_path / "history.jsonl"
    core = CheckpointCore(str(tmp_path / "ckpt"), save=5, async_save=True, history=str(history))
    core.open_history(None)
    for step in range(1, 61):
        level = 2.0 * math.exp(-step / 20)
        core.log(step, "train", None, {"loss": level + 0.01 * (step % 3)})
        if step % 5 == 0:
            core.log(step, "val", None, {"loss": level + 0.05})
        if checkpoints and core.due(step):
            core.commit(step, {"weights": b"w" * 2_000_000, "opt": lambda: b"o" * 1_000_000})
    core.close()
    return str(history)


def test_a_save_that_cannot_fit_the_notice_is_a_warning_with_the_fixes_in_output_json_and_html(
    tmp_path, monkeypatch
):
    history = train(tmp_path, monkeypatch, "1e-9")  # no save is that fast
    report = tmp_path / "verdict.json"
    page = tmp_path / "report.html"
    proc = cli("validate", history, "--json", report, "--html", page)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the run itself was fine
    assert "PASSED with warnings (preemption)" in proc.stdout
    assert "| warn | `preemption` | 5–60 | a preemption save does not fit the notice" in proc.stdout
    assert "## Checkpoint saves" in proc.stdout
    assert "checkpoint saves: 12, 3.0 MB each" in proc.stdout
    assert "a preemption save does NOT fit the 1e-09 s notice" in proc.stdout
    verdict = json.loads(report.read_text())
    assert verdict["passed"] is True
    saves = verdict["checkpoint_saves"]
    assert saves["saves"] == 12 and saves["last_bytes"] == 3_000_000 and saves["fits"] is False
    assert saves["notice_s"] == 1e-9 and saves["median_seconds"] > 0 and saves["median_mb_s"] > 0
    assert saves["max_seconds"] >= saves["median_seconds"] and saves["interval_s"] >= 0
    (finding,) = [f for f in verdict["findings"] if f["failure_class"] == "preemption"]
    assert finding["severity"] == "warn" and all(fix in finding["remedy"] for fix in FIXES)
    metrics = verdict["summary_metrics"]
    assert metrics["preemption_save_fits"] == 0 and metrics["save_median_seconds"] == saves["median_seconds"]
    html = page.read_text()
    assert "<h2>Checkpoint saves</h2>" in html and "does NOT fit the 1e-09 s notice" in html


def test_a_save_inside_the_notice_is_said_to_fit_and_warns_nothing(tmp_path, monkeypatch):
    verdict = validate(train(tmp_path, monkeypatch, "1h"))
    assert verdict.headline.startswith("PASSED: ") and not verdict.warnings
    assert verdict.saves is not None and verdict.saves.fits is True and verdict.saves.notice_s == 3600
    assert "a preemption save fits the 3600 s notice" in verdict.saves.line()
    assert verdict.summary_metrics()["preemption_save_fits"] == 1


def test_without_a_notice_the_cost_is_said_and_the_fit_left_open(tmp_path, monkeypatch):
    verdict = validate(train(tmp_path, monkeypatch, None))
    assert verdict.saves is not None and verdict.saves.saves == 12 and verdict.saves.fits is None
    assert "no preemption notice known" in verdict.saves.line() and not verdict.warnings
    metrics = verdict.summary_metrics()
    assert "save_median_seconds" in metrics and "preemption_save_fits" not in metrics


def test_a_history_without_save_records_says_nothing_about_saves(tmp_path, monkeypatch):
    history = train(tmp_path, monkeypatch, "30", checkpoints=False)
    report = tmp_path / "verdict.json"
    proc = cli("validate", history, "--json", report)
    assert proc.returncode == 0 and "Checkpoint saves" not in proc.stdout
    verdict = json.loads(report.read_text())
    assert verdict["checkpoint_saves"] is None
    assert not [k for k in verdict["summary_metrics"] if "save" in k]


@pytest.mark.parametrize("parse", [parse_lines_arrow, parse_lines_json])
def test_both_parsers_keep_the_same_save_records(tmp_path, monkeypatch, parse):
    text = open(train(tmp_path, monkeypatch, "30")).read()  # noqa: SIM115
    expected = [r for r in map(json.loads, text.splitlines()) if r["split"] == "checkpoint"]
    batch = parse(text.encode())
    assert batch is not None and batch.saves == expected and len(expected) == 12
