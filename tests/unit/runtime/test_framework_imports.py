"""Who imports what: a PyTorch image needs neither Keras nor transformers, and the base runtime
needs no framework at all; each guard's framework is pinned in its own extra."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FRAMEWORKS = (
    "lightning",
    "pytorch_lightning",
    "keras",
    "transformers",
    "accelerate",
    "torch",
    "jax",
    "numpy",
)


def imported_after(code: str, env: dict | None = None) -> list[str]:
    probe = (
        f"{code}\nimport json, sys\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(FRAMEWORKS)!r})))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_runtime_and_the_guards_shared_core_import_no_framework():
    assert imported_after("import trainguard.runtime, trainguard.runtime.guard_base") == []


# Lightning itself imports transformers when it is installed; the guard adds nothing to that.
@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "absent"),
    [
        ("trainguard.runtime.lightning", {"keras", "jax"}),
        ("trainguard.runtime.keras", {"lightning", "pytorch_lightning", "transformers", "torch"}),
        ("trainguard.runtime.hf", {"lightning", "pytorch_lightning", "keras", "jax"}),
    ],
)
def test_each_guard_imports_its_own_framework_only(module, absent):
    framework = {"lightning": "lightning", "keras": "keras", "hf": "transformers"}[module[19:]]
    if importlib.util.find_spec(framework) is None:
        pytest.skip(f"{framework} is not installed")
    found = set(imported_after(f"import {module}", env={"KERAS_BACKEND": "jax"}))
    assert not found & absent, f"{module} imported {sorted(found & absent)}"


def test_the_framework_extras_pin_the_tested_versions():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert extras["dependencies"] == []
    optional = extras["optional-dependencies"]
    assert optional["lightning"] == ["lightning==2.6.*"]
    assert optional["keras"] == ["keras==3.*"]
    assert optional["hf"] == ["transformers==5.*", "accelerate>=1.1"]
    for dist, major in (("lightning", "2.6."), ("keras", "3."), ("transformers", "5.")):
        with contextlib.suppress(metadata.PackageNotFoundError):  # not installed: nothing to check
            assert metadata.version(dist).startswith(major)


def test_the_runtime_package_loads_a_module_only_when_one_of_its_names_is_used():
    """The CLI reads the environment contract's names (trainguard.runtime.env): that loads env.py,
    not the checkpoint machinery; every public name still resolves."""
    probe = (
        "import json, sys\n"
        "import trainguard.runtime.env\n"
        "first = sorted(m for m in sys.modules if m.startswith('trainguard.runtime'))\n"
        "import trainguard.runtime as rt\n"
        "light = [n for n in rt.__all__ if n not in ('TorchCheckpointer', 'JaxCheckpointer')]\n"
        "print(json.dumps([first, light, [getattr(rt, n).__name__ for n in light]]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, names, resolved = json.loads(proc.stdout)
    assert first == ["trainguard.runtime", "trainguard.runtime.env"]
    assert resolved == names and "CheckpointCore" in names
