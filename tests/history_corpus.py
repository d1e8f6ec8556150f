"""The real-history corpus for validation: loading it and scoring ``validate`` on it.

The corpus (tests/fixtures/real_histories, README.md there) holds training histories copied byte
for byte from public repositories (Lightning ``metrics.csv``, Keras ``CSVLogger`` files, Hugging
Face ``trainer_state.json``, Ultralytics ``results.csv``, MLflow runs: a run's directory of metric
files), each with the expectation its numbers
justify and why. It is split by a stable hash of the repository's URL, so every run of one
repository lands in the same part: the rules are tuned on ``dev``; ``test`` only measures. Used by
tests/unit/validation/test_real_histories.py.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from trainguard.errors import TrainguardError

__all__ = [
    "CORPUS_DIR",
    "SPLITS",
    "KINDS",
    "Entry",
    "Outcome",
    "Score",
    "split_of",
    "writer_of",
    "load",
    "judge",
    "score",
    "format_score",
]

CORPUS_DIR = Path(__file__).resolve().parent / "fixtures" / "real_histories"
SPLITS = ("dev", "test")
# What a label can say (README.md there): the verdict must ...
KINDS = (
    "fails",  # fail, with one of the listed classes for "class right"
    "flags",  # fail or warn with one of the listed classes (a run that learnt too little to call)
    "warns",  # pass with a warning of the class
    "passes",  # pass with no finding at all
    "no fail",  # pass; a warning is acceptable
    "not judged",  # not fail: too few points (refusing it as bad input is right too)
    "unclear",  # anything but an internal error: the numbers do not settle it
)


@dataclass(frozen=True)
class Entry:
    """One real history: where it came from, what a careful engineer would conclude, and why."""

    file: str
    repo: str
    commit: str
    source: str
    kind: str
    classes: tuple[str, ...]
    why: str

    @property
    def path(self) -> Path:
        return CORPUS_DIR / "files" / self.file

    @property
    def writer(self) -> str:
        return writer_of(self.file)


@dataclass(frozen=True)
class Outcome:
    """What ``validate`` made of one entry."""

    entry: Entry
    status: str  # "failed", "passed", "undecided", "refused" (bad input, exit 2) or "crashed"
    failure_class: str | None = None
    warned: tuple[str, ...] = ()
    detail: str = ""  # the headline, or the refusal's / crash's message

    @property
    def ok(self) -> bool:
        kind, classes = self.entry.kind, self.entry.classes
        if self.status == "crashed":
            return False
        if kind == "fails":
            return self.status == "failed"
        if kind == "flags":
            found = {self.failure_class, *self.warned} if self.status == "failed" else set(self.warned)
            return bool(found & set(classes))
        if kind == "warns":
            return self.status == "passed" and bool(set(self.warned) & set(classes))
        if kind == "passes":
            return self.status == "passed" and not self.warned
        if kind == "no fail":
            return self.status in ("passed", "undecided")
        if kind == "not judged":
            return self.status != "failed"
        return True  # unclear: only an internal error is wrong

    @property
    def class_right(self) -> bool:
        return self.status == "failed" and self.failure_class in self.entry.classes

    @property
    def false_alarm(self) -> bool:
        """A run that must not fail, failed."""
        return self.entry.kind in ("passes", "no fail", "warns", "not judged") and self.status == "failed"


@dataclass
class Score:
    """The figures over some outcomes."""

    outcomes: list[Outcome] = field(default_factory=list)

    def of(self, *kinds: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.entry.kind in kinds]

    @property
    def ok(self) -> int:
        return sum(o.ok for o in self.outcomes)

    @property
    def crashed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "crashed"]

    def line(self, title: str) -> str:
        failing = self.of("fails")
        healthy = self.of("passes", "no fail")
        wrong_warn = [o for o in self.of("passes") if o.status == "passed" and o.warned]
        refused = [
            o for o in self.of("passes", "no fail", "warns", "fails", "flags") if o.status == "refused"
        ]
        return (
            f"{title:<22} {self.ok:>3}/{len(self.outcomes):<3} right | failing caught "
            f"{sum(o.status == 'failed' for o in failing)}/{len(failing)} (class right "
            f"{sum(o.class_right for o in failing)}) | flagged {sum(o.ok for o in self.of('flags'))}/"
            f"{len(self.of('flags'))} | false alarms {sum(o.false_alarm for o in healthy)}/{len(healthy)} "
            f"| wrong warnings {len(wrong_warn)} | refused {len(refused)} | internal errors "
            f"{len(self.crashed)}"
        )


def split_of(repo: str) -> str:
    """The part a repository's histories belong to: a stable hash of its URL (about 50/50)."""
    url = f"https://github.com/{repo}"
    return "test" if int(hashlib.sha256(url.encode()).hexdigest()[:8], 16) % 2 else "dev"


def writer_of(file: str) -> str:
    """Which logger wrote a file, from its name (a DVCLive run is its ``dvclive`` directory, an MLflow
    run a directory under ``mlruns/``)."""
    name = file.rsplit("/", 1)[-1]
    if name == "dvclive":  # a run's directory: one .tsv per metric below it
        return "dvclive"
    if "/mlruns/" in f"/{file}/" or (CORPUS_DIR / "files" / file).is_dir():
        return "mlflow"
    if name == "trainer_state.json":
        return "hf_trainer_state"
    if name == "results.csv":
        return "ultralytics"
    if name == "metrics.csv":
        return "lightning_csv"
    return "keras_csv"


def _expectation(text: str) -> tuple[str, tuple[str, ...]]:
    kind, _, classes = text.partition(":")
    kind = kind.strip()
    if kind not in KINDS:
        raise ValueError(f"unknown expectation {text!r}; one of {KINDS}")
    return kind, tuple(c.strip() for c in classes.split("|") if c.strip())


def load(split: str | None = None) -> list[Entry]:
    """Reads the corpus' entries, of one part (``dev`` or ``test``) or all."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; one of {SPLITS}")
    raw = json.loads((CORPUS_DIR / "corpus.json").read_text(encoding="utf-8"))
    entries = []
    for item in raw:
        kind, classes = _expectation(item["expect"])
        entry = Entry(item["file"], item["repo"], item["commit"], item["source"], kind, classes, item["why"])
        if split is None or split_of(entry.repo) == split:
            entries.append(entry)
    return entries


def judge(entry: Entry, validate: Callable[..., object]) -> Outcome:
    """Validates one history with no flags and says what came of it.

    ``TrainguardError`` is bad input (the CLI's exit 2); any other exception is an internal error.
    """
    try:
        verdict = validate(entry.path)
    except TrainguardError as exc:
        return Outcome(entry, "refused", detail=str(exc))
    except Exception as exc:  # the bug the corpus exists to find: report it, do not raise
        return Outcome(entry, "crashed", detail=f"{type(exc).__name__}: {exc}")
    warned = tuple(dict.fromkeys(f.failure_class for f in verdict.warnings))  # type: ignore[attr-defined]
    if not verdict.passed:  # type: ignore[attr-defined]
        status = "failed"
    elif verdict.undecided:  # type: ignore[attr-defined]
        status = "undecided"
    else:
        status = "passed"
    return Outcome(entry, status, verdict.failure_class, warned, verdict.headline)  # type: ignore[attr-defined]


def score(entries: Iterable[Entry], validate: Callable[..., object]) -> Score:
    """Judges every entry."""
    return Score([judge(entry, validate) for entry in entries])


def format_score(result: Score, title: str = "") -> str:
    """Totals per writer, then every entry the verdict got wrong, as text."""
    lines = [result.line(title or "all")]
    for writer in sorted({o.entry.writer for o in result.outcomes}):
        part = Score([o for o in result.outcomes if o.entry.writer == writer])
        lines.append(part.line(f"  {writer}"))
    for o in result.outcomes:
        if not o.ok:
            want = o.entry.kind + (": " + "|".join(o.entry.classes) if o.entry.classes else "")
            got = o.status + (f" {o.failure_class}" if o.failure_class else "")
            got += f" warned {','.join(o.warned)}" if o.warned else ""
            lines.append(f"  WRONG {o.entry.file}: want {want}, got {got} [{o.detail[:140]}]")
    return "\n".join(lines)
