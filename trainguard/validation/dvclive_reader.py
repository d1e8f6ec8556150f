"""DVCLive's metric logs: one tab-separated file per metric under ``dvclive/plots/metrics/``.

``Live.log_metric("train/loss", v)`` appends a row to ``<run>/plots/metrics/train/loss.tsv``
(dvclive's ``plots/metric.py``: ``csv.DictWriter`` with ``delimiter="\t"``; the run's directory is
``dvclive`` by default; 1.x releases wrote ``<run>/scalars/``, 0.x ``<run>/<name>.tsv``, per the
0.x README): a header ``step<TAB>loss`` (``timestamp<TAB>step<TAB>loss`` before 2.0), then a row
per ``Live.next_step()``. Its Keras, Lightning, Hugging Face and fastai callbacks log the same way
(``train/loss``, ``eval/loss``, ``epoch``...). A metric is named by its path below the metric
directory (``train/loss``, or ``loss/train`` where a user put the split last): split and metric
come from the whole path. ``epoch.tsv`` and other files without a metric column (only ``step``,
``epoch`` or ``timestamp``) count epochs, not a metric: they are skipped with a note.

Each file is read by :mod:`~trainguard.validation.csv_reader` (its errors name the file and the
line). The directory given may be the run's (``dvclive``), its metric directory, or one above
that holds exactly one run.
"""

from __future__ import annotations

import functools
from pathlib import Path

from trainguard.errors import HistoryError
from trainguard.validation.collect import MAX_SERIES, Collector, echo, file_blocks
from trainguard.validation.csv_reader import read_csv
from trainguard.validation.formats import refuse_lfs_pointer
from trainguard.validation.history import History

__all__ = ["FORMAT", "metrics_roots", "read_dvclive"]

FORMAT = "dvclive"
# Where a run keeps its metric files: plots/metrics (DVCLive 2.0 on), scalars (1.x); 0.x wrote them
# in the run's directory itself (dvclive/ by default).
_METRIC_DIRS = (("plots", "metrics"), ("scalars",))
_DEFAULT_DIR = "dvclive"
_NOT_METRICS = frozenset(("step", "epoch", "timestamp"))
_SHOWN_ROOTS = 5
_SEARCH_DEPTH = 4  # dvclive/plots/metrics below a project's root, or a level more


def _tsv_here(directory: Path) -> bool:
    try:
        return any(p.suffix == ".tsv" and p.is_file() for p in directory.iterdir())
    except OSError:
        return False


def _root_of(directory: Path) -> Path | None:
    """The metric directory a DVCLive run keeps in ``directory`` (its own directory), if any."""
    for parts in _METRIC_DIRS:
        candidate = directory.joinpath(*parts)
        if candidate.is_dir() and any(candidate.rglob("*.tsv")):
            return candidate
    if directory.name == _DEFAULT_DIR and _tsv_here(directory):
        return directory  # DVCLive 0.x: dvclive/<name>.tsv
    return None


def metrics_roots(path: Path) -> list[Path]:
    """The metric directories of DVCLive runs at or below ``path`` (sorted)."""
    given = path.parts[-len(_METRIC_DIRS[0]) :] if len(path.parts) >= 2 else ()
    if (tuple(given) == _METRIC_DIRS[0] or path.name == _METRIC_DIRS[1][0]) and any(path.rglob("*.tsv")):
        return [path]
    found: list[Path] = []
    frontier = [path]
    for _ in range(_SEARCH_DEPTH):
        below: list[Path] = []
        for directory in frontier:
            root = _root_of(directory)
            if root is not None:
                found.append(root)
                continue
            try:
                below.extend(sorted(p for p in directory.iterdir() if p.is_dir() and not p.is_symlink()))
            except OSError:
                continue
        frontier = below[:1000]
    return sorted(found)


def read_dvclive(path: Path, source: str) -> History:
    """Reads the one DVCLive run at or below ``path``.

    Raises:
        HistoryError: no run, several runs, a metric file that is not DVCLive's, or no metric.
    """
    roots = metrics_roots(path)
    if not roots:
        raise HistoryError(f"{source}: no DVCLive metrics (plots/metrics/*.tsv) here")
    if len(roots) > 1:
        shown = ", ".join(echo(r.relative_to(path).as_posix(), 80) for r in roots[:_SHOWN_ROOTS])
        more = f", … ({len(roots)} in all)" if len(roots) > _SHOWN_ROOTS else ""
        raise HistoryError(
            f"{source}: {len(roots)} DVCLive runs ({shown}{more}); give the directory of the one to judge"
        )
    root = roots[0]
    files = sorted(p for p in root.rglob("*.tsv") if p.is_file())
    if len(files) > MAX_SERIES:
        raise HistoryError(
            f"{source}: {len(files)} metric files, more than {MAX_SERIES}: not a training history"
        )
    collector = Collector(source)
    notes: list[str] = []
    skipped: list[str] = []
    records = 0
    for file in files:
        name = file.relative_to(root).with_suffix("").as_posix()
        where = f"{source}/{file.relative_to(path).as_posix()}" if root != path else f"{source}/{name}.tsv"
        if not _has_metric(file, where):
            skipped.append(name)
            continue
        history = read_csv(functools.partial(file_blocks, file), where, "lightning_csv", file.stat().st_size)
        records = max(records, history.records)
        run, _, stem = name.rpartition("/")
        for column, series in history.series.items():
            if column.lower() in _NOT_METRICS:
                continue
            # The file's own metric is named by its path; another column by the path's directory.
            full = name if column == stem else (f"{run}/{column}" if run else column)
            # The whole path names it: train/loss and loss/train alike say split and metric.
            collector.add(full, full, "", "", series.steps, series.values)
    if skipped:
        shown = ", ".join(echo(s, 40) for s in skipped[:_SHOWN_ROOTS])
        more = f", … ({len(skipped)} in all)" if len(skipped) > _SHOWN_ROOTS else ""
        notes.append(f"skipped {shown}{more}: no metric column (DVCLive's step or epoch counter)")
    if not collector.parts:
        raise HistoryError(
            f"{source}: DVCLive metric files but no metric in them (empty, or only step, epoch or "
            f"timestamp columns); the training logged nothing to judge yet"
        )
    return collector.build(FORMAT, "step", records, notes)


def _has_metric(file: Path, where: str) -> bool:
    """Whether a metric file's header names a column besides step, epoch and timestamp (an empty
    file names none).

    Raises:
        HistoryError: a Git LFS pointer, or a header without DVCLive's ``step`` column.
    """
    with open(file, "rb") as handle:
        head = handle.readline(1 << 16)
    refuse_lfs_pointer(where, head)
    cells = [c.strip() for c in head.decode("utf-8", "replace").strip().split("\t") if c.strip()]
    if not any(c.lower() not in _NOT_METRICS for c in cells):
        return False
    if "step" not in (c.lower() for c in cells):
        shown = ", ".join(echo(c, 40) for c in cells[:_SHOWN_ROOTS])
        raise HistoryError(
            f"{where}: no 'step' column (columns: {shown}); DVCLive writes 'step', then the "
            f"metric, separated by tabs: is this file DVCLive's?"
        )
    return True
