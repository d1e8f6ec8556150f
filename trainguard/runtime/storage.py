"""A very small filesystem seam for the runtime: local/FUSE paths and ``gs://`` URIs.

Local writes are atomic (temporary file + ``os.replace`` + directory fsync) and reach the disk while
they are made (:mod:`~trainguard.runtime.writeback`); a GCS object write is
atomic by itself (an object appears whole or not at all), which is why checkpoints use a commit
marker rather than a rename. ``google-cloud-storage`` is imported only when a ``gs://`` URI is
used; it honours ``STORAGE_EMULATOR_HOST``.

Every Cloud Storage call runs under one retry deadline (``deadline_s``): a training job keeps a long
one (``STORAGE_DEADLINE_S``, minutes: a storage hiccup must not kill a day-long run), a one-shot
command passes ~10 s, so a dead endpoint answers with :class:`~trainguard.errors.EndpointUnreachable`
naming it instead of retrying for two minutes.

Local listings never follow symbolic links, and ``open_read`` refuses to open one: a link planted in
a checkpoint directory cannot make a restore read outside it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from trainguard.runtime.transfer import ParallelTransfer, TransferConfig
from trainguard.runtime.writeback import WritebackFile

__all__ = [
    "FileStore",
    "LocalStore",
    "GCSStore",
    "store_for",
    "join",
    "STORAGE_DEADLINE_S",
    "no_space_message",
    "fsync_dir",
]

#: The retry deadline of storage calls inside a training job (seconds): long, since giving up
#: loses the run; one-shot commands pass their own (~10 s) to ``store_for``.
STORAGE_DEADLINE_S = 300.0


def join(base: str, *parts: str) -> str:
    """Joins URI or path parts with single slashes."""
    out = base.rstrip("/")
    for part in parts:
        out = f"{out}/{part.strip('/')}"
    return out


def no_space_message(path: str, written: int | None = None) -> str:
    """What a user reads when a disk fills during a write (one wording for every writer)."""
    so_far = f" after {written / 2**20:.1f} MiB" if written else ""
    return (
        f"no space left on {path}{so_far}: free space on that disk or point the checkpoint "
        "directory (AIP_CHECKPOINT_DIR) at a bigger one; the previous checkpoint is intact"
    )


class FileStore:
    """Interface: byte-level operations on one kind of storage."""

    def read_bytes(self, uri: str) -> bytes:
        raise NotImplementedError

    def open_read(self, uri: str) -> contextlib.AbstractContextManager[BinaryIO]:
        """A seekable binary reader (local: never through a symbolic link)."""
        raise NotImplementedError

    def write_bytes(self, uri: str, data: bytes) -> None:
        self.write_stream(uri, lambda handle: handle.write(data))

    def write_stream(self, uri: str, writer: Callable[[BinaryIO], object]) -> int:
        """Creates ``uri`` from what ``writer`` writes to a binary file object, atomically, without
        holding the content in memory; returns the size."""
        raise NotImplementedError

    @contextlib.contextmanager
    def open_write(self, uri: str) -> Iterator[BinaryIO]:
        """A binary writer for engines that want a file object (``write_stream`` inside out)."""
        # Generic fallback through a local temporary file, uploaded atomically at the end.
        with tempfile.NamedTemporaryFile(prefix="tg-upload-", suffix=".tmp") as tmp:
            yield tmp  # type: ignore[misc]  # a binary file object, as BinaryIO describes
            tmp.flush()
            self.upload_file(tmp.name, uri)

    def upload_file(self, local_path: str, uri: str) -> None:
        raise NotImplementedError

    def download_file(self, uri: str, local_path: str) -> None:
        raise NotImplementedError

    def exists(self, uri: str) -> bool:
        raise NotImplementedError

    def list_sizes(self, prefix: str) -> dict[str, int]:
        """Every object/file URI under ``prefix`` (recursive) with its size in bytes."""
        raise NotImplementedError

    def list(self, prefix: str) -> list[str]:
        """Every object/file URI under ``prefix`` (recursive), sorted."""
        return sorted(self.list_sizes(prefix))

    def any_under(self, prefix: str) -> bool:
        """Whether any file/object lies under ``prefix`` (without listing them all)."""
        return bool(self.list_sizes(prefix))

    def child_dirs(self, prefix: str) -> tuple[str, ...]:
        """The names of the directories (GCS: common prefixes) right under ``prefix``, sorted."""
        raise NotImplementedError

    def delete(self, uri: str) -> None:
        raise NotImplementedError

    def delete_tree(self, prefix: str) -> None:
        """Deletes everything under ``prefix``."""
        for uri in self.list(prefix):
            self.delete(uri)

    def rename(self, uri: str, new_uri: str) -> None:
        """Moves one file/object (GCS: copy, then delete)."""
        raise NotImplementedError


class _SpaceWatch:
    """A file-object wrapper that remembers why a write failed: ``torch.save`` turns an ENOSPC from
    its file object into ``unexpected pos``, losing the reason."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self.error: OSError | None = None

    def write(self, data) -> int:
        try:
            return self._handle.write(data)
        except OSError as exc:
            self.error = self.error or exc
            raise

    def __getattr__(self, name: str):
        return getattr(self._handle, name)


class LocalStore(FileStore):
    """Local disks and Cloud Storage FUSE mounts (``/gcs/BUCKET/...``)."""

    def read_bytes(self, uri: str) -> bytes:
        return Path(uri).read_bytes()

    @contextlib.contextmanager
    def open_read(self, uri: str) -> Iterator[BinaryIO]:
        # O_NOFOLLOW: a symbolic link where a checkpoint file should be is refused (ELOOP).
        fd = os.open(uri, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as handle:
            yield handle

    def write_stream(self, uri: str, writer: Callable[[BinaryIO], object]) -> int:
        path = Path(uri)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise OSError(errno.ENOSPC, no_space_message(str(path.parent))) from exc
            raise
        watch = None
        try:
            with os.fdopen(fd, "wb") as handle:
                watch = _SpaceWatch(WritebackFile(handle))  # type: ignore[arg-type]
                writer(watch)  # type: ignore[arg-type]  # a file-like proxy of the handle
                handle.flush()
                os.fsync(handle.fileno())
                size = handle.tell()
            os.replace(tmp, path)
        except BaseException as exc:
            written = _size(tmp)
            Path(tmp).unlink(missing_ok=True)
            cause = watch.error if watch is not None and watch.error is not None else exc
            if isinstance(cause, OSError) and cause.errno == errno.ENOSPC:
                raise OSError(errno.ENOSPC, no_space_message(str(path.parent), written)) from exc
            raise
        fsync_dir(path.parent)
        return size

    def upload_file(self, local_path: str, uri: str) -> None:
        path = Path(uri)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.part")
        shutil.copyfile(local_path, tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)

    def download_file(self, uri: str, local_path: str) -> None:
        shutil.copyfile(uri, local_path)

    def exists(self, uri: str) -> bool:
        return Path(uri).exists()

    def list_sizes(self, prefix: str) -> dict[str, int]:
        root = prefix.rstrip("/") or "/"
        if not os.path.isdir(root):  # the root itself may be a link (the user's choice)
            return {}
        out = {}
        # Spelled with the caller's prefix (pathlib would turn "./a//b" into "a/b"): callers cut
        # the prefix off to find each file's name. Symbolic links are neither followed nor listed.
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            rel_dir = os.path.relpath(dirpath, root)
            dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
            for name in filenames:
                full = os.path.join(dirpath, name)
                try:
                    st = os.lstat(full)
                except OSError:
                    continue  # deleted while listing
                if not _is_regular(st.st_mode):
                    continue
                rel = name if rel_dir == "." else f"{Path(rel_dir).as_posix()}/{name}"
                out[join(prefix, rel)] = st.st_size
        return out

    def any_under(self, prefix: str) -> bool:
        root = prefix.rstrip("/") or "/"
        if not os.path.isdir(root):
            return False
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
            for name in filenames:
                with contextlib.suppress(OSError):  # deleted while walking: not there
                    if _is_regular(os.lstat(os.path.join(dirpath, name)).st_mode):
                        return True
        return False

    def child_dirs(self, prefix: str) -> tuple[str, ...]:
        try:
            with os.scandir(prefix.rstrip("/") or "/") as entries:
                return tuple(sorted(e.name for e in entries if e.is_dir(follow_symlinks=False)))
        except (FileNotFoundError, NotADirectoryError):
            return ()

    def delete(self, uri: str) -> None:
        path = Path(uri)
        path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # drop the folder once it is empty, as GCS does
            path.parent.rmdir()

    def delete_tree(self, prefix: str) -> None:
        path = Path(prefix)
        if path.is_symlink():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        with contextlib.suppress(OSError):
            path.parent.rmdir()

    def rename(self, uri: str, new_uri: str) -> None:
        os.replace(uri, new_uri)


def _is_regular(mode: int) -> bool:
    import stat

    return stat.S_ISREG(mode)


def _size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def fsync_dir(path: Path | str) -> None:
    """Makes a directory's entries (files created or renamed in it) durable; best effort, as some
    FUSE mounts refuse."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _spool_dir_for(size: int) -> Iterator[str | None]:
    """A temporary directory on a disk with room for ``size`` bytes and a margin, else ``None``."""
    base = tempfile.gettempdir()
    try:
        free = shutil.disk_usage(base).free
    except OSError:
        free = 0
    if free < size + 256 * 2**20:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="tg-restore-", dir=base) as spool:
        yield spool


class GCSStore(FileStore):
    """Cloud Storage through google-cloud-storage (``STORAGE_EMULATOR_HOST`` aware).

    Large files travel in concurrent parts (:mod:`~trainguard.runtime.transfer`): composite
    uploads, concurrent ranged reads; ``TransferConfig.single_stream()`` keeps one stream per file.

    Args:
        client: a ``google.cloud.storage.Client`` (default: one for the environment).
        deadline_s: the total retry deadline of each call (default ``STORAGE_DEADLINE_S``).
        transfer: parts and workers (default: :meth:`TransferConfig.from_env`).
    """

    def __init__(
        self, client=None, *, deadline_s: float | None = None, transfer: TransferConfig | None = None
    ) -> None:
        from trainguard.retry import RetryPolicy, transient_types
        from trainguard.runtime.rng_isolation import isolate_library_randomness

        isolate_library_randomness()  # a save must not move the training's own `random`
        if client is None:
            from google.cloud import storage

            if os.environ.get("STORAGE_EMULATOR_HOST"):
                from google.auth.credentials import AnonymousCredentials

                client = storage.Client(
                    project=os.environ.get("GOOGLE_CLOUD_PROJECT", "test"),
                    credentials=AnonymousCredentials(),
                )
            else:
                client = storage.Client()
        self._client = client
        self.deadline_s = STORAGE_DEADLINE_S if deadline_s is None else float(deadline_s)
        self._retry = RetryPolicy(deadline_s=self.deadline_s).api_core(*transient_types())
        # One request never outlives the deadline (a black-holed endpoint would hang otherwise).
        self._timeout = max(1.0, min(60.0, self.deadline_s))
        self.transfer = transfer if transfer is not None else TransferConfig.from_env()
        self._parallel = ParallelTransfer(client, self.transfer, retry=self._retry, timeout=self._timeout)

    @property
    def endpoint(self) -> str:
        """Where requests go (the emulator's URL under ``STORAGE_EMULATOR_HOST``)."""
        return os.environ.get("STORAGE_EMULATOR_HOST") or "https://storage.googleapis.com"

    @staticmethod
    def _split(uri: str) -> tuple[str, str]:
        if not uri.startswith("gs://"):
            raise ValueError(f"not a gs:// URI: {uri}")
        bucket, _, name = uri[5:].partition("/")
        return bucket, name

    def _blob(self, uri: str):
        bucket, name = self._split(uri)
        return self._client.bucket(bucket).blob(name)

    def _call(self, what: str, uri: str, fn: Callable[[], object]):
        """``fn()``, its retry errors turned into one message that names the endpoint."""
        from google.api_core import exceptions as gexc

        from trainguard.errors import EndpointUnreachable, TransientError
        from trainguard.retry import describe, unreachable_types

        try:
            return fn()
        except gexc.RetryError as exc:
            cause = exc.cause or exc
            if isinstance(cause, unreachable_types()):
                raise EndpointUnreachable(
                    f"Cloud Storage {what} {uri}: no answer from {self.endpoint} within "
                    f"{self.deadline_s:g} s ({describe(cause)}); check STORAGE_EMULATOR_HOST and "
                    "the network"
                ) from None
            raise TransientError(
                f"Cloud Storage {what} {uri} kept failing for "
                f"{self.deadline_s:g} s: {describe(cause)}; try again later"
            ) from None

    def read_bytes(self, uri: str) -> bytes:
        if self.transfer.parallel:
            return self._call("read", uri, lambda: self._parallel.read_bytes(*self._split(uri)))
        return self._call(
            "read", uri, lambda: self._blob(uri).download_as_bytes(retry=self._retry, timeout=self._timeout)
        )

    @contextlib.contextmanager
    def open_read(self, uri: str) -> Iterator[BinaryIO]:
        blob = self._blob(uri)
        self._call("read", uri, lambda: blob.reload(retry=self._retry, timeout=self._timeout))
        size = int(blob.size or 0)
        if self.transfer.parallel and size >= self.transfer.threshold_bytes:
            # A large object comes down in concurrent ranges into a temporary file (readers seek):
            # memory stays bounded whatever the object's size. Without the disk room for it, it is
            # streamed as before (one stream is slower, never wrong).
            with _spool_dir_for(size) as spool:
                if spool is not None:
                    local = os.path.join(spool, "object")
                    self.download_file(uri, local)
                    with open(local, "rb") as handle:
                        yield handle
                    return
        with blob.open("rb", retry=self._retry, timeout=self._timeout) as handle:
            yield handle

    def _part_writer(self, uri: str):
        bucket, name = self._split(uri)
        return self._parallel.writer(
            bucket,
            name,
            lambda data: self._blob(uri).upload_from_string(data, retry=self._retry, timeout=self._timeout),
        )

    @contextlib.contextmanager
    def open_write(self, uri: str) -> Iterator[BinaryIO]:
        if self.transfer.parallel:
            writer = self._part_writer(uri)
            try:
                yield writer  # a write-only binary file object
            except BaseException:
                writer.abort()
                raise
            self._call("write", uri, writer.close)
            return
        blob = self._blob(uri)
        blob.chunk_size = 16 * 1024 * 1024
        handle = blob.open("wb", ignore_flush=True, retry=self._retry, timeout=self._timeout)
        try:
            yield handle
        except BaseException:
            # Closing a BlobWriter finishes the upload: a failed write still makes an object.
            # Remove it (it lies in an attempt no COMMIT names; this is tidiness, not safety).
            with contextlib.suppress(Exception):
                handle.close()
                self.delete(uri)
            raise
        self._call("write", uri, handle.close)

    def write_bytes(self, uri: str, data: bytes) -> None:
        if self.transfer.parallel:
            self._call("write", uri, lambda: self._parallel.upload_bytes(*self._split(uri), data))
            return
        self._call(
            "write",
            uri,
            lambda: self._blob(uri).upload_from_string(data, retry=self._retry, timeout=self._timeout),
        )

    def write_stream(self, uri: str, writer: Callable[[BinaryIO], object]) -> int:
        if self.transfer.parallel:
            # Parts leave while ``writer`` writes; the object appears with the last compose.
            def parts() -> int:
                with self._part_writer(uri) as handle:
                    writer(handle)  # a write-only binary file object
                    size = handle.tell()
                return size

            return self._call("write", uri, parts)
        # One stream: a resumable upload in chunks; the object appears when the upload completes.
        blob = self._blob(uri)
        blob.chunk_size = 16 * 1024 * 1024

        def upload() -> int:
            with blob.open("wb", ignore_flush=True, retry=self._retry, timeout=self._timeout) as handle:
                writer(handle)
                return handle.tell()

        return self._call("write", uri, upload)

    def upload_file(self, local_path: str, uri: str) -> None:
        if self.transfer.parallel:
            self._call("upload", uri, lambda: self._parallel.upload_file(*self._split(uri), local_path))
            return
        self._call(
            "upload",
            uri,
            lambda: self._blob(uri).upload_from_filename(
                local_path, retry=self._retry, timeout=self._timeout
            ),
        )

    def download_file(self, uri: str, local_path: str) -> None:
        if self.transfer.parallel:
            self._call("download", uri, lambda: self._parallel.download_file(*self._split(uri), local_path))
            return
        self._call(
            "download",
            uri,
            lambda: self._blob(uri).download_to_filename(
                local_path, retry=self._retry, timeout=self._timeout
            ),
        )

    def exists(self, uri: str) -> bool:
        return self._call(
            "exists", uri, lambda: self._blob(uri).exists(retry=self._retry, timeout=self._timeout)
        )

    def list_sizes(self, prefix: str) -> dict[str, int]:
        bucket, name = self._split(prefix)

        def listing() -> dict[str, int]:
            blobs = self._client.list_blobs(
                bucket, prefix=name.rstrip("/") + "/", retry=self._retry, timeout=self._timeout
            )
            return {f"gs://{bucket}/{blob.name}": int(blob.size or 0) for blob in blobs}

        return self._call("list", prefix, listing)

    def any_under(self, prefix: str) -> bool:
        bucket, name = self._split(prefix)

        def first() -> bool:
            blobs = self._client.list_blobs(
                bucket, prefix=name.rstrip("/") + "/", max_results=1, retry=self._retry, timeout=self._timeout
            )
            return any(True for _ in blobs)

        return bool(self._call("list", prefix, first))

    def child_dirs(self, prefix: str) -> tuple[str, ...]:
        bucket, name = self._split(prefix)
        under = name.rstrip("/") + "/"

        def listing() -> tuple[str, ...]:
            blobs = self._client.list_blobs(
                bucket, prefix=under, delimiter="/", retry=self._retry, timeout=self._timeout
            )
            for _ in blobs:  # the prefixes are filled in as the pages are read
                pass
            return tuple(sorted(p[len(under) :].rstrip("/") for p in blobs.prefixes))

        return tuple(self._call("list", prefix, listing))

    def delete(self, uri: str) -> None:
        from google.api_core.exceptions import NotFound

        def delete() -> None:
            with contextlib.suppress(NotFound):
                self._blob(uri).delete(retry=self._retry, timeout=self._timeout)

        self._call("delete", uri, delete)

    def rename(self, uri: str, new_uri: str) -> None:
        src_bucket, _ = self._split(uri)
        dst_bucket, dst_name = self._split(new_uri)
        blob = self._blob(uri)
        self._call(
            "copy",
            uri,
            lambda: self._client.bucket(src_bucket).copy_blob(
                blob, self._client.bucket(dst_bucket), dst_name, retry=self._retry, timeout=self._timeout
            ),
        )
        self.delete(uri)


def store_for(uri: str, *, deadline_s: float | None = None) -> FileStore:
    """The store that serves ``uri``: GCS for ``gs://``, the local filesystem otherwise.

    Args:
        uri: a ``gs://`` URI or a local/FUSE path.
        deadline_s: the total retry deadline of each Cloud Storage call (default
            ``STORAGE_DEADLINE_S``, for training jobs); one-shot commands pass ~10 s.
    """
    return GCSStore(deadline_s=deadline_s) if uri.startswith("gs://") else LocalStore()
