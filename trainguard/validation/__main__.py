"""``python -m trainguard.validation [--update README.md]``: the thresholds table, printed or
written into the README between its markers."""

from __future__ import annotations

import sys
from pathlib import Path

from trainguard.validation.thresholds import markdown_table, update_readme


def main(argv: list[str]) -> int:
    """Prints the defaults table, or updates the README's generated block."""
    if len(argv) == 2 and argv[0] == "--update":
        changed = update_readme(Path(argv[1]))
        print(f"{argv[1]}: {'updated' if changed else 'already up to date'}")
        return 0
    if argv:
        print("usage: python -m trainguard.validation [--update README.md]")
        return 2
    print(markdown_table())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
