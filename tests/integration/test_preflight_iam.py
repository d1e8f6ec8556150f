"""Service-account and caller IAM against loopback Policy Troubleshooter, Resource Manager, IAM,
IAM Credentials and the storage emulator, with the real clients."""

from __future__ import annotations

import pytest

from tests.integration.conftest import AGENT, BUCKET, CALLER, PROJECT, SA, context, make_spec
from trainguard.preflight import iam as iam_mod
from trainguard.preflight.results import Status

IMAGE = "127.0.0.1:1/unused:1"
MEMBER = f"serviceAccount:{SA}"


def run(spec, timeout: float = 5.0) -> dict[str, object]:
    """Results by title prefix: 'bucket', 'project', 'create', 'actas'."""
    out = {}
    for r in iam_mod.iam(context(spec, timeout)):
        key = (
            "create"
            if "create CustomJobs" in r.title
            else "actas"
            if "act as" in r.title
            else "bucket"
            if f"gs://{BUCKET}" in r.title
            else "project"
            if "on project" in r.title
            else r.title
        )
        out[key] = r
    return out


def test_healthy_service_account_and_caller_pass(loopback):
    results = run(make_spec(IMAGE))
    assert {k: r.status for k, r in results.items()} == {
        "bucket": Status.PASS,
        "create": Status.PASS,
        "actas": Status.PASS,
    }
    assert (
        "storage.objects.create, storage.objects.get, storage.objects.list, "
        "storage.objects.delete" in results["bucket"].evidence
    )
    assert "Policy Troubleshooter" in results["bucket"].evidence
    # one troubleshoot call per permission, sent concurrently
    assert len(loopback.troubleshooter.calls("iam:troubleshoot")) == 4


def test_missing_bucket_access_fails_listing_permissions_roles_and_the_grant(loopback):
    loopback.state.revoke(MEMBER)
    results = run(make_spec(IMAGE))
    bucket = results["bucket"]
    assert bucket.status is Status.FAIL and bucket.failure_class == "permission"
    assert "storage.objects.create (roles/storage.objectCreator" in bucket.evidence
    assert "storage.objects.get (roles/storage.objectViewer" in bucket.evidence
    assert "storage.objects.delete (roles/storage.objectUser" in bucket.evidence
    assert bucket.remedy == (
        f"gcloud storage buckets add-iam-policy-binding gs://{BUCKET} "
        f"--member={MEMBER} --role=roles/storage.objectUser"
    )


def test_missing_only_delete_warns(loopback):
    state = loopback.state
    state.revoke(MEMBER)
    state.grant(MEMBER, "roles/storage.objectViewer", state.bucket_resource(BUCKET))
    state.grant(MEMBER, "roles/storage.objectCreator", state.bucket_resource(BUCKET))
    bucket = run(make_spec(IMAGE))["bucket"]
    assert bucket.status is Status.WARN
    assert "storage.objects.delete" in bucket.evidence and "overwrite" in bucket.evidence
    assert "--role=roles/storage.objectUser" in bucket.remedy


def test_project_level_grant_is_inherited_by_the_bucket(loopback):
    state = loopback.state
    state.revoke(MEMBER)
    state.grant(MEMBER, "roles/storage.objectAdmin", state.project_resource(PROJECT))
    assert run(make_spec(IMAGE))["bucket"].status is Status.PASS


def test_no_service_account_checks_the_custom_code_service_agent(loopback):
    results = run(make_spec(IMAGE, service_account=None))
    assert results["bucket"].status is Status.PASS
    assert AGENT in results["bucket"].title
    assert "actas" not in results  # no actAs needed for the service agent
    assert loopback.iam.calls(f"/v3/projects/{PROJECT}$", "GET")  # project number looked up


def test_service_agent_without_access_fails_with_its_member(loopback):
    loopback.state.revoke(f"serviceAccount:{AGENT}")
    bucket = run(make_spec(IMAGE, service_account=None))["bucket"]
    assert bucket.status is Status.FAIL
    assert f"--member=serviceAccount:{AGENT}" in bucket.remedy


def test_troubleshooter_forbidden_falls_back_to_impersonation(loopback):
    loopback.troubleshooter.allowed = False
    loopback.grant(CALLER, "roles/iam.serviceAccountTokenCreator", loopback.state.sa_resource(SA))
    # tensorboard makes the SA need aiplatform permissions on the project, which it lacks
    spec = make_spec(IMAGE, tensorboard=f"projects/{PROJECT}/locations/us-central1/tensorboards/1")
    results = run(spec)
    # gcp-storage-emulator's bucket testPermissions is a stub that grants everything asked, so
    # the bucket half only shows the fallback ran; the project half is decided by the IAM server,
    # which answers as the impersonated service account.
    assert results["bucket"].status is Status.PASS
    assert "testIamPermissions as the service account" in results["bucket"].evidence
    project = results["project"]
    assert project.status is Status.FAIL
    assert "aiplatform.tensorboardExperiments.write" in project.evidence
    assert project.remedy == (
        f"gcloud projects add-iam-policy-binding {PROJECT} --member={MEMBER} --role=roles/aiplatform.user"
    )
    assert len(loopback.iam.calls("generateAccessToken")) >= 1
    [test_call] = loopback.iam.calls(f"/v3/projects/{PROJECT}:testIamPermissions$")[-1:]
    assert test_call.bearer.startswith("ya29.loopback-")  # sent as the service account


def test_no_troubleshooter_and_no_impersonation_is_unknown_with_the_verify_command(loopback):
    loopback.troubleshooter.allowed = False
    bucket = run(make_spec(IMAGE))["bucket"]
    assert bucket.status is Status.UNKNOWN
    assert f"cannot impersonate {SA}" in bucket.evidence
    assert "403" in bucket.evidence
    assert bucket.remedy.startswith(
        "verify by hand: gcloud policy-intelligence troubleshoot-policy iam "
        f"//storage.googleapis.com/projects/_/buckets/{BUCKET} --principal-email={SA} "
        "--permission=storage.objects.create"
    )
    assert "roles/iam.serviceAccountTokenCreator" in bucket.remedy


def test_unreadable_policy_for_the_service_agent_is_unknown(loopback):
    loopback.state.unreadable.add(loopback.state.bucket_resource(BUCKET))
    loopback.state.revoke(f"serviceAccount:{AGENT}")
    bucket = run(make_spec(IMAGE, service_account=None))["bucket"]
    assert bucket.status is Status.UNKNOWN
    assert "UNKNOWN_INFO" in bucket.evidence
    assert "service agent cannot be impersonated" in bucket.evidence
    assert loopback.iam.calls("generateAccessToken") == []


def test_conditional_grant_is_decided_by_impersonation(loopback):
    state = loopback.state
    state.revoke(MEMBER)
    state.grant(MEMBER, "roles/aiplatform.user", state.project_resource(PROJECT), conditional=True)
    state.grant(MEMBER, "roles/storage.objectAdmin", state.bucket_resource(BUCKET))
    state.grant(CALLER, "roles/iam.serviceAccountTokenCreator", state.sa_resource(SA))
    spec = make_spec(
        IMAGE, experiment=f"projects/{PROJECT}/locations/us-central1/metadataStores/default/contexts/exp1"
    )
    project = run(spec)["project"]
    # the condition is not evaluated by testIamPermissions of this server: not granted
    assert project.status is Status.FAIL
    assert "aiplatform.metadataStores.get" in project.evidence


def test_caller_without_create_permission_fails_with_the_grant(loopback):
    loopback.state.revoke(CALLER, "roles/aiplatform.user")
    create = run(make_spec(IMAGE))["create"]
    assert create.status is Status.FAIL
    assert "aiplatform.customJobs.create (roles/aiplatform.user)" in create.evidence
    assert create.remedy == (
        f"gcloud projects add-iam-policy-binding {PROJECT} "
        "--member=user:$(gcloud config get-value account) "
        "--role=roles/aiplatform.user"
    )


def test_caller_without_act_as_fails_with_the_grant(loopback):
    loopback.state.revoke(CALLER, "roles/iam.serviceAccountUser")
    actas = run(make_spec(IMAGE))["actas"]
    assert actas.status is Status.FAIL
    assert actas.remedy == (
        f"gcloud iam service-accounts add-iam-policy-binding {SA} "
        "--member=user:$(gcloud config get-value account) "
        "--role=roles/iam.serviceAccountUser"
    )


def test_service_account_that_does_not_exist_fails(loopback):
    ghost = f"ghost@{PROJECT}.iam.gserviceaccount.com"
    actas = run(make_spec(IMAGE, service_account=ghost))["actas"]
    assert actas.status is Status.FAIL
    assert "does not exist" in actas.evidence
    assert f"gcloud iam service-accounts create ghost --project={PROJECT}" in actas.remedy


def test_project_number_unreadable_is_unknown_with_gcloud_describe(loopback):
    loopback.state.revoke(CALLER, "roles/browser")
    results = run(make_spec(IMAGE, service_account=None))
    agent = results["Vertex AI Custom Code Service Agent"]
    assert agent.status is Status.UNKNOWN
    assert "resourcemanager.projects.get" in agent.evidence and "roles/browser" in agent.evidence
    assert f"gcloud projects describe {PROJECT} --format='value(projectNumber)'" in agent.remedy


def test_troubleshooter_rate_limit_is_retried(loopback):
    loopback.troubleshooter.fail("iam:troubleshoot", 429, times=2)
    assert run(make_spec(IMAGE))["bucket"].status is Status.PASS


def test_slow_troubleshooter_is_unknown_not_a_crash(loopback):
    loopback.troubleshooter.slow("iam:troubleshoot", 1.0)
    loopback.iam.slow("generateAccessToken", 1.0)
    bucket = run(make_spec(IMAGE), timeout=0.3)["bucket"]
    assert bucket.status is Status.UNKNOWN
    assert "did not answer within 0.3 s" in bucket.evidence


@pytest.mark.long
def test_no_outputs_needs_no_job_access(loopback):
    results = run(make_spec(IMAGE, output=None))
    assert results["job identity"].status is Status.PASS
