"""Parallel transfer of large ``gs://`` objects: composite uploads in parts, concurrent ranged reads.

Cloud Storage gives one stream roughly 200 MiB/s and many streams together far more, so a
checkpoint file sent as one resumable upload is bounded by one stream however fat the VM's link
is ("Optimize performance": "parallel composite uploads ... can be significantly faster if network
and disk speed are not limiting factors", cloud.google.com/storage/docs/parallel-composite-uploads).

Uploads: a file at or above ``threshold_bytes`` is cut into ``part_bytes`` parts, each uploaded
concurrently as a temporary object beside its destination (``<name>.tg-part-<nonce>-<index>``),
then joined with ``compose`` (at most :data:`COMPOSE_MAX_SOURCES` sources per request, so more
parts are composed in a tree through ``<name>.tg-compose-…`` objects; "Composite objects may be
built from source objects that are themselves composite objects", XML API put-object-compose), and
the temporary objects are deleted. The destination object appears only when the last compose
lands — whole, as any GCS object write — so the checkpoint ``COMMIT`` protocol is untouched: a kill
at any moment leaves temporary objects inside an attempt no ``COMMIT`` names, which the next save
removes. google-cloud-storage's ``transfer_manager.upload_chunks_concurrently`` would be the kept
call, but it speaks the XML multipart-upload API, which gcp-storage-emulator does not serve (its
routes have ``compose`` but no ``POST ?uploads``); compose is the JSON API's way.

Downloads: ``download_file`` uses ``transfer_manager.download_chunks_concurrently`` (threads:
network waits release the GIL), which checks the whole file's crc32c; ``read_bytes`` reads ranges
of ``part_bytes`` concurrently into one buffer, each pinned to the object's generation (an object
replaced mid-read fails instead of mixing two), and checks the crc32c of the whole.

>>> TransferConfig().parallel
True
>>> TransferConfig.single_stream().parallel
False
>>> TransferConfig(part_bytes=1024)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
trainguard.errors.ConfigError: part_bytes=1024: pass at least 262144 bytes (256 KiB): ...
"""

from __future__ import annotations

import base64
import contextlib
import io
import os
import re
import secrets
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from trainguard.errors import ConfigError

__all__ = [
    "TransferConfig",
    "ParallelTransfer",
    "PartWriter",
    "COMPOSE_MAX_SOURCES",
    "TEMP_MARKERS",
    "DEFAULT_PART_BYTES",
    "DEFAULT_WORKERS",
    "DEFAULT_THRESHOLD_BYTES",
    "ENV_WORKERS",
    "ENV_PART_BYTES",
    "ENV_THRESHOLD_BYTES",
]

MiB = 1 << 20

# --- the one table of transfer facts, each with its source ----------------------------------------
#: Sources one compose request may join: "a compose request takes between 1 and 32 objects"
#: (cloud.google.com/storage/docs/composing-objects).
COMPOSE_MAX_SOURCES = 32
#: Bytes per part: google-cloud-storage's transfer_manager.TM_DEFAULT_CHUNK_SIZE (32 MiB).
DEFAULT_PART_BYTES = 32 * MiB
#: Concurrent requests: transfer_manager.DEFAULT_MAX_WORKERS (8).
DEFAULT_WORKERS = 8
#: Below two parts there is nothing to parallelise; one stream moves 64 MiB in ~0.3 s.
DEFAULT_THRESHOLD_BYTES = 2 * DEFAULT_PART_BYTES
#: The smallest part: a resumable upload's chunk granularity (256 KiB, Blob.chunk_size's unit).
MIN_PART_BYTES = 256 << 10
#: requests' connection pool keeps 10 connections per host (requests.adapters.DEFAULT_POOLSIZE);
#: more workers get a bigger pool mounted.
POOL_DEFAULT = 10
MAX_WORKERS = 64

ENV_WORKERS = "TRAINGUARD_GCS_WORKERS"
ENV_PART_BYTES = "TRAINGUARD_GCS_PART_BYTES"
ENV_THRESHOLD_BYTES = "TRAINGUARD_GCS_PARALLEL_THRESHOLD"

#: What names a temporary object of a parallel upload (never a checkpoint payload name's suffix).
TEMP_MARKERS = (".tg-part-", ".tg-compose-")

_SIZE = re.compile(r"^\s*(\d+)\s*(|b|kib|mib|gib)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}


def _parse_size(name: str, text: str) -> int:
    m = _SIZE.match(text)
    if not m:
        raise ConfigError(f"{name}={text!r}: pass a number of bytes, e.g. 33554432 or 32MiB")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


@dataclass(frozen=True)
class TransferConfig:
    """How ``gs://`` objects travel.

    Attributes:
        workers: concurrent requests per file (1: one stream, the resumable upload of old).
        part_bytes: bytes per part and per ranged read.
        threshold_bytes: files at least this large go in parts; smaller ones in one request.

    Raises:
        ConfigError: a value out of range (the message says what to pass).
    """

    workers: int = DEFAULT_WORKERS
    part_bytes: int = DEFAULT_PART_BYTES
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES

    def __post_init__(self) -> None:
        for name in ("workers", "part_bytes", "threshold_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"{name}={value!r}: pass a whole number")
        if not 1 <= self.workers <= MAX_WORKERS:
            raise ConfigError(f"workers={self.workers}: pass 1 (one stream) to {MAX_WORKERS}")
        if self.part_bytes < MIN_PART_BYTES:
            raise ConfigError(
                f"part_bytes={self.part_bytes}: pass at least {MIN_PART_BYTES} bytes (256 KiB): "
                "a smaller part costs a request for too few bytes"
            )
        if self.threshold_bytes < self.part_bytes:
            raise ConfigError(
                f"threshold_bytes={self.threshold_bytes}: pass at least part_bytes "
                f"({self.part_bytes}): a file smaller than one part is sent whole"
            )

    @property
    def parallel(self) -> bool:
        """Whether large files go in concurrent parts."""
        return self.workers > 1

    @classmethod
    def single_stream(cls) -> TransferConfig:
        """One stream per file (what every file used before parallel transfer)."""
        return cls(workers=1)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TransferConfig:
        """The defaults, overridden by ``TRAINGUARD_GCS_WORKERS``, ``TRAINGUARD_GCS_PART_BYTES``
        and ``TRAINGUARD_GCS_PARALLEL_THRESHOLD`` (bytes, or with KiB/MiB/GiB)."""
        env = os.environ if environ is None else environ
        workers = env.get(ENV_WORKERS, "").strip()
        part = env.get(ENV_PART_BYTES, "").strip()
        threshold = env.get(ENV_THRESHOLD_BYTES, "").strip()
        if workers and not workers.isdigit():
            raise ConfigError(f"{ENV_WORKERS}={workers!r}: pass a whole number (1 = one stream)")
        part_bytes = _parse_size(ENV_PART_BYTES, part) if part else DEFAULT_PART_BYTES
        return cls(
            workers=int(workers) if workers else DEFAULT_WORKERS,
            part_bytes=part_bytes,
            threshold_bytes=(
                _parse_size(ENV_THRESHOLD_BYTES, threshold)
                if threshold
                else max(DEFAULT_THRESHOLD_BYTES, 2 * part_bytes)
            ),
        )


def _ranges(size: int, part: int) -> list[tuple[int, int]]:
    """Inclusive byte ranges of ``part`` bytes covering ``size``."""
    return [(start, min(start + part, size) - 1) for start in range(0, size, part)]


def _crc32c_b64(data: bytes | bytearray | memoryview) -> str:
    import google_crc32c  # google-cloud-storage's own dependency

    return base64.b64encode(google_crc32c.Checksum(bytes(data)).digest()).decode()


class ParallelTransfer:
    """Parallel uploads and downloads of one bucket's objects through a google-cloud-storage client.

    Args:
        client: a ``google.cloud.storage.Client``.
        config: the parts and workers.
        retry: the ``google.api_core`` retry every request runs under.
        timeout: one request's timeout (seconds).
    """

    def __init__(self, client, config: TransferConfig, *, retry: Any, timeout: float) -> None:
        self.client = client
        self.config = config
        self.retry = retry
        self.timeout = timeout
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        if config.workers > POOL_DEFAULT:
            self._widen_pool(config.workers)

    def _widen_pool(self, size: int) -> None:
        """More connections than requests' default 10 per host, else extra workers wait."""
        import requests.adapters

        session = getattr(self.client, "_http", None)  # the client's AuthorizedSession
        if session is not None and hasattr(session, "mount"):
            for scheme in ("https://", "http://"):
                session.mount(scheme, requests.adapters.HTTPAdapter(pool_maxsize=size, pool_connections=size))

    @property
    def pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.config.workers, thread_name_prefix="trainguard-gcs")
            return self._pool

    # -- uploads --

    def part_names(self, name: str, count: int) -> tuple[str, list[str]]:
        nonce = secrets.token_hex(4)
        return nonce, [f"{name}.tg-part-{nonce}-{index:05d}" for index in range(count)]

    def upload_part(self, bucket: str, name: str, data: bytes | memoryview) -> None:
        blob = self.client.bucket(bucket).blob(name)
        blob.upload_from_string(bytes(data), retry=self.retry, timeout=self.timeout)

    def upload_bytes(self, bucket: str, name: str, data: bytes | bytearray | memoryview) -> int:
        """Creates ``name`` from ``data``: in parts when large, else in one request."""
        view = memoryview(data)
        if not self.config.parallel or len(view) < self.config.threshold_bytes:
            self.upload_part(bucket, name, view)
            return len(view)
        ranges = _ranges(len(view), self.config.part_bytes)
        nonce, parts = self.part_names(name, len(ranges))
        self.finish_parts(
            bucket,
            name,
            nonce,
            [
                (part, self.pool.submit(self.upload_part, bucket, part, view[a : b + 1]))
                for part, (a, b) in zip(parts, ranges, strict=True)
            ],
        )
        return len(view)

    def upload_file(self, bucket: str, name: str, local_path: str) -> None:
        """Creates ``name`` from a local file: in parts read at their offsets when large."""
        size = os.path.getsize(local_path)
        blob = self.client.bucket(bucket).blob(name)
        if not self.config.parallel or size < self.config.threshold_bytes:
            blob.upload_from_filename(local_path, retry=self.retry, timeout=self.timeout)
            return

        def send(part: str, start: int, end: int) -> None:
            with open(local_path, "rb") as handle:
                handle.seek(start)
                self.upload_part(bucket, part, handle.read(end - start + 1))

        ranges = _ranges(size, self.config.part_bytes)
        nonce, parts = self.part_names(name, len(ranges))
        self.finish_parts(
            bucket,
            name,
            nonce,
            [(p, self.pool.submit(send, p, a, b)) for p, (a, b) in zip(parts, ranges, strict=True)],
        )

    def finish_parts(self, bucket: str, name: str, nonce: str, sent: list[tuple[str, Future]]) -> None:
        """Waits for the parts, composes them into ``name`` and deletes them; on any failure the
        parts are deleted (best effort) and the error raised: ``name`` was never created."""
        made: list[str] = []
        try:
            error: BaseException | None = None
            for part, future in sent:
                try:
                    future.result()
                    made.append(part)
                except BaseException as exc:  # wait for every part, then raise the first error
                    error = error or exc
            if error is not None:
                raise error
            made += self.compose(bucket, name, nonce, [p for p, _ in sent])
        except BaseException:
            with contextlib.suppress(Exception):  # tidiness: no COMMIT names these objects
                self.delete_many(bucket, made + [p for p, _ in sent])
            raise
        self.delete_many(bucket, made)

    def compose(self, bucket: str, name: str, nonce: str, sources: list[str], level: int = 0) -> list[str]:
        """Composes ``sources`` (in order) into ``name``; returns the intermediate objects made."""
        handle = self.client.bucket(bucket)
        if len(sources) <= COMPOSE_MAX_SOURCES:
            handle.blob(name).compose(
                [handle.blob(s) for s in sources], retry=self.retry, timeout=self.timeout
            )
            return []
        groups = [sources[i : i + COMPOSE_MAX_SOURCES] for i in range(0, len(sources), COMPOSE_MAX_SOURCES)]
        middle = [f"{name}.tg-compose-{nonce}-{level}-{i:04d}" for i in range(len(groups))]
        jobs = [
            self.pool.submit(
                lambda n, g: handle.blob(n).compose(
                    [handle.blob(s) for s in g], retry=self.retry, timeout=self.timeout
                ),
                n,
                g,
            )
            for n, g in zip(middle, groups, strict=True)
        ]
        try:
            for job in jobs:
                job.result()
        except BaseException:
            with contextlib.suppress(Exception):
                self.delete_many(bucket, middle)
            raise
        return middle + self.compose(bucket, name, nonce, middle, level + 1)

    def delete_many(self, bucket: str, names: list[str]) -> None:
        """Deletes ``names`` concurrently (one missing is fine)."""
        from google.api_core.exceptions import NotFound

        handle = self.client.bucket(bucket)

        def delete(n: str) -> None:
            with contextlib.suppress(NotFound):
                handle.blob(n).delete(retry=self.retry, timeout=self.timeout)

        for job in [self.pool.submit(delete, n) for n in names]:
            job.result()

    def writer(self, bucket: str, name: str, single: Callable[[bytes], None]) -> PartWriter:
        """A file object whose bytes become ``name`` on ``close()`` (see :class:`PartWriter`)."""
        return PartWriter(self, bucket, name, single)

    # -- downloads --

    def read_bytes(self, bucket: str, name: str) -> bytes:
        """The object's bytes: concurrent ranged reads of one generation when large, crc32c-checked."""
        blob = self.client.bucket(bucket).blob(name)
        if not self.config.parallel:
            return bytes(blob.download_as_bytes(retry=self.retry, timeout=self.timeout))
        blob.reload(retry=self.retry, timeout=self.timeout)
        size = int(blob.size or 0)
        if size < self.config.threshold_bytes:
            return bytes(
                blob.download_as_bytes(
                    if_generation_match=blob.generation, retry=self.retry, timeout=self.timeout
                )
            )
        out = bytearray(size)
        view = memoryview(out)

        def fetch(start: int, end: int) -> None:
            chunk = blob.download_as_bytes(
                start=start,
                end=end,
                if_generation_match=blob.generation,
                checksum=None,  # a range has no checksum of its own; the whole is checked below
                retry=self.retry,
                timeout=self.timeout,
            )
            if len(chunk) != end - start + 1:
                raise OSError(f"gs://{bucket}/{name}: bytes {start}-{end} came back {len(chunk)} long")
            view[start : end + 1] = chunk

        for job in [self.pool.submit(fetch, a, b) for a, b in _ranges(size, self.config.part_bytes)]:
            job.result()
        if blob.crc32c and _crc32c_b64(out) != blob.crc32c:
            raise OSError(
                f"gs://{bucket}/{name}: the bytes read do not match the object's crc32c "
                "(changed while it was read?); read it again"
            )
        return bytes(out)

    def download_file(self, bucket: str, name: str, local_path: str) -> None:
        """Downloads to ``local_path``: ``transfer_manager.download_chunks_concurrently`` when large."""
        from google.cloud.storage import transfer_manager

        blob = self.client.bucket(bucket).blob(name)
        if self.config.parallel:
            blob.reload(retry=self.retry, timeout=self.timeout)
        if not self.config.parallel or int(blob.size or 0) < self.config.threshold_bytes:
            blob.download_to_filename(local_path, retry=self.retry, timeout=self.timeout)
            return
        transfer_manager.download_chunks_concurrently(
            blob,
            local_path,
            chunk_size=self.config.part_bytes,
            download_kwargs={
                "retry": self.retry,
                "timeout": self.timeout,
                "if_generation_match": blob.generation,
            },
            worker_type=transfer_manager.THREAD,
            max_workers=self.config.workers,
        )

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None


class PartWriter:
    """A write-only binary file object that uploads what is written as parts while it is written.

    Up to ``threshold_bytes`` are held; once more arrive, full parts go to the workers (at most
    ``workers + 1`` parts in memory: ``write`` waits for a free slot). ``close()`` sends the last
    part and composes; a file that never reached the threshold is sent whole in one request.
    ``abort()`` deletes what was sent (the destination is never created).
    """

    def __init__(self, transfer: ParallelTransfer, bucket: str, name: str, single: Callable[[bytes], None]):
        self._t = transfer
        self._bucket = bucket
        self._name = name
        self._single = single
        self._buffer = bytearray()
        self._sent: list[tuple[str, Future]] = []
        self._nonce = secrets.token_hex(4)
        self._slots = threading.BoundedSemaphore(transfer.config.workers + 1)
        self._size = 0
        self.closed = False

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._size

    def read(self, size: int = -1) -> bytes:
        # Writers such as numpy's savez (zipfile_factory) tell a file object from a path by its
        # ``read`` attribute, as google-cloud-storage's BlobWriter (an io.BufferedIOBase) has it.
        raise io.UnsupportedOperation("read: a checkpoint upload is write-only")

    def fileno(self) -> int:
        raise io.UnsupportedOperation("fileno: a checkpoint upload has no file descriptor")

    def isatty(self) -> bool:
        return False

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Nothing to do: parts leave as they fill."""

    def write(self, data) -> int:
        if self.closed:
            raise ValueError("write to a closed checkpoint upload")
        view = memoryview(data).cast("B")
        self._buffer += view
        self._size += len(view)
        part = self._t.config.part_bytes
        if self._sent or len(self._buffer) >= self._t.config.threshold_bytes:
            while len(self._buffer) >= part:
                self._send(bytes(self._buffer[:part]))
                del self._buffer[:part]
        return len(view)

    def _send(self, chunk: bytes) -> None:
        self._slots.acquire()
        name = f"{self._name}.tg-part-{self._nonce}-{len(self._sent):05d}"

        def upload() -> None:
            try:
                self._t.upload_part(self._bucket, name, chunk)
            finally:
                self._slots.release()

        try:
            self._sent.append((name, self._t.pool.submit(upload)))
        except BaseException:
            self._slots.release()
            raise

    def close(self) -> None:
        """Creates the object (compose of the parts, or one request)."""
        if self.closed:
            return
        self.closed = True
        if not self._sent:
            data, self._buffer = bytes(self._buffer), bytearray()
            self._single(data)
            return
        if self._buffer:
            self._send(bytes(self._buffer))
            self._buffer = bytearray()
        self._t.finish_parts(self._bucket, self._name, self._nonce, self._sent)

    def abort(self) -> None:
        """Drops what was written: the parts sent are deleted (best effort), nothing is created."""
        self.closed = True
        self._buffer = bytearray()
        for _, future in self._sent:
            with contextlib.suppress(BaseException):
                future.result()
        with contextlib.suppress(Exception):
            self._t.delete_many(self._bucket, [n for n, _ in self._sent])

    def __enter__(self) -> PartWriter:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()
