"""The real-error corpus for triage: loading it and scoring a classifier on it.

The corpus (tests/fixtures/triage/corpus, see its README.md) holds error texts copied from public
issue threads, each with the class the thread says was the cause. It is split by a stable hash of
the source URL, so every text of one thread lands in the same part: patterns are written against
``dev``; ``test`` only measures. Used by tests/unit/test_triage_corpus.py and
tests/benchmarks/bench_triage_corpus.py.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "CORPUS_DIR",
    "SPLITS",
    "GOAL_ACCURACY",
    "GOAL_WRONG_CLASS",
    "Entry",
    "Miss",
    "Score",
    "split_of",
    "load",
    "score",
    "format_score",
]

CORPUS_DIR = Path(__file__).resolve().parent / "fixtures" / "triage" / "corpus"
SPLITS = ("dev", "test")
# Issue 13's goals on the test part.
GOAL_ACCURACY = 0.95
GOAL_WRONG_CLASS = 0.01


@dataclass(frozen=True)
class Entry:
    """One real error text: the program output, its true class and where it was published."""

    id: str
    failure_class: str
    framework: str
    source: str
    why: str
    text: str


@dataclass(frozen=True)
class Miss:
    """An entry the classifier got wrong: what it answered and the evidence it quoted."""

    entry: Entry
    predicted: str
    evidence: str


@dataclass
class Score:
    """Per-class recall and precision, accuracy and the wrong-class rate over some entries."""

    total: int = 0
    correct: int = 0
    wrong_class: int = 0  # a class other than the true one, and not ``unknown``
    support: dict[str, int] = field(default_factory=dict)  # true class -> count
    hits: dict[str, int] = field(default_factory=dict)  # true class -> correctly named
    predicted: dict[str, int] = field(default_factory=dict)  # predicted class -> count
    misses: list[Miss] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0

    @property
    def wrong_class_rate(self) -> float:
        return self.wrong_class / self.total if self.total else 0.0

    def recall(self, cls: str) -> float | None:
        n = self.support.get(cls, 0)
        return self.hits.get(cls, 0) / n if n else None

    def precision(self, cls: str) -> float | None:
        n = self.predicted.get(cls, 0)
        return self.hits.get(cls, 0) / n if n else None


def split_of(source: str) -> str:
    """The part an entry belongs to: a stable hash of its source URL (about 50/50)."""
    return "test" if int(hashlib.sha256(source.encode()).hexdigest()[:8], 16) % 2 else "dev"


def load(split: str) -> list[Entry]:
    """Reads one part of the corpus (``dev`` or ``test``)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; one of {SPLITS}")
    entries = []
    with open(CORPUS_DIR / f"{split}.jsonl", encoding="utf-8") as handle:
        for line in handle:
            raw = json.loads(line)
            entries.append(
                Entry(raw["id"], raw["class"], raw["framework"], raw["source"], raw["why"], raw["text"])
            )
    return entries


def score(entries: Iterable[Entry], classify: Callable[[str], object]) -> Score:
    """Classifies every entry and tallies the result.

    Args:
        entries: the corpus entries.
        classify: ``trainguard.triage.classify`` or a stand-in returning an object with
            ``failure_class`` and ``evidence``.
    """
    result = Score()
    for entry in entries:
        diagnosis = classify(entry.text)
        got = diagnosis.failure_class  # type: ignore[attr-defined]
        truth = entry.failure_class
        result.total += 1
        result.support[truth] = result.support.get(truth, 0) + 1
        result.predicted[got] = result.predicted.get(got, 0) + 1
        if got == truth:
            result.correct += 1
            result.hits[truth] = result.hits.get(truth, 0) + 1
            continue
        if got != "unknown":
            result.wrong_class += 1
        result.misses.append(Miss(entry, got, diagnosis.evidence))  # type: ignore[attr-defined]
    return result


def _pct(value: float | None) -> str:
    return "   -" if value is None else f"{100 * value:4.0f}"


def format_score(result: Score, title: str = "") -> str:
    """The per-class table (recall, precision, support), totals and the misses, as text."""
    classes = sorted(set(result.support) | set(result.predicted))
    lines = [title] if title else []
    lines.append(f"{'class':<18}{'n':>5}{'recall%':>9}{'precision%':>12}")
    for cls in classes:
        lines.append(
            f"{cls:<18}{result.support.get(cls, 0):>5}{_pct(result.recall(cls)):>9}"
            f"{_pct(result.precision(cls)):>12}"
        )
    lines.append(
        f"accuracy {100 * result.accuracy:.1f}% ({result.correct}/{result.total}); "
        f"wrong class (not unknown) {100 * result.wrong_class_rate:.1f}% ({result.wrong_class})"
    )
    for miss in result.misses:
        lines.append(
            f"  miss {miss.entry.id}: true {miss.entry.failure_class}, got {miss.predicted}"
            f" [{miss.evidence[:90]}]"
        )
    return "\n".join(lines)
