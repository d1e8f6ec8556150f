"""A history with a thousand series or values at the edge of the float range still gets a report a
person reads: bounded, and no numpy warnings on the way."""

from __future__ import annotations

import json
import warnings

from tests.fuzz.contract import MAX_OUTPUT, assert_contract, run_cli


def test_a_thousand_series_and_huge_values_keep_the_report_bounded(tmp_path):
    path = tmp_path / "history.jsonl"
    with path.open("w") as handle:
        for step in range(1, 40):
            metrics = {f"m{i}": 1.0 / step + i for i in range(1200)}
            metrics["loss"] = 1e307 * step  # overflows in sums: read as far worse, not a warning
            handle.write(json.dumps({"step": step, "split": "train", "metrics": metrics}) + "\n")
            handle.write(json.dumps({"step": step, "split": "val", "metrics": {"loss": 1e300}}) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        outcome = run_cli("validate", path)
    assert_contract(outcome)
    assert len(outcome.output) < MAX_OUTPUT // 2
    assert "more series" in outcome.output
