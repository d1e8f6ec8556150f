"""The history formats, and which one a file is from its name and first bytes."""

from __future__ import annotations

import codecs
import csv
import re

from trainguard.errors import HistoryError
from trainguard.validation.collect import echo
from trainguard.validation.csv_layout import sniff

__all__ = [
    "FORMATS",
    "EVENTS_MARK",
    "HF_STATE_NAME",
    "detect_format",
    "is_event_file",
    "refuse_lfs_pointer",
    "is_json_document",
    "not_jsonl",
]

FORMATS = (
    "jsonl",
    "keras_csv",
    "lightning_csv",
    "tensorboard",
    "hf_trainer_state",
    "dvclive",
    "mlflow",
)
# Hugging Face's Trainer saves its log as one JSON document (not JSONL) with this list in it.
HF_STATE_NAME = "trainer_state.json"
HF_LOG_KEY = b'"log_history"'
EVENTS_MARK = "tfevents"
# What Git LFS leaves in a clone without `git lfs pull`: a small text file in place of the data
# (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md: "version https://git-lfs.github.com/spec/v1").
# Hugging Face Hub repositories keep their `runs/*tfevents*` that way.
LFS_POINTER = b"version https://git-lfs.github.com/spec/"
_SHOWN_COLUMNS = 20
# One line of an MLflow metric file: a millisecond timestamp, the value, the step.
_MLFLOW_LINE = re.compile(rb"\d{10,14} \S+( -?\d+)?\r?")


def is_event_file(name: str) -> bool:
    """Whether a file or object name is a TensorBoard event file's."""
    return EVENTS_MARK in name.rstrip("/").rsplit("/", 1)[-1]


def refuse_lfs_pointer(name: str, head: bytes) -> None:
    """Refuses a Git LFS pointer given in place of a history (``head``: the file's first bytes).

    Raises:
        HistoryError: ``head`` is a pointer's.
    """
    if head.startswith(LFS_POINTER):
        raise HistoryError(
            f"{name}: a Git LFS pointer, not the file itself (its repository keeps the data in LFS); "
            f"fetch it with `git lfs pull` (or download the file) and give that"
        )


def detect_format(name: str, head: bytes) -> str:
    """Names the format of a file from its name and its first bytes.

    Raises:
        HistoryError: an empty file, a Git LFS pointer, or one that is none of the formats.
    """
    refuse_lfs_pointer(name, head)
    if is_event_file(name):
        return "tensorboard"
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if not text:
        raise HistoryError(f"{name}: the file is empty; the training wrote no history")
    if name.rstrip("/").rsplit("/", 1)[-1] == HF_STATE_NAME or (
        text.startswith(b"{") and HF_LOG_KEY in text and is_json_document(text)
    ):
        return "hf_trainer_state"
    if text.startswith(b"{"):
        return "jsonl"
    if not _is_text(text):
        raise HistoryError(
            f"{name}: binary data (or text not in UTF-8), not a history: JSONL records, a Keras or "
            f"Lightning CSV, or TensorBoard event files; is it the right file (not compressed)?"
        )
    columns = _first_row(text, name)
    if len(columns) > 1:
        if "step" in columns:
            return "lightning_csv"
        if "epoch" in columns or _names_a_loss(columns):
            return "keras_csv"
        shown = ", ".join(echo(c, 40)[1:-1] for c in columns[:_SHOWN_COLUMNS])
        more = f", … ({len(columns)} columns)" if len(columns) > _SHOWN_COLUMNS else ""
        raise HistoryError(
            f"{name}: a CSV without an 'epoch' or a 'step' column, nor a loss (columns: "
            f"{shown}{more}); Keras' CSVLogger and Ultralytics write 'epoch', Lightning's 'step', "
            f"and a Keras history saved with pandas names its 'loss'; force one with --format"
        )
    if _MLFLOW_LINE.fullmatch(text.split(b"\n", 1)[0]):
        raise HistoryError(
            f"{name}: one metric file of an MLflow run ('<timestamp> <value> <step>' lines); give "
            f"the run's directory (mlruns/<experiment id>/<run id>, which holds metrics/), so that "
            f"its training and validation metrics are read together"
        )
    raise HistoryError(
        f"{name}: not a history in a known format (JSONL records, a Keras, Lightning or "
        f"Ultralytics CSV, a Hugging Face trainer_state.json, an MLflow run directory or TensorBoard "
        f"event files); force "
        f"one with --format"
    )


def not_jsonl(source: str) -> str:
    """The message for a JSON document given where JSONL was expected."""
    return (
        f"{source}: a JSON document (one value over many lines), not JSONL (one record a "
        f"line); trainguard reads its own JSONL history, a Hugging Face {HF_STATE_NAME} "
        f"(its log_history), Keras, Lightning and Ultralytics CSV logs and TensorBoard event files"
    )


def is_json_document(text: bytes) -> bool:
    """Whether text starting with ``{`` or ``[`` is a JSON document spread over lines (indented,
    as ``json.dump(..., indent=2)`` writes it) rather than JSONL: its first line alone is not a
    complete value."""
    body = text.lstrip()
    if b"\n" not in body:
        return False  # the first line does not end within what was read: JSONL's reader decides
    first = body.split(b"\n", 1)[0].strip()
    return first in (b"{", b"[") or (first[:1] in (b"{", b"[") and first[-1:] not in (b"}", b"]"))


def _names_a_loss(columns: list[str]) -> bool:
    """Whether a header without an x column names a loss: the columns of ``history.history``
    (Keras always logs ``loss``) that pandas' ``to_csv`` wrote, one row per epoch, or a training
    loop's own ``train_loss,val_loss,...`` table. A table of results (``Model,RMSE,MAE``) names
    none and stays refused."""
    return any("loss" in c for c in columns)


def _is_text(head: bytes) -> bool:
    """No NUL byte, and UTF-8 (a character cut at the end of the head allowed)."""
    if b"\x00" in head:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return True


def _first_row(text: bytes, name: str) -> list[str]:
    """The header's cells, lower-cased, in the file's layout (its separator, below a title line);
    [] when it is not a CSV row (a NUL, a stray quote).

    Raises:
        HistoryError: numbers with a decimal comma (:func:`~trainguard.validation.csv_layout.sniff`).
    """
    lines = [line.decode("utf-8", "replace") for line in text.splitlines()[:3]]  # \n, \r\n, \r
    if not lines:
        return []
    layout = sniff(lines, name)
    try:
        return [
            c.strip().lower()
            for c in next(csv.reader([lines[layout.header_line - 1]], delimiter=layout.separator), [])
        ]
    except (csv.Error, IndexError):
        return []
