"""The pipeline's components image, checked by preflight's image family like a training image,
against Debian's docker-registry; and ``trainguard run --vertex`` refusing one it cannot pull."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

from tests.integration.conftest import context, make_spec
from trainguard.preflight import image as image_mod
from trainguard.preflight.results import Status

ROOT = Path(__file__).resolve().parents[2]


def run(spec, components_image: str):
    ctx = dataclasses.replace(context(spec, 5.0), components_image=components_image)
    return {r.title.split(":", 1)[0]: r for r in image_mod.image(ctx)}


def test_a_components_image_in_the_registry_passes_beside_the_training_image(insecure_registry):
    trainer = insecure_registry.uri("public/trainer:1.0")
    components = insecure_registry.uri("public/multi:2.0")  # no entrypoint needed: KFP gives the command
    results = run(make_spec(trainer), components)
    assert results["components image"].status is Status.PASS
    assert insecure_registry.digests["public/multi:2.0"][:19] in results["components image"].evidence
    assert results["image of workerPoolSpecs[0]"].status is Status.PASS


def test_a_components_image_that_was_never_pushed_fails_with_the_push_to_do(insecure_registry):
    results = run(make_spec(insecure_registry.uri("public/trainer:1.0")), insecure_registry.uri("nope/c:1"))
    found = results["components image"]
    assert found.status is Status.FAIL and found.failure_class == "container"
    assert "every pipeline task would fail pulling it" in found.evidence
    assert "make images REGISTRY=" in found.remedy


def test_a_components_image_that_names_no_registry_fails_before_any_registry_is_asked(insecure_registry):
    results = run(make_spec(insecure_registry.uri("public/trainer:1.0")), "trainguard/components:0.1.0")
    found = results["components image"]
    assert found.status is Status.FAIL
    assert "names no registry" in found.evidence and "Docker Hub" in found.evidence
    assert "us-central1-docker.pkg.dev/PROJECT/REPO/trainguard/components:0.1.0" in found.remedy


def test_the_cli_checks_the_image_named_in_the_environment(insecure_registry, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "workerPoolSpecs:\n- machineSpec: {machineType: n1-standard-4}\n  replicaCount: 1\n"
        f"  containerSpec: {{imageUri: '{insecure_registry.uri('public/trainer:1.0')}'}}\n"
    )
    env = {**os.environ, "TRAINGUARD_COMPONENT_IMAGE": "trainguard/components:0.1.0"}
    proc = subprocess.run(
        [sys.executable, "-m", "trainguard.cli", "preflight", str(spec), "-p", "my-project",
         "-r", "us-central1", "--only", "image"],
        env=env, capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL    image: components image: trainguard/components:0.1.0" in proc.stdout


def test_run_vertex_refuses_a_components_image_its_registry_lacks(insecure_registry, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "trainguard.cli", "run", "examples/a100-spot.yaml", "--vertex",
         "-p", "my-project", "-r", "us-central1", "--pipeline-root", "gs://b/root",
         "--image", insecure_registry.uri("nope/c:1")],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=dict(os.environ),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "does not exist" in proc.stderr and "every pipeline task would fail pulling it" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_run_vertex_without_an_image_is_refused_before_anything_is_sent(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRAINGUARD_COMPONENT_IMAGE"}
    proc = subprocess.run(
        [sys.executable, "-m", "trainguard.cli", "run", "examples/a100-spot.yaml", "--vertex",
         "-p", "my-project", "-r", "us-central1", "--pipeline-root", "gs://b/root"],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env=env,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "submitting to Vertex AI Pipelines needs the components image" in proc.stderr
    assert "trainguard publishes none" in proc.stderr
