"""MLflow's local file store (``mlruns/``): one run's metric files to a History.

MLflow's ``FileStore`` (``mlflow/store/tracking/file_store.py`` in mlflow/mlflow) keeps a run as
``mlruns/<experiment id>/<run id>/`` holding ``meta.yaml``, ``params/``, ``tags/`` and
``metrics/<metric name>`` (a name with ``/`` becomes subdirectories). ``_log_run_metric`` appends
one line per logged value, ``f"{metric.timestamp} {metric.value} {metric.step}\\n"`` (milliseconds,
Python's ``str`` of the float, so ``nan``, ``inf`` and ``-inf``, and the integer step), and
``_get_metric_from_line`` reads it back: two or three fields, ``int`` timestamp, ``float`` value,
``int`` step (0 when an older file has only two). ``get_metric_history`` returns the lines in file
order; an empty file is "malformed. No data found".

What is read: a run directory (``metrics/`` and ``meta.yaml``), its ``metrics/`` directory, or an
experiment or ``mlruns`` directory holding exactly one run with metric files (runs in ``.trash``
are deleted ones and are not counted). Several runs are refused with their paths: a curve merged
from runs is one no run produced.

Each metric file is a series named as MLflow names it (``val_loss``, ``train/loss``), on the step
axis. ``mlflow.keras.autolog`` logs ``loss``, ``val_loss``, ``accuracy``, ``val_accuracy`` with the
epoch as step; Lightning's autolog and ``MLFlowLogger`` ``train_loss``, ``val_loss``. Left out:
``epoch`` and ``step``, the counters Lightning's ``MLFlowLogger`` and Hugging Face's
``MLflowCallback`` log beside the metrics (an x axis, as a CSV's other ``epoch`` column is); and in
a Hugging Face ``Trainer``'s run (``train_runtime`` or ``eval_runtime`` among its files) the
timing, throughput and settings series that :data:`~trainguard.validation.hf_reader.NOT_POINTS`
names, as the ``trainer_state.json`` reader leaves them out, with a note. Points keep the file's
order; :meth:`History.build` sorts them by step (a step logged twice keeps its later value), with
a note. A series whose steps are all 0 (``log_metric`` without a step) is put on its line order,
with a note.

Bounds: at most :data:`~trainguard.validation.collect.MAX_SERIES` metric files,
:data:`MAX_RUN_BYTES` in all, :data:`MAX_METRIC_LINE` bytes a line. Whitespace other than one
space between fields is accepted, and blank lines are skipped with a note (MLflow refuses them).
A torn last line (a writer that died mid-write, no line end) is skipped with a note. An empty
file, a line of the wrong shape, a value that is not a number or a step that is not an integer
is an error naming the file and the line. On Cloud Storage (a Vertex AI job writing ``mlruns/``
through its ``/gcs/`` mount) the run's files are downloaded first
(:func:`~trainguard.validation.remote_reader.download_mlflow`).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from trainguard.errors import HistoryError
from trainguard.validation.collect import MAX_SERIES, Collector, Tail, echo, file_blocks, whole_lines
from trainguard.validation.formats import LFS_POINTER, refuse_lfs_pointer
from trainguard.validation.hf_reader import NOT_POINTS
from trainguard.validation.history import History

__all__ = [
    "FORMAT",
    "read_mlflow_run",
    "locate_run",
    "is_run_dir",
    "MAX_RUN_BYTES",
    "MAX_METRIC_LINE",
    "METRICS_DIR",
    "META_FILE",
]

FORMAT = "mlflow"
METRICS_DIR = "metrics"
META_FILE = "meta.yaml"
MAX_RUN_BYTES = 512 << 20  # ~15 million logged values: more than one run's history
MAX_METRIC_LINE = 4096  # a line is three numbers
_MAX_STEP = 2**63  # MLflow's steps are int64
_SHOWN_RUNS = 5
# Folders of an experiment or of mlruns that hold no runs: deleted runs, the model registry,
# MLflow 3's logged models, traces, datasets, an experiment's tags.
_NOT_RUNS = frozenset((".trash", "models", "traces", "datasets", "tags"))
_MAX_NOTED = 5
_COUNTERS = frozenset(("epoch", "step"))  # logged beside the metrics, not metrics themselves
_HF_MARKS = frozenset(("train_runtime", "eval_runtime"))  # a Trainer's MLflowCallback run
_MAX_CANDIDATES = 10_000  # directories looked at for runs below what was given


def is_run_dir(path: Path) -> bool:
    """Whether a directory is an MLflow run's: it holds ``metrics/`` and ``meta.yaml``."""
    return (path / METRICS_DIR).is_dir() and (path / META_FILE).is_file()


@dataclass
class Located:
    """What :func:`locate_run` found below a directory.

    Attributes:
        run: the one run with metric files, or None.
        with_metrics: every run with metric files (more than one: refused).
        runs: how many run directories there are, metric files or not.
    """

    run: Path | None = None
    with_metrics: list[Path] = field(default_factory=list)
    runs: int = 0
    root: Path = Path(".")


def locate_run(path: Path) -> Located | None:
    """The MLflow run a directory is or holds; None when it is no MLflow layout at all.

    ``path`` may be a run, its ``metrics/`` directory, an experiment (runs one level down) or
    ``mlruns`` (two levels down), or a project holding ``mlruns/``.
    """
    if is_run_dir(path):
        return Located(path, [path], 1)
    if path.name == METRICS_DIR and (path.parent / META_FILE).is_file():
        return Located(path.parent, [path.parent], 1)
    runs = [r for r in _candidates(path) if is_run_dir(r)]
    if not runs:
        return None
    with_metrics = [r for r in runs if _has_file(r / METRICS_DIR)]
    run = with_metrics[0] if len(with_metrics) == 1 else None
    return Located(run, with_metrics, len(runs), path)


def _subdirs(path: Path) -> list[Path]:
    try:
        with os.scandir(path) as entries:
            return sorted(
                Path(e.path) for e in entries if e.name not in _NOT_RUNS and e.is_dir(follow_symlinks=False)
            )
    except OSError:
        return []


def _candidates(path: Path) -> list[Path]:
    """Directories one and two levels down (an experiment's runs, mlruns' runs), and those of a
    ``mlruns`` directory inside ``path``."""
    found: list[Path] = []
    for child in _subdirs(path):
        found.append(child)
        found.extend(_subdirs(child))
        if len(found) > _MAX_CANDIDATES:
            break
    inner = path / "mlruns"
    if inner.is_dir() and not inner.is_symlink():
        for experiment in _subdirs(inner):
            found.extend(_subdirs(experiment))
            if len(found) > 2 * _MAX_CANDIDATES:
                break
    return list(dict.fromkeys(found))


def _has_file(directory: Path) -> bool:
    return any(files for _, _, files in os.walk(directory))


def several_runs(source: str, located: Located) -> HistoryError:
    """The refusal of a directory holding several runs (or runs without metrics)."""
    if not located.with_metrics:
        return HistoryError(
            f"{source}: {located.runs} MLflow run(s) but none logged a metric (no file under "
            f"metrics/): nothing to judge; log the training curve with mlflow.log_metric(name, "
            f"value, step=epoch) or autolog"
        )
    shown = ", ".join(
        echo(p.relative_to(located.root).as_posix(), 100) for p in located.with_metrics[:_SHOWN_RUNS]
    )
    extra = len(located.with_metrics) - _SHOWN_RUNS
    more = f", … ({extra} more)" if extra > 0 else ""
    return HistoryError(
        f"{source}: {len(located.with_metrics)} MLflow runs with metrics ({shown}{more}); "
        f"give one run's directory (mlruns/<experiment id>/<run id>)"
    )


def _metric_files(metrics: Path, source: str) -> list[tuple[str, Path]]:
    """(metric name, path) for every file under ``metrics/``, sorted by name; bounded."""
    files: list[tuple[str, Path]] = []
    for root, dirs, names in os.walk(metrics):
        dirs.sort()
        for name in names:
            path = Path(root) / name
            rel = path.relative_to(metrics).as_posix()
            # A name that is not UTF-8 (the file system's bytes) is shown, never crashed on.
            rel = rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            files.append((rel, path))
            if len(files) > MAX_SERIES:
                raise HistoryError(
                    f"{source}: more than {MAX_SERIES} metric files under metrics/: not a training "
                    f"history (name the metrics you log, not per-item values)"
                )
    return sorted(files)


def read_mlflow_run(run: Path, source: str, metrics: Path | None = None) -> History:
    """Reads one MLflow run's metric files.

    Args:
        run: the run directory (for messages).
        source: the path the user gave.
        metrics: the metrics directory (default ``run/metrics``).

    Raises:
        HistoryError: no metric file, an empty or malformed one, more than the bounds.
    """
    metrics = metrics if metrics is not None else run / METRICS_DIR
    files = _metric_files(metrics, source)
    if not files:
        raise HistoryError(
            f"{source}: an MLflow run with no metric files (metrics/ is empty): it logged only "
            f"params or tags, nothing to judge; log the curve with mlflow.log_metric(name, value, "
            f"step=epoch) or autolog"
        )
    collector = Collector(source)
    state = _State()
    total = 0
    skipped = set(_COUNTERS)
    if _HF_MARKS & {name for name, _ in files}:
        skipped |= NOT_POINTS
        state.hf = True
    for name, path in files:
        where = f"{source}: metric file {echo(name, 100)}"
        mode = path.stat().st_mode  # follows a link: its target must be a plain file
        if not stat.S_ISREG(mode):
            raise HistoryError(f"{where}: not a regular file; an MLflow metric is a text file")
        total += path.stat().st_size
        if total > MAX_RUN_BYTES:
            raise HistoryError(
                f"{source}: more than {MAX_RUN_BYTES >> 20} MiB of metric files, more than a run's "
                f"history holds; is it the right directory?"
            )
        if name.lower() not in skipped:
            _read_file(path, name, where, collector, state)
    if all(name.lower() in skipped for name, _ in files):
        shown = ", ".join(echo(n, 60) for n, _ in files[:_MAX_NOTED])
        raise HistoryError(
            f"{source}: an MLflow run whose only metric files are {shown} (counters, timings, "
            f"settings: not metrics): nothing to judge"
        )
    return collector.build(FORMAT, "step", state.records, state.notes())


@dataclass
class _State:
    records: int = 0
    blank: int = 0
    torn: list[str] = field(default_factory=list)
    line_order: list[str] = field(default_factory=list)
    hf: bool = False

    def notes(self) -> list[str]:
        out = []
        if self.hf:
            out.append(
                "a Hugging Face Trainer's run (MLflowCallback): its timing, throughput and "
                "settings series (eval_runtime, learning_rate, grad_norm, ...) are not metrics "
                "and were left out"
            )
        if self.line_order:
            names = ", ".join(echo(n, 60) for n in self.line_order[:_MAX_NOTED])
            extra = len(self.line_order) - _MAX_NOTED
            more = f" and {extra} more" if extra > 0 else ""
            out.append(
                f"{names}{more}: every step is 0 (logged without step=), so the points are "
                f"placed in the order they were logged"
            )
        if self.torn:
            names = ", ".join(echo(n, 60) for n in self.torn[:_MAX_NOTED])
            out.append(f"skipped a torn last line (no line end) in {names}")
        if self.blank:
            out.append(f"skipped {self.blank} blank line(s) in the metric files")
        return out


def _read_file(path: Path, name: str, where: str, collector: Collector, state: _State) -> None:
    with open(path, "rb") as handle:
        refuse_lfs_pointer(where, handle.read(len(LFS_POINTER)))
    tail = Tail()
    line = 0
    points = 0
    for chunk in whole_lines(file_blocks(path), where, tail, MAX_METRIC_LINE):
        rows = chunk.split(b"\n")
        rows.pop()  # a chunk ends with a line end
        steps, values, blank = _parse(rows, line, where)
        line += len(rows)
        state.blank += blank
        if steps.size:
            points += steps.size
            collector.add(name, name, "", "", steps, values)
    if tail.data.strip():
        # MLflow ends every line: one without an end was cut mid-write, unless it has all three
        # fields (or is the file's only line, as a hand-written file may be).
        if not points:  # the only line: a malformed one is an error, as anywhere else
            steps, values, _ = _parse([tail.data], line, where)
            whole = True
        else:
            whole = len(tail.data.split()) == 3
            try:
                steps, values, _ = _parse([tail.data], line, where)
            except HistoryError:
                whole = False
        if whole:
            points += steps.size
            collector.add(name, name, "", "", steps, values)
        else:
            state.torn.append(name)
    if not points:
        raise HistoryError(
            f"{where}: empty (MLflow itself reads it as malformed, no data found); a metric file "
            f"holds one '<timestamp> <value> <step>' line per logged value"
        )
    state.records += points
    part = collector.parts.get(name)
    if part is not None and part.size > 1:
        steps, _ = part.arrays()
        if not steps.any():  # every step 0: MLflow's default when log_metric is given none
            steps[:] = np.arange(part.size, dtype=np.float64)
            state.line_order.append(name)


def _parse(rows: list[bytes], first: int, where: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Steps and values of whole lines (``first`` lines precede them); blank lines skipped.

    Raises:
        HistoryError: a line that is not ``<timestamp> <value> [<step>]``, naming it.
    """
    fields = [row.split() for row in rows]
    blank = 0
    if not all(len(f) == 3 for f in fields):
        blank = sum(1 for f in fields if not f)
        fields = [f for f in fields if f]
    try:
        if all(len(f) == 3 for f in fields):  # the common shape, converted in bulk
            for f in fields:
                int(f[0])
            steps = np.fromiter((int(f[2]) for f in fields), np.float64, len(fields))
            values = np.fromiter((float(f[1]) for f in fields), np.float64, len(fields))
            if steps.size and float(np.abs(steps).max()) < _MAX_STEP:
                return steps, values, blank
    except (ValueError, OverflowError):
        pass
    return _parse_exactly(rows, first, where)


def _parse_exactly(rows: list[bytes], first: int, where: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Line by line, to name the first bad one."""
    steps: list[float] = []
    values: list[float] = []
    blank = 0
    for number, row in enumerate(rows, first + 1):
        f = row.split()
        if not f:
            blank += 1
            continue
        at = f"{where}: line {number}"
        if len(f) not in (2, 3):
            raise HistoryError(
                f"{at}: {len(f)} fields ({echo(row.decode('utf-8', 'replace'), 80)}); an MLflow "
                f"metric line is '<timestamp> <value> <step>' (or '<timestamp> <value>')"
            )
        if not _is_int(f[0]):
            raise HistoryError(f"{at}: the timestamp {_shown(f[0])} is not an integer (milliseconds)")
        try:
            value = float(f[1])
        except ValueError:
            raise HistoryError(f"{at}: the value {_shown(f[1])} is not a number") from None
        step = 0
        if len(f) == 3:
            if not _is_int(f[2]):
                raise HistoryError(f"{at}: the step {_shown(f[2])} is not an integer")
            step = int(f[2])
            if abs(step) >= _MAX_STEP:
                raise HistoryError(f"{at}: the step {_shown(f[2])} is out of range (MLflow's are int64)")
        steps.append(float(step))
        values.append(value)
    return np.asarray(steps, dtype=np.float64), np.asarray(values, dtype=np.float64), blank


def _is_int(token: bytes) -> bool:
    try:
        int(token)
    except ValueError:
        return False
    return True


def _shown(token: bytes) -> str:
    return echo(token.decode("utf-8", "replace"), 40)
