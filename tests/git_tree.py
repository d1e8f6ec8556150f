"""``trainguard/`` as a git revision had it: the baseline the reader golden tests and the validation
benchmark compare against."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def trainguard_at(rev: str, into: Path | str) -> Path:
    """Extracts ``trainguard/`` at ``rev`` under ``into`` and returns ``into``.

    Raises:
        subprocess.CalledProcessError: git cannot give that revision (a shallow clone, say).
    """
    archive = subprocess.run(["git", "archive", rev, "trainguard"], cwd=ROOT, capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        # Python 3.11.4 and later take the "data" filter (nothing outside `into`, no devices);
        # earlier 3.11 releases have no filters, and the archive is this repository's own.
        tar.extractall(into, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return Path(into)
