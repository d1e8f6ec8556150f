"""The examples in trainguard's docstrings run, and say what they show.

Collected without importing anything: the modules whose source holds a ``>>>`` example are found
by reading the files, and each is imported only by its own test (``--doctest-modules`` would
import every module, Lightning's and Keras's guards included, into every xdist worker). A module
whose framework is not installed is skipped as its other tests are.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import re
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = re.compile(r"^\s*>>> ", re.MULTILINE)
# What a module's examples import besides the standard library and trainguard.
NEEDS = {
    "trainguard.runtime.torch_checkpointer": ("torch",),
    "trainguard.runtime.jax_checkpointer": ("jax", "orbax"),
}


def _modules() -> list[str]:
    found = []
    for path in sorted((ROOT / "trainguard").rglob("*.py")):
        if EXAMPLE.search(path.read_text(encoding="utf-8")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


MODULES = _modules()


def test_the_examples_are_found():
    assert {"trainguard.choices", "trainguard.runtime.core", "trainguard.runtime.policies.save"} <= set(
        MODULES
    )


@pytest.mark.parametrize(
    "name", [pytest.param(m, marks=pytest.mark.slow) if m in NEEDS else m for m in MODULES]
)  # slow: those import torch or JAX and save checkpoints
def test_the_docstring_examples_run(name, tmp_path, monkeypatch):
    for package in NEEDS.get(name, ()):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed")
    monkeypatch.chdir(tmp_path)  # an example that writes a relative path writes here
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # and tempfile.mkdtemp() too
    monkeypatch.delenv("AIP_CHECKPOINT_DIR", raising=False)
    monkeypatch.delenv("TRAINGUARD_HISTORY", raising=False)
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=True)
    assert result.attempted > 0 and result.failed == 0, (
        f"{name}: {result.failed} example(s) failed (see above)"
    )
