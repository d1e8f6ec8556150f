"""What some writers' column names mean, where the name alone does not say it.

Ultralytics' ``results.csv`` (``BaseTrainer.save_metrics`` in ultralytics/engine/trainer.py, one
row per epoch; older releases pad every cell to 23 characters) names its columns after the head
that produced them:

- ``train/<item>`` and ``val/<item>``: the loss items of that split (``box_loss``, ``cls_loss``,
  ``dfl_loss``; ``loss`` for classification; YOLOv10's ``box_om``, ``cls_oo``... for its one-to-many
  and one-to-one heads): all losses, minimised;
- ``metrics/<name>(B)`` (``(M)`` for masks, ``(P)`` for poses): validation metrics, precision,
  recall, mAP50, mAP50-95 (``metrics/accuracy_top1`` for classification), maximised;
- ``lr/pg0``, ``lr/pg1``... and ``time``: settings and timing, not metrics.

:func:`column_meaning` turns such a header into, per column, the name to interpret and the split.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["column_meaning", "is_ultralytics"]

_MASK_SUFFIX = re.compile(r"\((?:b|m|p)\)$", re.IGNORECASE)


def is_ultralytics(header: Sequence[str]) -> bool:
    """Whether a CSV header is an Ultralytics ``results.csv``'s."""
    lowered = [c.strip().lower() for c in header]
    return (
        "epoch" in lowered
        and any(c.startswith("train/") for c in lowered)
        and any(c.startswith("metrics/") for c in lowered)
    )


def column_meaning(header: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Column -> (the name to read split and metric from, the split) for the columns a dialect
    explains; columns left out mean what their names say."""
    if not is_ultralytics(header):
        return {}
    out: dict[str, tuple[str, str]] = {}
    for column in header:
        group, _, item = column.strip().partition("/")
        group = group.lower()
        if not item:
            continue
        if group in ("train", "val"):
            tag = item if "loss" in item.lower() else f"{item}_loss"
            out[column] = (tag, group)
        elif group == "metrics":
            suffix = _MASK_SUFFIX.search(item)
            name = item[: suffix.start()] if suffix else item
            kind = {"(m)": "mask_", "(p)": "pose_"}.get(suffix.group(0).lower(), "") if suffix else ""
            out[column] = (kind + name, "val")
    return out
