"""The Makefile's .venv follows the interpreter it is asked for (`make -n`: what make would run)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHICH = "import sys; print(sys.base_prefix, sys.version.split()[0])"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


@pytest.fixture
def checkout(tmp_path):
    """A directory with the Makefile, a pyproject.toml and an installed .venv made by this Python."""
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    made_by = subprocess.run([sys.executable, "-c", WHICH], capture_output=True, text=True, check=True)
    (venv / ".python").write_text(made_by.stdout)
    (venv / ".installed").touch()
    past = os.stat(venv / ".installed").st_mtime - 60
    os.utime(tmp_path / "pyproject.toml", (past, past))
    return tmp_path


def would_run(checkout: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "install", *args],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def other_python(checkout: Path) -> str:
    """An interpreter .venv was not made from: the same Python, seen as another one."""
    (checkout / ".venv" / ".python").write_text("/opt/another-python 3.11.0\n")
    return sys.executable


def test_the_interpreter_venv_was_made_from_keeps_it(checkout):
    assert "-m venv" not in would_run(checkout, f"PYTHON={sys.executable}")


def test_another_interpreter_given_makes_venv_again_from_it(checkout):
    python = other_python(checkout)
    assert f"{python} -m venv --clear .venv" in would_run(checkout, f"PYTHON={python}")


def test_without_python_given_an_existing_venv_is_kept(checkout):
    other_python(checkout)
    assert "-m venv" not in would_run(checkout)


def test_a_changed_pyproject_installs_into_the_existing_venv(checkout):
    stamp = checkout / ".venv" / ".installed"
    os.utime(checkout / "pyproject.toml", (stamp.stat().st_mtime + 60,) * 2)
    steps = would_run(checkout)
    assert "[ -x .venv/bin/python ] || python3 -m venv .venv" in steps
    assert "--clear" not in steps and "pip install" in steps
