"""TensorBoard event files under a log directory, parsed as they grow.

An event file is a sequence of TFRecords: ``uint64 length``, ``uint32 masked CRC-32C of the
length``, ``length`` bytes of a serialised ``Event``, ``uint32 masked CRC-32C of the data``. Whole
records are parsed now, a record still being written waits for the next poll; a CRC that does not
match is garbage (:class:`~trainguard.errors.HistoryError`). Scalars are kept as the readers name
them: ``<run>/<tag>`` with the run being the file's directory under the log root (Keras' ``train``
and ``validation``), so ``validate`` picks the same series from the followed history as from the
finished one.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np

from trainguard.errors import HistoryError
from trainguard.guard.book import Added, SeriesBook
from trainguard.guard.follow import FollowError, GcsFollower, LocalFollower, split_gs
from trainguard.validation.history import describe_name, shown_name

__all__ = ["EventRecords", "EventDirTail", "EVENTS_MARK", "MAX_RECORD_BYTES"]

EVENTS_MARK = "tfevents"
MAX_RECORD_BYTES = 64 << 20  # an "event" larger than this is not one being written
_HEADER = struct.Struct("<QI")
_CRC = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8


def _masked_crc(data: bytes) -> int:
    import google_crc32c

    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


class EventRecords:
    """Splits one event file's bytes into whole TFRecords; keeps a partial one for later."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.records = 0
        self._pending = b""

    def feed(self, data: bytes) -> list[bytes]:
        """The payloads of the records ``data`` completes.

        Raises:
            HistoryError: a length or a payload whose CRC does not match (not an event file).
        """
        buf = self._pending + data if self._pending else data
        out, pos = [], 0
        while len(buf) - pos >= _HEADER.size:
            length, length_crc = _HEADER.unpack_from(buf, pos)
            if _masked_crc(buf[pos : pos + 8]) != length_crc or length > MAX_RECORD_BYTES:
                raise HistoryError(
                    f"{self.source}: record {self.records + 1}: the length's "
                    "checksum does not match: not a TensorBoard event file"
                )
            end = pos + _HEADER.size + length + _CRC.size
            if end > len(buf):
                break
            payload = buf[pos + _HEADER.size : end - _CRC.size]
            if _masked_crc(payload) != _CRC.unpack_from(buf, end - _CRC.size)[0]:
                raise HistoryError(
                    f"{self.source}: record {self.records + 1}: the data's "
                    "checksum does not match: a corrupt TensorBoard event file"
                )
            out.append(payload)
            self.records += 1
            pos = end
        self._pending = buf[pos:]
        return out


def _scalar(value: Any) -> float | None:
    """A summary value's number: ``simple_value`` or a one-element numeric tensor."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind != "tensor":
        return None
    from tensorboard.util import tensor_util

    try:
        array = tensor_util.make_ndarray(value.tensor)
    except Exception:  # strings, resources: not a scalar series
        return None
    if array.size != 1 or array.dtype.kind not in "fiub":
        return None
    return float(array.reshape(-1)[0])


class _File:
    def __init__(self, uri: str, run: str, follower: Any) -> None:
        self.uri, self.run, self.follower = uri, run, follower
        self.records = EventRecords(uri)


class EventDirTail:
    """Every event file under a log directory (local or ``gs://``), followed together.

    Args:
        root: the log directory (``AIP_TENSORBOARD_LOG_DIR``).
        client: a storage client for ``gs://`` (made when needed).
    """

    def __init__(self, root: str, client: Any = None) -> None:
        self.root = root.rstrip("/")
        self.book = SeriesBook()
        self._client = client
        self._files: dict[str, _File] = {}

    @property
    def files(self) -> int:
        return len(self._files)

    @property
    def bytes_read(self) -> int:
        return sum(f.follower.bytes_read for f in self._files.values())

    def reset(self) -> None:
        self.book.clear()
        self._files.clear()

    def _listing(self) -> list[tuple[str, int | None, Any]]:
        """(uri, size, generation) of every event file under the root."""
        if self.root.startswith("gs://"):
            from google.api_core import exceptions as gexc

            if self._client is None:
                from trainguard.gcp import storage_client

                self._client = storage_client()
            bucket, prefix = split_gs(self.root)
            try:
                blobs = list(self._client.list_blobs(bucket, prefix=prefix + "/", timeout=30))
            except gexc.NotFound:
                return []
            except (gexc.Forbidden, gexc.Unauthorized) as exc:
                raise FollowError(
                    f"permission denied listing {self.root} ({type(exc).__name__})"
                    "; whoever runs the train task needs storage.objects.list on "
                    "the bucket (roles/storage.objectViewer)",
                    transient=False,
                ) from None
            except gexc.GoogleAPICallError as exc:
                raise FollowError(f"cannot list {self.root}: {type(exc).__name__}") from None
            return sorted(
                (f"gs://{bucket}/{b.name}", int(b.size or 0), b.generation)
                for b in blobs
                if EVENTS_MARK in b.name.rsplit("/", 1)[-1]
            )
        root = Path(self.root)
        if not root.is_dir():
            return []
        return [(str(p), None, None) for p in sorted(root.rglob(f"*{EVENTS_MARK}*")) if p.is_file()]

    def _run(self, uri: str) -> str:
        relative = uri[len(self.root) + 1 :]
        return relative.rsplit("/", 1)[0] if "/" in relative else ""

    def read(self) -> tuple[Added, bool]:
        """Reads what every file added; (what it brought, whether any event file exists).

        Raises:
            HistoryError: an event file that is not one.
            FollowError: storage could not be read this time.
        """
        added = Added()
        listing = self._listing()
        for uri, size, generation in listing:
            entry = self._files.get(uri)
            if entry is None:
                follower = GcsFollower(uri, self._client) if uri.startswith("gs://") else LocalFollower(uri)
                entry = self._files[uri] = _File(uri, self._run(uri), follower)
            chunk = entry.follower.read_new(size, generation)
            if chunk is None or not chunk.data:
                continue
            if chunk.restarted:
                # Event files are only appended to; one rewritten means start over, all of them.
                self.reset()
                return Added(), True
            added.merge(self._parse(entry, entry.records.feed(chunk.data)))
        return added, bool(listing)

    def _parse(self, entry: _File, payloads: list[bytes]) -> Added:
        from tensorboard.compat.proto import event_pb2

        points: dict[str, tuple[str, list[float], list[float]]] = {}
        for payload in payloads:
            event = event_pb2.Event()
            try:
                event.ParseFromString(payload)
            except Exception as exc:  # the protobuf runtime's DecodeError
                raise HistoryError(
                    f"{entry.uri}: a record that is not an Event ({type(exc).__name__})"
                ) from None
            self.book.records += 1
            if not event.HasField("summary"):
                continue
            for value in event.summary.value:
                number = _scalar(value)
                if number is None:
                    continue
                name = f"{entry.run}/{value.tag}" if entry.run else value.tag
                _, steps, values = points.setdefault(name, (value.tag, [], []))
                steps.append(float(event.step))
                values.append(number)
        added = Added()
        for name, (tag, steps, values) in points.items():
            split, metric, granularity = describe_name(shown_name(tag), None, shown_name(entry.run))
            added.merge(
                self.book.add(
                    shown_name(name), split, metric, granularity, np.asarray(steps), np.asarray(values)
                )
            )
        return added
