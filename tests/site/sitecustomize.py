"""Garbage collection in the Python processes the suite starts (the conftest puts this directory on
PYTHONPATH; Python imports ``sitecustomize`` at start-up).

The suite starts ~170 processes: trainers restarted after each preemption, ranks, CLI runs, KFP
tasks. Most of their CPU is importing torch, Lightning, transformers or JAX and, at exit, Python's
last collections walking everything those imports made. Two settings cut both, ~25% of the suite's
CPU in all:

- **Fewer collections** (``GC_THRESHOLDS``): with CPython's defaults (700, 10, 10) the collector
  runs hundreds of times during those imports, over objects that live until exit: ~0.5 s of the
  ~2.1 s a torch trainer spends importing, ~0.7 s of Lightning's ~4.4 s. This changes nothing a
  test checks: the collector only reclaims reference cycles, and it still runs.
- **No last collection in a process that imported torch or JAX**: at exit its objects are frozen
  (:func:`gc.freeze`) after every ``atexit`` handler has run, so the collections made while
  Python shuts down skip them: ~0.45 s of a torch trainer's exit, ~0.85 s of a Lightning one's.
  What this gives up: the finalizer of an object caught in a reference cycle does not run at
  exit, and so cannot report an error there ("Exception ignored in ..."). A test that checks such
  a process's output for tracebacks asks for Python's full exit with the ``full_exit`` fixture
  (which sets ``FULL_EXIT_ENV``); the CLI, which imports neither framework, always has it.

A ``sitecustomize`` found later on the path (a distribution's own) still runs, after this one.
"""

import atexit
import gc
import importlib.machinery
import importlib.util
import os
import sys

GC_THRESHOLDS = (20_000, 50, 100)  # measured on torch/Lightning imports: 5,000 to 50,000 are alike
FRAMEWORKS = ("torch", "jax")  # Lightning, transformers and Keras import one of them
FULL_EXIT_ENV = "TRAINGUARD_TESTS_FULL_EXIT"

gc.set_threshold(*GC_THRESHOLDS)


def _skip_the_last_collection() -> None:
    if any(name in sys.modules for name in FRAMEWORKS):
        gc.freeze()


def _run_the_next_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


if __name__ == "sitecustomize":  # not when tests/conftest.py imports it for its own settings
    if os.environ.get(FULL_EXIT_ENV) != "1":
        atexit.register(_skip_the_last_collection)  # first registered: it runs after all the others
    _run_the_next_sitecustomize()
