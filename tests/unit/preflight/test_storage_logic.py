"""Where the output bucket lives relative to the job."""

from __future__ import annotations

from trainguard.preflight.results import Status
from trainguard.preflight.storage import assess_bucket


def test_regional_bucket_in_the_job_region_passes():
    r = assess_bucket("b", region="us-central1", location="US-CENTRAL1", location_type="region")
    assert r.status is Status.PASS


def test_anything_else_warns_with_the_create_command():
    for location, kind in (("EUROPE-WEST4", "region"), ("US", "multi-region"), ("NAM4", "dual-region")):
        r = assess_bucket("b", region="us-central1", location=location, location_type=kind)
        assert r.status is Status.WARN
        assert "gcloud storage buckets create gs://BUCKET --location=us-central1" in r.remedy
