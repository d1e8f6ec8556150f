"""The ``trainguard`` command's entry point: the CLI, or one line saying what to install.

The base install is the training runtime alone (what goes into a training image); the command line
comes with the ``pipelines`` extra. Without it, ``trainguard`` says so instead of a traceback.
"""

from __future__ import annotations

import sys

__all__ = ["main", "MISSING_CLI"]

MISSING_CLI = (
    "trainguard: the command line needs the pipelines extra (this install is the training runtime "
    "alone): pip install 'trainguard[pipelines]' — from a clone of the repository: "
    "pip install '.[pipelines]'"
)


def main() -> None:
    """Runs :func:`trainguard.cli.main`; exit 2 with :data:`MISSING_CLI` when typer or rich is absent."""
    try:
        from trainguard.cli import main as cli_main
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in {"typer", "rich", "click"}:
            raise
        print(MISSING_CLI, file=sys.stderr)
        sys.exit(2)
    cli_main()
