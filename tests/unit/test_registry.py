"""What travels with a registered model: labels within Vertex's rules, and a description."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.servers.model_registry import _label_ok
from trainguard.registry import LABEL_KEYS, label_value, model_card, system_labels
from trainguard.validation import validate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "histories"


@given(st.one_of(st.text(max_size=200), st.floats(allow_nan=True), st.integers()))
def test_any_text_or_number_becomes_a_label_value_vertex_accepts(text):
    assert _label_ok(label_value(text), key=False)


@pytest.mark.parametrize(
    ("given", "label"),
    [
        (0.31234, "0p3123"),
        (-0.5, "neg0p5"),
        (1.5e-07, "1p5e-07"),
        (1200.0, "1200"),
        ("val/loss", "val-loss"),
        ("Trainguard-Guarded-Training-20260101.1", "trainguard-guarded-training-20260101-1"),
    ],
)
def test_label_values_read_as_what_they_stand_for(given, label):
    assert label_value(given) == label


def test_every_key_trainguard_writes_is_a_valid_label_key():
    assert all(_label_ok(k, key=True) for k in LABEL_KEYS)


@pytest.fixture(scope="module")
def verdicts():
    path = FIXTURES / "overfit" / "history.jsonl"  # a real run that overfit after step 81
    return validate(path, shipped_step=80).to_dict(), validate(path).to_dict()


def test_the_card_carries_the_verdict_the_step_and_the_metric(verdicts):
    escaped, _ = verdicts
    meta = {
        "model_source": "checkpoint",
        "model_step": 80,
        "model_metric": "val/loss",
        "model_metric_value": 0.7,
    }
    card = model_card(escaped, meta, run="run-1", verdict_uri="gs://b/verdict", history_uri="gs://b/history")
    assert card.passed and card.warnings == ("overfit",) and card.step == 80
    assert card.labels["trainguard-warnings"] == "overfit" and card.labels["trainguard-value"] == "0p7"
    assert card.description.startswith("trainguard verdict: passed with 1 warning(s)")
    assert "verdict: gs://b/verdict" in card.description and "history: gs://b/history" in card.description


def test_a_failing_verdict_makes_a_card_that_says_so(verdicts):
    _, failed = verdicts
    card = model_card(failed, {"model_source": "model_dir"})
    assert not card.passed and card.labels["trainguard-passed"] == "false"
    assert card.labels["trainguard-step"] == "final" and "FAILED" in card.description


def test_vertex_pipelines_labels_are_added_and_ours_win(monkeypatch):
    monkeypatch.setenv("VERTEX_AI_PIPELINES_RUN_LABELS", '{"vertex-ai-pipelines-run-billing-id": "42"}')
    assert system_labels() == {"vertex-ai-pipelines-run-billing-id": "42"}
    monkeypatch.setenv("VERTEX_AI_PIPELINES_RUN_LABELS", "not json")
    assert system_labels() == {}
