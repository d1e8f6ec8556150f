"""The environment of a Python process that a test starts with the repository on its path.

A child that imports ``tests.…`` helpers needs the repository root on ``PYTHONPATH``; what the
suite's environment already had there is kept behind it.

>>> env = with_repo_on_path(EXTRA="1")
>>> env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT), env["EXTRA"]
(True, '1')
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["ROOT", "with_repo_on_path"]


def with_repo_on_path(**extra: str) -> dict[str, str]:
    """This process's environment and ``extra``, with the repository root first on ``PYTHONPATH``
    (ahead of what the suite put there)."""
    env = {**os.environ, **extra}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env
