"""The image targets: Cloud Build runs in REGISTRY's project and builds every image the README
names (`make -n`: what make would run, nothing is built)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def would_run(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return subprocess.run(
        ["make", "--no-print-directory", "-n", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )


@pytest.mark.parametrize(
    ("registry", "project"),
    [("us-central1-docker.pkg.dev/my-proj/ml", "my-proj"), ("gcr.io/other-proj", "other-proj")],
)
def test_cloud_images_builds_in_the_project_the_registry_names(registry, project):
    done = would_run("cloud-images", f"REGISTRY={registry}")
    assert done.returncode == 0, done.stderr
    assert f"gcloud builds submit --project={project} --config cloudbuild.yaml" in done.stdout
    assert f"_REGISTRY={registry}," in done.stdout


def test_cloud_build_pushes_the_components_trainer_and_jax_trainer_images():
    config = yaml.safe_load((ROOT / "cloudbuild.yaml").read_text())
    assert config["images"] == [
        f"${{_REGISTRY}}/trainguard/{name}:${{_VERSION}}" for name in ("components", "trainer", "jax-trainer")
    ]
    dockerfiles = {step["args"][step["args"].index("-f") + 1] for step in config["steps"]}
    assert dockerfiles == {
        "containers/components/Dockerfile",
        "containers/trainer/Dockerfile",
        "containers/trainer/Dockerfile.jax",
    }
    assert all((ROOT / d).is_file() for d in dockerfiles)
