"""Settings for the whole suite."""

from __future__ import annotations

import os

# Three xdist workers share two cores, and many tests start trainers of their own: one intra-op
# thread per process stops them spinning against each other (torchrun sets the same for its
# workers). Set before any test module imports torch.
os.environ.setdefault("OMP_NUM_THREADS", "1")
