"""Atomic, resumable checkpoints on ``gs://``, local disks and ``/gcs/`` FUSE mounts.

Layout: ``<directory>/step-000000120/<name>`` for each payload file, then ``COMMIT`` (JSON: step,
files, sizes, metrics, time) written *last*. A checkpoint exists only once its marker does, so a
crash mid-save leaves an incomplete folder that ``restore_latest`` ignores and the next save cleans
up. Cloud Storage has no rename; the marker is what makes a save atomic there.

Saving can run in the background: the training thread hands off a snapshot (payload values may be
callables, serialised on the saver thread) and goes on; at most one save is in flight, and an error
from it is raised on the next call rather than lost.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import BinaryIO

from trainguard.runtime.storage import FileStore, join, store_for

__all__ = ["Checkpoint", "CheckpointManager", "SavePolicy", "RetentionPolicy", "Stream",
           "COMMIT_MARKER"]

COMMIT_MARKER = "COMMIT"
_STEP_DIR = re.compile(r"step-(\d{9})$")


@dataclass(frozen=True)
class Stream:
    """A payload file written by ``write(fileobj)`` straight to storage, never held in memory
    whole (for large states: ``Stream(lambda f: torch.save(state, f))``)."""

    write: Callable[[BinaryIO], object]


Payload = Mapping[str, "bytes | Callable[[], bytes] | Stream"]


@dataclass(frozen=True)
class SavePolicy:
    """When to save: every ``every_steps`` steps and/or every ``every_seconds`` seconds."""

    every_steps: int | None = None
    every_seconds: float | None = None

    def due(self, step: int, now: float, last_step: int | None, last_time: float) -> bool:
        """True when a save is due at ``step``."""
        if last_step is not None and step <= last_step:
            return False
        if self.every_steps and step % self.every_steps == 0:
            return True
        return bool(self.every_seconds and now - last_time >= self.every_seconds)


@dataclass(frozen=True)
class RetentionPolicy:
    """Which checkpoints to keep: the last ``keep_last`` and the ``keep_best`` best by ``metric``."""

    keep_last: int = 3
    keep_best: int = 0
    metric: str = "val_loss"
    mode: str = "min"

    def to_delete(self, checkpoints: list[Checkpoint]) -> list[Checkpoint]:
        """The complete checkpoints (sorted by step) this policy no longer keeps."""
        ordered = sorted(checkpoints, key=lambda c: c.step)
        keep = {c.step for c in ordered[-self.keep_last:]} if self.keep_last > 0 else set()
        if self.keep_best:
            scored = [c for c in ordered if _finite(c.metrics.get(self.metric))]
            scored.sort(key=lambda c: c.metrics[self.metric], reverse=self.mode == "max")
            keep |= {c.step for c in scored[: self.keep_best]}
        if ordered:
            keep.add(ordered[-1].step)  # never delete the newest
        return [c for c in ordered if c.step not in keep]


def _finite(value) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint."""

    step: int
    uri: str
    files: tuple[str, ...]
    metrics: dict = field(default_factory=dict)
    created: float = 0.0

    def read(self, name: str) -> bytes:
        """The bytes of payload file ``name``."""
        return store_for(self.uri).read_bytes(join(self.uri, name))


class CheckpointManager:
    """Saves and restores checkpoints in ``directory`` (default ``$AIP_CHECKPOINT_DIR``).

    Args:
        directory: ``gs://…``, a local path or a ``/gcs/`` FUSE path.
        save: when ``maybe_save`` saves.
        retention: which checkpoints to keep.
        async_save: save on a background thread.
        is_chief: only the chief writes; other ranks only read.
        store: storage override (tests).
    """

    def __init__(self, directory: str | None = None, *, save: SavePolicy | None = None,
                 retention: RetentionPolicy | None = None, async_save: bool = True,
                 is_chief: bool = True, store: FileStore | None = None) -> None:
        directory = directory or os.environ.get("AIP_CHECKPOINT_DIR", "")
        if not directory:
            raise ValueError("no checkpoint directory: pass directory= or run where "
                             "AIP_CHECKPOINT_DIR is set (a Vertex job with baseOutputDirectory)")
        self.directory = directory.rstrip("/")
        self.save_policy = save or SavePolicy(every_steps=100)
        self.retention = retention or RetentionPolicy()
        self.async_save = async_save
        self.is_chief = is_chief
        self._store = store or store_for(self.directory)
        self._last_step: int | None = None
        self._last_time = time.monotonic()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._preempted = threading.Event()
        self._previous_handler = None

    # -- reading --

    def _step_dirs(self) -> dict[int, set[str]]:
        out: dict[int, set[str]] = {}
        prefix = self.directory + "/"
        for uri in self._store.list(self.directory):
            rel = uri[len(prefix):] if uri.startswith(prefix) else uri
            head, _, name = rel.partition("/")
            m = _STEP_DIR.match(head)
            if m and name:
                out.setdefault(int(m.group(1)), set()).add(name)
        return out

    def checkpoints(self) -> list[Checkpoint]:
        """Every complete checkpoint, oldest first."""
        out = []
        for step, names in sorted(self._step_dirs().items()):
            if COMMIT_MARKER not in names:
                continue
            uri = self._uri(step)
            try:
                meta = json.loads(self._store.read_bytes(join(uri, COMMIT_MARKER)))
            except (ValueError, OSError):
                continue  # an unreadable marker is no commit
            files = tuple(meta.get("files", ()))
            if not set(files) <= names:
                continue
            out.append(Checkpoint(step, uri, files, meta.get("metrics", {}),
                                  meta.get("created", 0.0)))
        return out

    def restore_latest(self) -> Checkpoint | None:
        """The newest complete checkpoint, or None (incomplete ones are ignored)."""
        self.raise_pending()
        found = self.checkpoints()
        if not found:
            return None
        latest = found[-1]
        self._last_step = latest.step
        return latest

    # -- writing --

    def _uri(self, step: int) -> str:
        return join(self.directory, f"step-{step:09d}")

    def should_save(self, step: int) -> bool:
        """True when the save policy (or a pending preemption) asks for a save at ``step``."""
        return self.preempted or self.save_policy.due(step, time.monotonic(), self._last_step,
                                                      self._last_time)

    def maybe_save(self, step: int, payload: Payload | Callable[[], Payload],
                   metrics: Mapping[str, float] | None = None) -> bool:
        """Saves when due; ``payload`` may be a callable so no snapshot is taken otherwise."""
        if not self.should_save(step):
            return False
        self.save(step, payload() if callable(payload) else payload, metrics)
        return True

    def save(self, step: int, payload: Payload, metrics: Mapping[str, float] | None = None,
             *, blocking: bool | None = None) -> None:
        """Saves ``payload`` (name → bytes or a callable returning bytes) as step ``step``.

        At most one save is in flight: a second call waits for the first. A failed background
        save raises here or in the next call.
        """
        self.raise_pending()
        self.wait()
        self._last_step, self._last_time = step, time.monotonic()
        if not self.is_chief:
            return
        job = (step, dict(payload), dict(metrics or {}))
        if blocking or (blocking is None and not self.async_save) or self.preempted:
            self._write(*job)
            return
        self._thread = threading.Thread(target=self._background, args=job,
                                        name="trainguard-checkpoint", daemon=True)
        self._thread.start()

    def _background(self, step: int, payload: dict, metrics: dict) -> None:
        try:
            self._write(step, payload, metrics)
        except BaseException as exc:  # surfaced on the next call
            self._error = exc

    def _write(self, step: int, payload: dict, metrics: dict) -> None:
        uri = self._uri(step)
        existing = self._step_dirs()
        for stale_step, names in existing.items():  # debris of a crash mid-save
            if COMMIT_MARKER not in names:
                for name in names:
                    self._store.delete(join(self._uri(stale_step), name))
        if COMMIT_MARKER in existing.get(step, ()):
            # Saving a step again (a preemption right after a restore): withdraw the old commit
            # first, so a crash mid-way cannot leave new files under the old marker.
            self._store.delete(join(uri, COMMIT_MARKER))
            for name in existing[step] - {COMMIT_MARKER}:
                self._store.delete(join(uri, name))
        sizes = {}
        for name, value in payload.items():
            if "/" in name or name == COMMIT_MARKER:
                raise ValueError(f"invalid checkpoint file name {name!r}")
            target = join(uri, name)
            if isinstance(value, Stream):
                sizes[name] = self._store.write_stream(target, value.write)
                continue
            data = value() if callable(value) else value
            self._store.write_bytes(target, data)
            sizes[name] = len(data)
        clean_metrics = {k: float(v) for k, v in metrics.items() if _finite(float(v))}
        marker = {"step": step, "files": sorted(sizes), "sizes": sizes, "metrics": clean_metrics,
                  "created": time.time()}
        self._store.write_bytes(join(uri, COMMIT_MARKER), json.dumps(marker).encode())
        for old in self.retention.to_delete(self.checkpoints()):
            # Marker first: a half-deleted checkpoint must never look complete.
            self._store.delete(join(old.uri, COMMIT_MARKER))
            for name in old.files:
                self._store.delete(join(old.uri, name))

    def wait(self) -> None:
        """Blocks until the save in flight (if any) is done; raises its error."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.raise_pending()

    def raise_pending(self) -> None:
        """Raises the error of a failed background save, once."""
        if self._error is not None:
            exc, self._error = self._error, None
            raise RuntimeError(f"a background checkpoint save failed: {exc}") from exc

    def close(self) -> None:
        """Waits for the save in flight and restores the previous SIGTERM handler."""
        try:
            self.wait()
        finally:
            if self._previous_handler is not None:
                signal.signal(signal.SIGTERM, self._previous_handler)
                self._previous_handler = None

    # -- preemption --

    @property
    def preempted(self) -> bool:
        """True once SIGTERM arrived: save now (``should_save`` says so) and exit."""
        return self._preempted.is_set()

    def install_sigterm_handler(self) -> None:
        """On SIGTERM, flag a preemption instead of dying mid-step (main thread only)."""

        def handler(signum, frame):
            self._preempted.set()

        self._previous_handler = signal.signal(signal.SIGTERM, handler)

    def __enter__(self) -> CheckpointManager:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
