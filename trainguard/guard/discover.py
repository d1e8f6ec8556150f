"""Whatever history a job wrote, found under its output directories and published for ``validate``.

In order of preference:

1. trainguard's JSONL at ``TRAINGUARD_HISTORY`` (``<base>/history.jsonl``);
2. TensorBoard event files under ``AIP_TENSORBOARD_LOG_DIR`` (``<base>/logs/``);
3. elsewhere under the base output directory (checkpoints excepted): TensorBoard event files, a
   Lightning ``metrics.csv`` (the newest version's), or a Keras ``CSVLogger`` file (any ``.csv``
   or ``.log`` whose header has an ``epoch`` column).

So a job that never imported trainguard is validated on its own logs instead of an empty file.
The published artifact is that file, or for TensorBoard a directory with the event files in their
run sub-directories (``train/``, ``validation/``): both are what ``load_history`` reads.
"""

from __future__ import annotations

import os
import posixpath
import shutil
from dataclasses import dataclass
from pathlib import Path

from trainguard.errors import HistoryError
from trainguard.runtime.storage import store_for
from trainguard.validation.readers import detect_format

__all__ = ["FoundHistory", "find_history", "publish_history", "CSV_SUFFIXES"]

CSV_SUFFIXES = (".csv", ".log", ".tsv")
_EVENTS_MARK = "tfevents"
_HEAD_BYTES = 4096


@dataclass(frozen=True)
class FoundHistory:
    """A history a job wrote.

    Attributes:
        format: ``jsonl``, ``tensorboard``, ``keras_csv`` or ``lightning_csv``.
        uri: the file, or for TensorBoard the log directory the runs are under.
        files: the files to publish (the event files for TensorBoard, else the one file).
    """

    format: str
    uri: str
    files: tuple[str, ...]


def _list(uri: str) -> list[str]:
    try:
        return store_for(uri).list(uri.rstrip("/"))
    except Exception:  # a missing or unreadable directory holds no history
        return []


def _nonempty(uri: str) -> bool:
    try:
        if uri.startswith("gs://"):
            from trainguard.gcp import storage_client
            from trainguard.guard.follow import split_gs

            bucket, name = split_gs(uri)
            blob = storage_client().bucket(bucket).get_blob(name)
            return blob is not None and int(blob.size or 0) > 0
        return Path(uri).is_file() and Path(uri).stat().st_size > 0
    except Exception:  # unreadable is as good as absent here: the next source is tried
        return False


def _head(uri: str) -> bytes:
    if uri.startswith("gs://"):
        from trainguard.gcp import storage_client
        from trainguard.guard.follow import split_gs

        bucket, name = split_gs(uri)
        blob = storage_client().bucket(bucket).blob(name)
        return blob.download_as_bytes(start=0, end=_HEAD_BYTES - 1, checksum=None)
    with open(uri, "rb") as handle:
        return handle.read(_HEAD_BYTES)


def _events_root(files: list[str]) -> str:
    parents = [f.rsplit("/", 1)[0] for f in files]
    if parents[0].startswith("gs://"):
        bucket = parents[0][5:].split("/", 1)[0]
        common = posixpath.commonpath([p[5 + len(bucket) :] or "/" for p in parents])
        return f"gs://{bucket}{common}"
    return os.path.commonpath(parents)


def find_history(*, history_path: str, tensorboard_dir: str, base_output_dir: str) -> FoundHistory | None:
    """The history the job wrote, by the order of preference above; None when it wrote none."""
    if history_path and _nonempty(history_path):
        return FoundHistory("jsonl", history_path, (history_path,))
    if tensorboard_dir:
        events = [u for u in _list(tensorboard_dir) if _EVENTS_MARK in u.rsplit("/", 1)[-1]]
        if events:
            return FoundHistory("tensorboard", tensorboard_dir.rstrip("/"), tuple(events))
    if not base_output_dir:
        return None
    base = base_output_dir.rstrip("/")
    checkpoints = f"{base}/checkpoints/"
    files = [u for u in _list(base) if not u.startswith(checkpoints) and u != history_path]
    events = [u for u in files if _EVENTS_MARK in u.rsplit("/", 1)[-1]]
    if events:
        return FoundHistory("tensorboard", _events_root(events), tuple(events))
    lightning = sorted(u for u in files if u.rsplit("/", 1)[-1] == "metrics.csv")
    if lightning:
        return FoundHistory("lightning_csv", lightning[-1], (lightning[-1],))
    for uri in files:
        if uri.lower().endswith(CSV_SUFFIXES):
            try:
                fmt = detect_format(uri, _head(uri))
            except (HistoryError, OSError):
                continue
            if fmt in ("keras_csv", "lightning_csv"):
                return FoundHistory(fmt, uri, (uri,))
    return None


def publish_history(found: FoundHistory | None, dst: str) -> dict:
    """Copies the found history to ``dst`` (a file, or a directory for TensorBoard).

    With nothing found, ``dst`` is an empty file: ``validate`` then says the training wrote no
    history. Returns metadata for the artifact: ``format`` and ``source``.
    """
    target = Path(dst)
    if target.is_dir():
        shutil.rmtree(target)
    elif target.exists():
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    if found is None:
        target.write_bytes(b"")
        return {"format": "", "source": "", "note": "the job wrote no history"}
    if found.format != "tensorboard":
        store_for(found.uri).download_file(found.uri, str(target))
        return {"format": found.format, "source": found.uri}
    prefix = found.uri.rstrip("/") + "/"
    for uri in found.files:
        relative = uri[len(prefix) :] if uri.startswith(prefix) else uri.rsplit("/", 1)[-1]
        local = target.joinpath(*relative.split("/"))
        local.parent.mkdir(parents=True, exist_ok=True)
        store_for(uri).download_file(uri, str(local))
    return {"format": "tensorboard", "source": found.uri, "event_files": len(found.files)}
