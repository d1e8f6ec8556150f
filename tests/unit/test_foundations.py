"""The small shared pieces: choices, durations, the retry policy, redaction's bound."""

from __future__ import annotations

import pytest

from trainguard.choices import Backend, GuardMode, parse, values
from trainguard.durations import format_duration, parse_duration, parse_durations
from trainguard.errors import EXIT_BAD_INPUT, ConfigError, EndpointUnreachable, TransientError
from trainguard.redaction import bound
from trainguard.retry import RetryPolicy


def test_a_choice_parses_forgivingly_and_a_wrong_one_lists_the_valid_values():
    assert parse(Backend, " Local ", "--backend") is Backend.LOCAL
    assert parse(GuardMode, GuardMode.OFF, "--guard") is GuardMode.OFF
    with pytest.raises(ConfigError, match=r"--guard 'sometimes' is not one of: off, nonfinite, fail"):
        parse(GuardMode, "sometimes", "--guard")
    assert values(Backend) == ("local", "vertex")
    assert Backend.VERTEX == "vertex"  # plain strings travel through KFP and JSON


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("90", 90),
        ("20s", 20),
        ("1.5m", 90),
        ("45m", 2700),
        ("2h", 7200),
        ("500ms", 0.5),
        ("1d", 86400),
        (30, 30),
    ],
)
def test_durations_accept_what_people_type(text, seconds):
    assert parse_duration(text, "--max-queued") == seconds


@pytest.mark.parametrize("text", ["", "-5s", "soon", "5 parsecs", "1e9", "nan", True])
def test_a_bad_duration_names_the_option(text):
    with pytest.raises(ConfigError, match="--max-queued"):
        parse_duration(text, "--max-queued")


def test_duration_lists_sort_and_format_round_trips():
    assert parse_durations("1m, 20s,,5", "--preempt-after") == [5, 20, 60]
    assert [format_duration(s) for s in (2700, 90, 5400, 7)] == ["45m", "90s", "1.5h", "7s"]


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, delay):
        self.now += delay


def test_a_dead_endpoint_gives_up_at_the_deadline_with_exit_2_and_the_endpoint_named():
    clock = _Clock()
    calls = []

    def dead():
        calls.append(clock.now)
        raise ConnectionRefusedError("[Errno 111] Connection refused")

    policy = RetryPolicy(deadline_s=10)
    with pytest.raises(EndpointUnreachable) as info:
        policy.call(
            dead,
            transient=(ConnectionError,),
            what="storage read",
            where="http://127.0.0.1:9",
            clock=clock,
            sleep=clock.sleep,
        )
    assert info.value.exit_code == EXIT_BAD_INPUT
    assert "http://127.0.0.1:9" in str(info.value) and "TRAINGUARD_RETRY_DEADLINE" in str(info.value)
    assert clock.now <= 10 and len(calls) >= 4  # several tries, never past the deadline


def test_an_endpoint_that_answers_only_503_is_transient_not_unreachable():
    clock = _Clock()

    class Busy(Exception):
        pass

    def busy():
        raise Busy("503 Service Unavailable")

    with pytest.raises(TransientError, match="kept failing"):
        RetryPolicy(deadline_s=3).call(
            busy,
            transient=(Busy,),
            what="get",
            clock=clock,
            sleep=clock.sleep,
            unreachable=(ConnectionError,),
        )


def test_a_call_that_recovers_returns_and_other_errors_propagate_at_once():
    clock = _Clock()
    answers = iter([ConnectionError("down"), ConnectionError("down"), "ok"])

    def flaky():
        value = next(answers)
        if isinstance(value, Exception):
            raise value
        return value

    retried = []
    assert (
        RetryPolicy().call(
            flaky,
            transient=(ConnectionError,),
            what="x",
            clock=clock,
            sleep=clock.sleep,
            on_retry=lambda e, d: retried.append(d),
        )
        == "ok"
    )
    assert retried == [0.25, 0.5]
    with pytest.raises(KeyError):
        RetryPolicy().call(lambda: {}["x"], transient=(ConnectionError,), what="x")


def test_the_deadline_comes_from_the_environment():
    assert RetryPolicy.from_env({"TRAINGUARD_RETRY_DEADLINE": "2m"}).deadline_s == 120
    assert RetryPolicy.from_env({}).deadline_s == 10
    with pytest.raises(ConfigError):
        RetryPolicy.from_env({"TRAINGUARD_RETRY_DEADLINE": "forever"})


def test_bound_keeps_head_and_tail_within_the_limit():
    text = "A" * 50_000 + "Z"
    out = bound(text, 1000)
    assert len(out) <= 1000 and out.startswith("AAA") and out.endswith("Z")
    assert "characters elided" in out
    assert bound("short", 1000) == "short"


def test_every_error_message_is_redacted_and_bounded_where_it_is_raised():
    # A component's task log shows the message as raised, without the CLI in between.
    from trainguard.errors import MAX_MESSAGE_CHARS, HistoryError, SpecError, ValidationFailed

    assert "hunter2" not in str(ConfigError("cannot read postgres://bob:hunter2@db/x"))
    assert "ghp_" not in str(HistoryError("series ghp_" + "a" * 36 + " missing"))
    assert "AKIA" not in str(ValidationFailed("val/AKIAABCDEFGHIJKLMNOP rose", None))
    huge = SpecError("v" * 1_000_000, "workerPoolSpecs[0].args")
    assert len(str(huge)) <= MAX_MESSAGE_CHARS and str(huge).startswith("workerPoolSpecs[0].args")
    assert str(ConfigError("--guard 'sometimes'")) == "--guard 'sometimes'"  # plain text untouched


def test_errors_is_the_bottom_of_the_house_importing_only_redaction_and_only_to_make_a_message():
    """errors.py imports nothing of trainguard (no circle through launch/ or spec); a message
    loads the redaction table and its prefilter, leaves too."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "import trainguard.errors as e\n"
        "before = sorted(m for m in sys.modules if m.startswith('trainguard'))\n"
        "e.ConfigError('token=abc')\n"
        "after = sorted(m for m in sys.modules if m.startswith('trainguard'))\n"
        "print(json.dumps([before, after]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    before, after = json.loads(proc.stdout)
    assert before == ["trainguard", "trainguard.errors"]
    assert after == ["trainguard", "trainguard.errors", "trainguard.prefilter", "trainguard.redaction"]
