"""In CI (every extra installed) a test skipped for a missing package fails instead (tests/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import with_repo_on_path

CASES = """
import pytest

def test_needs_a_package():
    pytest.importorskip("trainguard_no_such_package")

def test_skips_for_another_reason():
    pytest.skip("root writes anywhere")
"""


def run(tmp_path: Path, ci: bool, body: str = CASES) -> subprocess.CompletedProcess:
    (tmp_path / "test_cases.py").write_text(body)
    env = {k: v for k, v in with_repo_on_path().items() if k != "CI"} | ({"CI": "true"} if ci else {})
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:xdist",
            "-p",
            "tests.conftest",
            "-rA",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_skip_for_a_missing_package_fails_in_ci_and_other_skips_stay_skips(tmp_path):
    proc = run(tmp_path, ci=True)
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "1 failed, 1 skipped" in proc.stdout
    assert "CI installs every extra, so this test must run, not skip" in proc.stdout
    assert "trainguard_no_such_package" in proc.stdout


def test_outside_ci_both_are_skips(tmp_path):
    proc = run(tmp_path, ci=False)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "2 skipped" in proc.stdout


@pytest.mark.parametrize("ci", [True, False])
def test_a_module_skipped_whole_for_a_missing_package(tmp_path, ci):
    body = 'import pytest\npytest.importorskip("trainguard_no_such_package")\n\ndef test_x():\n    pass\n'
    proc = run(tmp_path, ci=ci, body=body)
    # 2: a collection error; 5: nothing ran (the one module was skipped)
    assert proc.returncode == (2 if ci else 5), proc.stdout[-2000:]
    assert ("must run, not skip" in proc.stdout) == ci
