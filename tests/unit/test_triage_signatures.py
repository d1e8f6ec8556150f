"""The signature table cites, for every pattern, where its wording was seen, and the citation holds.

A ``dev:`` source is an entry of the corpus' dev part and a ``fixture:`` source a text under
tests/fixtures/triage: the pattern must match a line of it, so a pattern cannot drift away from
the text that justified it. No pattern may cite the test part, which only measures.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.triage_corpus import load, split_of
from trainguard.triage import ERROR, signatures
from trainguard.triage.signatures import CLASS_PATTERNS, SOURCE_KINDS, Pattern

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "triage"
# Patterns older than the corpus whose wording turned up only in a test-part thread; they are kept
# (they were not written from it) and cite it openly.
OLDER_THAN_THE_CORPUS = {
    "https://github.com/pytorch/pytorch/issues/69197",
    "https://github.com/azavea/raster-vision-aws/issues/15",
}


def _matches_a_line(pattern: Pattern, text: str) -> bool:
    return any(pattern.regex.search(line) for line in text.splitlines())


def _label(pattern: Pattern) -> str:
    return pattern.label


def test_every_pattern_cites_a_source_of_a_known_kind():
    for pattern in CLASS_PATTERNS:
        assert pattern.source.startswith(SOURCE_KINDS), pattern.label


@pytest.mark.parametrize("pattern", [p for p in CLASS_PATTERNS if p.source.startswith("dev:")], ids=_label)
def test_a_dev_source_is_an_entry_of_the_dev_part_the_pattern_matches(pattern: Pattern):
    entries = {entry.id: entry for entry in load("dev")}
    entry = entries.get(pattern.source.removeprefix("dev:"))

    assert entry is not None, f"{pattern.source} is not in the dev part"
    assert _matches_a_line(pattern, entry.text), pattern.source


@pytest.mark.parametrize(
    "pattern", [p for p in CLASS_PATTERNS if p.source.startswith("fixture:")], ids=_label
)
def test_a_fixture_source_is_a_text_the_pattern_matches(pattern: Pattern):
    path = FIXTURES / pattern.source.removeprefix("fixture:")

    assert path.is_file(), pattern.source
    assert _matches_a_line(pattern, path.read_text(encoding="utf-8", errors="replace")), pattern.source


def test_a_code_source_is_a_file_of_this_repository():
    for pattern in CLASS_PATTERNS:
        if pattern.source.startswith("code:"):
            assert (ROOT / pattern.source.removeprefix("code:")).is_file(), pattern.source


def test_no_pattern_cites_a_thread_of_the_test_part():
    test_sources = {entry.source for entry in load("test")}
    cited = {p.source for p in CLASS_PATTERNS if p.source.startswith("https://github.com/")}

    assert cited & test_sources == OLDER_THAN_THE_CORPUS
    assert all(split_of(source) == "test" for source in OLDER_THAN_THE_CORPUS)


def test_a_source_of_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="source"):
        Pattern("host_oom", re.compile("x"), 0.5, ERROR, "x", "a blog post")


def test_the_table_is_importable_from_the_package_as_before():
    from trainguard import triage

    assert triage.CLASS_PATTERNS is signatures.CLASS_PATTERNS
