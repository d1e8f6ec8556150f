"""TensorBoard event files, read with TensorBoard's own event loader.

A directory of event files, e.g. Keras' ``train/`` and ``validation/`` runs: each file's run is
its directory below the root. Scalars are written as ``simple_value`` (PyTorch's
``SummaryWriter``, TF1) or as one-element tensors (``tf.summary`` v2); both are read. A record
torn at the end of a file (a writer that died) ends that file, as TensorBoard itself reads it; a
record that is not an event is an error naming the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainguard.errors import HistoryError
from trainguard.redaction import bound, redact
from trainguard.validation.collect import Collector
from trainguard.validation.formats import LFS_POINTER, refuse_lfs_pointer
from trainguard.validation.history import History

__all__ = ["read_tensorboard", "EVENTS_MARK"]

EVENTS_MARK = "tfevents"


def read_tensorboard(files: list[Path], root: Path, source: str, notes: list[str] | None = None) -> History:
    """Reads event files; ``root`` is the log directory their runs are named from.

    Raises:
        HistoryError: an unreadable event file, or no scalar at all.
    """
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
        from tensorboard.util import tensor_util
    except ImportError as exc:  # tensorboard comes with [pipelines]; this says what to install
        raise HistoryError(
            f"{source}: reading TensorBoard logs needs the 'tensorboard' "
            f"package (pip install 'trainguard[pipelines]')"
        ) from exc
    collector = Collector(source)
    events = 0
    for path in files:
        with open(path, "rb") as handle:  # Hugging Face Hub copies of runs/ keep event files in LFS
            refuse_lfs_pointer(f"{source}: {path.name}", handle.read(len(LFS_POINTER)))
        run = path.parent.relative_to(root).as_posix() if path.parent != root else ""
        run = "" if run == "." else run
        points: dict[str, tuple[list[float], list[float]]] = {}
        try:
            for event in EventFileLoader(str(path)).Load():
                events += 1
                if event.HasField("summary"):
                    _scalars(event, points, tensor_util)
        except Exception as exc:  # a corrupt record: the proto library's own error types
            detail = bound(redact(f"{type(exc).__name__}: {exc}"), 300)
            raise HistoryError(
                f"{source}: {path.name}: not a readable TensorBoard event file ({detail})"
            ) from None
        for tag, (steps, values) in points.items():
            collector.add(f"{run}/{tag}" if run else tag, tag, "", run, np.asarray(steps), np.asarray(values))
    if not collector.parts:
        raise HistoryError(f"{source}: {events} TensorBoard event(s) but no scalar summaries")
    tags = [p.tag.lower() for p in collector.parts.values()]
    x_label = "epoch" if all(t.startswith("epoch_") for t in tags) else "step"
    return collector.build("tensorboard", x_label, events, list(notes or []))


def _scalars(event, points: dict, tensor_util) -> None:
    step = float(event.step)
    for value in event.summary.value:
        number = _scalar(value, tensor_util)
        if number is not None:
            steps, values = points.setdefault(value.tag, ([], []))
            steps.append(step)
            values.append(number)


def _scalar(value, tensor_util) -> float | None:
    """A summary value's number: ``simple_value``, or a one-element numeric tensor."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind != "tensor":
        return None
    # Only a one-element tensor is a scalar; checked before make_ndarray, which would fill a
    # crafted shape ([10**10] with one float_val) to its full size.
    if any(dim.size != 1 for dim in value.tensor.tensor_shape.dim):
        return None
    try:
        array = tensor_util.make_ndarray(value.tensor)
    except Exception:  # an unsupported dtype (strings, resources): not a scalar series
        return None
    if array.size != 1 or array.dtype.kind not in "fiub":
        return None
    return float(array.reshape(-1)[0])
