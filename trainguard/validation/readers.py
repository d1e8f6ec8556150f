"""Readers: a training history in any supported format, local or on Cloud Storage, to a History.

Formats (one module each):

- ``jsonl`` (:mod:`~trainguard.validation.jsonl_reader`): trainguard's runtime history, one
  record a line, read with pyarrow in batches; a torn last line is skipped with a note.
- ``keras_csv`` / ``lightning_csv`` (:mod:`~trainguard.validation.csv_reader`): Keras' and
  Lightning's ``CSVLogger`` files, read with pyarrow in batches.
- ``tensorboard`` (:mod:`~trainguard.validation.tensorboard_reader`): a directory of event files.
- ``hf_trainer_state`` (:mod:`~trainguard.validation.hf_reader`): a Hugging Face
  ``trainer_state.json`` (one JSON document; its ``log_history``).
- ``dvclive`` (:mod:`~trainguard.validation.dvclive_reader`): a DVCLive run's directory, one
  tab-separated file per metric under ``plots/metrics`` (local paths).
- ``mlflow`` (:mod:`~trainguard.validation.mlflow_reader`): an MLflow run directory of the local
  file store (``mlruns/<experiment>/<run>/metrics/``), or an experiment or ``mlruns`` directory
  holding one run with metrics; local or ``gs://``.

Ultralytics' ``results.csv`` is read as ``keras_csv`` (an ``epoch`` column); its column names are
understood by :mod:`~trainguard.validation.dialects`.

Paths may be local or ``gs://`` (:mod:`~trainguard.validation.remote_reader`). Memory follows the
points kept, not the file. Unreadable input raises :class:`~trainguard.errors.HistoryError`
(exit code 2) with a message that names the file, the line or column, and what to do; a path
that is not a regular file or directory (a FIFO, a device, a socket) is refused before it is
opened.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from trainguard.errors import ConfigError, HistoryError, TrainguardError
from trainguard.validation.collect import CHUNK_BYTES, bytes_blocks, file_blocks
from trainguard.validation.csv_reader import read_csv
from trainguard.validation.dvclive_reader import FORMAT as DVCLIVE
from trainguard.validation.dvclive_reader import metrics_roots, read_dvclive
from trainguard.validation.formats import (
    EVENTS_MARK,
    FORMATS,
    HF_STATE_NAME,
    detect_format,
    is_json_document,
    not_jsonl,
    refuse_lfs_pointer,
)
from trainguard.validation.hf_reader import MAX_STATE_BYTES, read_trainer_state
from trainguard.validation.history import History
from trainguard.validation.jsonl_reader import read_jsonl
from trainguard.validation.mlflow_reader import FORMAT as MLFLOW
from trainguard.validation.mlflow_reader import locate_run, read_mlflow_run, several_runs
from trainguard.validation.remote_reader import describe, load_remote
from trainguard.validation.tensorboard_reader import read_tensorboard

__all__ = ["FORMATS", "load_history", "detect_format", "read_jsonl_bytes", "CHUNK_BYTES"]


def load_history(path_or_uri: str | os.PathLike, format: str | None = None) -> History:  # noqa: A002
    """Reads a training history.

    Args:
        path_or_uri: a file, a TensorBoard log directory (or one event file), local or
            ``gs://``. A directory that holds a Lightning ``metrics.csv`` or a ``history.jsonl``
            (and no event files) is read as that file; an MLflow run directory (or an experiment
            or ``mlruns`` holding one run with metrics) as that run.
        format: one of :data:`FORMATS`; None detects it from the name and the first bytes.

    Raises:
        ConfigError: an unknown ``format``.
        HistoryError: the input is missing, empty, not a regular file, or malformed.
        EndpointUnreachable: Cloud Storage did not answer within the retry deadline.
    """
    if not isinstance(path_or_uri, str | bytes | os.PathLike):
        raise ConfigError(f"the history must be a path or a gs:// URI, not {type(path_or_uri).__name__}")
    source = os.fsdecode(path_or_uri)
    if not source.strip():  # Path("") is the current directory: say what is missing instead
        raise ConfigError("no history given: pass the history file, its directory or a gs:// URI")
    if format is not None and format not in FORMATS:
        raise ConfigError(f"unknown history format {format!r}; use one of {', '.join(FORMATS)}")
    try:
        if source.startswith("gs://"):
            return load_remote(source, format)
        return _load_local(Path(source), source, format)
    except TrainguardError:
        raise
    except OSError as exc:  # a permission, a file vanishing, a disk error
        raise HistoryError(f"{source}: cannot read ({exc.strerror or describe(exc)})") from None
    except Exception as exc:  # a reader's bug must still not reach the user as a traceback
        raise HistoryError(
            f"{source}: unexpected error reading this history ({describe(exc)}); please report it"
        ) from exc


def read_jsonl_bytes(data: bytes, source: str = "<bytes>") -> History:
    """Reads JSONL history already in memory (appended chunks, a downloaded object).

    Raises:
        HistoryError: as :func:`load_history` does for a JSONL file.
    """
    return read_jsonl(bytes_blocks(data), source, len(data))


def _kind(path: Path, source: str) -> int:
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise HistoryError(f"{source}: no such file or directory") from None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        what = (
            "a FIFO (named pipe)"
            if stat.S_ISFIFO(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a file"
        )
        raise HistoryError(
            f"{source}: {what}, not a regular file; give the history file itself "
            f"(copy a stream to a file first)"
        )
    return mode


def _load_local(path: Path, source: str, fmt: str | None) -> History:
    if stat.S_ISDIR(_kind(path, source)):
        return _load_directory(path, source, fmt)
    if fmt == DVCLIVE:
        raise HistoryError(
            f"{source}: --format dvclive reads a DVCLive run's directory (it holds plots/metrics/), "
            f"not a file; a single metric's .tsv reads without --format"
        )
    with open(path, "rb") as handle:
        head = handle.read(4096)
    refuse_lfs_pointer(source, head)
    fmt = fmt or detect_format(source, head)
    if fmt == MLFLOW:
        raise HistoryError(
            f"{source}: a file; an MLflow history is a run's directory (mlruns/<experiment id>/"
            f"<run id>, holding metrics/ and meta.yaml): give that directory"
        )
    if fmt == "tensorboard":
        return read_tensorboard([path], path.parent, source)
    size = path.stat().st_size
    if fmt == "hf_trainer_state":
        with open(path, "rb") as handle:
            return read_trainer_state(handle.read(MAX_STATE_BYTES + 1), source)
    if fmt == "jsonl":
        if is_json_document(head):
            raise HistoryError(not_jsonl(source))
        return read_jsonl(file_blocks(path), source, size)
    return read_csv(lambda: file_blocks(path), source, fmt, size)


def _load_directory(path: Path, source: str, fmt: str | None) -> History:
    if fmt in (None, MLFLOW):  # first: a run's artifacts may hold event files of its own
        located = locate_run(path)
        if located is not None:
            if located.run is None:
                raise several_runs(source, located)
            return read_mlflow_run(located.run, source)
        if fmt == MLFLOW:  # a directory of metric files without its run around it
            return read_mlflow_run(path, source, metrics=path)
    events = sorted(p for p in path.rglob(f"*{EVENTS_MARK}*") if p.is_file())
    if fmt in (None, "tensorboard") and events:
        return read_tensorboard(events, path, source)
    if fmt in (None, DVCLIVE) and metrics_roots(path):
        return read_dvclive(path, source)
    for name, kind in (
        ("metrics.csv", "lightning_csv"),
        ("history.jsonl", "jsonl"),
        (HF_STATE_NAME, "hf_trainer_state"),
    ):
        candidates = sorted(path.rglob(name))
        if candidates and fmt in (None, kind):
            return load_history(candidates[-1], kind)
    raise HistoryError(
        f"{source}: a directory without TensorBoard event files, metrics.csv, history.jsonl, "
        f"{HF_STATE_NAME}, DVCLive's plots/metrics or an MLflow run (metrics/ and meta.yaml)"
    )
