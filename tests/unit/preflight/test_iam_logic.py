"""IAM facts and summaries: the role table, what a job needs, the gcloud lines, the verdicts."""

from __future__ import annotations

from trainguard.preflight.common import Target, bucket_of, covering_role, role_for
from trainguard.preflight.iam import (
    GRANTED,
    MISSING,
    UNDECIDED,
    Answer,
    Need,
    agent_email,
    job_needs,
    summarize,
)
from trainguard.preflight.results import Status
from trainguard.spec import parse_spec

SA = "trainer@p-proj.iam.gserviceaccount.com"


def spec(**extra):
    data = {
        "workerPoolSpecs": [
            {"machineSpec": {"machineType": "n1-standard-4"}, "containerSpec": {"imageUri": "x/y:1"}}
        ],
        **extra,
    }
    return parse_spec(data, project="p-proj", region="us-central1")


def test_roles_least_privilege_first():
    assert role_for("storage.objects.get") == "roles/storage.objectViewer"
    assert role_for("storage.objects.create") == "roles/storage.objectCreator"
    assert role_for("iam.serviceAccounts.actAs") == "roles/iam.serviceAccountUser"
    assert covering_role(["storage.objects.create", "storage.objects.get"]) == "roles/storage.objectUser"
    assert covering_role(["storage.objects.get", "storage.objects.list"]) == "roles/storage.objectViewer"


def test_job_needs_follow_the_spec():
    assert job_needs(spec()) == []
    needs = job_needs(spec(baseOutputDirectory={"outputUriPrefix": "gs://b/run"}))
    assert {n.permission for n in needs} == {
        "storage.objects.create",
        "storage.objects.get",
        "storage.objects.list",
        "storage.objects.delete",
    }
    assert {n.target for n in needs} == {Target("bucket", "b")}
    delete = [n for n in needs if n.permission == "storage.objects.delete"][0]
    assert delete.severity is Status.WARN
    tb = job_needs(spec(tensorboard="projects/p-proj/locations/us-central1/tensorboards/1"))
    assert {n.target for n in tb} == {Target("project", "p-proj")}


def test_names_and_commands():
    assert bucket_of("gs://my-bucket/runs/1") == "my-bucket" and bucket_of("/tmp/x") == ""
    assert agent_email("42") == "service-42@gcp-sa-aiplatform-cc.iam.gserviceaccount.com"
    b = Target("bucket", "b")
    assert b.full_name == "//storage.googleapis.com/projects/_/buckets/b"
    assert (
        b.grant_command("serviceAccount:x", "roles/r")
        == "gcloud storage buckets add-iam-policy-binding gs://b --member=serviceAccount:x --role=roles/r"
    )
    assert (
        Target("project", "p").grant_command("user:u", "roles/r")
        == "gcloud projects add-iam-policy-binding p --member=user:u --role=roles/r"
    )
    assert b.verify_command(SA, "storage.objects.get") == (
        "gcloud policy-intelligence troubleshoot-policy iam "
        f"//storage.googleapis.com/projects/_/buckets/b --principal-email={SA} "
        "--permission=storage.objects.get"
    )


def test_summary_is_fail_then_warn_then_unknown_then_pass():
    b = Target("bucket", "b")
    create, delete = (
        Need(b, "storage.objects.create", "w"),
        Need(b, "storage.objects.delete", "d", Status.WARN),
    )
    [r] = summarize(SA, False, {create: Answer(MISSING), delete: Answer(MISSING)})
    assert r.status is Status.FAIL and r.remedy.endswith("--role=roles/storage.objectUser")
    [r] = summarize(SA, False, {create: Answer(GRANTED, via="x"), delete: Answer(MISSING)})
    assert r.status is Status.WARN
    [r] = summarize(
        SA,
        False,
        {
            create: Answer(GRANTED, via="x"),
            delete: Answer(UNDECIDED, reason="why", lacking="iam.serviceAccounts.getAccessToken"),
        },
    )
    assert r.status is Status.UNKNOWN and "--permission=storage.objects.delete" in r.remedy
    assert "roles/iam.serviceAccountTokenCreator" in r.remedy
    [r] = summarize(SA, False, {create: Answer(GRANTED, via="x")})
    assert r.status is Status.PASS and r.remedy == ""
