"""What tests/site/sitecustomize.py does to every Python process the suite starts, and what not."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.conftest import SITE
from tests.site.sitecustomize import FULL_EXIT_ENV, GC_THRESHOLDS

SHOW = "import builtins, gc; print(getattr(builtins, 'CHAINED', False), gc.get_threshold())"

# An object in a reference cycle whose finalizer fails: only a garbage collection at exit finds it.
FAILS_AT_EXIT = textwrap.dedent(
    """
    import sys, types
    if sys.argv[1] == "framework":
        sys.modules["torch"] = types.ModuleType("torch")  # what a trainer has imported
    class Cycle:
        def __del__(self):
            raise RuntimeError("a finalizer failed at exit")
    c = Cycle(); c.me = c; del c
    """
)


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done


def test_a_process_started_by_a_test_collects_garbage_less_often():
    assert _run("-c", SHOW).stdout.strip() == f"False {GC_THRESHOLDS}"


def test_a_sitecustomize_later_on_the_path_still_runs(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import builtins\nbuiltins.CHAINED = True\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SITE, str(tmp_path)])}
    assert _run("-c", SHOW, env=env).stdout.strip() == f"True {GC_THRESHOLDS}"


def test_without_the_suite_s_path_python_keeps_its_defaults():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    assert _run("-c", SHOW, env=env).stdout.strip() != f"False {GC_THRESHOLDS}"


def test_only_a_process_that_imported_a_framework_skips_the_last_collection():
    failed = "Exception ignored in"
    assert failed not in _run("-c", FAILS_AT_EXIT, "framework").stderr
    assert failed in _run("-c", FAILS_AT_EXIT, "cli").stderr  # the CLI's errors at exit still show


def test_full_exit_gives_a_framework_process_python_s_last_collection_back():
    env = {**os.environ, FULL_EXIT_ENV: "1"}
    assert "a finalizer failed at exit" in _run("-c", FAILS_AT_EXIT, "framework", env=env).stderr


def test_the_full_exit_fixture_reaches_the_processes_a_test_starts(full_exit):
    assert "a finalizer failed at exit" in _run("-c", FAILS_AT_EXIT, "framework").stderr
