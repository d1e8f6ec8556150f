"""The in-flight guard: follow a running job's history, stop it on a failing verdict, ship the
best model.

- :class:`HistoryGuard` (``watcher``) is the :class:`~trainguard.launch.base.Watcher` a backend
  calls between polls; it returns a :class:`~trainguard.launch.base.Stop` with the class, the
  evidence, the remedy and the accelerator-hours saved (``savings``); with a budget it also stops
  the job once its spend reaches it (``spend``: class ``budget``), and ``ledger`` is what the run
  cost, attempt by attempt, from the Cloud Billing Catalog ($0 for a local run).
- ``follow`` reads growing files at O(new bytes) (local offsets, ranged ``gs://`` reads);
  ``jsonl`` and ``events`` parse trainguard's JSONL and TensorBoard event files as they grow;
  ``judge`` asks :func:`trainguard.validation.validate` — the one implementation of the rules.
- ``discover`` finds whatever history a job wrote (JSONL, TensorBoard, Keras/Lightning CSV) for
  the ``history`` output; ``model`` picks the checkpoint nearest the best validation step.

Example::

    from trainguard.guard import HistoryGuard
    guard = HistoryGuard.for_spec(spec, "fail", stream=sys.stdout)
    result = backend.run(spec, watcher=guard)
    guard.finish()
"""

from trainguard.guard.discover import FoundHistory, find_history, publish_history
from trainguard.guard.jsonl import PLANNED_STEPS_KEY
from trainguard.guard.judge import EARLY_STOP_CLASSES, STOP_CLASSES, judge
from trainguard.guard.ledger import Ledger, RunCost
from trainguard.guard.model import BestStep, ModelPick, best_validation, pick_model, publish_model
from trainguard.guard.savings import JobCost, Savings, estimate
from trainguard.guard.spend import Meter
from trainguard.guard.watcher import HistoryGuard

__all__ = [
    "HistoryGuard",
    "JobCost",
    "Savings",
    "estimate",
    "Meter",
    "Ledger",
    "RunCost",
    "judge",
    "STOP_CLASSES",
    "EARLY_STOP_CLASSES",
    "PLANNED_STEPS_KEY",
    "FoundHistory",
    "find_history",
    "publish_history",
    "BestStep",
    "ModelPick",
    "best_validation",
    "pick_model",
    "publish_model",
]
