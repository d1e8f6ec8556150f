"""Histories on Cloud Storage: one object streamed in ranges, or a TensorBoard prefix downloaded.

Every storage call is bounded by the one retry policy (:mod:`trainguard.retry`): a dead or wrong
endpoint answers within ``TRAINGUARD_RETRY_DEADLINE`` (10 s by default) with
:class:`~trainguard.errors.EndpointUnreachable` (exit 2) naming the endpoint, instead of the
storage library's own two minutes of retries.

A TensorBoard prefix is downloaded into a temporary directory. Object names are untrusted: a name
whose path would leave that directory (``..``), or that two names would share (``a//b``,
``a/./b``), is not downloaded, and the history says so in a note.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from itertools import chain
from pathlib import Path, PurePosixPath
from typing import TypeVar

from trainguard.errors import HistoryError, TrainguardError
from trainguard.redaction import bound, redact
from trainguard.retry import RetryPolicy, transient_types
from trainguard.validation import collect
from trainguard.validation.collect import bytes_blocks
from trainguard.validation.csv_reader import read_csv
from trainguard.validation.dvclive_reader import FORMAT as DVCLIVE
from trainguard.validation.dvclive_reader import read_dvclive
from trainguard.validation.formats import (
    HF_STATE_NAME,
    detect_format,
    is_event_file,
    is_json_document,
    not_jsonl,
    refuse_lfs_pointer,
)
from trainguard.validation.hf_reader import MAX_STATE_BYTES, read_trainer_state
from trainguard.validation.history import History
from trainguard.validation.jsonl_reader import read_jsonl
from trainguard.validation.mlflow_reader import FORMAT as MLFLOW
from trainguard.validation.mlflow_reader import META_FILE as MLFLOW_META
from trainguard.validation.mlflow_reader import METRICS_DIR as MLFLOW_METRICS
from trainguard.validation.mlflow_reader import locate_run, read_mlflow_run, several_runs
from trainguard.validation.tensorboard_reader import read_tensorboard

__all__ = ["load_remote", "BoundedStore", "open_store", "local_name", "endpoint"]

_T = TypeVar("_T")
_CONNECT_TIMEOUT_S = 10.0
_READ_TIMEOUT_S = 60.0
_SHOWN_NAMES = 3


def _dvclive_metric(name: str) -> bool:
    """Whether an object is a DVCLive metric file: under <run>/plots/metrics/ (2.x), <run>/scalars/
    (1.x), or directly in a dvclive/ directory (0.x)."""
    return "/plots/metrics/" in name or "/scalars/" in name or PurePosixPath(name).parent.name == "dvclive"


def endpoint() -> str:
    """Where Cloud Storage calls go: the emulator when ``STORAGE_EMULATOR_HOST`` is set."""
    return os.environ.get("STORAGE_EMULATOR_HOST") or "https://storage.googleapis.com"


class BoundedStore:
    """The storage calls validation makes, each within the retry policy's total deadline.

    For ``gs://`` the storage library's own retry is turned off and :class:`RetryPolicy` retries
    instead (its deadline, its message). Other stores (a local directory standing in for a
    bucket) are called as they are.

    Note: written before ``store_for(uri, deadline_s=...)`` existed in
    ``trainguard.runtime.storage``; once it does, this class reduces to that call.
    """

    def __init__(self, store, policy: RetryPolicy) -> None:
        self._store = store
        self._policy = policy
        from trainguard.runtime.storage import GCSStore

        self._gcs = isinstance(store, GCSStore)
        timeout = min(_CONNECT_TIMEOUT_S, max(policy.deadline_s, 1.0))
        self._timeout = (timeout, _READ_TIMEOUT_S)

    def _call(self, fn: Callable[[], _T], what: str, uri: str) -> _T:
        if not self._gcs:
            return fn()
        return self._policy.call(
            fn, transient=transient_types(), what=f"Cloud Storage {what} of {uri}", where=endpoint()
        )

    def list(self, prefix: str) -> list[str]:
        """Object URIs under ``prefix`` (a folder)."""
        if not self._gcs:
            return self._store.list(prefix)
        bucket, _, name = prefix[len("gs://") :].partition("/")
        client = self._store._client  # GCSStore's client; see the class note

        def names() -> list[str]:
            blobs = client.list_blobs(
                bucket, prefix=name.rstrip("/") + "/", retry=None, timeout=self._timeout
            )
            return sorted(f"gs://{bucket}/{blob.name}" for blob in blobs)

        return self._call(names, "list", prefix)

    def read_bytes(self, uri: str) -> bytes:
        """The object's bytes."""
        if not self._gcs:
            return self._store.read_bytes(uri)
        blob = self._store._blob(uri)
        return self._call(lambda: blob.download_as_bytes(retry=None, timeout=self._timeout), "read", uri)

    def stream(self, uri: str, size: int | None = None) -> tuple[int, Iterator[bytes]]:
        """The object's size, and its bytes in ranges of ``size`` (default
        :data:`~trainguard.validation.collect.READ_BYTES`), all of one generation: memory
        stays at one range, however big the object."""
        size = size or collect.READ_BYTES
        if not self._gcs:
            data = self._store.read_bytes(uri)
            return len(data), bytes_blocks(data, size)
        blob = self._store._blob(uri)
        self._call(lambda: blob.reload(retry=None, timeout=self._timeout), "read", uri)
        total, generation = int(blob.size or 0), blob.generation

        def part(start: int) -> bytes:
            end = min(start + size, total) - 1
            return blob.download_as_bytes(
                start=start, end=end, if_generation_match=generation, retry=None, timeout=self._timeout
            )

        ranges = (self._call(functools.partial(part, start), "read", uri) for start in range(0, total, size))
        return total, ranges

    def download_file(self, uri: str, local_path: str) -> None:
        """Copies the object to a local file."""
        if not self._gcs:
            self._store.download_file(uri, local_path)
            return
        blob = self._store._blob(uri)
        self._call(
            lambda: blob.download_to_filename(local_path, retry=None, timeout=self._timeout), "download", uri
        )


def open_store(uri: str) -> BoundedStore:
    """The store for ``uri`` with the retry policy from the environment.

    Raises:
        HistoryError: the storage client cannot be made (no credentials, say).
    """
    from trainguard.runtime import storage  # only here: it may import google clients

    try:
        store = storage.store_for(uri)
    except TrainguardError:
        raise
    except Exception as exc:  # google.auth's DefaultCredentialsError, a missing package
        raise HistoryError(
            f"{uri}: cannot reach Cloud Storage ({describe(exc)}); run "
            f"'gcloud auth application-default login' or set "
            f"STORAGE_EMULATOR_HOST"
        ) from exc
    return BoundedStore(store, RetryPolicy.from_env())


def describe(exc: BaseException) -> str:
    """An error in one bounded, redacted line."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return bound(redact(f"{type(exc).__name__}: {text}" if text else type(exc).__name__), 300)


def local_name(relative: str) -> PurePosixPath | None:
    """The relative local path for an object name below the prefix, or None when the name could
    leave the download directory or collide with another (empty, ``.``, ``..`` parts, a
    backslash, a NUL)."""
    parts = relative.split("/")
    if any(p in ("", ".", "..") or "\\" in p or "\0" in p for p in parts):
        return None
    return PurePosixPath(*parts)


@contextmanager
def _downloaded(
    store: BoundedStore, uri: str, objects: list[str], what: str, keep_tail: int = 0
) -> Iterator[tuple[Path, list[Path], list[str]]]:
    """Downloads ``objects`` under ``uri`` into a temporary directory kept while the block runs:
    (its root, the local files, notes on objects refused for their names). With ``keep_tail``,
    the root is named as the prefix's last ``keep_tail`` parts (``plots/metrics``), for readers
    that know a directory by its name.

    Raises:
        HistoryError: none could be downloaded safely.
    """
    prefix = uri.rstrip("/") + "/"
    refused: list[str] = []
    tail = local_name("/".join(PurePosixPath(uri.rstrip("/")).parts[-keep_tail:])) if keep_tail else None
    with tempfile.TemporaryDirectory(prefix="trainguard-dl-") as tmp:
        root = Path(tmp).resolve()
        if tail is not None:
            root = root.joinpath(*tail.parts)
        local_files = []
        for obj in objects:
            relative = local_name(obj[len(prefix) :]) if obj.startswith(prefix) else None
            local = (root / relative) if relative is not None else None
            if local is None or not local.resolve().is_relative_to(root):
                refused.append(obj)
                continue
            local.parent.mkdir(parents=True, exist_ok=True)
            store.download_file(obj, str(local))
            local_files.append(local)
        notes: list[str] = []
        if refused:
            shown = ", ".join(repr(bound(redact(o), 200)) for o in refused[:_SHOWN_NAMES])
            more = f" and {len(refused) - _SHOWN_NAMES} more" if len(refused) > _SHOWN_NAMES else ""
            notes.append(
                f"skipped {len(refused)} object(s) whose names would leave the download "
                f"directory or collide with another ({shown}{more})"
            )
        if not local_files:
            raise HistoryError(f"{uri}: no {what} with a usable name under this prefix; {notes[0]}")
        yield root, sorted(local_files), notes


def download_tensorboard(store: BoundedStore, uri: str, events: list[str]) -> History:
    """Downloads the event files under ``uri`` and reads them.

    Raises:
        HistoryError: none could be downloaded safely, or they are not readable.
    """
    with _downloaded(store, uri, events, "event file") as (root, files, notes):
        return read_tensorboard(files, root, uri, notes)


def download_dvclive(store: BoundedStore, uri: str, metric_files: list[str]) -> History:
    """Downloads a DVCLive run's metric files under ``uri`` and reads them.

    Raises:
        HistoryError: none could be downloaded safely, or they are not DVCLive's.
    """
    # The run's own directory names (plots/metrics, scalars, dvclive) tell its metric directory.
    with _downloaded(store, uri, metric_files, "DVCLive metric file", keep_tail=2) as (root, _, notes):
        history = read_dvclive(root, uri)
    return replace(history, notes=[*notes, *history.notes]) if notes else history


def load_remote(uri: str, fmt: str | None) -> History:
    """Reads a history at a ``gs://`` URI: an object, or a prefix holding TensorBoard event files
    (or a ``metrics.csv`` / ``history.jsonl``).

    Raises:
        HistoryError: missing, unreadable or malformed.
        EndpointUnreachable: Cloud Storage did not answer within the retry deadline.
    """
    store = open_store(uri)
    try:
        if fmt in ("tensorboard", DVCLIVE, MLFLOW) or (fmt is None and not _looks_like_file(uri)):
            objects = store.list(uri.rstrip("/"))
            if objects:
                return _load_prefix(store, uri, objects, fmt)
        return _load_object(store, uri, fmt)
    except TrainguardError:
        raise
    except Exception as exc:  # the storage client's own errors: not found, forbidden, ...
        raise HistoryError(f"{uri}: cannot read ({describe(exc)})") from exc


def _looks_like_file(uri: str) -> bool:
    base = uri.rstrip("/").rsplit("/", 1)[-1]
    return not uri.endswith("/") and ("." in base or is_event_file(base))


def _load_object(store: BoundedStore, uri: str, fmt: str | None) -> History:
    if fmt == DVCLIVE:
        raise HistoryError(
            f"{uri}: --format dvclive reads a DVCLive run's prefix (it holds plots/metrics/), not "
            f"an object; a single metric's .tsv reads without --format"
        )
    if fmt == MLFLOW:
        raise HistoryError(
            f"{uri}: --format mlflow reads an MLflow run's prefix (it holds metrics/ and meta.yaml), "
            f"not an object; give the run's prefix"
        )
    total, blocks = store.stream(uri)
    first = next(blocks, b"")
    refuse_lfs_pointer(uri, first[:4096])
    fmt = fmt or detect_format(uri, first[:4096])
    if fmt == "hf_trainer_state":
        data = bytearray()
        for block in chain([first], blocks):
            data += block
            if len(data) > MAX_STATE_BYTES:
                break
        return read_trainer_state(bytes(data), uri)
    if fmt == "jsonl":
        if is_json_document(first[:4096]):
            raise HistoryError(not_jsonl(uri))
        return read_jsonl(chain([first], blocks), uri, total)
    if fmt == "tensorboard":
        with tempfile.TemporaryDirectory(prefix="trainguard-tb-") as tmp:
            local = Path(tmp) / "events.out.tfevents"
            with open(local, "wb") as handle:
                for block in chain([first], blocks):
                    handle.write(block)
            return read_tensorboard([local], Path(tmp), uri)
    used = [False]

    def open_blocks() -> Iterator[bytes]:  # the first pass reuses what detection read
        if used[0]:
            return store.stream(uri)[1]
        used[0] = True
        return chain([first], blocks)

    return read_csv(open_blocks, uri, fmt, total)


def download_mlflow(store: BoundedStore, uri: str, objects: list[str]) -> History:
    """Downloads an MLflow run's ``meta.yaml`` and metric files under ``uri`` (a job that wrote
    ``mlruns/`` through Vertex AI's ``/gcs/`` mount leaves it there) and reads them.

    Raises:
        HistoryError: no run, several runs, or what the reader refuses.
    """
    wanted = [o for o in objects if o.endswith("/" + MLFLOW_META) or f"/{MLFLOW_METRICS}/" in o]
    with _downloaded(store, uri, wanted, "MLflow run file") as (root, _, notes):
        located = locate_run(root)
        if located is None:
            raise HistoryError(f"{uri}: no MLflow run (metrics/ and meta.yaml) under this prefix")
        if located.run is None:
            raise several_runs(uri, located)
        history = read_mlflow_run(located.run, uri)
    return replace(history, notes=[*notes, *history.notes]) if notes else history


def _load_prefix(store: BoundedStore, uri: str, objects: list[str], fmt: str | None) -> History:
    events = [o for o in objects if is_event_file(o)]
    mlflow = any(f"/{MLFLOW_METRICS}/" in o for o in objects) and any(
        o.endswith("/" + MLFLOW_META) for o in objects
    )
    if fmt == MLFLOW or (fmt is None and mlflow):  # first: a run's artifacts may hold event files
        return download_mlflow(store, uri, objects)
    metric_files = [o for o in objects if o.endswith(".tsv") and _dvclive_metric(o)]
    if fmt == DVCLIVE or (fmt is None and not events and metric_files):
        if not metric_files:
            raise HistoryError(f"{uri}: no DVCLive metrics (plots/metrics/*.tsv) under this prefix")
        return download_dvclive(store, uri, metric_files)
    if not events:
        for name, kind in (
            ("metrics.csv", "lightning_csv"),
            ("history.jsonl", "jsonl"),
            (HF_STATE_NAME, "hf_trainer_state"),
        ):
            found = [o for o in objects if o.endswith("/" + name)]
            if found and fmt in (None, kind):
                return _load_object(store, found[-1], kind)
        raise HistoryError(
            f"{uri}: no TensorBoard event files, metrics.csv or history.jsonl under this prefix"
        )
    return download_tensorboard(store, uri, events)
