"""Kill-and-resume with the framework examples: Lightning, Keras and Hugging Face trainers, each
guarded by one trainguard callback, run by the local backend from ``examples/local-<name>.yaml``.

A run preempted (SIGTERM, then SIGKILL after the grace period) or killed outright (SIGKILL) and
restarted ends with the same model file, byte for byte, and the same history as the same spec run
without interruption by ``trainguard train``; ``trainguard validate`` reads that history with no
flags. The guards' saves on ``gs://`` are proven against the storage emulator.
"""

from __future__ import annotations

import hashlib
import importlib.util
import random
from pathlib import Path

import pytest
import yaml

from tests.fuzz.contract import run_cli
from tests.once import built_once
from tests.unit.runtime.framework_helpers import crash, history
from trainguard.launch.local import LocalBackend
from trainguard.spec import JobSpec

ROOT = Path(__file__).resolve().parents[2]
# What each example writes last (the weights) and the line it prints at each epoch's end.
EXAMPLES = {
    "lightning": {"module": "lightning", "model": "model.pt"},
    "keras": {"module": "keras", "model": "model.weights.h5"},
    "hf": {"module": "transformers", "model": "model.safetensors"},
}
SLOW = ["--step-sleep=0.02"]  # the same numbers, slower: preemptions land mid-epoch


def needs(name: str) -> None:
    if importlib.util.find_spec(EXAMPLES[name]["module"]) is None:
        pytest.skip(f"{EXAMPLES[name]['module']} is not installed")


def spec_for(name: str, base: Path, extra: list[str], env: dict | None = None) -> JobSpec:
    """The example spec's trainer, args and environment, with ``extra`` args and ``env``."""
    pool = yaml.safe_load((ROOT / "examples" / f"local-{name}.yaml").read_text())["workerPoolSpecs"][0]
    container = pool["containerSpec"]
    command = [container["command"][0], str(ROOT / container["command"][1])]
    return JobSpec.create(
        "demo-project",
        "us-central1",
        machine_type="n1-standard-4",
        image_uri=container["imageUri"],
        command=command,
        args=[*container.get("args", []), *extra],
        env={**{e["name"]: e["value"] for e in container.get("env", [])}, **(env or {})},
        base_output_dir=str(base),
    )


def run(name: str, base: Path, preempt_on=(), hard: bool = False, extra=SLOW):
    # Preemptions follow what the trainer prints, not wall time: start-up time varies a lot on a
    # shared machine.
    result = LocalBackend(preempt_on=list(preempt_on), grace_s=20, hard_kill=hard).run(
        spec_for(name, base, extra)
    )
    assert result.succeeded, result.log_tail[-4000:]
    return result


def digest(name: str, base: Path) -> str:
    return hashlib.sha256((base / "model" / EXAMPLES[name]["model"]).read_bytes()).hexdigest()


def after_epoch(epoch: int, delay: float) -> tuple[str, float]:
    return (rf"^epoch {epoch}\b", delay)


@pytest.fixture(scope="module")
def baselines(tmp_path_factory):
    """Each example spec, uninterrupted, as a user runs it: ``trainguard train SPEC --local``."""

    def get(name: str) -> Path:
        needs(name)

        def build(base: Path) -> None:
            with pytest.MonkeyPatch.context() as mp:
                mp.chdir(ROOT)  # the spec names its trainer relative to the repository
                outcome = run_cli(
                    "train",
                    f"examples/local-{name}.yaml",
                    "--local",
                    "-p",
                    "demo-project",
                    "-r",
                    "us-central1",
                    "--output-dir",
                    base,
                )
            assert outcome.exit_code == 0, outcome.output[-4000:]

        return built_once(tmp_path_factory, f"{name}-baseline", build)

    return get


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_example_spec_trains_and_validate_reads_its_history(name, baselines, tmp_path):
    base = baselines(name)
    assert (base / "model" / EXAMPLES[name]["model"]).exists()
    assert list((base / "checkpoints").glob("step-*/COMMIT"))
    outcome = run_cli("validate", base / "history.jsonl", "--json", tmp_path / "v.json")
    assert outcome.exit_code == 0, outcome.output[-3000:]
    assert {r[1] for r in history(base / "history.jsonl")} == {"train", "val"}


# Once in the default suite (each restart is a process that imports its framework, ~8 s of CPU);
# twice in the long one. A resumed run preempted again is proven in-process in the default suite:
# tests/unit/runtime/test_{lightning,keras}.py::test_a_resumed_fit_preempted_again_saves_and_resumes_again
# and tests/unit/runtime/test_hf.py::test_a_resumed_run_preempted_again_saves_and_resumes_again.
@pytest.mark.slow
@pytest.mark.parametrize("preemptions", [1, pytest.param(2, marks=pytest.mark.long)])
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_preempted_mid_epoch_ends_bit_identical(name, baselines, tmp_path, preemptions):
    base = baselines(name)
    result = run(name, tmp_path, preempt_on=[after_epoch(e, 0.3) for e in range(preemptions)])
    assert result.restarts == preemptions
    assert result.log_tail.count("trainguard's guard): saved step") == preemptions
    assert digest(name, tmp_path) == digest(name, base)
    assert history(tmp_path / "history.jsonl") == history(base / "history.jsonl")


@pytest.mark.long  # the default suite kills each framework's run in-process (tests/unit/runtime)
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_killed_mid_epoch_ends_bit_identical(name, baselines, tmp_path):
    base = baselines(name)
    result = run(name, tmp_path, preempt_on=[after_epoch(0, 0.4)], hard=True)
    assert result.restarts == 1 and "resum" in result.log_tail
    assert digest(name, tmp_path) == digest(name, base)
    assert history(tmp_path / "history.jsonl") == history(base / "history.jsonl")


@pytest.mark.long
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_sigkill_at_random_moments_ends_bit_identical(name, baselines, tmp_path):
    base = baselines(name)
    rng = random.Random(f"{name}-kills")
    for i in range(4):
        kills = [
            after_epoch(rng.randrange(3), round(rng.uniform(0.0, 0.5), 2)) for _ in range(rng.randint(1, 2))
        ]
        kills.sort(key=lambda k: k[0])
        where = tmp_path / f"kill{i}"
        run(name, where, preempt_on=kills, hard=True)
        assert digest(name, where) == digest(name, base), f"kill points {kills}"
        assert history(where / "history.jsonl") == history(base / "history.jsonl"), kills


@pytest.mark.long
def test_keras_on_the_jax_backend_resumes_bit_identical(tmp_path):
    needs("keras")
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed")

    def jax_run(base: Path, **kwargs):
        spec = spec_for("keras", base, SLOW, env={"KERAS_BACKEND": "jax"})
        result = LocalBackend(grace_s=20, **kwargs).run(spec)
        assert result.succeeded, result.log_tail[-4000:]
        assert "training on jax" in result.log_tail
        return result

    jax_run(tmp_path / "base")
    jax_run(tmp_path / "term", preempt_on=[after_epoch(0, 0.3), after_epoch(1, 0.3)])
    jax_run(tmp_path / "kill", preempt_on=[after_epoch(1, 0.2)], hard_kill=True)
    for other in ("term", "kill"):
        assert digest("keras", tmp_path / other) == digest("keras", tmp_path / "base")
        assert history(tmp_path / other / "history.jsonl") == history(tmp_path / "base" / "history.jsonl")


# --- gs:// through the storage emulator ---------------------------------------------------------


@pytest.fixture
def bucket(emulator, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.url)
    emulator.create_bucket("guard-bucket")
    return "gs://guard-bucket"


@pytest.mark.slow
@pytest.mark.framework  # in-process, as tests/unit/runtime does
def test_lightning_saves_and_resumes_on_gcs(bucket, tmp_path):
    needs("lightning")
    unit = importlib.import_module("tests.unit.runtime.lightning_runs")
    expected, _, _ = unit.fit(tmp_path / "local")
    where = {"directory": f"{bucket}/l/checkpoints", "history_path": f"{bucket}/l/history.jsonl"}
    with pytest.raises(RuntimeError):
        unit.fit(tmp_path / "gcs", unit.At(11, crash), **where)
    model, _, guard = unit.fit(tmp_path / "gcs", **where)
    assert guard.resumed_step == 8
    assert unit.same(unit.weights(model), unit.weights(expected))


@pytest.mark.slow
@pytest.mark.framework  # in-process, as tests/unit/runtime does
def test_keras_saves_and_resumes_on_gcs(bucket, tmp_path):
    needs("keras")
    unit = importlib.import_module("tests.unit.runtime.keras_runs")
    expected, _ = unit.fit(tmp_path / "local")
    where = {"directory": f"{bucket}/k/checkpoints", "history_path": f"{bucket}/k/history.jsonl"}
    with pytest.raises(RuntimeError):
        unit.fit(tmp_path / "gcs", unit.At(11, crash), **where)
    model, guard = unit.fit(tmp_path / "gcs", **where)
    assert guard.resumed_step == 8
    assert unit.same(unit.weights(model), unit.weights(expected))


@pytest.mark.slow
@pytest.mark.framework  # in-process, as tests/unit/runtime does
def test_hf_resumes_from_a_checkpoint_downloaded_from_gcs(bucket, tmp_path):
    needs("hf")
    unit = importlib.import_module("tests.unit.runtime.hf_runs")
    expected, _, _ = unit.train(tmp_path / "local")
    where = {"directory": f"{bucket}/h/checkpoints", "history_path": f"{bucket}/h/history.jsonl"}
    with pytest.raises(RuntimeError):
        unit.train(tmp_path / "gcs", unit.At(11, crash), **where)
    model, _, guard = unit.train(tmp_path / "gcs", **where)
    assert guard.resumed_step == 8
    assert unit.same(unit.weights(model), unit.weights(expected))
