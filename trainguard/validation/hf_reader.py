"""Hugging Face ``Trainer`` state files (``trainer_state.json``): one JSON document, not JSONL.

The ``Trainer`` saves ``TrainerState`` with ``json.dumps(..., indent=2)`` into each
``checkpoint-N/`` and the output directory (``TrainerState.save_to_json`` in transformers'
``trainer_callback.py``). Its ``log_history`` is a list of the dicts ``Trainer.log`` wrote, each
with ``step`` (the global step) and ``epoch``:

- training logs: ``loss`` (rounded to 4 decimals by older transformers releases), ``grad_norm``,
  ``learning_rate``;
- evaluation logs: ``eval_loss`` and ``eval_<metric>`` (``eval_accuracy``, ``eval_wer``...) with
  ``eval_runtime``, ``eval_samples_per_second``, ``eval_steps_per_second``;
- one summary at the end of ``train()`` (``train_runtime``, ``train_loss``, the run's mean loss,
  ``total_flos``): not a point of any curve.

Series are named as the keys are (``loss`` is the training split; ``eval_*`` the validation
split, by the ``eval`` word), on the global-step axis.
"""

from __future__ import annotations

import json
import math

import numpy as np

from trainguard.errors import HistoryError
from trainguard.validation.collect import Collector, echo
from trainguard.validation.history import History

__all__ = ["read_trainer_state", "MAX_STATE_BYTES", "NOT_POINTS"]

# A trainer_state.json holds one entry per logging step; millions of entries are tens of MiB.
MAX_STATE_BYTES = 256 << 20
# Keys of a log entry that are not a metric's value: throughput, timing, counters, settings.
NOT_POINTS = frozenset(
    (
        "step",
        "epoch",
        "learning_rate",
        "grad_norm",
        "total_flos",
        "num_input_tokens_seen",
        "train_runtime",
        "train_samples_per_second",
        "train_steps_per_second",
        "eval_runtime",
        "eval_samples_per_second",
        "eval_steps_per_second",
    )
)
_SUMMARY_KEY = "train_runtime"  # only the end-of-training summary has it


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:  # an integer literal past float range reads as infinite, as in JSONL
        return math.inf if value > 0 else -math.inf


def read_trainer_state(data: bytes, source: str) -> History:
    """Reads a ``trainer_state.json`` already in memory.

    Raises:
        HistoryError: not JSON, not a trainer state (no ``log_history`` list), or no points.
    """
    if len(data) > MAX_STATE_BYTES:
        raise HistoryError(
            f"{source}: {len(data) >> 20} MiB, more than a trainer_state.json holds "
            f"({MAX_STATE_BYTES >> 20} MiB at most); is it the right file?"
        )
    try:
        text = data.decode("utf-8")
        try:
            state = json.loads(text)
        except ValueError as exc:
            if isinstance(exc, json.JSONDecodeError):
                raise
            # An integer past Python's 4300-digit limit: read as a float (inf), as JSONL reads it.
            state = json.loads(text, parse_int=float)
    except UnicodeDecodeError:
        raise HistoryError(f"{source}: not UTF-8 text, so not a trainer_state.json") from None
    except json.JSONDecodeError as exc:
        raise HistoryError(
            f"{source}: line {exc.lineno}: not JSON ({exc.msg}); a trainer_state.json is one JSON document"
        ) from None
    except RecursionError:
        raise HistoryError(f"{source}: JSON nested too deeply to be a trainer_state.json") from None
    logs = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(logs, list):
        raise HistoryError(
            f"{source}: a JSON document without a 'log_history' list, so not a Hugging Face "
            f"trainer_state.json; trainguard's own history is JSONL, one record a line"
        )
    points: dict[str, tuple[list[float], list[float]]] = {}
    records = 0
    for entry in logs:
        if not isinstance(entry, dict) or _SUMMARY_KEY in entry:
            continue
        step = _number(entry.get("step"))
        if step is None or math.isnan(step):
            continue
        records += 1
        for key, value in entry.items():
            number = _number(value)
            if number is None or not isinstance(key, str) or key in NOT_POINTS:
                continue
            xs, ys = points.setdefault(key, ([], []))
            xs.append(step)
            ys.append(number)
    collector = Collector(source)
    for key, (xs, ys) in points.items():
        collector.add(key, key, "", "", np.asarray(xs), np.asarray(ys))
    if not collector.parts:
        raise HistoryError(
            f"{source}: {records} log entr{'y' if records == 1 else 'ies'} in log_history but no "
            f"metric values; the Trainer logs 'loss' every logging_steps (first at "
            f"{echo(str(state.get('logging_steps', '?')), 20)})"
        )
    return collector.build("hf_trainer_state", "step", records, [])
