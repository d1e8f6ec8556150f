"""Vertex AI's environment contract, as seen from inside a training container.

Vertex exports ``AIP_MODEL_DIR``, ``AIP_CHECKPOINT_DIR`` and ``AIP_TENSORBOARD_LOG_DIR`` when the job
has a ``baseOutputDirectory``, ``CLUSTER_SPEC``/``TF_CONFIG`` for multi-worker jobs, and (for
PyTorch images) ``MASTER_ADDR``/``MASTER_PORT``/``WORLD_SIZE``/``RANK``. trainguard's launchers add
``TRAINGUARD_HISTORY``, the path of the JSONL training history.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["VertexEnv", "HISTORY_FILENAME", "HISTORY_ENV", "DEFAULT_OUTPUT_DIR"]

HISTORY_FILENAME = "history.jsonl"
HISTORY_ENV = "TRAINGUARD_HISTORY"
#: Where a run on this machine writes when nothing names a directory (the runtime outside a job,
#: and ``trainguard train --local`` for a spec without ``baseOutputDirectory``).
DEFAULT_OUTPUT_DIR = "./trainguard-output"


def _parent(uri: str) -> str:
    stripped = uri.rstrip("/")
    head, _, _ = stripped.rpartition("/")
    return head


@dataclass(frozen=True)
class VertexEnv:
    """The contract's values, with defaults that make a plain local run work."""

    model_dir: str
    checkpoint_dir: str
    tensorboard_log_dir: str
    history_path: str
    rank: int
    world_size: int
    task_type: str

    @property
    def is_chief(self) -> bool:
        """True for the process that writes shared outputs (rank 0 / the chief pool)."""
        return self.rank == 0

    @classmethod
    def from_environ(
        cls, environ: Mapping[str, str] | None = None, default_base: str = DEFAULT_OUTPUT_DIR
    ) -> VertexEnv:
        """Reads the contract from ``environ`` (default ``os.environ``)."""
        env = os.environ if environ is None else environ
        base = default_base.rstrip("/")
        model_dir = env.get("AIP_MODEL_DIR") or f"{base}/model/"
        checkpoint_dir = env.get("AIP_CHECKPOINT_DIR") or f"{base}/checkpoints/"
        tb_dir = env.get("AIP_TENSORBOARD_LOG_DIR") or f"{base}/logs/"
        history = env.get(HISTORY_ENV) or f"{_parent(model_dir)}/{HISTORY_FILENAME}"
        rank = int(env.get("RANK", "0") or 0)
        world = int(env.get("WORLD_SIZE", "1") or 1)
        task_type = "workerpool0"
        cluster = env.get("CLUSTER_SPEC")
        if cluster:
            try:
                task = json.loads(cluster).get("task", {})
                task_type = task.get("type", task_type)
            except (ValueError, AttributeError):
                pass  # A malformed CLUSTER_SPEC is the launcher's bug; keep the defaults.
        return cls(model_dir, checkpoint_dir, tb_dir, history, rank, world, task_type)
