"""The one model layout on gs:// (gcp-storage-emulator): a checkpoint that ships is exported into
the job's AIP_MODEL_DIR, its files copied beside it, the final export kept in model-last/."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.requires import require
from trainguard.guard.layout import read_manifest
from trainguard.guard.model import best_validation, pick_model, publish_model
from trainguard.runtime.checkpoint import RetentionPolicy
from trainguard.runtime.storage import join, store_for
from trainguard.validation import validate

require("torch")
import torch  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "histories"


class Artifact:
    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.uri = str(path)
        self.metadata: dict = {}


@pytest.fixture
def base(emulator, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.url)
    emulator.create_bucket("tg-models")
    return "gs://tg-models/runs/overfit"


def test_a_checkpoint_on_gcs_ships_in_the_same_layout(base, tmp_path):
    import io

    from trainguard.runtime import TorchCheckpointer

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ckpt = TorchCheckpointer(
        model,
        optimizer,
        directory=f"{base}/checkpoints",
        save=40,
        retention=RetentionPolicy(keep_last=100),
        async_save=False,
        handle_sigterm=False,
    )
    at_80 = {}
    for step in range(1, 161):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        ckpt.step(step, loss=loss.item())
        if step == 80:
            at_80 = {k: v.clone() for k, v in model.state_dict().items()}
    ckpt.close()
    store = store_for(base)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    store.write_bytes(f"{base}/model/model.pt", buffer.getvalue())  # as train.py exports

    artifact = Artifact(tmp_path / "model")  # a Vertex task's artifact: its URI is set to gs://
    best = best_validation(validate(FIXTURES / "overfit" / "history.jsonl"))  # best at step 81
    pick = pick_model("best", model_dir=f"{base}/model/", checkpoint_dir=f"{base}/checkpoints", best=best)
    pick = publish_model(pick, artifact, model_dir=f"{base}/model/")
    assert pick.step == 80 and artifact.uri == f"{base}/model/"
    served = torch.load(io.BytesIO(store.read_bytes(f"{base}/model/model.pt")), weights_only=True)
    assert all(torch.equal(served[k], at_80[k]) for k in at_80)
    assert store.exists(f"{base}/model/checkpoint/state.pt")  # copied beside it, server-side
    final = torch.load(io.BytesIO(store.read_bytes(f"{base}/model-last/model.pt")), weights_only=True)
    assert all(torch.equal(final[k], model.state_dict()[k]) for k in final)
    manifest = read_manifest(f"{base}/model/")
    assert manifest["serving_files"] == ["model.pt"] and manifest["step"] == 80
    assert artifact.metadata["checkpoint_uri"] == join(f"{base}/model/", "checkpoint") + "/"
