"""Who installs what: a training image gets the runtime alone; the core never imports kfp.

The base install of trainguard is the runtime (checkpoints, history, Vertex's environment
contract). These tests run Python with the standard library and trainguard's source only — no
site-packages at all — which is what `pip install trainguard` inside an image amounts to.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = (
    "kfp",
    "google",
    "typer",
    "rich",
    "matplotlib",
    "tensorboard",
    "yaml",
    "numpy",
    "torch",
    "jax",
    "polars",
    "pyarrow",
    "requests",
)


def _bare_python(code: str) -> subprocess.CompletedProcess:
    """Runs ``code`` with the standard library and trainguard's source on the path, nothing else."""
    stdlib = [sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")]
    prelude = (
        f"import sys; sys.path[:] = {[str(ROOT), *stdlib]!r} + [p for p in sys.path if 'lib-dynload' in p]; "
    )
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", prelude + code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )


def test_the_runtime_imports_with_nothing_installed_but_trainguard(tmp_path):
    code = (
        "import json, trainguard.runtime as rt\n"
        "from trainguard.runtime import CheckpointManager, HistoryWriter, VertexEnv\n"
        f"m = CheckpointManager({str(tmp_path / 'ckpt')!r}, async_save=False)\n"
        "m.save(3, {'state': b'abc'}, {'val_loss': 0.5})\n"
        "got = m.restore_latest()\n"
        f"h = HistoryWriter({str(tmp_path / 'h.jsonl')!r}); h.log(3, 'train', loss=0.5); h.close()\n"
        "print(json.dumps({'step': got.step, 'data': got.read('state').decode(),\n"
        "                  'heavy': sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{HEAVY!r})}}))\n"
    )
    proc = _bare_python(code)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result == {"step": 3, "data": "abc", "heavy": []}


def test_the_base_install_declares_no_dependencies_and_pipelines_is_one_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == []
    pipelines = " ".join(project["optional-dependencies"]["pipelines"])
    for needed in ("kfp", "google-cloud-pipeline-components", "google-cloud-aiplatform", "typer"):
        assert needed in pipelines
    for extra in ("gcs", "torch", "jax"):
        assert extra in project["optional-dependencies"]
    assert project["optional-dependencies"]["torch"] == ["torch==2.13.0"]


@pytest.mark.parametrize(
    "module",
    [
        "trainguard.cli",
        "trainguard.stages",
        "trainguard.preflight",
        "trainguard.launch",
        "trainguard.validation",
        "trainguard.triage",
        "trainguard.spec",
    ],
)
def test_the_core_never_imports_kfp(module):
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.split('.')[0] == 'kfp'))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_dockerfiles_install_through_the_extras_never_around_them():
    trainer = (ROOT / "containers" / "trainer" / "Dockerfile").read_text()
    components = (ROOT / "containers" / "components" / "Dockerfile").read_text()
    assert "--no-deps" not in trainer + components
    installs = {
        name: [line for line in text.splitlines() if "pip install" in line]
        for name, text in (("trainer", trainer), ("components", components))
    }

    def extras(line: str) -> set[str]:
        return {e.strip() for group in re.findall(r"\.\[([^\]]*)\]", line) for e in group.split(",")}

    # The components image installs the package with its pipelines extra (and torch, whose CPU
    # build is installed first from PyTorch's index so that the extra's pin finds it there).
    assert any("pipelines" in extras(line) for line in installs["components"])
    # A training image gets the runtime with Cloud Storage, never the pipelines extra or kfp.
    assert any("[gcs" in line for line in installs["trainer"])
    assert not any("pipelines" in line or "kfp" in line for line in installs["trainer"])


def test_cloud_build_builds_and_pushes_every_image_from_the_repository_root():
    import yaml

    config = yaml.safe_load((ROOT / "cloudbuild.yaml").read_text())
    dockerfiles = {step["args"][step["args"].index("-f") + 1] for step in config["steps"]}
    assert dockerfiles == {
        "containers/components/Dockerfile",
        "containers/trainer/Dockerfile",
        "containers/trainer/Dockerfile.jax",  # the README sends TPU users to it
    }
    assert all((ROOT / d).is_file() for d in dockerfiles)
    tags = {step["args"][step["args"].index("-t") + 1] for step in config["steps"]}
    assert tags == set(config["images"])  # what is built is what is pushed
    assert all(step["args"][-1] == "." for step in config["steps"])
    assert {"_REGISTRY", "_VERSION"} <= set(config["substitutions"])


@pytest.mark.parametrize(
    ("registry", "project"), [("eu-docker.pkg.dev/p-eu/r", "p-eu"), ("gcr.io/other-proj", "other-proj")]
)
def test_make_cloud_images_submits_the_config_in_the_registrys_project(registry, project):
    from trainguard import __version__

    dry = subprocess.run(
        ["make", "-n", "cloud-images", f"REGISTRY={registry}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert dry.returncode == 0, dry.stderr
    command = " ".join(dry.stdout.replace("\\\n", " ").split())
    assert (
        f"gcloud builds submit --project={project} --config cloudbuild.yaml --substitutions="
        f"_REGISTRY={registry},_VERSION={__version__} ."
    ) in command
    missing = subprocess.run(["make", "cloud-images"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert missing.returncode == 2 and "set REGISTRY" in missing.stderr


def test_the_command_in_a_base_install_says_in_one_line_what_to_install():
    proc = _bare_python("from trainguard.entry import main; main()")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "trainguard: the command line needs the pipelines extra (this install is the training runtime "
        "alone): pip install 'trainguard[pipelines]' — from a clone of the repository: "
        "pip install '.[pipelines]'"
    ]


def test_the_installed_command_is_the_entry_that_says_so():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"trainguard": "trainguard.entry:main"}
