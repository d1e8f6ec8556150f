"""Reading a growing file from where the last read stopped: local paths and ``gs://`` objects.

A :class:`Follower` returns, per call, only the bytes added since its previous call: a local file
is read from the last offset, a Cloud Storage object with one ranged ``GET`` (``Range:
bytes=offset-``) pinned to the generation whose size was just read. So a poll costs O(new bytes),
never a re-download of the whole history.

A file can also be *rewritten* rather than appended to: trainguard's ``HistoryWriter`` rewrites a
``gs://`` history whole at each flush (same prefix, more lines) and truncates it to the resumed
step after a restart (a different tail). To tell the two apart each read re-reads the last
``ANCHOR_BYTES`` bytes before the offset: when they still match, the new bytes continue what was
read; when they do not (or the file shrank), the file was replaced and is read again from 0, with
:attr:`Chunk.restarted` set so the caller forgets what it parsed before.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "Chunk",
    "Follower",
    "LocalFollower",
    "GcsFollower",
    "FollowError",
    "follower_for",
    "ANCHOR_BYTES",
    "MAX_READ_BYTES",
    "split_gs",
]

ANCHOR_BYTES = 64
# One poll reads at most this much; a larger backlog (a guard started late on a long run) is
# caught up over the next polls, so memory stays bounded.
MAX_READ_BYTES = 128 << 20


class FollowError(Exception):
    """Reading failed.

    Attributes:
        transient: the next poll may not repeat it (a 503, a timeout, a lost race); False for a
            refusal that will not change by itself (403, 401).
    """

    def __init__(self, message: str, transient: bool = True) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True)
class Chunk:
    """Bytes a follower read.

    Attributes:
        data: the bytes, starting at ``start`` in the file.
        start: their offset in the file.
        restarted: the file was replaced since the last read; ``data`` starts at offset 0 and
            everything read before is void.
        size: the file's size when read (more may remain when a read was capped).
    """

    data: bytes
    start: int
    restarted: bool
    size: int


class Follower(Protocol):
    """Follows one growing file."""

    uri: str
    offset: int
    bytes_read: int

    def read_new(self, size: int | None = None, generation: Any = None) -> Chunk | None:
        """The bytes added since the last call; None when the file does not exist."""
        ...


class _Tail:
    """The offset and anchor logic shared by both kinds of storage."""

    def __init__(self, uri: str, max_read: int = MAX_READ_BYTES) -> None:
        self.uri = uri
        self.offset = 0
        self.bytes_read = 0  # what this follower transferred, anchors included (for benchmarks)
        self._anchor = b""
        self._max_read = max(ANCHOR_BYTES + 1, int(max_read))

    def _advance(self, size: int, read: Callable[[int, int], bytes]) -> Chunk:
        """Reads ``[offset, size)`` (capped) through ``read(start, end_exclusive)``."""
        if size < self.offset:
            return self._from_start(size, read)
        if size == self.offset:
            return Chunk(b"", self.offset, False, size)
        anchor = self._anchor
        start = self.offset - len(anchor)
        end = min(size, self.offset + self._max_read)
        data = read(start, end)
        self.bytes_read += len(data)
        if data[: len(anchor)] != anchor:
            return self._from_start(size, read)
        data = data[len(anchor) :]
        return self._took(data, self.offset, False, size)

    def _from_start(self, size: int, read: Callable[[int, int], bytes]) -> Chunk:
        self.offset, self._anchor = 0, b""
        data = read(0, min(size, self._max_read)) if size else b""
        self.bytes_read += len(data)
        return self._took(data, 0, True, size)

    def _took(self, data: bytes, start: int, restarted: bool, size: int) -> Chunk:
        self.offset = start + len(data)
        tail = (self._anchor + data) if len(data) < ANCHOR_BYTES else data
        self._anchor = tail[-ANCHOR_BYTES:]
        return Chunk(data, start, restarted, size)


class LocalFollower(_Tail):
    """A local (or ``/gcs/`` FUSE) file."""

    def read_new(self, size: int | None = None, generation: Any = None) -> Chunk | None:
        try:
            # O_NONBLOCK: a FIFO at the history's path must not block the launcher's poll loop
            # (open() would wait for a writer for ever, and the job would go unwatched).
            fd = os.open(self.uri, os.O_RDONLY | os.O_NONBLOCK)
            with open(fd, "rb") as handle:
                info = os.fstat(handle.fileno())
                if stat.S_ISDIR(info.st_mode):
                    raise IsADirectoryError
                if not stat.S_ISREG(info.st_mode):
                    raise FollowError(
                        f"{self.uri} is not a regular file (a FIFO, a device or a socket): not a history",
                        transient=False,
                    )
                os.set_blocking(handle.fileno(), True)
                size = info.st_size

                def read(start: int, end: int) -> bytes:
                    handle.seek(start)
                    return handle.read(end - start)

                return self._advance(size, read)
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise FollowError(f"{self.uri} is a directory, not a history file") from None
        except OSError as exc:
            raise FollowError(f"cannot read {self.uri}: {exc.strerror or exc}") from None


def split_gs(uri: str) -> tuple[str, str]:
    """``gs://bucket/a/b`` → ``("bucket", "a/b")``."""
    bucket, _, name = uri[5:].partition("/")
    return bucket, name


class GcsFollower(_Tail):
    """A Cloud Storage object, read with ranged GETs of the generation just seen.

    Args:
        uri: ``gs://bucket/name``.
        client: a ``google.cloud.storage.Client`` (made by :func:`trainguard.gcp.storage_client`
            when None).
        timeout_s: the HTTP timeout of one request.
    """

    def __init__(
        self, uri: str, client: Any = None, timeout_s: float = 30.0, max_read: int = MAX_READ_BYTES
    ) -> None:
        super().__init__(uri, max_read)
        if client is None:
            from trainguard.gcp import storage_client

            client = storage_client()
        self._client = client
        self._timeout = timeout_s
        self.requests = 0

    def read_new(self, size: int | None = None, generation: Any = None) -> Chunk | None:
        """Reads the new bytes; ``size``/``generation`` from a listing save the metadata GET."""
        from google.api_core import exceptions as gexc

        bucket_name, name = split_gs(self.uri)
        bucket = self._client.bucket(bucket_name)
        try:
            if size is None:
                self.requests += 1
                blob = bucket.get_blob(name, timeout=self._timeout)
                if blob is None:
                    return None
                size, generation = int(blob.size or 0), blob.generation
            blob = bucket.blob(name, generation=generation)

            def read(start: int, end: int) -> bytes:
                self.requests += 1
                # end is inclusive in the client's API; the generation pins the object version
                # whose size was read, so a rewrite in between cannot splice two versions.
                return blob.download_as_bytes(start=start, end=end - 1, timeout=self._timeout, checksum=None)

            return self._advance(size, read)
        except gexc.NotFound:
            # Rewritten between the size and the read (that generation is gone): next poll.
            raise FollowError(f"{self.uri} changed while being read; reading it again next poll") from None
        except (gexc.Forbidden, gexc.Unauthorized) as exc:
            raise FollowError(
                f"permission denied reading {self.uri} ({type(exc).__name__}: "
                f"{getattr(exc, 'message', None) or exc}); whoever runs the train "
                "task needs storage.objects.get and storage.objects.list on the "
                "bucket (roles/storage.objectViewer)",
                transient=False,
            ) from None
        except gexc.GoogleAPICallError as exc:
            raise FollowError(
                f"cannot read {self.uri}: {type(exc).__name__}: {getattr(exc, 'message', None) or exc}"
            ) from None
        except Exception as exc:  # transport errors of requests/google-auth: the next poll retries
            from trainguard.retry import unreachable_types

            if isinstance(exc, unreachable_types()):
                raise FollowError(
                    f"cannot reach Cloud Storage for {self.uri}: {type(exc).__name__}"
                ) from None
            raise


def follower_for(uri: str, client: Any = None, max_read: int = MAX_READ_BYTES) -> Follower:
    """The follower for ``uri``: Cloud Storage for ``gs://``, the filesystem otherwise."""
    if uri.startswith("gs://"):
        return GcsFollower(uri, client, max_read=max_read)
    return LocalFollower(uri, max_read)
