"""``JaxCheckpointer``: checkpointing a JAX training loop (TPU, GPU, CPU) on orbax-checkpoint.

Each save is one trainguard attempt directory holding one orbax ``CheckpointManager`` step::

    <dir>/step-000000120/COMMIT                      trainguard's marker, written last (process 0)
    <dir>/step-000000120/a-5f3c9e21b0d4/             the attempt: an orbax CheckpointManager root
        120/_CHECKPOINT_METADATA, 120/state/...      the state pytree (OCDBT; each process its shards)
        trainguard/process-00000.json                per process: data position (extra), host RNGs

orbax does the writing, asynchronously: its ``save`` copies the arrays to host memory on the training
thread (the only stall; buffers donated to the next step are safe afterwards) and writes them on
its own threads. trainguard's saver thread waits for orbax to finish, then writes ``COMMIT``; a kill
at any moment before that leaves an attempt that no ``COMMIT`` names, which restore ignores. The
save and retention policies, SIGTERM, the history and the ranks are :class:`Checkpointer`'s.

Restoring reads JSON and array data only (orbax never unpickles; the records are JSON), and fits
the checkpoint into the state the loop passes in: its tree, shapes, dtypes and shardings (arrays
are resharded onto the target's shardings, so a state saved over 8 devices restores onto 4 or 1).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from trainguard.errors import CheckpointError
from trainguard.runtime.checkpoint import Checkpoint, RetentionPolicy, SavePolicy, Sharded, note
from trainguard.runtime.checkpointer import Checkpointer, Engine, Restored, Slot, Start
from trainguard.runtime.storage import FileStore, join, no_space_message

__all__ = ["JaxCheckpointer", "JaxEngine", "JaxStart", "FORMAT_ORBAX", "STATE_ITEM", "host_rng_state"]

FORMAT_ORBAX = "orbax"
STATE_ITEM = "state"  # the orbax item holding the state pytree
_RECORD = re.compile(r"trainguard/process-(\d{5})\.json$")
_MAX_RECORD_BYTES = 1 << 20  # a record is ~15 KB (two RNG states and the position)
_SHOWN = 4  # key paths named in one message


#: The start of a JAX run: :class:`~trainguard.runtime.checkpointer.Start` with ``state`` (the
#: restored state in the target's tree, shardings and dtypes; on a fresh run the target as given).
JaxStart = Start


@dataclass
class _InFlight:
    uri: str
    manager: ocp.CheckpointManager


class JaxEngine(Engine[Any, _InFlight]):
    """The JAX part of :class:`JaxCheckpointer`: the state is a pytree handed in at each call;
    orbax copies it to host memory on the training thread and writes it in the background.

    Args:
        rank, world_size: this process in the job; with ``jax.distributed`` initialised they are
            ``jax.process_index()`` and ``process_count()``.

    Raises:
        CheckpointError: several processes are declared but ``jax.distributed`` is not initialised.
    """

    format = FORMAT_ORBAX
    reads = (FORMAT_ORBAX,)
    all_ranks_write = True  # every process writes its own shards and record
    needs_state = True  # a pytree is a value: a new one every step

    def __init__(self, rank: int = 0, world_size: int = 1) -> None:
        if jax.distributed.is_initialized():
            rank, world_size = jax.process_index(), jax.process_count()
        elif isinstance(world_size, int) and world_size > 1:
            raise CheckpointError(
                f"WORLD_SIZE={world_size} but jax.distributed is not initialised: call "
                "jax.distributed.initialize() before creating the JaxCheckpointer"
            )
        super().__init__(rank, world_size)
        self._inflight: _InFlight | None = None

    def agree(self, values: list[int]) -> list[int]:
        if self.world_size == 1:
            return values
        from jax.experimental import multihost_utils

        # int32 halves: without jax_enable_x64 an int64 would be truncated on the way.
        pairs = np.array([[v >> 31, v & (2**31 - 1)] for v in values], dtype=np.int32)
        every = np.asarray(multihost_utils.process_allgather(pairs)).reshape(-1, len(values), 2)
        return [max((int(hi) << 31) | int(lo) for hi, lo in every[:, i]) for i in range(len(values))]

    def meta(self) -> dict:
        return {
            "world_size": self.world_size,
            "jax": jax.__version__,
            "orbax": getattr(ocp, "__version__", ""),
            "devices": jax.device_count(),
            "platform": jax.default_backend(),
        }

    def close(self) -> None:
        inflight, self._inflight = self._inflight, None
        if inflight is not None:  # a save that failed before its write: let orbax stop
            with contextlib.suppress(Exception):  # the save's own error was raised already
                inflight.manager.close()

    # -- saving --

    def stage(self, state: Any, extra: dict, slot: Slot) -> _InFlight:
        # orbax copies the arrays to host memory before its save returns, blocking or not.
        record = {"extra": json_plain(extra, "extra"), "rng": host_rng_state()}
        # The record first: orbax's save starts with a barrier of every process, so all records
        # exist before any process can finish, and the chief commits only after that.
        slot.store.write_bytes(
            join(slot.uri, f"trainguard/process-{self.rank:05d}.json"), json.dumps(record).encode()
        )
        manager = ocp.CheckpointManager(
            slot.uri,
            options=ocp.CheckpointManagerOptions(
                create=True, save_root_metadata=False, enable_async_checkpointing=True
            ),
        )
        try:
            # Blocks while the arrays are copied to host memory; writes in the background.
            manager.save(slot.step, args=ocp.args.Composite(**{STATE_ITEM: ocp.args.PyTreeSave(state)}))
        except Exception as exc:
            manager.close()
            raise CheckpointError(
                f"checkpoint step {slot.step}: orbax cannot save this state: "
                f"{first_line(exc)}; the state must be a pytree of arrays and "
                "numbers"
            ) from exc
        self._inflight = _InFlight(slot.uri, manager)
        return self._inflight

    def payload(self, staged: _InFlight, slot: Slot) -> Sharded:
        return Sharded(lambda uri: self._finish(staged, uri))

    def _finish(self, inflight: _InFlight, uri: str) -> None:
        """On the saver thread: waits until orbax has written (every process) and finalised."""
        if uri.rstrip("/") != inflight.uri.rstrip("/"):
            raise RuntimeError(f"orbax wrote {inflight.uri}, trainguard commits {uri}")
        try:
            inflight.manager.wait_until_finished()
        except Exception as exc:
            if "no space left" in str(exc).lower():
                raise OSError(errno.ENOSPC, no_space_message(uri)) from exc
            raise
        finally:
            inflight.manager.close()
            if self._inflight is inflight:
                self._inflight = None

    # -- restore --

    def load(self, checkpoint: Checkpoint, target: Any, *, strict: bool, store: FileStore) -> Restored[Any]:
        step = checkpoint.step
        for name in (f"{step}/_CHECKPOINT_METADATA", f"{step}/{STATE_ITEM}/_METADATA"):
            if name not in checkpoint.files:
                raise CheckpointError(
                    f"{checkpoint.root}: no {name}: not an orbax checkpoint "
                    "written by JaxCheckpointer (or a torn one)"
                )
        saved_world, records = self._read_records(checkpoint, store)
        state = self._restore_state(checkpoint, target, strict)
        extra = self._apply_records(checkpoint, saved_world, records)
        return Restored(extra, state)

    def _restore_state(self, checkpoint: Checkpoint, target: Any, strict: bool) -> Any:
        path = join(checkpoint.root, str(checkpoint.step), STATE_ITEM)
        try:
            # The saved tree as orbax records it (tuples come back as lists): the restore item
            # must have its structure.
            layout = ocp.PyTreeCheckpointHandler().metadata(epath.Path(path)).tree
            saved = ocp.tree.to_flat_dict(layout)
        except Exception as exc:  # noqa: BLE001 - orbax raises many types on a damaged file
            raise CheckpointError(
                f"{path}: its orbax metadata cannot be read ({first_line(exc)}): damaged"
            ) from None
        leaves, treedef = jax.tree_util.tree_flatten_with_path(target)
        want = {ocp.utils.tuple_path_from_keypath(p): leaf for p, leaf in leaves}
        check_fit(path, saved, want, strict)

        def pick(keypath, _meta):
            key = ocp.utils.tuple_path_from_keypath(keypath)
            return want.get(key, ocp.PLACEHOLDER)  # PLACEHOLDER: not read

        item = jax.tree_util.tree_map_with_path(pick, layout)
        args = jax.tree.map(_restore_args, item, is_leaf=_is_placeholder)
        manager = ocp.CheckpointManager(
            checkpoint.root, options=ocp.CheckpointManagerOptions(create=False, save_root_metadata=False)
        )
        try:
            out = manager.restore(
                checkpoint.step,
                args=ocp.args.Composite(**{STATE_ITEM: ocp.args.PyTreeRestore(item=item, restore_args=args)}),
            )[STATE_ITEM]
        except Exception as exc:  # noqa: BLE001 - tensorstore/orbax errors of many types
            raise CheckpointError(f"{path}: cannot be restored into this state: {first_line(exc)}") from None
        finally:
            manager.close()
        got = ocp.tree.to_flat_dict(out)
        return jax.tree_util.tree_unflatten(
            treedef,
            [
                leaf if _is_placeholder(got.get(key, ocp.PLACEHOLDER)) else _placed(got[key], leaf)
                for key, leaf in want.items()
            ],
        )

    def _read_records(self, checkpoint: Checkpoint, store: FileStore) -> tuple[int, dict[int, dict]]:
        names = {int(m.group(1)): n for n in checkpoint.files if (m := _RECORD.match(n))}
        if not names:
            raise CheckpointError(
                f"{checkpoint.root}: no trainguard/process-NNNNN.json record: not written by JaxCheckpointer"
            )
        saved_world = checkpoint.meta.get("world_size")
        saved_world = saved_world if isinstance(saved_world, int) and saved_world > 0 else len(names)
        same = saved_world == self.world_size and self.rank in names
        records = {}
        for rank in [self.rank] if same else sorted(names):
            where = checkpoint.path(names[rank])
            if checkpoint.sizes.get(names[rank], 0) > _MAX_RECORD_BYTES:
                raise CheckpointError(
                    f"{where}: {checkpoint.sizes[names[rank]]} bytes: not a trainguard record"
                )
            try:
                data = json.loads(checkpoint.read(names[rank], store))
            except (ValueError, UnicodeDecodeError):
                raise CheckpointError(
                    f"{where}: not JSON: not a trainguard record (damaged or replaced)"
                ) from None
            if not isinstance(data, dict) or not isinstance(data.get("extra", {}), dict):
                raise CheckpointError(f"{where}: not a trainguard record (no 'extra' object)")
            data["rng"] = parse_rng_state(data.get("rng"), where)
            records[rank] = data
        return saved_world, records

    def _apply_records(self, checkpoint: Checkpoint, saved_world: int, records: dict[int, dict]) -> dict:
        mine = records.get(self.rank) if saved_world == self.world_size else None
        if mine is not None:
            set_host_rng_state(mine["rng"])
            return dict(mine.get("extra") or {})
        if self.rank == 0:
            note(
                f"{checkpoint.uri} was saved by {saved_world} process(es), this job has "
                f"{self.world_size}: arrays are resharded; Python/NumPy RNG states start from this "
                "run's seeds (the run goes on, not bit-identical to one without the change)"
            )
        extras = [records[r].get("extra") or {} for r in sorted(records)]
        if all(e == extras[0] for e in extras):
            return dict(extras[0])
        raise CheckpointError(
            f"{checkpoint.uri}: each of its {saved_world} processes saved a different data "
            f"position (extra), which cannot be mapped onto {self.world_size}: resume on "
            f"{saved_world} processes, or save a position that does not depend on the process"
        )


class JaxCheckpointer(Checkpointer[Any]):
    """Saves, restores and preempts a JAX training loop; the state is any pytree of arrays.

    Example (on Vertex, ``from_env`` reads the directory, ranks and history path)::

        >>> import tempfile, jax.numpy as jnp
        >>> from trainguard.runtime import JaxCheckpointer
        >>> ckpt = JaxCheckpointer(directory=tempfile.mkdtemp(), save=2)
        >>> start = ckpt.restore({"w": jnp.zeros(3)})  # the state as freshly initialised
        >>> state = start.state
        >>> for step in range(start.step + 1, 5):
        ...     state = {"w": state["w"] + 1.0}         # a train step: a new state each time
        ...     _ = ckpt.step(step, state=state, loss=float(state["w"].sum()), extra={"batch": step})
        >>> ckpt.close()
        >>> [c.step for c in ckpt.manager.checkpoints()]
        [2, 4]
        >>> JaxCheckpointer(directory=ckpt.directory).restore({"w": jnp.zeros(3)}).state["w"].tolist()
        [4.0, 4.0, 4.0]

    ``step()`` takes the new state every step (JAX arrays are immutable, and a jitted step may
    donate the old buffers); on SIGTERM it saves and exits (143). ``extra`` is saved as JSON.
    Python's and NumPy's global RNG states are saved per process and restored; JAX keys belong in
    the state.

    Args:
        directory: see :class:`Checkpointer` (default ``$AIP_CHECKPOINT_DIR``); a relative path is
            made absolute (orbax takes absolute paths only).
        rank, world_size: this process in the job (with ``jax.distributed`` initialised, they are
            ``jax.process_index()``/``process_count()``).
        **options: :class:`Checkpointer` options (``save``, ``retention``, ``async_save``,
            ``history``, ``log_every``, ``exit_on_preemption``, ``store``, …).
    """

    engine: JaxEngine

    def __init__(
        self,
        directory: str | None = None,
        *,
        rank: int = 0,
        world_size: int = 1,
        save: SavePolicy | int | None = None,
        retention: RetentionPolicy | None = None,
        **options: Any,
    ) -> None:
        engine = JaxEngine(rank, world_size)
        directory = directory or os.environ.get("AIP_CHECKPOINT_DIR") or None
        if directory is not None and not directory.startswith("gs://"):
            # orbax takes absolute paths only ("Checkpoint path should be absolute"); a relative
            # AIP_CHECKPOINT_DIR or --output-dir is relative to where the job started.
            directory = os.path.abspath(directory)
        super().__init__(engine, directory, save=save, retention=retention, **options)
        emulator = os.environ.get("STORAGE_EMULATOR_HOST")
        if emulator and self.directory.startswith("gs://"):
            # One endpoint override for all storage (DESIGN.md): orbax's array writer, tensorstore,
            # has its own variable; the rest (google-cloud-storage, gcsfs) read this one.
            os.environ.setdefault("TENSORSTORE_GCS_HTTP_URL", emulator)

    @classmethod
    def from_env(
        cls,
        *,
        environ: Mapping[str, str] | None = None,
        default_base: str = "./trainguard-output",
        **kwargs: Any,
    ) -> JaxCheckpointer:
        """A checkpointer configured by Vertex's environment contract (``AIP_CHECKPOINT_DIR``,
        ``TRAINGUARD_HISTORY``, ``RANK``, ``WORLD_SIZE``); ``kwargs`` override."""
        return cls(**{**cls.env_kwargs(environ, default_base), **kwargs})


def _is_placeholder(value) -> bool:
    return value is ocp.PLACEHOLDER


def _floating(leaf) -> bool:
    """True for a target leaf not placed on devices on purpose: a jax.Array JAX may still move
    (``committed`` False: made by ``jnp.zeros``, ``PRNGKey``), or a ``ShapeDtypeStruct`` without a
    sharding. It is restored the same way (read to host memory, then ``jnp.asarray``): committing
    it to one device would clash with sharded arrays in the next jitted step."""
    if isinstance(leaf, jax.Array):
        return not leaf.committed
    return isinstance(leaf, jax.ShapeDtypeStruct) and leaf.sharding is None


def _restore_args(leaf):
    if _is_placeholder(leaf):
        return leaf
    if _floating(leaf):
        return ocp.RestoreArgs(restore_type=np.ndarray, dtype=leaf.dtype)
    return ocp.checkpoint_utils.construct_restore_args(leaf)


def _placed(restored, target):
    """The restored leaf as the target had it (see ``_floating``)."""
    return jax.numpy.asarray(restored) if _floating(target) else restored


def _shape(value) -> tuple[int, ...]:
    shape = getattr(value, "shape", None)
    return tuple(shape) if shape is not None else np.shape(value)


def _dtype(value):
    dtype = getattr(value, "dtype", None)
    return np.dtype(dtype) if dtype is not None else None


def _named(keys) -> str:
    shown = ", ".join("/".join(k) for k in keys[:_SHOWN])
    return shown + (f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else "")


def _listed(problems: list[str]) -> str:
    more = f"; and {len(problems) - _SHOWN} more" if len(problems) > _SHOWN else ""
    return "; ".join(problems[:_SHOWN]) + more


def check_fit(where: str, saved: Mapping[tuple, Any], want: Mapping[tuple, Any], strict: bool) -> None:
    """Raises one CheckpointError when the saved arrays cannot be restored into ``want``.

    Args:
        where: the checkpoint path, for the message.
        saved: key path → orbax metadata of the saved leaves.
        want: key path → the target's leaves (arrays, ``ShapeDtypeStruct``, numbers).
        strict: target leaves missing from the checkpoint are an error (else they stay as given).
    """
    missing = [k for k in want if k not in saved]
    if missing and strict:
        raise CheckpointError(
            f"{where}: holds no {_named(missing)} ({len(missing)} of the {len(want)} arrays of "
            "this training state), e.g. no optimizer state: it was saved from another state. "
            "Resume with the setup that saved it, or restore(target, strict=False) to keep those "
            "as given"
        )
    shapes, dtypes, layouts = [], [], []
    for key, leaf in want.items():
        if key not in saved:
            continue
        have, need = _shape(saved[key]), _shape(leaf)
        if have != need:
            shapes.append(f"{'/'.join(key)} is {have} in the checkpoint, {need} here")
            continue
        a, b = _dtype(saved[key]), _dtype(leaf)
        if strict and a is not None and b is not None and a != b:
            dtypes.append(f"{'/'.join(key)} is {a} in the checkpoint, {b} here")
        sharding = getattr(leaf, "sharding", None)
        if sharding is not None:
            try:
                sharding.shard_shape(need)
            except Exception as exc:  # noqa: BLE001 - jax raises IndivisibleError/ValueError
                layouts.append(f"{'/'.join(key)} {need}: {first_line(exc)}")
    if shapes:
        raise CheckpointError(
            f"{where}: does not fit this state ({len(shapes)} array(s) differ in "
            f"shape): {_listed(shapes)}: resume with the model that saved it"
        )
    if dtypes:
        raise CheckpointError(
            f"{where}: other dtypes ({len(dtypes)} array(s)): {_listed(dtypes)}: "
            "resume with the setup that saved it, or restore(target, "
            "strict=False) to cast"
        )
    if layouts:
        raise CheckpointError(
            f"{where}: cannot be placed with the target's shardings on this job's "
            f"{jax.device_count()} device(s): {_listed(layouts)}. Give the target "
            "shardings over a mesh whose axes divide these shapes"
        )


def json_plain(obj, where: str = "extra"):
    """A JSON-ready copy of ``obj`` (NumPy/JAX scalars become numbers, tuples lists).

    Raises:
        CheckpointError: ``obj`` holds something JSON cannot carry back as it was.
    """
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, Mapping):
        for key in obj:
            if not isinstance(key, str):
                raise CheckpointError(
                    f"{where}: key {key!r} is not a string (the data position "
                    "is saved as JSON, whose keys are strings)"
                )
        return {k: json_plain(v, f"{where}[{k!r}]") for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_plain(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, np.generic) or (hasattr(obj, "shape") and hasattr(obj, "item") and _shape(obj) == ()):
        return obj.item()
    raise CheckpointError(
        f"{where} holds a {type(obj).__module__}.{type(obj).__qualname__}: the data position "
        "(extra) is saved as JSON: use dict, list, str, int, float, bool and None, and put arrays "
        "in the state"
    )


def host_rng_state() -> dict:
    """Python's and NumPy's global RNG states, as JSON."""
    version, internal, gauss = random.getstate()
    # legacy=True (the default) returns the tuple form, as NumPy documents it.
    legacy = cast("tuple[str, np.ndarray, int, int, float]", np.random.get_state(legacy=True))
    kind, keys, pos, has_gauss, cached = legacy
    return {
        "python": [version, list(internal), gauss],
        "numpy": [str(kind), keys.tolist(), int(pos), int(has_gauss), float(cached)],
    }


def parse_rng_state(data, where: str) -> dict:
    """Checks a saved ``host_rng_state`` by loading it into scratch generators; returns the
    states ready to set (nothing global changes here)."""
    if data is None:
        return {}
    try:
        version, internal, gauss = data["python"]
        python = (int(version), tuple(int(v) for v in internal), None if gauss is None else float(gauss))
        random.Random().setstate(python)
        kind, keys, pos, has_gauss, cached = data["numpy"]
        numpy = (str(kind), np.asarray(keys, dtype=np.uint32), int(pos), int(has_gauss), float(cached))
        np.random.RandomState().set_state(numpy)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise CheckpointError(
            f"{where}: its RNG states are not trainguard's ({type(exc).__name__}: {str(exc)[:120]})"
        ) from None
    return {"python": python, "numpy": numpy}


def set_host_rng_state(parsed: Mapping) -> None:
    """Sets what ``parse_rng_state`` checked."""
    if parsed.get("python") is not None:
        random.setstate(parsed["python"])
    if parsed.get("numpy") is not None:
        np.random.set_state(parsed["numpy"])


def first_line(exc: BaseException) -> str:
    """The first informative line of an error (orbax/tensorstore messages run long)."""
    for line in str(exc).strip().splitlines():
        line = line.strip()
        if line and not line.startswith(("Traceback", "File ")):
            return line[:400]
    return type(exc).__name__
