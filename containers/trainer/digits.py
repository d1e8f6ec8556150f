"""scikit-learn's digits (1,797 8x8 images, 10 classes), split as every reference trainer splits them.

The arrays are exactly ``sklearn.datasets.load_digits(return_X_y=True)``'s, read from the CSV that
scikit-learn ships, without importing scikit-learn: ``import sklearn`` costs about a second of CPU
(it imports ``scipy.stats``), and a trainer pays it again at every restart after a preemption.
When the file is not where scikit-learn has kept it, ``load_digits`` reads it.

>>> x_train, y_train, x_val, y_val = load(train_fraction=0.8, seed=0)
>>> x_train.shape, x_val.shape, x_train.dtype.name, y_train.dtype.name
((1437, 64), (360, 64), 'float32', 'int64')
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

MAX_VAL = 360  # validation examples: the last ones after the shuffle, never training ones


def raw_digits() -> tuple[np.ndarray, np.ndarray]:
    """(pixels 0..16 as float64, labels as int): what ``load_digits(return_X_y=True)`` returns."""
    spec = importlib.util.find_spec("sklearn")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            data = np.loadtxt(path, delimiter=",")
            return data[:, :-1], data[:, -1].astype(int)
    from sklearn.datasets import load_digits

    return load_digits(return_X_y=True)


def load(
    train_fraction: float = 0.8, seed: int = 0, label_noise: float = 0.0, raw: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_val, y_val): float32 inputs (scaled to [0, 1] unless ``raw``), int64
    labels, shuffled by ``seed``; ``label_noise`` of the training labels replaced at random."""
    x, y = raw_digits()
    x = (x if raw else x / 16.0).astype(np.float32)
    order = np.random.RandomState(seed).permutation(len(x))
    x, y = x[order], y[order].astype(np.int64)
    n_train = max(10, int(len(x) * train_fraction))
    n_val = min(len(x) - n_train, MAX_VAL)
    y_train = y[:n_train].copy()
    if label_noise > 0:
        rs = np.random.RandomState(seed + 1)
        flip = rs.rand(n_train) < label_noise
        y_train[flip] = rs.randint(0, 10, flip.sum())
    return x[:n_train], y_train, x[len(x) - n_val :], y[len(x) - n_val :]
