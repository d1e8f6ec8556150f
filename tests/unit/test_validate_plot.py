"""``trainguard validate --plot`` to a path that cannot be written is bad input, like ``--json``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fuzz.contract import assert_contract, run_cli

HISTORY = Path(__file__).resolve().parents[1] / "fixtures" / "histories" / "healthy" / "keras_log.csv"


def _unwritable(tmp_path: Path) -> Path:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    return locked / "curves.png"


@pytest.mark.parametrize("where", ["directory", "unwritable", "under a file"])
def test_plot_to_a_path_that_cannot_be_written_exits_2_with_a_message(tmp_path, where):
    if where == "unwritable" and os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    target = {
        "directory": lambda: tmp_path,
        "unwritable": lambda: _unwritable(tmp_path),
        "under a file": lambda: (tmp_path / "f.txt", (tmp_path / "f.txt").write_text("x"))[0] / "curves.png",
    }[where]()

    outcome = run_cli("validate", HISTORY, "--plot", target)

    assert_contract(outcome, max_seconds=60)
    assert outcome.exit_code == 2
    assert "cannot write" in outcome.stderr and str(target) in outcome.stderr


def test_plot_to_a_good_path_writes_a_png(tmp_path):
    target = tmp_path / "out" / "curves.png"

    outcome = run_cli("validate", HISTORY, "--plot", target)

    assert outcome.exit_code == 0, outcome.output
    assert target.read_bytes().startswith(b"\x89PNG")


def test_values_near_the_float_limit_plot_without_numpy_warnings(tmp_path):
    # A loss of 1e308 once printed matplotlib's "RuntimeWarning: overflow encountered in
    # multiply" (with its source path) under the verdict.
    import json
    import warnings

    from trainguard.validation import plot_png, validate

    path = tmp_path / "h.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {"step": s, "split": "train" if s % 2 else "val", "metrics": {"loss": 1e308 * (s % 3)}}
            )
            + "\n"
            for s in range(1, 100)
        )
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        png = plot_png(validate(path))
    assert png.startswith(b"\x89PNG")
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], caught[0].message
