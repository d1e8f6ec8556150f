"""Atomic, resumable checkpoints on ``gs://``, local disks and ``/gcs/`` FUSE mounts.

Layout::

    <directory>/step-000000120/COMMIT              JSON: step, format, dir, files, sizes, metrics
    <directory>/step-000000120/a-5f3c9e21b0d4/...  the payload files of one save ("attempt")

Each save writes its files into a fresh attempt directory, then writes ``COMMIT`` (atomically: a
local ``os.replace``, a whole GCS object) naming that attempt, then removes what the previous
``COMMIT`` of the step named. So the invariant holds at every instant, for re-saves of a step too:
**the newest complete checkpoint that existed before a save began stays complete until a newer one
is complete.** A crash mid-save leaves an attempt no ``COMMIT`` names, which restore ignores and the
next save removes. Retention removes a checkpoint's ``COMMIT`` before its files.

``COMMIT`` is the single contract other components read (the guard ships the best checkpoint by a
metric in it): ``step``, ``metrics``, ``format``, and the files at ``<step dir>/<dir>/<file>``. A
``COMMIT`` written before attempts existed has no ``dir``: its files sit in the step directory.

Nothing read from storage is trusted: step directories must be ``step-<9 digits>``, ``dir`` and file
names are plain relative names (no ``..``, no absolute paths), listed sizes must match ``COMMIT``,
and symbolic links are neither listed nor opened (see ``storage``). A committed checkpoint that fails
these checks is *damaged*: restore says so (:class:`~trainguard.errors.CheckpointError`) instead of
silently falling back, and nothing deletes it.

Saving can run in the background: the training thread hands off a payload (values may be callables
or :class:`Stream`, run on the saver thread) and goes on; at most one save is in flight, and its
error is raised on the next call rather than lost. A :class:`Sharded` payload is written by every
rank into the same attempt directory (``torch.distributed.checkpoint``, orbax); only the chief then
writes ``COMMIT``, once the engine has returned, i.e. after every rank finished.

This module is the storage layer. When to save (the policies in ``policies/``), SIGTERM, the
history and closing are :class:`~trainguard.runtime.core.CheckpointCore`'s, the one object every
checkpointer and framework guard is built on.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import math
import os
import re
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import BinaryIO, SupportsFloat, cast

from trainguard.errors import CheckpointError, ConfigError, UserError
from trainguard.runtime.policies import RetentionPolicy, SavePolicy, save_policy
from trainguard.runtime.policies.retention import finite as _finite
from trainguard.runtime.save_cost import SaveMeasure
from trainguard.runtime.storage import FileStore, join, store_for

__all__ = [
    "Checkpoint",
    "CheckpointManager",
    "SavePolicy",
    "RetentionPolicy",
    "Stream",
    "Sharded",
    "Scan",
    "COMMIT_MARKER",
    "FORMAT_FILES",
    "attempt_name",
    "safe_relative_name",
    "save_policy",
    "note",
]

COMMIT_MARKER = "COMMIT"
COMMIT_VERSION = 2
FORMAT_FILES = "files"  # named payload files written by CheckpointManager.save
_STEP_DIR = re.compile(r"step-(\d{9})$")
_PART = re.compile(r"[A-Za-z0-9_.=+-]{1,200}$")
_MAX_COMMIT_BYTES = 4 << 20  # a COMMIT is a few hundred bytes; a huge one is not ours


def safe_relative_name(name: object) -> bool:
    """True for a plain relative file name (``a/b.pt``): no ``..``, no absolute path, no oddities."""
    if not isinstance(name, str) or not name or len(name) > 1000:
        return False
    parts = name.split("/")
    return all(_PART.match(p) and p not in (".", "..") for p in parts)


def attempt_name(nonce: int | None = None) -> str:
    """The directory name of one save attempt; ranks that share ``nonce`` share the name."""
    value = secrets.randbits(48) if nonce is None else int(nonce) & (2**48 - 1)
    return f"a-{value:012x}"


@dataclass(frozen=True)
class Stream:
    """A payload file written by ``write(fileobj)`` straight to storage, never held in memory
    whole (for large states: ``Stream(lambda f: torch.save(state, f))``)."""

    write: Callable[[BinaryIO], object]


@dataclass(frozen=True)
class Sharded:
    """A payload written by *every* rank: ``write(attempt_uri)`` fills that directory (each rank
    its shards). The chief commits what is there once its own ``write`` returned, so ``write`` must
    return only after every rank finished (``torch.distributed.checkpoint.save`` does)."""

    write: Callable[[str], object]


Payload = Mapping[str, "bytes | Callable[[], bytes] | Stream"]


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint.

    Attributes:
        step: the training step.
        uri: the step directory (``…/step-000000120``).
        files: the payload files, relative to ``root``.
        metrics: the metrics recorded with it (``val_loss``, …).
        created: when it was committed (epoch seconds).
        format: who wrote it (``files``, ``torch``, ``torch-dcp``, …).
        root: the directory holding ``files`` (the attempt directory).
        sizes: each file's size in bytes.
        meta: the whole ``COMMIT`` record.
    """

    step: int
    uri: str
    files: tuple[str, ...]
    metrics: dict = field(default_factory=dict)
    created: float = 0.0
    format: str = FORMAT_FILES
    root: str = ""
    sizes: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    def path(self, name: str) -> str:
        """The URI/path of payload file ``name`` (one that ``COMMIT`` lists)."""
        if name not in self.files:
            raise CheckpointError(
                f"{self.uri}: the checkpoint has no file {name!r} "
                f"(it holds {', '.join(self.files[:8]) or 'nothing'})"
            )
        return join(self.root or self.uri, name)

    def read(self, name: str, store: FileStore | None = None) -> bytes:
        """The bytes of payload file ``name``."""
        with (store or store_for(self.uri)).open_read(self.path(name)) as handle:
            return handle.read()


@dataclass
class Scan:
    """What a checkpoint directory holds.

    Attributes:
        complete: usable checkpoints, oldest first.
        damaged: ``step -> reason`` for committed checkpoints that fail the checks.
        incomplete: steps with files but no ``COMMIT`` (a save that died; removed by the next save).
        others: names outside any step directory (another framework's checkpoint, stray files).
    """

    complete: list[Checkpoint] = field(default_factory=list)
    damaged: dict[int, str] = field(default_factory=dict)
    incomplete: list[int] = field(default_factory=list)
    others: list[str] = field(default_factory=list)


class CheckpointManager:
    """Saves and lists checkpoints in ``directory`` (default ``$AIP_CHECKPOINT_DIR``): the storage
    layer of :class:`~trainguard.runtime.core.CheckpointCore`, which decides *when* to save.

    Args:
        directory: ``gs://…``, a local path or a ``/gcs/`` FUSE path.
        retention: which checkpoints to keep (applied after each commit).
        async_save: save on a background thread.
        is_chief: only the chief writes ``COMMIT`` and plain payloads; every rank writes
            :class:`Sharded` ones.
        store: the storage to write through (default: :func:`~trainguard.runtime.storage.store_for`
            the directory); the place a faster store plugs in.
        deadline_s: retry deadline of each storage call (``gs://``; default: minutes).

    Raises:
        ConfigError: no directory (and no ``AIP_CHECKPOINT_DIR``), or an option of the wrong kind.
    """

    def __init__(
        self,
        directory: str | None = None,
        *,
        retention: RetentionPolicy | None = None,
        async_save: bool = True,
        is_chief: bool = True,
        store: FileStore | None = None,
        deadline_s: float | None = None,
    ) -> None:
        directory = directory or os.environ.get("AIP_CHECKPOINT_DIR", "")
        if not isinstance(directory, str) or not directory:
            raise ConfigError(
                "no checkpoint directory: pass directory= or run where "
                "AIP_CHECKPOINT_DIR is set (a Vertex job with baseOutputDirectory)"
            )
        if retention is not None and not isinstance(retention, RetentionPolicy):
            raise ConfigError(
                f"retention={retention!r}: pass a RetentionPolicy(keep_last=..., keep_best=..., metric=...)"
            )
        if deadline_s is not None and not (
            isinstance(deadline_s, int | float) and not isinstance(deadline_s, bool) and deadline_s > 0
        ):
            raise ConfigError(f"deadline_s={deadline_s!r}: pass a number of seconds > 0, or None")
        self.directory = directory.rstrip("/")
        self.retention = retention or RetentionPolicy()
        self.async_save = bool(async_save)
        self.is_chief = bool(is_chief)
        self.store = store or store_for(self.directory, deadline_s=deadline_s)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._measured: list[SaveMeasure] = []
        self._measured_lock = threading.Lock()

    def take_measures(self) -> list[SaveMeasure]:
        """The saves completed since the last call, measured (bytes, seconds), oldest first."""
        with self._measured_lock:
            out, self._measured = self._measured, []
        return out

    # -- reading --

    def _groups(self) -> tuple[dict[int, dict[str, int]], list[str]]:
        """Files per step directory (name relative to it → size), and the names outside them."""
        groups: dict[int, dict[str, int]] = {}
        others: list[str] = []
        prefix = self.directory + "/"
        for uri, size in self.store.list_sizes(self.directory).items():
            rel = uri[len(prefix) :] if uri.startswith(prefix) else uri
            head, _, name = rel.partition("/")
            m = _STEP_DIR.match(head)
            if m and name:
                groups.setdefault(int(m.group(1)), {})[name] = size
            else:
                others.append(rel)
        return groups, others

    def scan(self) -> Scan:
        """Every checkpoint in the directory, sorted into complete, damaged and incomplete."""
        groups, others = self._groups()
        out = Scan(others=sorted(others))
        for step, names in sorted(groups.items()):
            if COMMIT_MARKER not in names:
                out.incomplete.append(step)
                continue
            found = self._check(step, names)
            if isinstance(found, Checkpoint):
                out.complete.append(found)
            else:
                out.damaged[step] = found
        return out

    def _check(self, step: int, names: dict[str, int]) -> Checkpoint | str:
        """The checkpoint of ``step`` if its COMMIT holds; else why not."""
        uri = self.step_uri(step)
        if names[COMMIT_MARKER] > _MAX_COMMIT_BYTES:
            return f"its {COMMIT_MARKER} is {names[COMMIT_MARKER]} bytes, not a trainguard marker"
        try:
            meta = json.loads(self.store.read_bytes(join(uri, COMMIT_MARKER)))
        except (ValueError, OSError) as exc:
            return f"its {COMMIT_MARKER} cannot be read as JSON ({type(exc).__name__})"
        problem = _commit_problem(meta, step)
        if problem:
            return problem
        root_dir = meta.get("dir") or ""
        sizes = meta.get("sizes") or {}
        for name in meta["files"]:
            rel = f"{root_dir}/{name}" if root_dir else name
            if rel not in names:
                return f"{name} is missing or not a regular file (symbolic links are not followed)"
            want = sizes.get(name)
            if isinstance(want, int) and names[rel] != want:
                return f"{name} is {names[rel]} bytes but {COMMIT_MARKER} says {want} (torn or replaced)"
        metrics = {k: v for k, v in (meta.get("metrics") or {}).items() if isinstance(k, str) and _finite(v)}
        return Checkpoint(
            step,
            uri,
            tuple(meta["files"]),
            metrics,
            float(meta.get("created", 0.0)),
            str(meta.get("format", FORMAT_FILES)),
            join(uri, root_dir) if root_dir else uri,
            {k: v for k, v in sizes.items() if isinstance(v, int)},
            meta,
        )

    def checkpoints(self) -> list[Checkpoint]:
        """Every complete checkpoint, oldest first."""
        return self.scan().complete

    def checkpoint(self, step: int) -> Checkpoint | None:
        """The complete checkpoint of ``step``, or None."""
        return next((c for c in self.checkpoints() if c.step == step), None)

    def restore_latest(self) -> Checkpoint | None:
        """The newest complete checkpoint, or None (incomplete ones are ignored).

        Raises:
            CheckpointError: the newest committed checkpoint is damaged (it is left as it is).
        """
        self.raise_pending()
        return self.choose()

    def choose(self, step: int | None = None, scan: Scan | None = None) -> Checkpoint | None:
        """The checkpoint a restore reads: that of ``step``, else the newest complete one (None
        when there is none).

        Raises:
            CheckpointError: ``step`` has no complete checkpoint, or a committed checkpoint newer
                than the newest complete one is damaged; the message names the intact one to fall
                back to (nothing is deleted).
        """
        scan = scan or self.scan()
        if step is not None:
            found = next((c for c in scan.complete if c.step == step), None)
            if found is None:
                have = ", ".join(str(c.step) for c in scan.complete[-10:]) or "none"
                why = f" ({scan.damaged[step]})" if step in scan.damaged else ""
                raise CheckpointError(
                    f"no complete checkpoint of step {step} in {self.directory}{why}; complete ones: {have}"
                )
            return found
        latest = scan.complete[-1] if scan.complete else None
        newer = [s for s in scan.damaged if latest is None or s > latest.step]
        if newer:
            worst = max(newer)
            raise CheckpointError(
                f"{self.step_uri(worst)} is damaged: {scan.damaged[worst]}. "
                + self.fallback_hint(worst, scan)
            )
        return latest

    @contextlib.contextmanager
    def open_file(self, checkpoint: Checkpoint, name: str) -> Iterator[BinaryIO]:
        """A binary reader of payload file ``name`` of ``checkpoint`` (one its ``COMMIT`` lists):
        local and FUSE files are read in place and never through a symbolic link; a ``gs://``
        object is read whole first (the readers seek).

        Raises:
            CheckpointError: ``COMMIT`` lists no such file, or it is not a regular file.
        """
        path = checkpoint.path(name)
        if path.startswith("gs://"):
            yield io.BytesIO(self.store.read_bytes(path))
            return
        if os.path.islink(path) or not os.path.isfile(path):
            raise CheckpointError(
                f"{path}: not a regular file (symbolic links are not followed); "
                "move the checkpoint out of the checkpoint directory"
            )
        with self.store.open_read(path) as handle:
            yield handle

    def fallback_hint(self, step: int, scan: Scan | None = None) -> str:
        """What to do when checkpoint ``step`` cannot be used: the intact one to fall back to."""
        scan = scan or self.scan()
        older = [c for c in scan.complete if c.step < step]
        where = self.step_uri(step)
        if older:
            return (
                f"To resume from step {older[-1].step}, the newest intact checkpoint before "
                f"it, move {where} out of {self.directory} (nothing was deleted)"
            )
        return (
            f"No intact checkpoint precedes it: move {where} out of {self.directory} to start "
            "afresh (nothing was deleted)"
        )

    # -- writing --

    def step_uri(self, step: int) -> str:
        """The directory of step ``step``'s checkpoint (``…/step-000000120``)."""
        return join(self.directory, f"step-{step:09d}")

    def attempt_uri(self, step: int, attempt: str) -> str:
        """The directory one save of ``step`` writes its files into (see :func:`attempt_name`)."""
        return join(self.step_uri(step), attempt)

    def save(
        self,
        step: int,
        payload: Payload | Sharded,
        metrics: Mapping[str, object] | None = None,
        *,
        blocking: bool | None = None,
        format: str = FORMAT_FILES,
        attempt: str | None = None,
        meta: Mapping[str, object] | None = None,
    ) -> None:
        """Saves ``payload`` as step ``step``.

        Args:
            step: the training step.
            payload: name → bytes, a callable returning bytes, or a :class:`Stream`; or a
                :class:`Sharded` writer that every rank runs.
            metrics: recorded in ``COMMIT`` (what ``float()`` does not read as a finite number is
                dropped).
            blocking: write on this thread (default: unless ``async_save``).
            format: recorded in ``COMMIT``: who can read this checkpoint.
            attempt: the attempt directory name (ranks of a sharded save must agree on it).
            meta: more fields for ``COMMIT`` (``world_size``, versions).

        At most one save is in flight: a second call waits for the first. A failed background
        save raises here or in the next call.
        """
        if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= 999_999_999:
            raise ConfigError(f"checkpoint step must be a whole number in 0..999999999, not {step!r}")
        self.raise_pending()
        self.wait()
        sharded = isinstance(payload, Sharded)
        if not self.is_chief and not sharded:
            return
        if not isinstance(payload, Sharded):
            payload = dict(payload)
            for name in payload:
                if not safe_relative_name(name) or name == COMMIT_MARKER:
                    raise ConfigError(
                        f"checkpoint file name {name!r}: use a plain relative name (letters, digits, "
                        f"'_.=+-', '/' between parts; not '..' or {COMMIT_MARKER!r})"
                    )
        blocks = bool(blocking or (blocking is None and not self.async_save))
        job = (
            step,
            payload,
            dict(metrics or {}),
            format,
            attempt or attempt_name(),
            dict(meta or {}),
            blocks,
        )
        if blocks:
            self._write(*job)
            return
        self._thread = threading.Thread(
            target=self._background, args=job, name="trainguard-checkpoint", daemon=True
        )
        self._thread.start()

    def _background(self, *job) -> None:
        try:
            self._write(*job)
        except BaseException as exc:  # surfaced on the next call
            self._error = exc

    def _write(
        self, step: int, payload, metrics: dict, fmt: str, attempt: str, meta: dict, blocks: bool = True
    ) -> None:
        started, clock = time.time(), time.perf_counter()
        step_uri = self.step_uri(step)
        attempt_uri = join(step_uri, attempt)
        if self.is_chief:
            self._clean(keep=attempt_uri)
        try:
            if isinstance(payload, Sharded):
                payload.write(attempt_uri)
                if not self.is_chief:
                    return
                prefix = attempt_uri + "/"
                sizes = {
                    uri[len(prefix) :]: size
                    for uri, size in self.store.list_sizes(attempt_uri).items()
                    if uri.startswith(prefix)
                }
            else:
                sizes = {}
                for name, value in payload.items():
                    target = join(attempt_uri, name)
                    if isinstance(value, Stream):
                        sizes[name] = self.store.write_stream(target, value.write)
                        continue
                    data = value() if callable(value) else value
                    self.store.write_bytes(target, data)
                    sizes[name] = len(data)
        except BaseException as exc:
            if self.is_chief:  # free the space of the failed attempt (no COMMIT names it)
                with contextlib.suppress(Exception):  # the original error matters more
                    self.store.delete_tree(attempt_uri)
            full = _no_space(exc)
            if full is not None:
                raise CheckpointError(f"checkpoint step {step}: {full}") from exc
            raise
        self._commit(step, attempt, sizes, metrics, fmt, meta)
        measure = SaveMeasure(step, sum(sizes.values()), time.perf_counter() - clock, blocks, started)
        with self._measured_lock:
            self._measured.append(measure)

    def _commit(
        self, step: int, attempt: str, sizes: dict[str, int], metrics: dict, fmt: str, meta: dict
    ) -> None:
        clean_metrics = {}
        for key, value in metrics.items():
            try:
                number = float(cast(SupportsFloat, value))  # numbers, 0-d arrays and tensors
            except (TypeError, ValueError):
                continue
            if math.isfinite(number):
                clean_metrics[str(key)] = number
        marker = {
            **meta,
            "version": COMMIT_VERSION,
            "format": fmt,
            "step": step,
            "dir": attempt,
            "files": sorted(sizes),
            "sizes": sizes,
            "metrics": clean_metrics,
            "created": time.time(),
        }
        step_uri = self.step_uri(step)
        # The switch: one atomic write. Until it lands, the previous COMMIT of this step (if any)
        # still names its own, complete attempt.
        self.store.write_bytes(join(step_uri, COMMIT_MARKER), json.dumps(marker).encode())
        self._drop_unreferenced(step_uri, attempt)
        for old in self.retention.to_delete(self.checkpoints()):
            # Marker first: a half-deleted checkpoint must never look complete.
            self.store.delete(join(old.uri, COMMIT_MARKER))
            self.store.delete_tree(old.uri)

    def _drop_unreferenced(self, step_uri: str, attempt: str) -> None:
        """Removes what an older COMMIT of this step named (a re-save), now that it is replaced."""
        prefix = step_uri + "/"
        for uri in self.store.list(step_uri):
            rel = uri[len(prefix) :] if uri.startswith(prefix) else uri
            if rel != COMMIT_MARKER and not rel.startswith(attempt + "/"):
                self.store.delete(uri)

    def _clean(self, keep: str) -> None:
        """Removes debris of saves that died: step directories without COMMIT, and attempts that
        a complete COMMIT does not name. Damaged checkpoints are left for the user to inspect."""
        groups, _ = self._groups()
        for step, names in groups.items():
            step_uri = self.step_uri(step)
            if COMMIT_MARKER in names:
                found = self._check(step, names)
                if not isinstance(found, Checkpoint):
                    continue
                root = found.meta.get("dir") or ""
                referenced = {f"{root}/{f}" if root else f for f in found.files} | {COMMIT_MARKER}
            elif not keep.startswith(step_uri + "/"):
                self.store.delete_tree(step_uri)
                continue
            else:
                referenced = set()
            for rel in names:
                uri = join(step_uri, rel)
                if rel not in referenced and not uri.startswith(keep + "/"):
                    self.store.delete(uri)

    def wait(self) -> None:
        """Blocks until the save in flight (if any) is done; raises its error."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.raise_pending()

    def raise_pending(self) -> None:
        """Raises the error of a failed background save, once (user errors as they are)."""
        if self._error is not None:
            exc, self._error = self._error, None
            if isinstance(exc, UserError):
                raise exc
            raise RuntimeError(f"a background checkpoint save failed: {exc}") from exc

    def close(self) -> None:
        """Waits for the save in flight (raises its error)."""
        self.wait()

    def __enter__(self) -> CheckpointManager:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _commit_problem(meta: object, step: int) -> str:
    """Why a parsed COMMIT cannot be trusted ('' when it can)."""
    if not isinstance(meta, dict):
        return f"its {COMMIT_MARKER} is not a JSON object"
    if meta.get("step") not in (None, step):
        return f"its {COMMIT_MARKER} says step {meta.get('step')!r}, not {step}"
    files = meta.get("files")
    if not isinstance(files, list) or not all(safe_relative_name(f) for f in files):
        return (
            f"its {COMMIT_MARKER} lists file names that are not plain relative names "
            "(absolute, '..', or odd characters): it could point outside the checkpoint"
        )
    root = meta.get("dir")
    if root not in (None, "") and not (safe_relative_name(root) and "/" not in root):
        return f"its {COMMIT_MARKER} names an attempt directory {str(root)[:80]!r} that is not a plain name"
    return ""


def _no_space(exc: BaseException) -> str | None:
    """The disk-full message hidden anywhere in ``exc``'s chain (DCP wraps per-rank failures)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno == errno.ENOSPC:
            text = current.strerror or str(current)
            return text if "no space left on" in text else f"no space left on the device ({text})"
        todo += [current.__cause__, current.__context__]
        failures = getattr(current, "failures", None)
        if isinstance(failures, Mapping):
            todo += [v for v in failures.values() if isinstance(v, BaseException)]
    return None


def note(message: str) -> None:
    """One line for the job's log (stderr: it is what Vertex and the local backend keep)."""
    print(f"trainguard: {message}", file=sys.stderr, flush=True)
