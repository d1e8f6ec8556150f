"""Settings for the whole suite (read by the xdist controller before it starts the workers, so
the workers and every process they start inherit them).

The parts: ``make test`` runs the tests not marked ``slow`` or ``long``, ``make test-slow`` the
``slow`` ones (they start trainers and pipelines), both with ``--dist loadgroup``, pytest-xdist's
public mode that hands a worker one test at a time, or one ``xdist_group`` whole. Where one run
holds both (a plain ``pytest``), the tests that take seconds are collected first, so they start
first, on every worker, and the short ones fill in behind them. Tests that import Lightning,
Keras or transformers into the worker (``framework``) are one group, so one worker imports those
frameworks.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import tempfile

import pytest

# The xdist workers share two cores, and many tests start trainers of their own: one intra-op
# thread per process stops them spinning against each other (torchrun sets the same for its
# workers). Set before any test module imports torch.
os.environ.setdefault("OMP_NUM_THREADS", "1")


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


# Marks that say a test takes seconds: ``slow`` ones start trainers; every ``long`` one (``make
# test-long``) runs for tens of seconds to minutes.
SLOW_MARKS = ("slow", "long")


def _takes_seconds(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(mark) is not None for mark in SLOW_MARKS)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that take seconds first (the others keep their order), and those marked
    ``framework`` in one ``xdist_group``: the longest work starts first and one worker imports
    Lightning, Keras and transformers."""
    for item in items:
        if item.get_closest_marker("framework") is not None:
            item.add_marker(pytest.mark.xdist_group("framework"))
    items.sort(key=lambda item: not _takes_seconds(item))  # stable: file order within each part


_GROUPS_LOST = pytest.StashKey[str]()


class _GroupCheck:
    """In an xdist worker under ``--dist loadgroup``, every grouped item must carry its group in
    its node id: that is how xdist hands a group to one worker. pytest 9.2 keeps node ids where
    xdist 3.8 no longer writes (pytest-dev/pytest-xdist#1386, open), and the groups then fall
    apart without a word: every worker imports Lightning, Keras and transformers. The grouped
    tests then fail, saying so (an error raised here would reach the user as xdist's
    INTERNALERROR without its message)."""

    @pytest.hookimpl(trylast=True)  # after xdist's worker hook, which writes each item's group
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if not (hasattr(config, "workerinput") and config.getoption("loadgroup", default=False)):
            return
        if any(i.get_closest_marker("xdist_group") and "@" not in i.nodeid for i in items):
            config.stash[_GROUPS_LOST] = (
                "pytest-xdist's --dist loadgroup is not grouping this test with its xdist_group: "
                "pytest 9.2 with pytest-xdist 3.8 (pytest-dev/pytest-xdist#1386). Install what "
                "pyproject.toml's dev extra pins (make install), or run without -n."
            )

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        lost = item.config.stash.get(_GROUPS_LOST, "")
        if lost and item.get_closest_marker("xdist_group"):
            pytest.fail(lost, pytrace=False)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_GroupCheck(), "trainguard-group-check")


UNMARKED_SLOW_S = 5.0  # a test this long without a mark in SLOW_MARKS (it lengthens make test) is named
_unmarked_slow: list[tuple[float, str]] = []


def pytest_runtest_logreport(report):
    if (
        report.when == "call"
        and report.duration > UNMARKED_SLOW_S
        and not any(mark in report.keywords for mark in SLOW_MARKS)
    ):
        _unmarked_slow.append((report.duration, report.nodeid))


def pytest_terminal_summary(terminalreporter):
    """Names the long tests not marked so (they would start late and end the run alone)."""
    if _unmarked_slow:
        terminalreporter.write_sep(
            "-", f"for contributors, not a failure: over {UNMARKED_SLOW_S:.0f} s without @pytest.mark.slow"
        )
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
