"""Benchmark: redaction speed and false redactions on real text (``make bench``).

Everything trainguard echoes goes through ``trainguard.redaction.redact`` (the one secrets
table): triage evidence (one line, at most 300 characters shown, redacted within 8,000
characters of the signal), launcher log tails and diagnosis artifacts (bounded to 20,000
characters). This measures, side by side on the same machine:

- real log text (the benchmark log excerpts and healthy fixtures of tests/fixtures/triage, and
  the 375 published error texts of its corpus) cut into 20,000-character tails: MB/s, and how
  many characters redaction changed (a false redaction: none of these texts holds a secret);
- the same text as evidence lines: microseconds per line;
- text dense with secrets (every shape of the table, tests/unit/test_redaction.py's cases): MB/s;
- a floor beside them: one pass of one compiled regex over the same tails.

Usage: ``python tests/benchmarks/bench_triage_redaction.py [--mb 4] [--check]`` (``--check`` exits
1 when a real text is changed).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.triage_corpus import SPLITS, load  # noqa: E402
from trainguard.redaction import SECRET_SHAPES, bound, redact  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "triage"
TAIL_CHARS = 20_000
MB = 1_000_000


def _real_texts() -> list[str]:
    paths = [*sorted(FIXTURES.glob("unknown-healthy-*.txt")), *sorted(FIXTURES.glob("logs/*.txt"))]
    return [p.read_text(encoding="utf-8") for p in paths] + [e.text for s in SPLITS for e in load(s)]


def _secret_texts() -> list[str]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
    from test_redaction import CASES  # noqa: PLC0415

    return [text for _name, text, _leaks, _kept in CASES]


def _tails(texts: list[str], total: int) -> list[str]:
    joined = "\n".join(texts)
    body = (joined + "\n") * (total // len(joined) + 1)
    return [body[i : i + TAIL_CHARS] for i in range(0, total, TAIL_CHARS)]


def _rate(function, items: list[str]) -> tuple[float, float]:
    started = time.perf_counter()
    for item in items:
        function(item)
    seconds = time.perf_counter() - started
    return sum(len(i) for i in items) / MB / seconds, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=4, help="characters of text per measurement, in millions")
    parser.add_argument("--check", action="store_true", help="exit 1 when a real text is changed")
    args = parser.parse_args()
    total = int(args.mb * MB)

    real = _real_texts()
    changed = [t for t in real if redact(t) != t]
    tails = _tails(real, total)
    lines = [bound(line, 300) for text in real for line in text.splitlines() if line.strip()]
    secrets = _tails(_secret_texts(), total // 4)
    floor = re.compile(r"ya29\.[\w.-]+")

    print(f"{len(SECRET_SHAPES)} secret shapes; {len(real)} real texts ({sum(map(len, real)):,} characters)")
    real_rate, _ = _rate(redact, tails)
    floor_rate, _ = _rate(lambda t: floor.sub("[REDACTED]", t), tails)
    print(
        f"real log tails ({TAIL_CHARS:,} characters): {real_rate:7.1f} MB/s"
        f" (one regex beside it: {floor_rate:.1f} MB/s)"
    )
    _, seconds = _rate(redact, lines)
    print(f"real evidence lines: {1e6 * seconds / len(lines):7.1f} us per line ({len(lines)} lines)")
    secret_rate, _ = _rate(redact, secrets)
    print(f"text dense with secrets: {secret_rate:7.1f} MB/s")
    print(f"real texts changed by redaction (false redactions): {len(changed)}")
    for text in changed[:5]:
        print(f"  {text[:100]!r}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
