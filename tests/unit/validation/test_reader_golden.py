"""Every history fixture reads to the same points, and judges to the same verdict, as it did with
the hand-written JSONL parser and the csv-module readers that the pyarrow readers replaced.

``reader_golden.json`` holds, for each fixture input (each file, each directory of event files):

- ``history``: the fingerprint of what the *old* readers read (revision :data:`BASELINE_REV`, taken
  from git by the recorder): format, x axis, record count, reader notes and, for each series in
  order, its naming and a SHA-256 of its steps and values as float64 bytes;
- ``verdict``: the verdict on it (recorded with the rules of the tree, on a history whose
  fingerprint matched the old readers', so it is the verdict the old readers led to).

Same fingerprint means the rules see bit-identical input, so the verdicts cannot differ whatever
the rules become.

One note is left out of the comparison on both sides: the re-logged-step note ("N point(s) at a
step logged again ..."). Since the old readers it is made only where a repeat changed the value
(Lightning logs ``epoch`` at one step beside both its training and its validation metrics, which
the old note called a restarted run); ``test_jsonl.py`` pins what it says now.

Record again (after adding fixtures, or when a rule change moves a verdict):
``python tests/unit/validation/test_reader_golden.py --record``. It refuses to record a fixture
that the readers of this tree read differently from the old ones.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "histories"
GOLDEN = Path(__file__).with_name("reader_golden.json")
BASELINE_REV = "93bba95"  # the last commit with the hand-written readers


def fixture_inputs() -> list[str]:
    """Every readable input under the fixtures: each history file, each directory of event files
    (a TensorBoard log directory such as ``tb_keras/``, whose runs are its subdirectories)."""
    out = []
    for path in sorted(FIXTURES.rglob("*")):
        rel = path.relative_to(FIXTURES).as_posix()
        history_file = path.is_file() and (path.suffix in (".jsonl", ".csv") or "tfevents" in path.name)
        log_dir = path.is_dir() and path.name.startswith("tb") and any(path.rglob("*tfevents*"))
        if history_file or log_dir:
            out.append(rel)
    return out


_RELOGGED = re.compile(r"point\(s\) at a step logged again")


def comparable(fingerprint: dict) -> dict:
    """A fingerprint without the re-logged-step note (see the module docstring)."""
    if "notes" not in fingerprint:
        return fingerprint
    return {**fingerprint, "notes": [n for n in fingerprint["notes"] if not _RELOGGED.search(n)]}


def fingerprint(history) -> dict:
    series = []
    for name, s in history.series.items():
        digest = hashlib.sha256(s.steps.astype("<f8").tobytes() + s.values.astype("<f8").tobytes())
        series.append([name, s.split, s.metric, s.granularity, len(s), digest.hexdigest()])
    return {
        "format": history.format,
        "x_label": history.x_label,
        "records": history.records,
        "notes": list(history.notes),
        "series": series,
    }


def read(rel: str) -> dict:
    """The fingerprint of what the importable readers read, or the error they raised."""
    from trainguard.errors import TrainguardError
    from trainguard.validation import load_history

    try:
        return fingerprint(load_history(FIXTURES / rel))
    except TrainguardError as exc:
        return {"error": type(exc).__name__}


def verdict_summary(rel: str) -> dict | None:
    from trainguard.errors import TrainguardError
    from trainguard.validation import load_history, validate

    try:
        verdict = validate(load_history(FIXTURES / rel))
    except TrainguardError as exc:
        return {"error": type(exc).__name__}
    return {
        "passed": verdict.passed,
        "failure_class": verdict.failure_class,
        "findings": [
            [f.failure_class, f.severity, f.series, [float(x) for x in f.step_range]]
            for f in verdict.findings
        ],
        "train": (verdict.series.get("train") or {}).get("name"),
        "val": (verdict.series.get("val") or {}).get("name"),
    }


def _golden() -> dict:
    return json.loads(GOLDEN.read_text())


def test_every_fixture_is_recorded() -> None:
    missing = sorted(set(fixture_inputs()) - set(_golden()))
    assert not missing, f"record them (see the module docstring): {missing[:5]}"


@pytest.mark.parametrize("rel", fixture_inputs())
def test_same_points_and_verdict_as_the_old_readers(rel: str) -> None:
    expected = _golden().get(rel)
    if expected is None:
        pytest.fail(f"{rel} is not recorded (see the module docstring)")
    assert comparable(read(rel)) == comparable(expected["history"])
    assert verdict_summary(rel) == expected["verdict"]


# --- recording --------------------------------------------------------------------------------


def _baseline_fingerprints(rev: str) -> dict:
    """Runs :func:`read` on every fixture with the readers of ``rev``, in a child interpreter."""
    from tests.git_tree import trainguard_at  # not in the --fingerprints child, which has no tests/

    with tempfile.TemporaryDirectory(prefix="tg-golden-") as tmp:
        trainguard_at(rev, tmp)
        env = {**os.environ, "PYTHONPATH": tmp}
        out = subprocess.run(
            [sys.executable, __file__, "--fingerprints"],
            env=env,
            cwd=tmp,
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(out.stdout)


def _record(rev: str) -> int:
    old = _baseline_fingerprints(rev)
    record, differ = {}, []
    for rel in fixture_inputs():
        now = read(rel)
        if comparable(now) != comparable(old[rel]):
            differ.append(rel)
            continue
        record[rel] = {"history": old[rel], "verdict": verdict_summary(rel)}
    if differ:
        print(f"not recorded: these read differently from the readers of {rev}: {differ}")
        return 1
    GOLDEN.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(record)} inputs in {GOLDEN.name} (histories as {rev} read them)")
    return 0


if __name__ == "__main__":
    if "--fingerprints" in sys.argv:  # the child: PYTHONPATH gives the old readers
        import trainguard

        assert not Path(trainguard.__file__).resolve().is_relative_to(ROOT), trainguard.__file__
        print(json.dumps({rel: read(rel) for rel in fixture_inputs()}))
        sys.exit(0)
    sys.path.insert(0, str(ROOT))
    if "--record" in sys.argv:
        sys.exit(
            _record(sys.argv[sys.argv.index("--baseline") + 1] if "--baseline" in sys.argv else BASELINE_REV)
        )
    print(__doc__)
