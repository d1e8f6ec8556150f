"""A hostile and a careless user at the command line: every flag, wrong values, secrets pasted in.

Each case is something a person typed (or a script passed) that once broke the contract of
tests/fuzz/contract.py: a credential echoed back, a message of 100 KB, a hang, a traceback, a
pipeline that ran before its bad flag was noticed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fuzz.contract import assert_contract, run_cli

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "a100-spot.yaml"
SECRET = "ya29.a0AfB_qaSECRETtoken"


def history(path: Path, steps: int = 60) -> Path:
    """A healthy JSONL history (train every step, val every 5)."""
    with path.open("w") as out:
        for s in range(1, steps + 1):
            out.write(json.dumps({"step": s, "split": "train", "metrics": {"loss": 2 / s ** 0.5}})
                      + "\n")
            if s % 5 == 0:
                out.write(json.dumps({"step": s, "split": "val",
                                      "metrics": {"loss": 2.2 / s ** 0.5, "accuracy": 0.5}}) + "\n")
    return path


@pytest.mark.parametrize("flags", [
    ("--val-metric", SECRET),
    ("--train-metric", SECRET),
    ("--gate", f"{SECRET}>=0.5"),
    ("--threshold", f"{SECRET}=1"),
    ("--fail-on", f"overfit,{SECRET}"),
    ("--format", SECRET),
    ("--mode", SECRET),
], ids=lambda f: f[0])
def test_a_secret_pasted_into_a_validate_flag_is_never_echoed(tmp_path, flags):
    outcome = run_cli("validate", history(tmp_path / "h.jsonl"), *flags)
    assert_contract(outcome, allowed=(2,))
    assert "qaSECRET" not in outcome.output and "[REDACTED]" in outcome.output


@pytest.mark.parametrize("flags", [("--guard", SECRET), ("--model", SECRET),
                                   ("--max-queued", SECRET), ("--preempt-after", SECRET)],
                         ids=lambda f: f[0])
def test_a_secret_pasted_into_a_train_flag_is_never_echoed(tmp_path, flags):
    outcome = run_cli("train", SPEC, "--output-dir", tmp_path / "out", *flags)
    assert_contract(outcome, allowed=(2,))
    assert "qaSECRET" not in outcome.output


def test_a_secret_pasted_as_the_pipeline_name_is_never_echoed():
    outcome = run_cli("run", SPEC, "--pipeline", SECRET)
    assert_contract(outcome, allowed=(2,))
    assert "qaSECRET" not in outcome.output


@pytest.mark.parametrize("flag", ["--train-metric", "--val-metric", "--gate", "--direction"])
def test_a_huge_flag_value_gets_a_short_answer(tmp_path, flag):
    value = "m" * 200_000 + (">=1" if flag == "--gate" else "=max" if flag == "--direction" else "")
    outcome = run_cli("validate", history(tmp_path / "h.jsonl"), flag, value)
    assert_contract(outcome, allowed=(0, 2))
    assert len(outcome.output) < 12_000
