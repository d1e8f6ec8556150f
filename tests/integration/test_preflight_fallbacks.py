"""Preflight of a job's fallbacks against loopback Cloud Quotas, Monitoring and the storage
emulator: which alternatives are viable, which run away from the data, and what still fails."""

from __future__ import annotations

import json

from tests.fuzz.contract import assert_contract, run_cli
from tests.integration.conftest import A100, BUCKET, PROJECT, REGION, make_spec
from trainguard.launch.alternatives import parse_fallbacks
from trainguard.preflight import run_preflight
from trainguard.preflight.alternatives import render_sections
from trainguard.preflight.results import Status
from trainguard.stages import preflight_stage

IMAGE = f"{REGION}-docker.pkg.dev/{PROJECT}/ml/trainer:1"  # stored in us-central1 (not pulled here)
CHECKS = ["compat", "quota", "storage"]


def rows(report, prefix: str) -> list:
    return [r for r in report.results if r.title.startswith(prefix)]


def test_a_region_with_no_quota_left_is_a_warning_when_a_fallback_is_viable(loopback):
    loopback.monitoring.set_usage(A100, REGION, 8)  # the 8 A100 of us-central1 are all in use
    loopback.monitoring.set_usage(A100, "us-east1", 0)  # us-east1: a limit of 16, none used
    report = run_preflight(
        make_spec(IMAGE), only=CHECKS, alternatives=parse_fallbacks("region=us-east1"), timeout_s=20
    )
    own_quota = next(r for r in report.results if r.check == "quota" and "alternative" not in r.title)
    assert own_quota.status is Status.WARN
    assert "not a stop: the launcher falls back to alternative 1" in own_quota.evidence
    [verdict] = [r for r in rows(report, "alternative 1 (region=us-east1)") if r.title.endswith("viable")]
    assert (
        verdict.status is Status.PASS and "us-east1, a2-highgpu-1g, 1×NVIDIA_TESLA_A100" in verdict.evidence
    )
    [far] = rows(report, "alternative 1 (region=us-east1): away from its data")
    assert far.status is Status.WARN
    assert (
        f"gs://{BUCKET} is region us-central1" in far.evidence
        and f"{IMAGE} is stored in us-central1" in far.evidence
    )
    assert "egress" in far.evidence
    assert report.passed()
    section = render_sections(report)
    assert "### Alternative 1 (region=us-east1): viable" in section
    assert "**WARN** fallback: away from its data" in section


def test_an_alternative_without_quota_is_not_viable_and_one_that_is_bad_input_fails_preflight(loopback):
    loopback.monitoring.set_usage(A100, "us-east1", 16)
    report = run_preflight(
        make_spec(IMAGE),
        only=CHECKS,
        alternatives=parse_fallbacks(["region=us-east1", "accelerator=NVIDIA_TESLA_K80"]),
        timeout_s=20,
    )
    verdicts = {r.title: r.status for r in report.results if r.check == "fallback" and "viable" in r.title}
    assert verdicts == {
        "the job as specified: viable": Status.PASS,
        "alternative 1 (region=us-east1): not viable": Status.WARN,
        "alternative 2 (accelerator=NVIDIA_TESLA_K80): not viable": Status.WARN,
    }
    # us-east1's quota is full: a WARN, the launcher moves past it; a K80 is out of support:
    # that alternative would stop the launcher with bad input, so preflight fails now.
    [east_quota] = [r for r in rows(report, "alternative 1") if r.check == "quota"]
    assert east_quota.status is Status.WARN
    failing = report.failing()
    assert [r.title for r in failing] == [
        "alternative 2 (accelerator=NVIDIA_TESLA_K80): NVIDIA_TESLA_K80 support"
    ]


def test_with_no_viable_alternative_a_quota_failure_still_fails(loopback):
    loopback.monitoring.set_usage(A100, REGION, 8)
    loopback.monitoring.set_usage(A100, "us-east1", 16)
    report = run_preflight(
        make_spec(IMAGE), only=CHECKS, alternatives=parse_fallbacks("region=us-east1"), timeout_s=20
    )
    assert not report.passed()
    # the job's own quota and its alternative's: nothing the launcher could fall back to
    assert [(r.check, r.title.startswith("alternative 1")) for r in report.failing()] == [
        ("quota", False),
        ("quota", True),
    ]


def test_the_report_and_the_cli_show_a_section_per_alternative(loopback, tmp_path):
    spec = make_spec(IMAGE)
    markdown = tmp_path / "report.md"
    preflight_stage(
        spec,
        project=PROJECT,
        region=REGION,
        only="compat,storage",
        fallbacks="region=us-east1;region=us-central1,strategy=SPOT",
        markdown_path=str(markdown),
        json_path=str(tmp_path / "report.json"),
    )
    text = markdown.read_text()
    assert "## Fallbacks" in text
    assert "### Alternative 1 (region=us-east1): viable" in text
    assert "### Alternative 2 (region=us-central1,strategy=SPOT): viable" in text
    results = json.loads((tmp_path / "report.json").read_text())["results"]
    assert {r["details"].get("alternative") for r in results} == {None, 0, 1, 2}

    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec.to_dict()))
    outcome = run_cli(
        "preflight", spec_file, "-p", PROJECT, "-r", REGION, "--only", "compat", "--fallback", "regoin=x"
    )
    assert_contract(outcome, max_seconds=60, allowed=(2,))
    assert "unknown key 'regoin'" in outcome.output
