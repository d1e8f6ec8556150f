"""trainguard.api_errors: what a Google error body says, on the shapes Google sends."""

from __future__ import annotations

import pytest

from tests.servers.googleapi import disabled_body
from trainguard import api_errors


@pytest.mark.parametrize(
    "vertex, spec",
    [
        (
            "job_spec.worker_pool_specs[0].machine_spec.accelerator_type",
            "workerPoolSpecs[0].machineSpec.acceleratorType",
        ),
        ("job_spec.base_output_directory.output_uri_prefix", "baseOutputDirectory.outputUriPrefix"),
        ("custom_job.job_spec.service_account", "serviceAccount"),
        ("display_name", "displayName"),
        ("", ""),
    ],
)
def test_vertex_field_paths_read_in_the_spec_file_s_spelling(vertex, spec):
    assert api_errors.spec_path(vertex) == spec


def test_a_field_is_read_from_field_violations_first_then_from_the_message():
    facts = api_errors.ErrorFacts.from_body(
        {
            "error": {
                "code": 400,
                "message": "List of found errors:\t1.Field: job_spec.a; Message: from the text\t",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.BadRequest",
                        "fieldViolations": [{"field": "job_spec.b", "description": "from the detail"}],
                    }
                ],
            }
        }
    )
    assert api_errors.field_violation(facts) == ("job_spec.b", "from the detail")
    text_only = api_errors.ErrorFacts(
        400, "List of found errors:\t1.Field: job_spec.a; Message: from the text\t"
    )
    assert api_errors.field_violation(text_only) == ("job_spec.a", "from the text")
    assert api_errors.field_violation(api_errors.ErrorFacts(400, "Invalid JSON payload received.")) == (
        "",
        "",
    )


def test_the_disabled_body_the_servers_send_reads_back_as_a_disabled_api():
    for legacy in (False, True):
        facts = api_errors.ErrorFacts.from_body(
            disabled_body("cloudquotas.googleapis.com", "42", legacy=legacy)
        )
        assert api_errors.kind(facts) == api_errors.SERVICE_DISABLED
        found = api_errors.disabled_service(facts)
        assert found == api_errors.DisabledService(
            "cloudquotas.googleapis.com",
            "Cloud Quotas API",
            "42",
            "https://console.developers.google.com/apis/api/cloudquotas.googleapis.com/overview?project=42",
        )


def test_a_call_billed_to_another_project_says_which_and_offers_a_quota_project():
    found = api_errors.DisabledService("monitoring.googleapis.com", "Cloud Monitoring API", "other-proj", "")
    line = found.remedy("my-proj")
    assert line.startswith(
        "enable the API: gcloud services enable monitoring.googleapis.com --project=other-proj"
    )
    assert "gcloud auth application-default set-quota-project my-proj" in line
    # the consumer is the job's own project, named by number: nothing else to say
    same = api_errors.DisabledService("monitoring.googleapis.com", "", "123", "")
    assert same.remedy("my-proj", project_number="123") == (
        "enable the API: gcloud services enable monitoring.googleapis.com --project=123"
    )


def test_a_permission_denied_is_not_a_disabled_api_nor_a_quota():
    facts = api_errors.ErrorFacts.from_body(
        {
            "error": {
                "code": 403,
                "status": "PERMISSION_DENIED",
                "message": "Permission 'aiplatform.customJobs.create' denied on resource "
                "'//aiplatform.googleapis.com/projects/p/locations/us-central1' (or it may not exist).",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "IAM_PERMISSION_DENIED",
                        "domain": "aiplatform.googleapis.com",
                        "metadata": {"permission": "aiplatform.customJobs.create"},
                    }
                ],
            }
        }
    )
    assert api_errors.kind(facts) == api_errors.PERMISSION
    assert api_errors.disabled_service(facts) is None and api_errors.quota_metrics(facts) == ()


def test_several_metrics_over_their_limits_are_all_named():
    facts = api_errors.ErrorFacts(
        429,
        "The following quota metrics exceed quota limits: aiplatform.googleapis.com/a, "
        "aiplatform.googleapis.com/b, ",
    )
    assert api_errors.quota_metrics(facts) == ("aiplatform.googleapis.com/a", "aiplatform.googleapis.com/b")
