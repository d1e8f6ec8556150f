"""``TorchCheckpointer``: checkpointing a PyTorch training loop in three calls.

One process (or DDP replicas saving from the chief) writes one ``state.pt`` (format ``torch``);
multi-process jobs (DDP, FSDP2 ``fully_shard``) and sharded models save through
``torch.distributed.checkpoint`` (format ``torch-dcp``), each rank writing its shards into the same
attempt directory, and restore into any world size. Both keep the overlap that makes async saves
cheap: the state is copied into kept (pinned, for CUDA) CPU buffers during the next forward and
backward pass, and written from them on a background thread. RNG states, the data position and the
scheduler go with each rank; everything loads with ``weights_only=True``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any

import torch
import torch.distributed as dist

from trainguard.errors import CheckpointError
from trainguard.runtime.checkpoint import Checkpoint, Payload, RetentionPolicy, SavePolicy, Sharded, note
from trainguard.runtime.checkpointer import Checkpointer, Engine, Restored, Slot
from trainguard.runtime.storage import FileStore
from trainguard.runtime.torch_state import (
    STATE_FILE,
    Stager,
    apply_state,
    load_state,
    plain,
    rng_state,
    set_rng_state,
    stream,
)

__all__ = ["TorchCheckpointer", "TorchEngine", "FORMAT_TORCH", "FORMAT_DCP"]

FORMAT_TORCH = "torch"
FORMAT_DCP = "torch-dcp"
_RANK_KEY = re.compile(r"rank(\d+)$")
_PLAN_KEYS = itertools.count()  # one key in DCP's plan cache per checkpointer


def _has_dtensor(model) -> bool:
    return any(type(p).__name__ == "DTensor" for p in model.parameters())


class TorchEngine(Engine[None, Any]):
    """The PyTorch part of :class:`TorchCheckpointer`: it holds the model, optimizer and scheduler
    (references: the loop passes no state), stages them into kept CPU buffers during the next
    forward/backward pass, and writes one ``state.pt`` or, sharded, a DCP checkpoint.

    Args:
        model, optimizer, scheduler: the training objects (see :class:`TorchCheckpointer`).
        sharded: save with ``torch.distributed.checkpoint`` (default: several ranks, or DTensor
            parameters).
        rank, world_size: this process in the job; with ``torch.distributed`` initialised they
            come from it.

    Raises:
        CheckpointError: several ranks are declared but ``torch.distributed`` is not initialised.
    """

    reads = (FORMAT_TORCH, FORMAT_DCP)

    def __init__(
        self,
        model,
        optimizer=None,
        scheduler=None,
        *,
        sharded: bool | None = None,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        initialised = dist.is_available() and dist.is_initialized()
        if initialised:
            rank, world_size = dist.get_rank(), dist.get_world_size()
        elif isinstance(world_size, int) and world_size > 1:
            raise CheckpointError(
                f"WORLD_SIZE={world_size} but torch.distributed is not initialised: call "
                "torch.distributed.init_process_group() before creating the TorchCheckpointer"
            )
        super().__init__(rank, world_size)
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.sharded = (self.world_size > 1 or _has_dtensor(model)) if sharded is None else bool(sharded)
        self.format = FORMAT_DCP if self.sharded else FORMAT_TORCH
        self.all_ranks_write = self.sharded
        self._stager = Stager()
        self._pending: Any = None  # the latest snapshot: its waits in optimizer.step() count as stall
        self._waited_s = 0.0
        # Own gloo groups: one for the per-step agreement (training thread), one for DCP's
        # collectives (saver thread). Two threads must never share a group: collectives pair up
        # by order of issue.
        self._ctl: Any = None
        self._io: Any = None
        self._plans = str(next(_PLAN_KEYS))
        if initialised:
            if self.world_size > 1:
                self._ctl = dist.new_group(backend="gloo")
            if self.sharded:
                self._io = dist.new_group(backend="gloo")

    def agree(self, values: list[int]) -> list[int]:
        if self._ctl is None:
            return values
        tensor = torch.tensor(values, dtype=torch.int64)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=self._ctl)
        return [int(v) for v in tensor.tolist()]

    def meta(self) -> dict:
        return {"world_size": self.world_size, "torch": torch.__version__}

    def held_s(self) -> float:
        """Seconds ``optimizer.step()`` waited for a snapshot's copy."""
        latest = self._pending.blocked_s if self._pending is not None else 0.0
        return self._waited_s + latest

    # -- saving --

    def stage(self, state: None, extra: dict, slot: Slot) -> Any:
        if self._pending is not None:
            self._waited_s += self._pending.blocked_s
            self._pending = None
        if slot.blocking and self.sharded:
            # The training thread waits for this save: DCP can write the live tensors (it copies
            # device tensors itself), no staging copy needed.
            return _Ready(self._refs(extra)[0])
        self._pending = self._begin(extra)
        return self._pending

    def _begin(self, extra: dict):
        if not self.sharded:
            return self._stager.begin(self.model, self.optimizer, self.scheduler, extra)
        refs, early = self._refs(extra)
        optimizers = [self.optimizer] if self.optimizer is not None else []
        return self._stager.begin_state(refs, early, optimizers)

    def _refs(self, extra: dict) -> tuple[dict, set[tuple]]:
        """The DCP state dict (references to the live tensors) and the paths to copy at once."""
        from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict

        if self.optimizer is not None:
            model_sd, optim_sd = get_state_dict(self.model, self.optimizer)
        else:
            model_sd, optim_sd = get_model_state_dict(self.model), None
        # Small per-rank state (a few KB): RNG, data position, scheduler. In a 1-tuple, DCP keeps
        # it as one item (it flattens dicts) and each rank writes its own.
        small = (
            {
                "rng": rng_state(),
                "extra": plain(extra),
                "scheduler": (
                    plain(self.scheduler.state_dict(), "scheduler") if self.scheduler is not None else None
                ),
            },
        )
        refs: dict[str, object] = {"model": model_sd, f"rank{self.rank}": small}
        if optim_sd is not None:
            refs["optim"] = optim_sd
        module = getattr(self.model, "module", self.model)
        return refs, {("model", name) for name, _ in module.named_buffers()}

    def payload(self, staged: Any, slot: Slot) -> Payload | Sharded:
        if not self.sharded:
            return {STATE_FILE: stream(staged)}
        return Sharded(lambda uri: self._dcp_save(staged, uri, slot.store))

    def _dcp_save(self, staged, uri: str, store: FileStore) -> None:
        import torch.distributed.checkpoint as dcp

        from trainguard.runtime.torch_dcp import save_planner, writer_for

        state = staged.result()
        writer = writer_for(uri, store)
        if self._io is not None:
            planner = save_planner(self._plans)
            dcp.save(state, storage_writer=writer, planner=planner, process_group=self._io)
        else:
            dcp.save(state, storage_writer=writer, no_dist=True)

    # -- loading --

    def accepts(self, checkpoint: Checkpoint) -> bool:
        # A COMMIT from before formats were recorded, with the single state file of that time.
        legacy = "format" not in checkpoint.meta and STATE_FILE in checkpoint.files
        return legacy or super().accepts(checkpoint)

    def load(self, checkpoint: Checkpoint, target: None, *, strict: bool, store: FileStore) -> Restored[None]:
        if checkpoint.format == FORMAT_DCP:
            return Restored(self._load_dcp(checkpoint, strict, store))
        if _has_dtensor(self.model):
            raise CheckpointError(
                f"{checkpoint.uri} was saved by one process as a single file; this model is "
                "sharded (FSDP), which cannot load it as is: resume with the unsharded setup that "
                "saved it (one process), or start this sharded run in an empty directory"
            )
        path = checkpoint.path(STATE_FILE)
        with store.open_read(path) as handle:
            state = load_state(handle, name=path)
        extra = apply_state(state, self.model, self.optimizer, self.scheduler, strict=strict, name=path)
        return Restored(extra)

    def _load_dcp(self, checkpoint: Checkpoint, strict: bool, store: FileStore) -> dict:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import (
            get_model_state_dict,
            get_state_dict,
            set_model_state_dict,
            set_state_dict,
        )

        from trainguard.runtime.torch_dcp import METADATA_FILE, SafeLoadPlanner, reader_for

        where = checkpoint.root
        if METADATA_FILE not in checkpoint.files:
            raise CheckpointError(f"{where}: no {METADATA_FILE}: a torn sharded save")
        keys = set(reader_for(where, store, checkpoint.files).read_metadata().state_dict_metadata)
        ranks = sorted(int(m.group(1)) for k in keys if (m := _RANK_KEY.match(k)))
        has_optim = any(k.startswith("optim.") for k in keys)
        if not any(k.startswith("model.") for k in keys) or not ranks:
            raise CheckpointError(
                f"{where}: a torch.distributed.checkpoint without trainguard's "
                "model and per-rank state: not written by TorchCheckpointer"
            )
        if self.optimizer is not None and not has_optim and strict:
            raise CheckpointError(
                f"{where}: holds no optimizer state, but an optimizer was given: resume with the "
                "setup that saved it, or restore(strict=False) to start the optimizer afresh"
            )
        load_optim = self.optimizer is not None and has_optim
        target: dict[str, Any]
        if load_optim:
            model_sd, optim_sd = get_state_dict(self.model, self.optimizer)
            target = {"model": model_sd, "optim": optim_sd}
        else:
            target = {"model": get_model_state_dict(self.model)}
        for r in ranks:
            target[f"rank{r}"] = None  # a leaf: replaced by the loaded (per-rank dict,)
        reader = reader_for(where, store, checkpoint.files)
        try:
            if self._io is not None:
                dcp.load(target, storage_reader=reader, planner=SafeLoadPlanner(), process_group=self._io)
            else:
                dcp.load(target, storage_reader=reader, planner=SafeLoadPlanner(), no_dist=True)
            if load_optim:
                set_state_dict(
                    self.model,
                    self.optimizer,
                    model_state_dict=target["model"],
                    optim_state_dict=target["optim"],
                )
            else:
                set_model_state_dict(self.model, target["model"])
        except CheckpointError:
            raise
        except Exception as exc:  # noqa: BLE001 - DCP wraps per-rank failures in many types
            raise CheckpointError(
                f"{where}: does not fit this model/optimizer: "
                f"{_first_line(exc)}; resume with the model that saved it"
            ) from None
        blobs = {}
        for r in ranks:
            item = target[f"rank{r}"]
            if not (isinstance(item, tuple) and len(item) == 1 and isinstance(item[0], dict)):
                raise CheckpointError(f"{where}: its per-rank record rank{r} is not trainguard's")
            blobs[r] = item[0]
        return self._apply_small(checkpoint, blobs, strict)

    def _apply_small(self, checkpoint: Checkpoint, blobs: dict[int, dict], strict: bool) -> dict:
        """Scheduler, RNG states and data position from the per-rank records."""
        saved_world = int(checkpoint.meta.get("world_size") or len(blobs))
        mine = blobs.get(self.rank) if saved_world == self.world_size else None
        first = blobs[min(blobs)]
        if self.scheduler is not None:
            if first.get("scheduler") is None and strict:
                raise CheckpointError(
                    f"{checkpoint.root}: holds no scheduler state, but a "
                    "scheduler was given: restore(strict=False) starts it afresh"
                )
            if first.get("scheduler") is not None:
                self.scheduler.load_state_dict(first["scheduler"])
        extras = [blobs[r].get("extra") or {} for r in sorted(blobs)]
        if mine is not None:
            set_rng_state(mine.get("rng") or {})
            return dict(mine.get("extra") or {})
        if self.rank == 0:
            note(
                f"{checkpoint.uri} was saved on {saved_world} rank(s), this job has "
                f"{self.world_size}: weights and optimizer state are resharded; RNG states start "
                "from this run's seeds (the run goes on, not bit-identical to one without the "
                "change)"
            )
        if all(e == extras[0] for e in extras):
            return dict(extras[0])
        raise CheckpointError(
            f"{checkpoint.uri}: each of its {saved_world} ranks saved a different data position "
            f"(extra), which cannot be mapped onto {self.world_size} ranks: resume on "
            f"{saved_world} ranks, or save a position that does not depend on the rank"
        )


class TorchCheckpointer(Checkpointer[None]):
    """Saves, restores and preempts a PyTorch training loop.

    Example (runs as is; on Vertex, ``from_env`` reads the directory, rank and history path)::

        >>> import tempfile, torch
        >>> from trainguard.runtime import TorchCheckpointer
        >>> model = torch.nn.Linear(4, 1)
        >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> ckpt = TorchCheckpointer(model, optimizer, directory=tempfile.mkdtemp(), save=5)
        >>> start = ckpt.restore()                     # Start(step=0) on a fresh run
        >>> for step in range(start.step + 1, 21):
        ...     loss = model(torch.randn(8, 4)).pow(2).mean()
        ...     optimizer.zero_grad()
        ...     loss.backward()
        ...     optimizer.step()
        ...     _ = ckpt.step(step, loss=loss.item(), extra={"batch": step})
        >>> ckpt.close()
        >>> [c.step for c in ckpt.manager.checkpoints()]    # the last 3 are kept
        [10, 15, 20]

    Call ``step()`` on every rank after each ``optimizer.step()``; on SIGTERM it saves and exits
    (143). The data position goes in ``extra`` and comes back as ``start.extra``.

    Args:
        model: the module (plain, DDP-wrapped, or FSDP2 ``fully_shard``-ed).
        optimizer: its optimizer (restoring a checkpoint without one is an error unless
            ``restore(strict=False)``).
        scheduler: an LR scheduler.
        directory: see :class:`Checkpointer` (default ``$AIP_CHECKPOINT_DIR``).
        sharded: save with ``torch.distributed.checkpoint`` (default: when the job has several
            ranks or the model has sharded (DTensor) parameters).
        rank, world_size: this process in the job (with ``torch.distributed`` initialised, they
            come from it).
        **options: :class:`Checkpointer` options (``save``, ``retention``, ``async_save``,
            ``history``, ``log_every``, ``exit_on_preemption``, ``store``, …).
    """

    engine: TorchEngine

    def __init__(
        self,
        model,
        optimizer=None,
        scheduler=None,
        directory: str | None = None,
        *,
        sharded: bool | None = None,
        rank: int = 0,
        world_size: int = 1,
        save: SavePolicy | int | None = None,
        retention: RetentionPolicy | None = None,
        **options: Any,
    ) -> None:
        engine = TorchEngine(model, optimizer, scheduler, sharded=sharded, rank=rank, world_size=world_size)
        super().__init__(engine, directory, save=save, retention=retention, **options)

    @classmethod
    def from_env(
        cls,
        model,
        optimizer=None,
        scheduler=None,
        *,
        environ: Mapping[str, str] | None = None,
        default_base: str = "./trainguard-output",
        **kwargs: Any,
    ) -> TorchCheckpointer:
        """A checkpointer configured by Vertex's environment contract (``AIP_CHECKPOINT_DIR``,
        ``TRAINGUARD_HISTORY``, ``RANK``, ``WORLD_SIZE``); ``kwargs`` override."""
        return cls(model, optimizer, scheduler, **{**cls.env_kwargs(environ, default_base), **kwargs})

    @property
    def model(self):
        """The module checkpointed."""
        return self.engine.model

    @property
    def sharded(self) -> bool:
        """True when saves go through ``torch.distributed.checkpoint`` (each rank its shards)."""
        return self.engine.sharded


class _Ready:
    """A state that needs no copy (a blocking save writes the live tensors)."""

    blocked_s = 0.0

    def __init__(self, state: dict) -> None:
        self._state = state

    def result(self) -> dict:
        return self._state


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Traceback", "File ")):
            return line[:400]
    return type(exc).__name__
