"""Benchmark: ``preflight --only compat`` on the real job-spec corpus (``make bench``).

Judges every spec of tests/fixtures/specs (copied as found from public material, labelled from
the documents INDEX.json cites) and prints, for the ``test`` part (never tuned on) and the
``dev`` part: how many specs get the right worst status, how many get every rule right, the
internal errors, and the misses; then how many specs fall in each category issue 28 requires.

Usage: ``python tests/benchmarks/bench_spec_corpus.py [--split test|dev|all]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.spec_corpus import REQUIRED_CATEGORIES, SPLITS, categories, load, score  # noqa: E402


def coverage() -> str:
    """How many specs of each part fall in each category issue 28 requires; the missing ones."""
    counts = {split: {c: 0 for c in REQUIRED_CATEGORIES} for split in SPLITS}
    for split in SPLITS:
        for entry in load(split):
            for c in categories(entry) & set(REQUIRED_CATEGORIES):
                counts[split][c] += 1
    lines = ["required categories (dev / test):"]
    lines += [f"  {c:26} {counts['dev'][c]:3} / {counts['test'][c]:3}" for c in REQUIRED_CATEGORIES]
    missing = [c for c in REQUIRED_CATEGORIES if not any(counts[s][c] for s in SPLITS)]
    lines.append(f"  missing: {', '.join(missing) or 'none'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="all")
    args = parser.parse_args(argv)
    splits = ("test", "dev") if args.split == "all" else (args.split,)
    worst = 0
    for split in splits:
        entries = load(split)
        started = time.perf_counter()
        result = score(entries)
        took = time.perf_counter() - started
        print(
            result.format(f"spec corpus, {split} part ({took * 1000 / max(1, len(entries)):.1f} ms a spec)")
        )
        worst = max(worst, len(result.internal_errors))
    print(coverage())
    return 1 if worst else 0


if __name__ == "__main__":
    raise SystemExit(main())
