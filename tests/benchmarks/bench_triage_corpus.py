"""Benchmark: triage on the real-error corpus (``make bench``).

Classifies every text of tests/fixtures/triage/corpus (528 error texts from public issue threads,
labelled by the cause each thread found; see README.md there) and prints, for the ``test`` part
(never tuned on) and the ``dev`` part (patterns written against it): per-class recall and
precision, overall accuracy and the wrong-class rate (a class other than the true one, rather
than ``unknown``), plus the texts it got wrong and the classification throughput.

Goals (issues 13 and 29), on the test part: >= 95 % correct, a wrong class on <= 1 %.

Usage: ``python tests/benchmarks/bench_triage_corpus.py [--split test|dev|all] [--check]``
(``--check`` exits 1 when the test part misses a goal).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.triage_corpus import (  # noqa: E402
    GOAL_ACCURACY,
    GOAL_WRONG_CLASS,
    SPLITS,
    format_score,
    load,
    score,
)
from trainguard.triage import classify  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="all")
    parser.add_argument("--check", action="store_true", help="exit 1 when the test part misses a goal")
    args = parser.parse_args(argv)

    splits = ("test", "dev") if args.split == "all" else (args.split,)
    failed = False
    for split in splits:
        entries = load(split)
        started = time.perf_counter()
        result = score(entries, classify)
        elapsed = time.perf_counter() - started
        size = sum(len(e.text.encode()) for e in entries)
        print(format_score(result, f"== triage, corpus part '{split}' ({len(entries)} texts)"))
        print(f"classified {len(entries)} texts ({size / 1024:.0f} KiB) in {elapsed * 1000:.0f} ms")
        if split == "test":
            met = result.accuracy >= GOAL_ACCURACY and result.wrong_class_rate <= GOAL_WRONG_CLASS
            print(
                f"goals: accuracy >= {100 * GOAL_ACCURACY:.0f}%, wrong class <= "
                f"{100 * GOAL_WRONG_CLASS:.0f}%: {'met' if met else 'NOT met'}"
            )
            failed = not met
        print()
    return 1 if args.check and failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
