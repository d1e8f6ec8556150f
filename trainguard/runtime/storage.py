"""A very small filesystem seam for the runtime: local/FUSE paths and ``gs://`` URIs.

Local writes are atomic (temporary file + ``os.replace``); a GCS object write is atomic by itself
(an object appears whole or not at all), which is why checkpoints use a commit marker rather than a
rename. ``google-cloud-storage`` is imported only when a ``gs://`` URI is used; it honours
``STORAGE_EMULATOR_HOST``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["FileStore", "LocalStore", "GCSStore", "store_for", "join"]


def join(base: str, *parts: str) -> str:
    """Joins URI or path parts with single slashes."""
    out = base.rstrip("/")
    for part in parts:
        out = f"{out}/{part.strip('/')}"
    return out


class FileStore:
    """Interface: byte-level operations on one kind of storage."""

    def read_bytes(self, uri: str) -> bytes:
        raise NotImplementedError

    def write_bytes(self, uri: str, data: bytes) -> None:
        self.write_stream(uri, lambda handle: handle.write(data))

    def write_stream(self, uri: str, writer: Callable[[BinaryIO], object]) -> int:
        """Creates ``uri`` from what ``writer`` writes to a binary file object, atomically, without
        holding the content in memory; returns the size."""
        raise NotImplementedError

    def upload_file(self, local_path: str, uri: str) -> None:
        raise NotImplementedError

    def download_file(self, uri: str, local_path: str) -> None:
        raise NotImplementedError

    def exists(self, uri: str) -> bool:
        raise NotImplementedError

    def list(self, prefix: str) -> list[str]:
        """Every object/file URI under ``prefix`` (recursive)."""
        raise NotImplementedError

    def delete(self, uri: str) -> None:
        raise NotImplementedError


class LocalStore(FileStore):
    """Local disks and Cloud Storage FUSE mounts (``/gcs/BUCKET/...``)."""

    def read_bytes(self, uri: str) -> bytes:
        return Path(uri).read_bytes()

    def write_stream(self, uri: str, writer: Callable[[BinaryIO], object]) -> int:
        path = Path(uri)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                writer(handle)
                handle.flush()
                os.fsync(handle.fileno())
                size = handle.tell()
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
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

    def list(self, prefix: str) -> list[str]:
        root = Path(prefix)
        if not root.exists():
            return []
        # Spelled with the caller's prefix (pathlib would turn "./a//b" into "a/b"): callers cut
        # the prefix off to find each file's name.
        return sorted(join(prefix, p.relative_to(root).as_posix())
                      for p in root.rglob("*") if p.is_file())

    def delete(self, uri: str) -> None:
        path = Path(uri)
        path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # drop the folder once it is empty, as GCS does
            path.parent.rmdir()


class GCSStore(FileStore):
    """Cloud Storage through google-cloud-storage (``STORAGE_EMULATOR_HOST`` aware)."""

    def __init__(self, client=None) -> None:
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

    @staticmethod
    def _split(uri: str) -> tuple[str, str]:
        if not uri.startswith("gs://"):
            raise ValueError(f"not a gs:// URI: {uri}")
        bucket, _, name = uri[5:].partition("/")
        return bucket, name

    def _blob(self, uri: str):
        bucket, name = self._split(uri)
        return self._client.bucket(bucket).blob(name)

    def read_bytes(self, uri: str) -> bytes:
        return self._blob(uri).download_as_bytes()

    def write_bytes(self, uri: str, data: bytes) -> None:
        self._blob(uri).upload_from_string(data)

    def write_stream(self, uri: str, writer: Callable[[BinaryIO], object]) -> int:
        # A resumable upload in chunks: the object appears only when the upload completes.
        blob = self._blob(uri)
        blob.chunk_size = 16 * 1024 * 1024
        with blob.open("wb", ignore_flush=True) as handle:
            writer(handle)
            size = handle.tell()
        return size

    def upload_file(self, local_path: str, uri: str) -> None:
        self._blob(uri).upload_from_filename(local_path)

    def download_file(self, uri: str, local_path: str) -> None:
        self._blob(uri).download_to_filename(local_path)

    def exists(self, uri: str) -> bool:
        return self._blob(uri).exists()

    def list(self, prefix: str) -> list[str]:
        bucket, name = self._split(prefix)
        return sorted(
            f"gs://{bucket}/{blob.name}"
            for blob in self._client.list_blobs(bucket, prefix=name.rstrip("/") + "/")
        )

    def delete(self, uri: str) -> None:
        from google.api_core.exceptions import NotFound

        with contextlib.suppress(NotFound):
            self._blob(uri).delete()


def store_for(uri: str) -> FileStore:
    """The store that serves ``uri``: GCS for ``gs://``, the local filesystem otherwise."""
    return GCSStore() if uri.startswith("gs://") else LocalStore()
