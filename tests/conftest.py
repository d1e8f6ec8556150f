"""Settings for the whole suite (read by the xdist controller before it starts the workers, so
the workers and every process they start inherit them)."""

from __future__ import annotations

import atexit
import gc
import os
import re
import shutil
import signal
import tempfile

import pytest

import tests.site.sitecustomize
from tests.schedule import SLOW_MARKS, is_slow, slow_at_the_heads

# The xdist workers share two cores, and many tests start trainers of their own: one intra-op
# thread per process stops them spinning against each other (torchrun sets the same for its
# workers). Set before any test module imports torch.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Fewer garbage collections while the suite's processes import torch and friends, and none at the
# exit of those that did: ~25% of the suite's CPU (tests/site/sitecustomize.py says what this
# changes and what not). The workers and every process started with this environment load it at
# start-up; this process was already running, and the import sets its thresholds.
SITE = os.path.dirname(tests.site.sitecustomize.__file__)
if SITE not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (SITE, os.environ.get("PYTHONPATH")) if p)


@pytest.fixture
def full_exit(monkeypatch):
    """Processes started by this test exit as Python's do everywhere else, with the last garbage
    collection, so a finalizer's error at exit shows in their output: for tests that check a
    trainer's output for tracebacks."""
    monkeypatch.setenv(tests.site.sitecustomize.FULL_EXIT_ENV, "1")


@pytest.fixture(autouse=True)
def default_sigterm():
    """Each test starts with the default SIGTERM action and leaves it so: checkpointers and guards
    that a test only restores from, or that a test's crash leaves open, keep their handler
    installed, and a later test in the same worker would start with it."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


# One XLA compilation cache for the suite: the JAX tests restart processes (that is what they
# prove), and every start compiled the same programs again (~2 s of CPU each). The cache is
# JAX's own (keyed by program, flags and versions); its programs are the ones a fresh compile
# makes, and the byte-identical resume tests check exactly that.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _xla_cache = tempfile.mkdtemp(prefix="trainguard-tests-xla-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _xla_cache
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # our programs compile fast
    atexit.register(shutil.rmtree, _xla_cache, True)


@pytest.hookimpl(trylast=True)  # after `-m` and `-k` have deselected: the runs are cut from what is left
def pytest_collection_modifyitems(config, items):
    """Tests marked ``slow`` or ``long`` first, spread over the xdist workers' shares (in file order
    the long ones sat in a few contiguous runs, and worksteal moves only tests not yet started);
    those marked ``framework`` on one worker."""
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    items[:] = slow_at_the_heads(
        items,
        is_slow,
        workers,
        together=lambda item: item.get_closest_marker("framework") is not None,
    )


def pytest_collection_finish(session):
    """What collection imported (torch, JAX, kfp, the test modules) lives until the worker exits:
    frozen, it is left out of every later collection. Each full collection in a worker had walked
    ~850,000 objects, ~0.45 s, and the suite makes a dozen (accelerate, under transformers'
    Trainer, asks for them); the workers' collections took 8.6 s of CPU in all, now 4.0 s."""
    gc.freeze()


UNMARKED_SLOW_S = 5.0  # a test this long without a mark in SLOW_MARKS is named at the end of the run
_unmarked_slow: list[tuple[float, str]] = []


def pytest_runtest_logreport(report):
    if (
        report.when == "call"
        and report.duration > UNMARKED_SLOW_S
        and not any(mark in report.keywords for mark in SLOW_MARKS)
    ):
        _unmarked_slow.append((report.duration, report.nodeid))


def pytest_terminal_summary(terminalreporter):
    """Names the long tests the scheduler does not know are long (tests/schedule.py)."""
    if _unmarked_slow:
        terminalreporter.write_sep("-", f"over {UNMARKED_SLOW_S:.0f} s without @pytest.mark.slow or long")
        for seconds, nodeid in sorted(_unmarked_slow, reverse=True):
            terminalreporter.write_line(f"{seconds:5.1f} s  {nodeid}")


# CI installs every extra (the Makefile's install): a test skipped there for a missing package has
# lost its coverage without a word, as every Keras test would have when an importorskip("keras")
# ran before KERAS_BACKEND was set (keras then looked for TensorFlow). In CI such a skip fails.
MISSING_PACKAGE = re.compile(r"could not import|is not installed|needs the \[")


def _fail_a_skip_for_a_missing_package(report) -> None:
    if not (os.environ.get("CI") and report.skipped and isinstance(report.longrepr, tuple)):
        return
    reason = str(report.longrepr[2])
    if MISSING_PACKAGE.search(reason) and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"CI installs every extra, so this test must run, not skip: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    _fail_a_skip_for_a_missing_package((yield).get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):  # a module-level importorskip skips its whole module
    _fail_a_skip_for_a_missing_package((yield).get_result())


def pytest_unconfigure(config):
    """Python's last garbage collection at exit walks every object the process still holds: in an
    xdist worker that has imported torch, JAX, Lightning and transformers it took 2-4 s, and the
    whole run waited for the slowest worker to exit. Frozen objects are left out of it; nothing
    that remains at this point needs collecting (what has a finalizer to run was torn down with
    the fixtures)."""
    gc.freeze()
