"""The runtime imported inside training containers: checkpoints and the training history.

It depends on nothing of trainguard outside this package (it ships inside user images), and on no
kfp or aiplatform. ``google-cloud-storage`` is imported only for ``gs://`` paths.
"""

from trainguard.runtime.checkpoint import Checkpoint, CheckpointManager
from trainguard.runtime.env import VertexEnv
from trainguard.runtime.history import HistoryWriter, read_history_records

__all__ = ["Checkpoint", "CheckpointManager", "HistoryWriter", "VertexEnv", "read_history_records"]
