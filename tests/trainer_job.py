"""The reference trainer (``containers/trainer/train.py``) as a one-pool ``n1-standard-4`` job in
``us-central1``, the shape the local-backend and pipeline tests run it in.

>>> job = trainer_job(["--epochs=1"])
>>> job.pools[0].command[1].endswith("train.py"), list(job.pools[0].args)
(True, ['--epochs=1'])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.child_env import ROOT
from trainguard.spec import JobSpec

TRAINER = ROOT / "containers" / "trainer" / "train.py"

__all__ = ["TRAINER", "trainer_job"]


def trainer_job(
    args: Sequence[str], *, project: str = "my-project", image_uri: str = "img", **fields: Any
) -> JobSpec:
    """``python train.py ARGS`` on one n1-standard-4; ``fields`` as ``JobSpec.create`` takes them."""
    return JobSpec.create(
        project,
        "us-central1",
        machine_type="n1-standard-4",
        image_uri=image_uri,
        command=["python", str(TRAINER)],
        args=list(args),
        **fields,
    )
