"""``trainguard validate`` reads what the framework guards write, with no flags: the recorded
histories of the Lightning, Keras and Hugging Face example trainers (see
``tests/fixtures/histories/frameworks/record.py``) get the verdicts their scenarios expect."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("typer")

from tests.fuzz.contract import run_cli  # noqa: E402
from trainguard.runtime.history import read_history_records  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "histories" / "frameworks"
SCENARIOS = json.loads((FIXTURES / "scenarios.json").read_text())


def test_every_recorded_scenario_is_listed_and_present():
    assert {p.name for p in FIXTURES.iterdir() if p.is_dir()} == set(SCENARIOS)
    for name in SCENARIOS:
        records = read_history_records((FIXTURES / name / "history.jsonl").read_text())
        assert {r["split"] for r in records} == {"train", "val"}
        steps = [r["step"] for r in records]
        assert steps == sorted(steps), f"{name}: steps go back"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_validate_reads_each_guards_history_with_no_flags(name, tmp_path):
    out = tmp_path / "verdict.json"
    outcome = run_cli("validate", FIXTURES / name / "history.jsonl", "--json", out)
    expect = SCENARIOS[name]["expect"]
    verdict = json.loads(out.read_text())
    summary = verdict["summary_metrics"]
    assert summary["train_points"] > 10 and summary["val_points"] >= 5
    if expect.startswith("passes"):
        assert outcome.exit_code == 0, outcome.output[-2000:]
        assert verdict["passed"] and not verdict["findings"], verdict["headline"]
        assert not verdict["not_judged"]
    else:
        assert outcome.exit_code == 1, outcome.output[-2000:]
        assert verdict["failure_class"] == expect.split(": ")[1]
