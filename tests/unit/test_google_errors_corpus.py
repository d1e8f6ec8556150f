"""trainguard.api_errors on real Google error answers from public threads (issue 28).

The rules are tuned on the ``dev`` part; ``test`` only measures. The costly confusions are held to
zero on both: a quota refusal retried as a rate limit (the launcher once retried those for 15
minutes), a rate limit failed as a quota refusal, and a disabled API or a bad project sent to IAM.
"""

from __future__ import annotations

import pytest

from tests import google_errors_corpus as corpus
from trainguard import api_errors


@pytest.mark.parametrize("split", corpus.SPLITS)
def test_every_entry_sits_in_the_part_its_source_hashes_to(split):
    entries = corpus.load(split)
    assert entries
    assert corpus.split_is_by_source(entries, split) == []
    assert {e.kind for e in entries} <= set(api_errors.KINDS)


@pytest.mark.parametrize("split", corpus.SPLITS)
def test_the_rules_tell_the_real_answers_apart(split, capsys):
    entries = corpus.load(split)
    now = corpus.score(entries, corpus.after)
    then = corpus.score(entries, corpus.before)
    with capsys.disabled():
        print(f"\n[google errors {split}] {then.line('before')}\n[google errors {split}] {now.line('after')}")
    assert now.quota_rate_swaps == 0, now.misses
    assert now.disabled_as_permission == 0, now.misses
    assert now.accuracy >= 0.9, now.misses
    assert now.accuracy > then.accuracy


def test_a_quota_refusal_names_its_metrics_and_a_disabled_api_its_service():
    (refusal,) = [e for e in corpus.load("test") if e.id == "quota_limit-stable-diffusion-on-gcp-12"]
    facts = corpus.facts_of(refusal.text)
    assert api_errors.quota_metrics(facts) == (
        "aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus",
    )
    (disabled,) = [e for e in corpus.load("test") if e.id.endswith("terraform-provider-google-21165")]
    found = api_errors.disabled_service(corpus.facts_of(disabled.text))
    assert found is not None
    assert (found.service, found.project) == ("cloudquotas.googleapis.com", "653407317329")
    assert found.remedy("653407317329").startswith(
        "enable the API: gcloud services enable cloudquotas.googleapis.com --project=653407317329"
    )


def test_a_call_billed_to_gcloud_s_own_project_is_told_to_set_a_quota_project():
    (entry,) = [e for e in corpus.load("test") if e.id == "service_disabled-python-docs-samples-244"]
    found = api_errors.disabled_service(corpus.facts_of(entry.text))
    assert found is not None and found.billed_to_gcloud
    assert found.service == "monitoring.googleapis.com"  # the old answer's URL says apis/api/monitoring
    assert "gcloud auth application-default set-quota-project my-proj" in found.remedy("my-proj")
