"""The TPU v5e example (the reference JAX trainer, sharded over 8 fake CPU devices) through the local
backend: preempted (SIGTERM) or killed (SIGKILL) runs end with a model byte-identical to an
uninterrupted run's, and the same history."""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
from pathlib import Path

import pytest

from tests.fuzz.contract import run_cli
from tests.once import built_once
from tests.requires import require
from trainguard.launch.local import LocalBackend
from trainguard.runtime.history import read_history_records
from trainguard.spec import load_spec

require("jax", "orbax", "optax", "sklearn")  # the [jax] and [examples] extras

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "tpu-v5e.yaml"
PROJECT, REGION = "my-project", "us-central1"


def train(out: Path, *flags: str):
    # The spec's command is relative to the repository root, as in the image (WORKDIR /app).
    with contextlib.chdir(ROOT):
        outcome = run_cli(
            "train",
            SPEC,
            "--local",
            "-p",
            PROJECT,
            "-r",
            REGION,
            "--output-dir",
            out,
            "--json",
            out / "result.json",
            *flags,
        )
    assert outcome.exit_code == 0, outcome.output[-4000:]
    assert "Traceback" not in outcome.output, outcome.output[-4000:]
    return outcome, json.loads((out / "result.json").read_text())


def digest(base: Path) -> str:
    return hashlib.sha256((base / "model" / "model.npz").read_bytes()).hexdigest()


def history(base: Path):
    return [
        (r["step"], r["split"], r["metrics"])
        for r in read_history_records((base / "history.jsonl").read_text())
    ]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    def build(base: Path) -> None:
        outcome, result = train(base)
        assert result["restarts"] == 0 and "training on 8 cpu device(s)" in outcome.output
        splits = {split for _, split, _ in history(base)}
        assert splits == {"train", "val"}

    return built_once(tmp_path_factory, "jax-baseline", build)


@pytest.mark.slow
def test_the_tpu_example_preempted_at_4s_and_9s_ends_byte_identical(baseline, tmp_path, monkeypatch):
    # Steps paced at 40 ms (~11 s of training) so both preemptions land mid-run on a fast machine
    # too; the pace does not change the weights.
    monkeypatch.setenv("TRAINER_STEP_SLEEP", "0.04")
    outcome, result = train(tmp_path, "--preempt-after", "4s,9s")
    assert result["restarts"] == 2 and result["state"] == "SUCCEEDED"
    assert "stopped by SIGTERM (a Spot reclaim, a cancellation, or trainguard's guard)" in outcome.output
    assert "resumed from checkpoint" in outcome.output
    assert digest(tmp_path) == digest(baseline)
    assert history(tmp_path) == history(baseline)  # no duplicated or lost records
    kept = json.loads(max((tmp_path / "checkpoints").glob("step-*/COMMIT")).read_text())
    assert kept["format"] == "orbax" and "val_loss" in kept["metrics"]


def hard_kill_runs(baseline: Path, tmp_path: Path, count: int, seed: int) -> None:
    spec = load_spec(SPEC, project=PROJECT, region=REGION)
    rng = random.Random(seed)
    for i in range(count):
        base = tmp_path / f"kill{i}"
        # SIGKILL anywhere in training (~3 s of steps at 10 ms), mid-save included, once or twice.
        kills = [("training on", round(rng.uniform(0.05, 2.5), 2)) for _ in range(rng.randint(1, 2))]
        with contextlib.chdir(ROOT):
            result = LocalBackend(
                output_dir=str(base),
                preempt_on=kills,
                hard_kill=True,
                extra_env={"TRAINER_STEP_SLEEP": "0.01"},
            ).run(spec)
        assert result.succeeded, result.log_tail[-3000:]
        assert result.restarts == len(kills)
        assert digest(base) == digest(baseline), f"kill points {kills}"
        assert history(base) == history(baseline), f"kill points {kills}"


@pytest.mark.long  # the default suite kills mid-save in test_jax_checkpointer.py
def test_sigkill_at_random_moments_still_ends_byte_identical(baseline, tmp_path):
    hard_kill_runs(baseline, tmp_path, count=1, seed=5)


@pytest.mark.long
def test_sigkill_at_many_random_moments(baseline, tmp_path):
    hard_kill_runs(baseline, tmp_path, count=12, seed=13)


def test_the_tpu_image_runs_the_command_the_spec_names():
    pool = load_spec(SPEC, project=PROJECT, region=REGION).pools[0]
    script = pool.command[1]
    assert pool.command[0] == "python" and (ROOT / script).is_file()
    dockerfile = (ROOT / "containers" / "trainer" / "Dockerfile.jax").read_text()
    # The image's working directory holds the script at the path the repository root does.
    assert "WORKDIR /app" in dockerfile and f"COPY {script} /app/{script}" in dockerfile
    assert '"/opt/trainguard[gcs,jax]" "jax[tpu]"' in dockerfile


@pytest.mark.long
def test_two_processes_preempted_end_byte_identical(tmp_path):
    """A 2-process JAX job (jax.distributed over loopback, 4 fake devices each, every process
    writing its own shards) preempted mid-run ends as the same job uninterrupted does."""
    from trainguard.spec import JobSpec

    def run(base: Path, triggers=()):
        spec = JobSpec.create(
            PROJECT,
            REGION,
            machine_type="n1-standard-4",
            image_uri="img",
            command=["python", "containers/trainer/jax_train.py"],
            args=["--epochs=3"],
            base_output_dir=str(base),
            replica_count=2,
            env={"XLA_FLAGS": "--xla_force_host_platform_device_count=4"},
        )
        with contextlib.chdir(ROOT):
            result = LocalBackend(preempt_on=list(triggers)).run(spec)
        assert result.succeeded, result.log_tail[-3000:]
        return result

    run(tmp_path / "whole")
    result = run(tmp_path / "preempted", [("epoch 1 step", 0.1)])
    assert result.restarts == 1 and "process 1/2" in result.log_tail
    assert "resumed from checkpoint" in result.log_tail
    assert digest(tmp_path / "preempted") == digest(tmp_path / "whole")
    assert history(tmp_path / "preempted") == history(tmp_path / "whole")


def test_sharded_saves_on_gcs_restore_and_retain(emulator, monkeypatch):
    """gs:// against gcp-storage-emulator: orbax writes the arrays (tensorstore, gcsfs), trainguard
    the records and COMMIT, all through the one STORAGE_EMULATOR_HOST override."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from trainguard.runtime import RetentionPolicy
    from trainguard.runtime.jax_checkpointer import JaxCheckpointer
    from trainguard.runtime.storage import GCSStore

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.url)
    monkeypatch.delenv("TENSORSTORE_GCS_HTTP_URL", raising=False)
    emulator.create_bucket("jax-ckpt")
    directory = "gs://jax-ckpt/run/checkpoints"
    mesh = Mesh(np.array(jax.devices()), ("x",))
    sharding = NamedSharding(mesh, P(None, "x") if jax.device_count() > 1 else P())

    def state_of(step: int) -> dict:
        return {"w": jax.device_put(jnp.full((8, 8 * jax.device_count()), step, jnp.float32), sharding)}

    ckpt = JaxCheckpointer(directory=directory, save=1, retention=RetentionPolicy(keep_last=2))
    for step in (1, 2, 3):
        ckpt.step(step, state=state_of(step), extra={"step": step})
    ckpt.close()
    reader = JaxCheckpointer(directory=directory)
    start = reader.restore(state_of(0))
    reader.close()  # puts the SIGTERM handler back
    assert start.step == 3 and start.extra == {"step": 3}
    assert np.unique(np.asarray(start.state["w"])).tolist() == [3.0]
    assert start.state["w"].sharding == sharding
    names = GCSStore().list(directory)
    assert not any("step-000000001" in n for n in names)
    assert any(n.endswith("step-000000003/COMMIT") for n in names)
