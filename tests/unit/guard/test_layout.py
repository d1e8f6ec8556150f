"""One model layout whichever step shipped: the step's export where a serving container loads it,
its training checkpoint beside it, a manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.requires import require
from trainguard.guard.export import EXPORTERS, NOT_EXPORTABLE, export_checkpoint
from trainguard.guard.layout import MANIFEST, publish_serving, read_manifest
from trainguard.guard.model import LAST_MODEL_DIRNAME, best_validation, pick_model, publish_model
from trainguard.runtime.checkpoint import CheckpointManager, RetentionPolicy
from trainguard.validation import validate

require("torch")
import torch  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "histories"


class Artifact:
    """What KFP hands a component: a path, a URI, metadata."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.uri = str(path)
        self.metadata: dict = {}


@pytest.fixture(scope="module")
def overfit_best():
    # val/loss is best at step 81 of 180 in this real run.
    return best_validation(validate(FIXTURES / "overfit" / "history.jsonl"))


def torch_run(base: Path, *, sharded: bool = False, final: bool = True) -> dict[int, dict]:
    """A real TorchCheckpointer run of 160 steps saving every 40 (as the reference trainer does),
    the final weights exported as train.py exports them; returns the weights at each save."""
    from trainguard.runtime import TorchCheckpointer

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    ckpt = TorchCheckpointer(
        model,
        optimizer,
        directory=str(base / "checkpoints"),
        save=40,
        retention=RetentionPolicy(keep_last=100),
        async_save=False,
        handle_sigterm=False,
        sharded=sharded,
    )
    saved = {}
    for step in range(1, 161):
        loss = model(torch.randn(16, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        ckpt.step(step, loss=loss.item())
        if step % 40 == 0:
            saved[step] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    ckpt.close()
    if final:
        (base / "model").mkdir(parents=True)
        torch.save(model.state_dict(), base / "model" / "model.pt")
    return saved


def shipped(base: Path, best, model: Artifact, choice: str = "best"):
    pick = pick_model(
        choice,
        model_dir=f"{base}/model/",
        checkpoint_dir=f"{base}/checkpoints/",
        best=best,
        last_step=160,
    )
    return publish_model(pick, model, model_dir=f"{base}/model/")


def same_weights(path: Path, expected: dict) -> bool:
    loaded = torch.load(path, weights_only=True)
    return loaded.keys() == expected.keys() and all(torch.equal(loaded[k], expected[k]) for k in expected)


def test_a_checkpoint_that_ships_is_exported_where_the_final_weights_would_be(tmp_path, overfit_best):
    base = tmp_path / "run"
    saved = torch_run(base)
    model = Artifact(base / "model")  # the local backend's AIP_MODEL_DIR is the artifact
    pick = shipped(base, overfit_best, model)
    assert pick.source == "checkpoint" and pick.step == 80
    # What a serving container loads: model.pt, the step-80 weights, as the trainer exports them.
    assert same_weights(base / "model" / "model.pt", saved[80])
    # The training checkpoint of that step beside it; the job's final export kept aside.
    assert (base / "model" / "checkpoint" / "state.pt").is_file()
    assert same_weights(base / LAST_MODEL_DIRNAME / "model.pt", saved[160])
    manifest = read_manifest(str(base / "model"))
    assert manifest["step"] == 80 and manifest["serving_files"] == ["model.pt"]
    assert manifest["checkpoint"] == "checkpoint/" and manifest["checkpoint_format"] == "torch"
    assert model.metadata["serving_files"] == ["model.pt"] and model.metadata["model_step"] == 80
    json.dumps(model.metadata)  # KFP metadata must be JSON


def test_the_layout_is_the_same_whichever_step_shipped(tmp_path, overfit_best):
    layouts = []
    for choice in ("best", "last"):
        base = tmp_path / choice
        torch_run(base)
        model = Artifact(tmp_path / f"artifact-{choice}")  # an artifact directory of its own
        pick = shipped(base, overfit_best, model, choice)
        names = sorted(p.name for p in Path(model.path).iterdir())
        layouts.append((names, read_manifest(model.path)["serving_files"]))
        assert pick.step == (80 if choice == "best" else 160)
    assert layouts[0] == layouts[1] == (sorted(["checkpoint", MANIFEST, "model.pt"]), ["model.pt"])


def test_a_sharded_checkpoint_is_consolidated_into_the_same_model_pt(tmp_path, overfit_best):
    base = tmp_path / "run"
    saved = torch_run(base, sharded=True, final=False)  # a stopped job: no final export at all
    model = Artifact(tmp_path / "artifact")
    pick = shipped(base, overfit_best, model)
    assert pick.format == "torch-dcp" and pick.step == 80
    assert same_weights(Path(model.path) / "model.pt", saved[80])
    assert (Path(model.path) / "checkpoint" / ".metadata").is_file()


def _files_run(base: Path, fmt: str, files: dict[str, bytes]) -> None:
    manager = CheckpointManager(
        str(base / "checkpoints"), async_save=False, retention=RetentionPolicy(keep_last=9)
    )
    for step in (40, 80, 120):
        manager.save(step, files, format=fmt)


def test_a_checkpoint_only_the_trainer_can_export_gives_way_to_the_final_weights(tmp_path, overfit_best):
    base = tmp_path / "run"
    _files_run(base, "keras", {"keras-state.npz": b"variables", "keras-state.json": b"{}"})
    (base / "model").mkdir(parents=True)
    (base / "model" / "model.weights.h5").write_bytes(b"the trainer's export")
    model = Artifact(tmp_path / "artifact")
    pick = shipped(base, overfit_best, model)
    assert pick.source == "model_dir" and pick.step == 160
    assert "could not be exported" in pick.reason and "model.save_weights" in pick.reason
    assert (Path(model.path) / "model.weights.h5").read_bytes() == b"the trainer's export"
    assert model.metadata["model_source"] == "model_dir"


def test_with_no_final_weights_the_checkpoint_ships_alone_and_says_it_has_nothing_to_serve(
    tmp_path, overfit_best
):
    base = tmp_path / "run"
    _files_run(base, "files", {"weights.bin": b"custom"})
    model = Artifact(tmp_path / "artifact")
    pick = shipped(base, overfit_best, model)
    assert pick.source == "checkpoint" and "no serving files" in pick.reason
    assert (Path(model.path) / "checkpoint" / "weights.bin").read_bytes() == b"custom"
    assert read_manifest(model.path)["serving_files"] == [] and model.metadata["serving_files"] == []


def test_a_hugging_face_checkpoint_exports_what_save_model_writes(tmp_path):
    src = tmp_path / "checkpoint-80"
    names = {
        "model.safetensors": b"weights",
        "config.json": b"{}",
        "generation_config.json": b"{}",
        "tokenizer.json": b"{}",
        "optimizer.pt": b"o",
        "scheduler.pt": b"s",
        "scaler.pt": b"g",
        "rng_state.pth": b"r",
        "rng_state_3.pth": b"r",
        "trainer_state.json": b"{}",
    }
    for name, data in names.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(data)
    export, why = export_checkpoint("hf", src, list(names), tmp_path / "out")
    assert why == "" and export is not None
    assert export.files == ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == list(export.files)


def test_a_damaged_checkpoint_is_said_not_raised(tmp_path):
    (tmp_path / "state.pt").write_bytes(b"not a torch file")
    export, why = export_checkpoint("torch", tmp_path, ["state.pt"], tmp_path / "out")
    assert export is None and "could not be exported" in why and "state.pt" in why
    export, why = export_checkpoint("no-such-format", tmp_path, [], tmp_path / "out")
    assert export is None and "no-such-format" in why


def test_the_export_table_names_the_runtime_formats():
    from trainguard.runtime.checkpoint import FORMAT_FILES
    from trainguard.runtime.torch_checkpointer import FORMAT_DCP, FORMAT_TORCH

    assert {FORMAT_TORCH, FORMAT_DCP, "lightning", "hf"} == set(EXPORTERS)
    assert {FORMAT_FILES, "keras", "orbax"} == set(NOT_EXPORTABLE)


def test_the_serving_model_names_the_same_directory_and_the_serving_image(tmp_path, overfit_best):
    base = tmp_path / "run"
    torch_run(base)
    model = Artifact(base / "model")
    shipped(base, overfit_best, model)
    serving = Artifact(tmp_path / "serving_model")
    publish_serving(serving, model, "us-docker.pkg.dev/p/serving/torch:1")
    assert serving.uri == model.uri
    assert serving.metadata["containerSpec"] == {"imageUri": "us-docker.pkg.dev/p/serving/torch:1"}
    assert serving.metadata["trainguard"]["model_step"] == 80
