"""Property-based fuzzing of triage text through ``trainguard triage`` (in-process).

Whatever the text — real log lines shuffled with random ones, carriage returns, escaped ``\\n``,
replica prefixes, secrets, undecodable bytes, megabyte lines — the CLI keeps the contract
(tests/fuzz/contract.py), never echoes a planted secret, and the scan's prefilter never changes
what the full signature table finds.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.fuzz.contract import assert_contract, run_cli
from trainguard import triage
from trainguard.prefilter import DIGITS, digit_blind, digit_relaxed
from trainguard.triage import scan
from trainguard.triage.input import blocks

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "triage"
REAL_LINES = sorted(
    {
        line
        for p in [*FIXTURES.glob("*.txt"), *FIXTURES.glob("logs/*.txt")]
        for line in p.read_text(encoding="utf-8").splitlines()
        if line.strip()
    }
)
SECRETS = [
    "ya29.a0AfB_byFUZZSECRET0123456789",
    "ghp_FUZZSECRETFUZZSECRETFUZZSECRETFUZZ12",
    "AKIAFUZZSECRET123456",
    "xoxb-1234567890-FUZZSECRETFUZZ",
    "AIzaSyFUZZSECRET_0123456789abcdefghijkl",
]
SECRET_LINES = [
    "PERMISSION_DENIED: Authorization: Bearer {s}",
    "CUDA out of memory at https://trainer:{s}@db.example/x",
    "RuntimeError: upload failed, token={s}",
    "Quota exceeded for {s}",
    "Killed {s}",
    "{s} torch.OutOfMemoryError: CUDA out of memory",
]
_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
# The contract looks for a Python traceback in the output; a log that quotes one is echoed in the
# evidence legitimately, so the CLI properties leave such logs to the scan property.
_TRACEBACK = "Traceback (most recent call last)"


def fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, database=None, suppress_health_check=_CHECKS)


line_noise = st.one_of(
    st.sampled_from(REAL_LINES),
    st.text(max_size=80),
    st.builds(lambda w, n: f"[workerpool{n}-0] {w}", st.sampled_from(REAL_LINES), st.integers(0, 3)),
    st.builds(lambda a, b: f"{a}\\n{b}", st.sampled_from(REAL_LINES), st.sampled_from(REAL_LINES)),
    st.sampled_from(
        [
            '  File "/app/t.py", line 3, in <module>',
            "    raise RuntimeError('x')",
            "\u212aILLED",
            "ſIGTERM",
            "İNTERNAL",
            "frame #3: c10::Error",
            "   ^^^^^",
        ]
    ),
)
separators = st.sampled_from(["\n", "\r\n", "\r", "\n\n"])


@st.composite
def logs(draw) -> str:
    lines = draw(st.lists(line_noise, max_size=30))
    return draw(separators).join(lines)


def _hits(text: str) -> list[tuple[int, int, str]]:
    found = scan.scan(blocks(io.BytesIO(text.encode("utf-8", "surrogatepass"))), errors="surrogatepass")
    return sorted((h.line_number, h.segment, h.pattern.label) for h in found)


def _reference(text: str) -> list[tuple[int, int, str]]:
    """Every signature on every piece of every line, as the scan did before its prefilter."""
    hits, after_frame = [], False
    for number, line in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), 1):
        line = scan.REPLICA_PREFIX.sub("", line, count=1)
        for segment, piece in enumerate(line.split("\\n")):
            quoted = after_frame and piece[:1] in (" ", "\t")
            after_frame = bool(scan.PYTHON_FRAME.match(piece))
            if quoted or scan.FRAME.match(piece):
                continue
            hits += [(number, segment, p.label) for p in triage.CLASS_PATTERNS if p.regex.search(piece)]
    return sorted(hits)


@fuzz(300)
@given(text=st.one_of(logs(), st.text(max_size=300)))
def test_the_prefilter_never_changes_what_the_table_finds(text):
    assert _hits(text) == _reference(text)


@st.composite
def renumbered(draw) -> str:
    """A real line with its digits drawn anew (a log repeats its lines but for their numbers)."""
    line = draw(st.sampled_from([line for line in REAL_LINES if re.search(r"\d", line)]))
    digits = draw(st.lists(st.sampled_from("0123456789"), min_size=len(line), max_size=len(line)))
    return "".join(digits[i] if ch.isascii() and ch.isdigit() else ch for i, ch in enumerate(line))


@fuzz(200)
@given(lines=st.lists(renumbered(), min_size=1, max_size=40))
def test_lines_alike_but_for_their_digits_each_get_their_own_hits(lines):
    # "exit code 137" after "exit code 0": the scan reads a line shape once, never its digits.
    text = "\n".join(lines)
    assert _hits(text) == _reference(text)


@fuzz(200)
@given(line=renumbered())
def test_a_digit_blind_signature_matches_a_line_exactly_when_it_matches_its_shape(line):
    shape = line.encode("utf-8", "surrogatepass").translate(DIGITS).decode("utf-8", "surrogatepass")
    for pattern in triage.CLASS_PATTERNS:
        found = pattern.regex.search(line) is not None
        if digit_blind(pattern.regex):
            assert found == (pattern.regex.search(shape) is not None), pattern.label
        elif found and (relaxed := digit_relaxed(pattern.regex)) is not None:
            assert relaxed.search(shape), pattern.label


SECRET_FRAGMENTS = [
    "token",
    "TOKEN",
    "secret",
    "Secret Access Key",
    "api_key",
    "PGPASSWORD",
    "key_id",
    "X-Goog-Signature",
    "sig",
    "ſecret",
    "--password",
    "--hf-token",
    "=",
    ": ",
    '"',
    "%3D",
    "%22",
    " ",
    "\n",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    "hunter2",
    "https://",
    "bob:",
    "p4ss/w0rd",
    "@host.example:443/x",
    "-----BEGIN RSA PRIVATE\nKEY-----",
    "-----END PRIVATE KEY-----",
    "MIIEvQIBADANBgkqhkiG9w0B",
    "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "Authorization",
    "Bearer ",
    "cookie",
]


@fuzz(300)
@given(parts=st.lists(st.one_of(st.sampled_from(SECRET_FRAGMENTS), st.sampled_from(REAL_LINES)), max_size=12))
def test_the_redaction_gates_never_keep_a_shape_from_running(parts):
    # redact() skips a shape where its gates find nothing; running every shape must agree.
    from trainguard.redaction import SECRET_SHAPES, redact

    text = "".join(parts)
    everything = text
    for shape in SECRET_SHAPES:
        everything = shape.regex.sub(shape.replacement, everything)
    assert redact(text) == everything


@fuzz(40)
@given(text=logs(), how=st.sampled_from(["stdin", "text", "file"]))
def test_triage_of_any_log_keeps_the_contract(tmp_path_factory, text, how):
    assume(_TRACEBACK not in text)
    if how == "stdin":
        outcome = run_cli("triage", "-", stdin=text.encode("utf-8", "surrogatepass"))
    elif how == "text":
        outcome = run_cli("triage", "--text", text)
    else:
        path = tmp_path_factory.mktemp("log") / "job.log"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        outcome = run_cli("triage", path)
    assert_contract(outcome)
    assert outcome.exit_code == 0


@fuzz(30)
@given(before=logs(), secret=st.sampled_from(SECRETS), shape=st.sampled_from(SECRET_LINES), after=logs())
def test_a_planted_secret_is_never_echoed(tmp_path_factory, before, secret, shape, after):
    text = "\n".join([before, shape.format(s=secret), after])
    assume(_TRACEBACK not in text)
    json_path = tmp_path_factory.mktemp("out") / "d.json"
    outcome = run_cli("triage", "-", "--json", json_path, stdin=text)
    assert_contract(outcome)
    assert "FUZZSECRET" not in outcome.output
    assert "FUZZSECRET" not in json_path.read_text(encoding="utf-8")


@fuzz(20)
@given(data=st.binary(max_size=2000))
def test_random_bytes_keep_the_contract(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("bin") / "job.log"
    path.write_bytes(data)
    outcome = run_cli("triage", path)
    assert_contract(outcome)
    assert outcome.exit_code == 0


@fuzz(8)
@given(
    size=st.integers(min_value=100_000, max_value=2_000_000),
    where=st.floats(0, 1),
    signal=st.sampled_from(["CUDA out of memory", "PERMISSION_DENIED", "Killed"]),
)
def test_a_megabyte_line_is_classified_and_bounded(tmp_path_factory, size, where, signal):
    at = int(size * where)
    text = "x" * at + f" {signal} " + "y" * (size - at)
    path = tmp_path_factory.mktemp("big") / "job.log"
    path.write_text(text, encoding="utf-8")
    outcome = run_cli("triage", path)
    assert_contract(outcome)
    assert len(outcome.output) < 2000
