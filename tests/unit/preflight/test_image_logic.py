"""Image references, where registries keep images, and the verdict for one pool."""

from __future__ import annotations

import pytest

from trainguard.preflight.image import assess_image, geography, image_location, is_google_registry
from trainguard.preflight.oci_client import ImageInfo, ImageNotFound, ImageRef
from trainguard.preflight.results import Status
from trainguard.spec import Pool


@pytest.mark.parametrize(
    "uri,host,repo,ref",
    [
        ("python:3.11", "registry-1.docker.io", "library/python", "3.11"),
        ("docker.io/pytorch/pytorch", "registry-1.docker.io", "pytorch/pytorch", "latest"),
        ("us-central1-docker.pkg.dev/p/r/img:v1", "us-central1-docker.pkg.dev", "p/r/img", "v1"),
        ("localhost:5000/a/b@sha256:" + "0" * 64, "localhost:5000", "a/b", "sha256:" + "0" * 64),
        ("gcr.io/p/img:tag@sha256:" + "1" * 64, "gcr.io", "p/img", "sha256:" + "1" * 64),
    ],
)
def test_image_references_parse_as_docker_does(uri, host, repo, ref):
    assert ImageRef.parse(uri) == ImageRef(host, repo, ref)


@pytest.mark.parametrize("bad", ["", "Trainer Image", "https://x/y", "host/UPPER:1"])
def test_bad_references_are_rejected(bad):
    with pytest.raises(ValueError):
        ImageRef.parse(bad)


def test_registry_locations_and_continents():
    assert image_location("europe-west4-docker.pkg.dev") == "europe-west4"
    assert image_location("asia-docker.pkg.dev") == "asia"
    assert image_location("eu.gcr.io") == "europe" and image_location("quay.io") is None
    assert geography("us-central1") == geography("us") == "North America"
    assert geography("europe-west4") == "Europe"
    assert is_google_registry("us-docker.pkg.dev") and is_google_registry("gcr.io")
    assert not is_google_registry("registry-1.docker.io")


def pool(uri, command=()):
    return Pool(0, "n1-standard-4", None, 0, 1, uri, tuple(command), ())


INFO = ImageInfo(
    "sha256:" + "a" * 64,
    "sha256:" + "a" * 64,
    "application/vnd.oci.image.manifest.v1+json",
    ["linux/amd64"],
    {"Entrypoint": ["python"]},
    "linux",
    "amd64",
)


def test_image_on_another_continent_warns_with_the_push_target():
    uri = "europe-docker.pkg.dev/p/r/img:1"
    r = assess_image(pool(uri), "us-central1", INFO)
    assert r.status is Status.WARN and "Europe" in r.evidence and "North America" in r.evidence
    assert "us-central1-docker.pkg.dev/p/REPO" in r.remedy
    assert assess_image(pool("us-docker.pkg.dev/p/r/img:1"), "us-central1", INFO).status is Status.PASS
    assert assess_image(pool("python:3.11"), "asia-east1", INFO).status is Status.PASS


def test_nothing_to_run_fails_unless_the_spec_gives_command():
    bare = ImageInfo("d", "d", "t", ["linux/amd64"], {}, "linux", "amd64")
    assert assess_image(pool("x.io/a:1"), "us-central1", bare).status is Status.FAIL
    assert assess_image(pool("x.io/a:1", ["python"]), "us-central1", bare).status is Status.PASS


def test_missing_image_fails_as_container():
    r = assess_image(pool("x.io/a:1"), "us-central1", ImageNotFound("tag or digest not found"))
    assert r.status is Status.FAIL and r.failure_class == "container"
