"""Skipping a test module when a package is missing, without importing the package.

``pytest.importorskip("torch")`` at a module's top imports torch while the tests are collected: in
every xdist worker, whether or not it runs one of the module's tests (~1 s of CPU each for torch,
~0.6 s for scikit-learn). The trainers these modules start import it in their own processes.
"""

from __future__ import annotations

import importlib.util

import pytest


def require(*packages: str) -> None:
    """Skips the calling test module unless every one of ``packages`` is installed (the message
    says which is not, as importorskip's does)."""
    for package in packages:
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed", allow_module_level=True)
