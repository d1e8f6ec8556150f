"""Every history fixture reads to the same points, and judges to the same verdict, as it did with
the hand-written JSONL parser and the csv-module readers this round replaced.

``reader_golden.json`` was recorded with that code (commit before the pyarrow readers). A history
is fingerprinted whole: format, x axis, record count, reader notes, and for each series, in order,
its naming and a SHA-256 of its steps and values as float64 bytes. Same fingerprint means the
rules see bit-identical input, so every verdict is the same whatever the rules become; the
verdicts themselves are recorded too, as a readable check.

Regenerate (only when a fixture is added, or a rule change moves a verdict):
``python tests/unit/validation/test_reader_golden.py --record`` (fingerprints are kept unless
``--fingerprints`` is given too).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "histories"
GOLDEN = Path(__file__).with_name("reader_golden.json")


def fixture_inputs() -> list[str]:
    """Every readable input under the fixtures: each file, each TensorBoard directory."""
    out = []
    for path in sorted(FIXTURES.rglob("*")):
        rel = path.relative_to(FIXTURES).as_posix()
        tb_dir = path.is_dir() and path.name.startswith("tb_")
        history_file = path.is_file() and (path.suffix in (".jsonl", ".csv")
                                           or "tfevents" in path.name)
        if tb_dir or history_file:
            out.append(rel)
    return out


def fingerprint(history) -> dict:
    series = []
    for name, s in history.series.items():
        digest = hashlib.sha256(s.steps.astype("<f8").tobytes() + s.values.astype("<f8").tobytes())
        series.append([name, s.split, s.metric, s.granularity, len(s), digest.hexdigest()])
    return {"format": history.format, "x_label": history.x_label, "records": history.records,
            "notes": list(history.notes), "series": series}


def verdict_summary(verdict) -> dict:
    return {
        "passed": verdict.passed,
        "failure_class": verdict.failure_class,
        "findings": [[f.failure_class, f.severity, f.series, [float(x) for x in f.step_range]]
                     for f in verdict.findings],
        "train": (verdict.series.get("train") or {}).get("name"),
        "val": (verdict.series.get("val") or {}).get("name"),
    }


def observe(rel: str) -> dict:
    from trainguard.validation import load_history, validate

    history = load_history(FIXTURES / rel)
    return {"history": fingerprint(history), "verdict": verdict_summary(validate(history))}


def _golden() -> dict:
    return json.loads(GOLDEN.read_text())


def test_every_fixture_is_recorded() -> None:
    assert sorted(_golden()) == fixture_inputs(), "new fixture: record it (see the docstring)"


@pytest.mark.parametrize("rel", fixture_inputs())
def test_same_points_and_verdict_as_before(rel: str) -> None:
    expected = _golden()[rel]
    seen = observe(rel)
    assert seen["history"] == expected["history"]
    assert seen["verdict"] == expected["verdict"]


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    old = _golden() if GOLDEN.exists() else {}
    keep_fingerprints = "--fingerprints" not in sys.argv
    record = {}
    for rel in fixture_inputs():
        seen = observe(rel)
        if keep_fingerprints and rel in old:
            seen["history"] = old[rel]["history"]
        record[rel] = seen
    if "--record" in sys.argv:
        GOLDEN.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(record)} inputs in {GOLDEN}")
    else:
        print(json.dumps(record, indent=1, sort_keys=True))
