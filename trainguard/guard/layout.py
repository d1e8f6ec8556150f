"""One model layout, whichever step shipped.

The ``model`` artifact (and the ``serving_model`` that points at the same directory) always holds::

    <model>/                      what a serving container loads: the shipped step's weights,
                                  exported as the trainer exports its final model (model.pt, …)
    <model>/checkpoint/           that step's training checkpoint (the COMMIT's files), when one
                                  was saved at that step
    <model>/trainguard-model.json which step shipped, from where, how it was exported, its metric

On ``gs://`` the directory is the job's ``AIP_MODEL_DIR`` (``<base>/model/``); locally it is the
artifact's own directory (which *is* ``AIP_MODEL_DIR`` when the local backend wrote there). When a
checkpoint ships, its export (:mod:`trainguard.guard.export`) replaces the job's final export,
which moves to ``<base>/model-last/`` (nothing is lost). A checkpoint that cannot be exported where
the train task runs gives way to the job's final weights, said in the reason, so what is served
is always an export; a job that left nothing else ships the checkpoint alone, with no serving
files, and the manifest says why (a registration refuses it).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from trainguard.guard.export import Export, export_checkpoint
from trainguard.guard.model import LAST_MODEL_DIRNAME, ModelPick, _replace, _with_value
from trainguard.runtime.storage import join, store_for

__all__ = ["CHECKPOINT_DIRNAME", "MANIFEST", "publish", "read_manifest"]

CHECKPOINT_DIRNAME = "checkpoint"
MANIFEST = "trainguard-model.json"
_OURS = (CHECKPOINT_DIRNAME + "/", MANIFEST)  # what the layout adds beside the serving files


def _gs(uri: str) -> bool:
    return uri.startswith("gs://")


def _dir(uri: str) -> str:
    return uri.rstrip("/") + "/"


def _names(uri: str) -> list[str]:
    """The files under the directory ``uri``, relative to it (none when it does not exist)."""
    if not uri:
        return []
    prefix = _dir(uri)
    try:
        listed = store_for(uri).list(uri.rstrip("/"))
    except FileNotFoundError:
        return []
    return sorted(u[len(prefix) :] for u in listed if u.startswith(prefix))


def _serving(names: list[str]) -> tuple[str, ...]:
    return tuple(n for n in names if not n.startswith(_OURS))


def _local_copy(uri: str, files: tuple[str, ...], scratch: Path) -> Path:
    """A local directory holding ``files`` of the directory ``uri`` (downloaded from ``gs://``)."""
    if not _gs(uri):
        return Path(uri)
    store = store_for(uri)
    for name in files:
        (scratch / name).parent.mkdir(parents=True, exist_ok=True)
        store.download_file(join(uri, name), str(scratch / name))
    return scratch


def _copy_in(src: str, names: tuple[str, ...], dst: str) -> None:
    """Copies ``names`` from the directory ``src`` into the directory ``dst`` (local or ``gs://``;
    server-side between buckets)."""
    if _gs(src) and _gs(dst):
        from trainguard.gcp import storage_client

        client = storage_client()
        for name in names:
            sb, _, so = join(src, name)[5:].partition("/")
            db, _, do = join(dst, name)[5:].partition("/")
            client.bucket(sb).copy_blob(client.bucket(sb).blob(so), client.bucket(db), do)
        return
    if _gs(dst):
        store = store_for(dst)
        for name in names:
            store.upload_file(str(Path(src) / name), join(dst, name))
        return
    store = store_for(src)
    for name in names:
        target = Path(dst) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if _gs(src):
            store.download_file(join(src, name), str(target))
        else:
            shutil.copyfile(Path(src) / name, target)


def _move_aside(directory: str, names: tuple[str, ...]) -> str:
    """Moves the files ``names`` of ``directory`` to ``<its parent>/model-last/``; returns it."""
    aside = directory.rstrip("/").rsplit("/", 1)[0] + f"/{LAST_MODEL_DIRNAME}/"
    if _gs(directory):
        store = store_for(directory)
        store.delete_tree(aside.rstrip("/"))
        for name in names:
            store.rename(join(directory, name), join(aside, name))
        return aside
    shutil.rmtree(aside, ignore_errors=True)
    for name in names:
        target = Path(aside) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(Path(directory) / name), str(target))
    return aside


def _same_dir(a: str, b: str) -> bool:
    if not a or not b:
        return False
    if _gs(a) or _gs(b):
        return _dir(a) == _dir(b)
    return Path(a).exists() and Path(b).exists() and Path(a).resolve() == Path(b).resolve()


def _final(pick: ModelPick, model_dir: str, why: str) -> ModelPick | None:
    """The job's final weights in place of a checkpoint that cannot be exported, or None."""
    if not _serving(_names(model_dir)):
        return None
    return _with_value(
        ModelPick(
            pick.choice,
            model_dir,
            "model_dir",
            pick.final_step,
            (),
            f"the job's final weights: {pick.reason.replace('the kept', 'the', 1)} could not be "
            f"exported: {why}",
            pick.best,
        )
    )


def publish(pick: ModelPick, model: Any, *, model_dir: str) -> ModelPick:
    """Lays the picked weights out in the artifact ``model`` (``.path``, ``.uri``, ``.metadata``).

    Args:
        pick: what :func:`~trainguard.guard.model.pick_model` chose.
        model: the model artifact.
        model_dir: the job's ``AIP_MODEL_DIR``.

    Returns:
        The pick that shipped: ``pick``, or the final weights when its checkpoint could not be
        exported here.

    Raises:
        Exception: the storage client's errors when the weights cannot be read or written.
    """
    if pick.source == "none":
        model.metadata.update(pick.metadata())
        return pick
    with tempfile.TemporaryDirectory(prefix="trainguard-model-") as scratch:
        export: Export | None = None
        local_ckpt: Path | None = None
        if pick.source == "checkpoint":
            local_ckpt = _local_copy(pick.uri, pick.files, Path(scratch) / "checkpoint")
            export, why = export_checkpoint(pick.format, local_ckpt, pick.files, Path(scratch) / "export")
            if export is None:
                fallback = _final(pick, model_dir, why)
                if fallback is None:
                    pick = _replace(pick, reason=f"{pick.reason}; it has no serving files: {why}")
                else:
                    pick, local_ckpt = fallback, None
        on_gs = _gs(model_dir) or (not model_dir and _gs(pick.uri))
        target = _dir(model_dir) if on_gs else str(Path(model.path))
        if not on_gs:
            Path(target).mkdir(parents=True, exist_ok=True)
        exported = (Path(scratch) / "export", export) if export is not None else None
        layout = _lay_out(pick, exported, local_ckpt, model_dir, target)
    if on_gs:
        model.uri = target
    model.metadata.update(pick.metadata())
    model.metadata.update(layout)
    return pick


def _lay_out(
    pick: ModelPick,
    exported: tuple[Path, Export] | None,
    local_ckpt: Path | None,
    model_dir: str,
    target: str,
) -> dict[str, Any]:
    """Writes serving files (the export in its local directory, or the job's own), the checkpoint
    and the manifest into ``target``; returns what goes into the artifact's metadata."""
    same = _same_dir(model_dir, target)
    meta: dict[str, Any] = {}
    present = _serving(_names(target))
    if pick.source == "model_dir":
        serving = _serving(_names(model_dir))
        if not same:
            _copy_in(model_dir, serving, target)
        how = "the job's own export (AIP_MODEL_DIR)"
    else:
        if present:  # the job's final export, replaced by the checkpoint's: kept beside
            meta["last_model_uri"] = _move_aside(target, present)
        serving = exported[1].files if exported is not None else ()
        if exported is not None:
            _copy_in(str(exported[0]), serving, target)
        how = exported[1].how if exported is not None else ""
    checkpoint = ""
    if pick.checkpoint_uri and pick.checkpoint_files:
        checkpoint = join(target, CHECKPOINT_DIRNAME) + "/"
        source = str(local_ckpt) if local_ckpt is not None and not _gs(target) else pick.checkpoint_uri
        _copy_in(source, pick.checkpoint_files, checkpoint)
    manifest = {
        "step": pick.step,
        "source": pick.source,
        "reason": pick.reason,
        "serving_files": list(serving),
        "export": how,
        "checkpoint": f"{CHECKPOINT_DIRNAME}/" if checkpoint else None,
        "checkpoint_format": pick.format or None,
        "checkpoint_from": pick.checkpoint_uri or None,
        "metric": pick.metric or None,
        "value": pick.value,
    }
    store_for(target).write_bytes(join(target, MANIFEST), json.dumps(manifest, indent=2).encode())
    meta.update(serving_files=list(serving), model_export=how)
    if checkpoint:
        meta["checkpoint_uri"] = checkpoint
    return meta


def read_manifest(uri: str) -> dict:
    """The manifest of a model laid out by :func:`publish` (empty when it has none)."""
    try:
        return dict(json.loads(store_for(uri).read_bytes(join(uri, MANIFEST))))
    except (OSError, ValueError, TypeError):
        return {}


def publish_serving(serving_model: Any, model: Any, serving_image: str) -> None:
    """Makes ``serving_model`` (a ``google.UnmanagedContainerModel``) name the same directory as
    ``model``, with GCPC's ``containerSpec.imageUri`` (what ``ModelUploadOp`` sends to Vertex) and
    trainguard's facts about the weights under ``trainguard``."""
    serving_model.uri = model.uri
    if serving_image:
        serving_model.metadata["containerSpec"] = {"imageUri": serving_image}
    serving_model.metadata["trainguard"] = dict(model.metadata)
