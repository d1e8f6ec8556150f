"""The reference trainers' data (``containers/trainer/digits.py``): scikit-learn's digits, read
without importing scikit-learn, exactly as ``load_digits`` returns them."""

from __future__ import annotations

import doctest
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.requires import require

require("sklearn")
TRAINER_DIR = Path(__file__).resolve().parents[2] / "containers" / "trainer"


@pytest.fixture(scope="module")
def digits():
    spec = importlib.util.spec_from_file_location("digits", TRAINER_DIR / "digits.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_arrays_are_load_digits_own(digits):
    x, y = digits.raw_digits()
    from sklearn.datasets import load_digits  # here, not at collection: ~0.6 s in every worker

    want_x, want_y = load_digits(return_X_y=True)
    assert x.dtype == want_x.dtype and y.dtype == want_y.dtype
    np.testing.assert_array_equal(x, want_x)
    np.testing.assert_array_equal(y, want_y)


def test_reading_them_does_not_import_scikit_learn():
    code = (
        f"import sys; sys.path.insert(0, {str(TRAINER_DIR)!r}); import digits; digits.load(); "
        "print('sklearn' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_without_the_bundled_file_load_digits_reads_them(digits, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "sklearn" else real(name, *a)
    )
    x, _ = digits.raw_digits()
    assert x.shape == (1797, 64)


def test_validation_never_overlaps_training_and_noise_touches_training_labels_only(digits):
    x, y, x_val, y_val = digits.load(train_fraction=0.9, seed=3)
    assert len(x) + len(x_val) == 1797 and len(x_val) == 1797 - len(x)
    _, noisy, _, noisy_val = digits.load(train_fraction=0.9, seed=3, label_noise=0.5)
    assert (noisy != y).mean() > 0.3
    np.testing.assert_array_equal(noisy_val, y_val)
    raw, *_ = digits.load(seed=3, raw=True)
    assert raw.max() == 16.0 and x.max() == 1.0


def test_the_docstring_example_runs(digits):
    result = doctest.testmod(digits)
    assert result.attempted >= 2 and result.failed == 0


@pytest.mark.parametrize("dockerfile", ["Dockerfile", "Dockerfile.jax"])
def test_each_trainer_image_copies_the_data_module_beside_its_trainer(dockerfile):
    copies = dict(
        line.split()[1:3]
        for line in (TRAINER_DIR / dockerfile).read_text().splitlines()
        if line.startswith("COPY containers/trainer/")
    )
    trainers = [dst for src, dst in copies.items() if src.endswith("train.py")]
    assert len(trainers) == 1
    assert copies["containers/trainer/digits.py"] == str(Path(trainers[0]).with_name("digits.py"))
