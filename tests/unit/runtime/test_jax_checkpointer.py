"""JaxCheckpointer on 8 fake CPU devices: a sharded loop resumes bit-identically (SIGTERM, SIGKILL
mid-save), restores reshard onto fewer devices, and bad checkpoints get one clear CheckpointError
that leaves the newest complete checkpoint as it was."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import random
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

# Before jax creates its CPU backend (at first use, after collection): 8 devices to shard over.
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    ).strip()

jax = pytest.importorskip("jax")
optax = pytest.importorskip("optax")
pytest.importorskip("orbax.checkpoint")

import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from tests.child_env import with_repo_on_path  # noqa: E402
from trainguard.errors import CheckpointError  # noqa: E402
from trainguard.runtime import RetentionPolicy, read_history_records  # noqa: E402
from trainguard.runtime.checkpoint import COMMIT_MARKER  # noqa: E402
from trainguard.runtime.jax_checkpointer import JaxCheckpointer  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
KILL_CHILD = Path(__file__).with_name("jax_kill_child.py")


@pytest.fixture(autouse=True)
def eight_devices():
    assert jax.device_count() >= 8, (
        "these tests need 8 CPU devices: jax was initialised before this module set XLA_FLAGS; "
        "run with XLA_FLAGS=--xla_force_host_platform_device_count=8"
    )


@functools.cache
def mesh() -> Mesh:
    return Mesh(np.array(jax.devices()[:8]), ("x",))


def shardings(state):
    def spec(a):
        if a.ndim == 2:
            return P(None, "x") if a.shape[1] % 8 == 0 else P("x", None)
        return P("x") if a.ndim == 1 and a.shape[0] % 8 == 0 else P()

    return jax.tree.map(lambda a: NamedSharding(mesh(), spec(a)), state)


def setup(seed=0, hidden=16, optimizer=True):
    """A two-layer model, its Adam state and a dropout key, sharded over the 8 devices."""
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    params = {
        "w1": jax.random.normal(k1, (8, hidden)),
        "b1": jnp.zeros(hidden),
        "w2": jax.random.normal(k2, (hidden, 2)),
        "b2": jnp.zeros(2),
    }
    state = {"params": params, "key": jax.random.PRNGKey(seed + 1)}
    if optimizer:
        state["opt_state"] = optax.adam(0.01).init(params)
    return jax.device_put(state, shardings(state))


@functools.cache
def train_step():
    opt = optax.adam(0.01)

    def step(state, x):
        key, sub = jax.random.split(state["key"])

        def loss_fn(p):
            h = jax.nn.relu(x @ p["w1"] + p["b1"])
            h = jnp.where(jax.random.bernoulli(sub, 0.7, h.shape), h / 0.7, 0.0)  # dropout
            return jnp.mean((h @ p["w2"] + p["b2"]) ** 2)

        loss, grads = jax.value_and_grad(loss_fn)(state["params"])
        updates, opt_state = opt.update(grads, state["opt_state"], state["params"])
        return {
            "params": optax.apply_updates(state["params"], updates),
            "key": key,
            "opt_state": opt_state,
        }, loss

    state = setup()
    return jax.jit(step, out_shardings=(shardings(state), NamedSharding(mesh(), P())), donate_argnums=0)


def train(directory, steps=12, stop_at=None, history=None, **kwargs):
    """Trains ``steps`` steps under a JaxCheckpointer; with ``stop_at``, a SIGTERM arrives at that
    step (the run saves and stops: returns None). Inputs come from Python's and NumPy's global
    RNGs, so they too must resume where they were."""
    state = setup(seed=123)  # a fresh process: other weights until restored
    ckpt = JaxCheckpointer(
        directory=str(directory), history=history, exit_on_preemption=False, **{"save": 5, **kwargs}
    )
    start = ckpt.restore(state)
    state = start.state
    if not start.resumed:
        state = setup(seed=0)
        random.seed(0)
        np.random.seed(0)
    for step in range(start.step + 1, steps + 1):
        x = jnp.asarray(np.random.rand(16, 8) + random.random(), jnp.float32)
        state, loss = train_step()(state, x)
        if step == stop_at:
            os.kill(os.getpid(), signal.SIGTERM)
        val = {"loss": float(loss) * 2} if step % 4 == 0 else None
        if not ckpt.step(step, loss=loss, state=state, extra={"seen": step}, val=val):
            return None
    ckpt.close()
    return state


def leaves(state) -> list[bytes]:
    return [np.asarray(leaf).tobytes() for leaf in jax.tree.leaves(state)]


def files(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` with a digest of its bytes (to see that nothing changed)."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.mark.slow
@pytest.mark.parametrize("async_save", [True, False])
def test_a_preempted_sharded_loop_resumes_bit_identical(tmp_path, async_save):
    expected = train(tmp_path / "a", history=str(tmp_path / "a.jsonl"))
    assert train(tmp_path / "b", stop_at=7, async_save=async_save, history=str(tmp_path / "b.jsonl")) is None
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back after the save
    got = train(tmp_path / "b", async_save=async_save, history=str(tmp_path / "b.jsonl"))
    assert leaves(got) == leaves(expected)
    # Restored onto the target's shardings: w1 stays split over the 8 devices.
    assert got["params"]["w1"].sharding.spec == P(None, "x")
    assert len(got["params"]["w1"].sharding.device_set) == 8

    def rows(name):
        return [
            (r["step"], r["split"], r["metrics"]) for r in read_history_records((tmp_path / name).read_text())
        ]

    assert rows("b.jsonl") == rows("a.jsonl")


def test_sigterm_saves_then_exits_143(tmp_path):
    ckpt = JaxCheckpointer(directory=str(tmp_path), save=1000)
    ckpt.restore(setup())
    os.kill(os.getpid(), signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped:
        ckpt.step(3, loss=1.0, state=setup(seed=5), extra={"batch": 3})
    assert stopped.value.code == 143
    found = ckpt.manager.checkpoints()[-1]
    assert found.step == 3 and found.format == "orbax"
    start = JaxCheckpointer(directory=str(tmp_path)).restore(setup())
    assert start.extra == {"batch": 3} and leaves(start.state) == leaves(setup(seed=5))


def test_the_layout_is_an_orbax_step_inside_a_committed_attempt(tmp_path):
    train(tmp_path, steps=5)
    commit = json.loads((tmp_path / "step-000000005" / COMMIT_MARKER).read_text())
    assert commit["format"] == "orbax" and commit["devices"] >= 8
    attempt = tmp_path / "step-000000005" / commit["dir"]
    assert (attempt / "5" / "_CHECKPOINT_METADATA").is_file()
    assert (attempt / "trainguard" / "process-00000.json").is_file()
    assert sorted(commit["files"]) == sorted(files(attempt))  # COMMIT names every file written


def test_the_best_checkpoint_by_val_loss_is_kept_with_its_metric(tmp_path):
    train(tmp_path, steps=12, retention=RetentionPolicy(keep_last=1, keep_best=1))
    kept = JaxCheckpointer(directory=str(tmp_path)).manager.checkpoints()
    scored = [c for c in kept if "val_loss" in c.metrics]
    assert kept[-1].step == 12 and scored
    assert all(c.step % 4 == 0 for c in scored)  # saved at each validation (4, 8, 12)


RESHARD = textwrap.dedent("""
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import jax, jax.numpy as jnp, numpy as np, optax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    from trainguard.runtime.jax_checkpointer import JaxCheckpointer
    params = {"w1": jnp.zeros((8, 16)), "b1": jnp.zeros(16), "w2": jnp.zeros((16, 2)),
              "b2": jnp.zeros(2)}
    state = {"params": params, "key": jax.random.PRNGKey(0), "opt_state": optax.adam(0.01).init(params)}
    for devices in (jax.devices(), jax.devices()[:1]):
        mesh = Mesh(np.array(devices), ("x",))
        spec = lambda a: P(None, "x") if a.ndim == 2 and a.shape[1] % len(devices) == 0 else P()
        target = jax.tree.map(lambda a: jax.device_put(a, NamedSharding(mesh, spec(a))), state)
        start = JaxCheckpointer(directory=sys.argv[1]).restore(target)
        w1 = start.state["params"]["w1"]
        print(len(w1.sharding.device_set), start.step, start.extra["seen"],
              b"".join(np.asarray(l).tobytes() for l in jax.tree.leaves(start.state)).hex())
""")


def test_a_state_saved_over_8_devices_restores_onto_4_and_onto_1(tmp_path):
    saved = train(tmp_path, steps=10)
    result = subprocess.run(
        [sys.executable, "-c", RESHARD, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=with_repo_on_path(),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line.split() for line in result.stdout.splitlines()]
    expected = b"".join(leaves(saved)).hex()
    assert [(d, s, e) for d, s, e, _ in lines] == [("4", "10", "10"), ("1", "10", "10")]
    assert all(data == expected for *_, data in lines)


def test_a_sharding_that_cannot_be_restored_is_refused_and_nothing_changes(tmp_path):
    train(tmp_path, steps=5)
    before = files(tmp_path)
    three = Mesh(np.array(jax.devices()[:3]), ("x",))
    target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), setup())
    target["params"]["w1"] = jax.ShapeDtypeStruct(
        (8, 16), jnp.float32, sharding=NamedSharding(three, P(None, "x"))
    )
    with pytest.raises(CheckpointError) as refused:
        JaxCheckpointer(directory=str(tmp_path)).restore(target)
    message = str(refused.value)
    assert "cannot be placed with the target's shardings" in message
    assert "params/w1 (8, 16)" in message and "No intact checkpoint precedes it" in message
    assert files(tmp_path) == before


def test_a_checkpoint_without_optimizer_state_needs_strict_false(tmp_path):
    ckpt = JaxCheckpointer(directory=str(tmp_path), save=1)
    ckpt.restore(setup(optimizer=False))
    ckpt.step(1, loss=1.0, state=setup(seed=4, optimizer=False))
    ckpt.close()
    with pytest.raises(CheckpointError, match=r"holds no opt_state/.*strict=False"):
        JaxCheckpointer(directory=str(tmp_path)).restore(setup())
    target = setup(seed=9)
    start = JaxCheckpointer(directory=str(tmp_path)).restore(target, strict=False)
    assert leaves(start.state["params"]) == leaves(setup(seed=4)["params"])
    assert leaves(start.state["opt_state"]) == leaves(target["opt_state"])  # kept as given


def test_a_checkpoint_of_another_model_does_not_fit(tmp_path):
    train(tmp_path, steps=5)
    with pytest.raises(
        CheckpointError,
        match=r"does not fit this state \(9 array\(s\) differ in "
        r"shape\): .*/b1 is \(16,\) in the checkpoint, "
        r"\(32,\) here.*and 5 more",
    ):
        JaxCheckpointer(directory=str(tmp_path)).restore(setup(hidden=32))


def make_orbax_checkpoint(directory: Path) -> None:
    import orbax.checkpoint as ocp

    with ocp.CheckpointManager(directory) as manager:
        manager.save(100, args=ocp.args.StandardSave({"w": jnp.ones(4)}))


@pytest.mark.parametrize(
    ("make", "what"),
    [
        (make_orbax_checkpoint, "an orbax \\(JAX\\) checkpoint \\(100/"),
        (lambda d: (d / "model.pt").write_bytes(b"x"), "a model file saved outside trainguard"),
        (
            lambda d: (d / "dcp").mkdir() or (d / "dcp" / ".metadata").write_bytes(b"x"),
            "a torch.distributed.checkpoint \\(DCP\\) checkpoint \\(dcp/.metadata\\)",
        ),
    ],
)
def test_another_frameworks_checkpoint_in_the_directory_is_refused(tmp_path, make, what):
    make(tmp_path)
    before = files(tmp_path)
    with pytest.raises(CheckpointError, match=f"holds {what}.*no trainguard checkpoint"):
        JaxCheckpointer(directory=str(tmp_path)).restore(setup())
    assert files(tmp_path) == before


def test_torch_and_jax_refuse_each_others_checkpoints(tmp_path):
    torch = pytest.importorskip("torch")
    from trainguard.runtime import TorchCheckpointer

    ckpt = TorchCheckpointer(torch.nn.Linear(2, 2), directory=str(tmp_path / "torch"), save=1)
    ckpt.step(1)
    ckpt.close()
    with pytest.raises(CheckpointError, match=r"saved by another checkpointer \(format 'torch'\)"):
        JaxCheckpointer(directory=str(tmp_path / "torch")).restore(setup())
    train(tmp_path / "jax", steps=5)
    with pytest.raises(CheckpointError, match=r"saved by another checkpointer \(format 'orbax'\)"):
        TorchCheckpointer(torch.nn.Linear(2, 2), directory=str(tmp_path / "jax")).restore()


def test_a_torn_save_is_ignored_and_removed_by_the_next_save(tmp_path):
    train(tmp_path, steps=5)
    # What a kill mid-save leaves: a whole orbax step in an attempt that no COMMIT names.
    done = next((tmp_path / "step-000000005").glob("a-*"))
    torn = tmp_path / "step-000000010" / "a-00000000beef"
    shutil.copytree(done, torn)
    start = JaxCheckpointer(directory=str(tmp_path)).restore(setup())
    assert start.step == 5 and start.extra == {"seen": 5}
    train(tmp_path, steps=7, save=1)
    assert not (tmp_path / "step-000000010").exists()


def test_a_torn_newest_checkpoint_is_refused_and_the_previous_still_restores(tmp_path):
    train(tmp_path, steps=10)
    data = max((tmp_path / "step-000000010").rglob("ocdbt.process_0/d/*"), key=lambda p: p.stat().st_size)
    data.write_bytes(data.read_bytes()[:-7])  # torn: shorter than COMMIT says
    before = files(tmp_path)
    with pytest.raises(CheckpointError) as refused:
        JaxCheckpointer(directory=str(tmp_path)).restore(setup())
    assert "is damaged" in str(refused.value) and "To resume from step 5" in str(refused.value)
    start = JaxCheckpointer(directory=str(tmp_path)).restore(setup(), step=5)
    assert start.step == 5 and start.extra == {"seen": 5}
    assert files(tmp_path) == before


def plant(path: Path, data: bytes) -> None:
    """Replaces a committed file and fixes its COMMIT, as someone with write access could."""
    path.write_bytes(data)
    step_dir = next(p for p in path.parents if p.name.startswith("step-"))
    commit = step_dir / COMMIT_MARKER
    meta = json.loads(commit.read_text())
    name = str(path.relative_to(step_dir / meta["dir"]))
    meta["sizes"][name] = len(data)
    commit.write_text(json.dumps(meta))


class Planted:
    def __reduce__(self):
        return (os.system, ("touch planted-ran",))


def test_a_crafted_record_is_refused_without_running_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    train(tmp_path / "ck", steps=10)
    record = next((tmp_path / "ck" / "step-000000010").rglob("process-00000.json"))
    plant(record, pickle.dumps(Planted()))
    with pytest.raises(CheckpointError, match=r"process-00000.json: not JSON.*To resume from step 5"):
        JaxCheckpointer(directory=str(tmp_path / "ck")).restore(setup())
    assert not (tmp_path / "planted-ran").exists()


def test_damaged_orbax_metadata_is_refused(tmp_path):
    train(tmp_path, steps=10)
    metadata = next((tmp_path / "step-000000010").rglob("state/_METADATA"))
    metadata.write_bytes(b"{" * metadata.stat().st_size)  # same size: only the content lies
    with pytest.raises(CheckpointError, match=r"_METADATA|metadata cannot be read"):
        JaxCheckpointer(directory=str(tmp_path)).restore(setup())


def test_a_position_that_is_not_json_is_refused_before_anything_is_written(tmp_path):
    train(tmp_path, steps=5)
    before = files(tmp_path)
    ckpt = JaxCheckpointer(directory=str(tmp_path), save=1)
    start = ckpt.restore(setup())
    with pytest.raises(CheckpointError, match=r"extra\['sampler'\] holds a .*saved as JSON"):
        ckpt.step(6, state=start.state, extra={"sampler": object()})
    ckpt.close()
    assert files(tmp_path) == before


def test_numpy_and_jax_scalars_in_the_position_come_back_as_numbers(tmp_path):
    ckpt = JaxCheckpointer(directory=str(tmp_path), save=1)
    ckpt.step(1, state=setup(), extra={"epoch": np.int64(2), "seen": jnp.int32(7), "at": (1, 2)})
    ckpt.close()
    extra = JaxCheckpointer(directory=str(tmp_path)).restore(setup()).extra
    assert extra == {"epoch": 2, "seen": 7, "at": [1, 2]}


def test_importing_the_runtime_does_not_import_jax():
    code = (
        "import sys, trainguard.runtime; "
        "assert not {'jax', 'orbax', 'torch'} & set(sys.modules), sys.modules.keys()"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        cwd=ROOT,
        timeout=120,
        env=with_repo_on_path(),
    )


def kill_once(directory: str, async_save: bool, delay: float) -> tuple[int, int | None]:
    """Starts the kill child, SIGKILLs it ``delay`` s after it is ready; returns (the step it had
    restored, the last step it announced committed)."""
    proc = subprocess.Popen(
        [sys.executable, str(KILL_CHILD), directory, "1" if async_save else "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=with_repo_on_path(),
    )
    lines: list[str] = []
    ready = threading.Event()

    def pump():
        for line in proc.stdout:
            lines.append(line.split())
            if line.startswith("ready"):
                ready.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    if not ready.wait(180):
        proc.kill()
        raise AssertionError(f"the child never got ready: {proc.stderr.read()[-3000:]}")
    time.sleep(delay)
    proc.kill()
    proc.wait()
    reader.join(10)
    done = [int(w[1]) for w in lines if w[0] == "done"]
    restored = next(int(w[1]) for w in lines if w[0] == "ready")
    return restored, (done[-1] if done else None)


def kill_loop(directory: str, kills: int, seed: int, async_save: bool) -> list[tuple]:
    """SIGKILLs at random moments (mid-save included); after each, the newest complete
    checkpoint is at least the last one announced, and the next child restores and checks it."""
    rng = random.Random(seed)
    seen: list[tuple] = []
    committed = 0  # the newest step a run announced committed
    for _ in range(kills):
        restored, done = kill_once(directory, async_save, rng.uniform(0.0, 1.0))
        seen.append((restored, done))
        # This run restored (and checked, in the child) at least what the previous one committed.
        assert restored >= committed, seen
        committed = max(committed, restored, done or 0)
        latest = JaxCheckpointer(directory=directory).manager.checkpoints()
        assert committed == 0 or (latest and latest[-1].step >= committed), seen
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("async_save", [True, False])
def test_sigkill_mid_save_never_loses_the_newest_complete_checkpoint(tmp_path, async_save):
    seen = kill_loop(str(tmp_path / "ck"), kills=3, seed=int(async_save), async_save=async_save)
    assert seen[-1][0] > 0, seen  # the kills landed among saves


@pytest.mark.long
@pytest.mark.parametrize("async_save", [True, False])
def test_many_sigkills_mid_save(tmp_path, async_save):
    kill_loop(str(tmp_path / "ck"), kills=15, seed=11, async_save=async_save)


def test_corrupted_array_data_is_refused(tmp_path):
    train(tmp_path, steps=10)
    for data in (tmp_path / "step-000000010").rglob("state/d/*"):  # the merged OCDBT data
        flipped = bytearray(data.read_bytes())
        flipped[len(flipped) // 2] ^= 0xFF  # same size: only OCDBT's checksums can tell
        data.write_bytes(bytes(flipped))
    with pytest.raises(
        CheckpointError,
        match=r"step-000000010.*(checksum|cannot be).*To resume from "
        r"step 5",
    ):
        JaxCheckpointer(directory=str(tmp_path)).restore(setup())


FULL_DISK = textwrap.dedent("""
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    import jax
    from trainguard.errors import CheckpointError
    from trainguard.runtime import RetentionPolicy
    from trainguard.runtime.jax_checkpointer import JaxCheckpointer
    state = {"w": jax.random.normal(jax.random.PRNGKey(0), (300, 1000))}  # 1.2 MB
    ckpt = JaxCheckpointer(directory=sys.argv[1], save=1, retention=RetentionPolicy(keep_last=1))
    ckpt.step(1, state=state)                         # fits on the 2 MB disk
    ckpt.wait()
    try:
        ckpt.step(2, state=state)                     # needs a second copy: does not fit
        ckpt.wait()
    except CheckpointError as exc:
        print("ERROR", exc)
    print("LATEST", JaxCheckpointer(directory=sys.argv[1]).restore(state).step)
""")


def test_a_full_disk_says_so_and_keeps_the_previous_checkpoint(tmp_path):
    if not shutil.which("unshare"):
        pytest.skip("needs unshare (util-linux) to mount a small tmpfs without root")
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("user namespaces are not available here")
    disk = tmp_path / "disk"
    disk.mkdir()
    result = subprocess.run(
        [
            "unshare",
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            'mount -t tmpfs -o size=2m tmpfs "$1" && exec "$2" -c "$3" "$1"',
            "sh",
            str(disk),
            sys.executable,
            FULL_DISK,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=with_repo_on_path(),
    )
    assert "ERROR checkpoint step 2: no space left on " + str(disk) in result.stdout, result.stderr
    assert "LATEST 1" in result.stdout, result.stdout + result.stderr[-3000:]


MULTIPROCESS = Path(__file__).with_name("jax_multiprocess.py")


def job(directory: Path, world: int, devices: int, mode: str) -> list[dict]:
    """Runs ``jax_multiprocess.py`` as a ``world``-process JAX job; each process's RESULT."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(MULTIPROCESS),
                str(directory),
                str(rank),
                str(world),
                str(port),
                str(devices),
                mode,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=with_repo_on_path(),
        )
        for rank in range(world)
    ]
    results = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(next(line[7:] for line in out.splitlines() if line.startswith("RESULT "))))
    return results


@pytest.mark.slow
def test_two_processes_write_their_shards_and_resume_on_two_or_on_one(tmp_path):
    saved = job(tmp_path, world=2, devices=4, mode="save")
    assert [r["world"] for r in saved] == [2, 2]
    commit = json.loads((tmp_path / "step-000000004" / COMMIT_MARKER).read_text())
    assert commit["world_size"] == 2 and commit["devices"] == 8
    # Each process wrote its own shards and record; COMMIT (one, by process 0) names them all.
    for name in (
        "4/state/ocdbt.process_0/manifest.ocdbt",
        "4/state/ocdbt.process_1/manifest.ocdbt",
        "trainguard/process-00000.json",
        "trainguard/process-00001.json",
    ):
        assert name in commit["files"], commit["files"]
    same = job(tmp_path, world=2, devices=4, mode="restore")
    for result, before in zip(same, saved, strict=True):
        assert result["step"] == 4 and result["extra"] == {"step": 4}
        assert result["shards"] == result["expected"]
        assert result["next_draw"] == before["draw"]  # each process's NumPy RNG resumed
    one = job(tmp_path, world=1, devices=8, mode="restore")[0]
    assert one["step"] == 4 and one["extra"] == {"step": 4} and one["shards"] == one["expected"]


@pytest.mark.parametrize(
    "how", ["relative AIP_CHECKPOINT_DIR", "no AIP_CHECKPOINT_DIR", "relative directory="]
)
def test_a_relative_or_missing_checkpoint_directory_saves_under_the_working_directory(
    tmp_path, monkeypatch, how
):
    # orbax refuses relative paths ("Checkpoint path should be absolute"): the README's commands
    # with a relative --output-dir, and a script run with no AIP_CHECKPOINT_DIR, must still save.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AIP_CHECKPOINT_DIR", raising=False)
    monkeypatch.delenv("TRAINGUARD_HISTORY", raising=False)
    if how == "relative AIP_CHECKPOINT_DIR":
        monkeypatch.setenv("AIP_CHECKPOINT_DIR", "out/checkpoints/")
        ckpt, where = JaxCheckpointer.from_env(save=1), tmp_path / "out" / "checkpoints"
    elif how == "no AIP_CHECKPOINT_DIR":
        ckpt, where = JaxCheckpointer.from_env(save=1), tmp_path / "trainguard-output" / "checkpoints"
    else:
        ckpt, where = JaxCheckpointer(directory="rel/ckpt", save=1), tmp_path / "rel" / "ckpt"
    ckpt.restore(setup())
    ckpt.step(1, loss=1.0, state=setup(seed=3))
    ckpt.close()
    assert ckpt.directory == str(where)
    assert (where / "step-000000001" / COMMIT_MARKER).is_file()
