"""The local backend: Vertex's environment contract, failures in Vertex's words, preemption."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from trainguard.durations import parse_durations
from trainguard.errors import ConfigError
from trainguard.launch.base import RunningJob, Stop
from trainguard.launch.local import LocalBackend
from trainguard.spec import JobSpec, parse_spec


def script(tmp_path, body: str, name: str = "job.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def gone_within(pid: int, seconds: float = 10) -> bool:
    """``pid`` is gone within ``seconds``: an orphaned process is reaped by init, not by us."""
    deadline = time.monotonic() + seconds
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return gone(pid)


def launcher(tmp_path, worker: str, replicas: int = 1) -> str:
    """A script that runs ``python worker`` with the local backend and prints the job's state."""
    return script(
        tmp_path,
        name="launcher.py",
        body=f"""
        from trainguard.launch.local import LocalBackend
        from trainguard.spec import JobSpec
        spec = JobSpec.create("my-project", "us-central1", machine_type="n1-standard-4",
                              image_uri="i", command=["python", {worker!r}], replica_count={replicas},
                              base_output_dir={str(tmp_path / "b")!r})
        result = LocalBackend(grace_s=2).run(spec)
        print("STATE", result.state)
    """,
    )


def spec(command, base, replicas=1, **kw):
    return JobSpec.create(
        "my-project",
        "us-central1",
        machine_type="n1-standard-4",
        image_uri="img",
        command=command,
        base_output_dir=base,
        replica_count=replicas,
        **kw,
    )


def test_the_environment_contract_is_set(tmp_path):
    dump = script(
        tmp_path,
        """
        import json, os, sys
        keys = ["AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR", "CLUSTER_SPEC",
                "TF_CONFIG", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "TRAINGUARD_HISTORY"]
        rank = os.environ["RANK"]
        open(os.path.join(os.environ["OUT"], f"env-{rank}.json"), "w").write(
            json.dumps({k: os.environ.get(k) for k in keys}))
    """,
    )
    base = str(tmp_path / "base")
    job = spec(["python", dump], base, replicas=3)
    result = LocalBackend(extra_env={"OUT": str(tmp_path)}).run(job)
    assert result.succeeded, result.log_tail
    envs = [json.loads((tmp_path / f"env-{r}.json").read_text()) for r in range(3)]
    assert envs[0]["AIP_MODEL_DIR"] == f"{base}/model/"
    assert envs[0]["AIP_CHECKPOINT_DIR"] == f"{base}/checkpoints/"
    assert envs[0]["AIP_TENSORBOARD_LOG_DIR"] == f"{base}/logs/"
    assert envs[0]["TRAINGUARD_HISTORY"] == f"{base}/history.jsonl"
    assert {e["WORLD_SIZE"] for e in envs} == {"3"}
    assert sorted(e["RANK"] for e in envs) == ["0", "1", "2"]
    assert len({e["MASTER_PORT"] for e in envs}) == 1
    cluster = json.loads(envs[1]["CLUSTER_SPEC"])
    assert len(cluster["cluster"]["workerpool0"]) == 1 and len(cluster["cluster"]["workerpool1"]) == 2
    assert cluster["task"] == {"type": "workerpool1", "index": 0, "trial": ""}
    tf = json.loads(envs[0]["TF_CONFIG"])
    assert tf["task"] == {"type": "chief", "index": 0} and len(tf["cluster"]["worker"]) == 2


def test_failure_is_reported_in_vertex_words_with_the_log_tail(tmp_path):
    bad = script(tmp_path, "import nonexistent_package_xyz\n")
    result = LocalBackend().run(spec(["python", bad], str(tmp_path / "b")))
    assert result.state == "FAILED"
    assert result.error == "The replica workerpool0-0 exited with a non-zero status of 1."
    assert "ModuleNotFoundError" in result.log_tail


def test_a_missing_executable_exits_127_like_a_container(tmp_path):
    result = LocalBackend().run(spec(["no-such-trainer-binary"], str(tmp_path / "b")))
    assert result.state == "FAILED" and "status of 127" in result.error
    assert "executable file not found" in result.log_tail


def test_sigkill_reports_137(tmp_path):
    killer = script(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)\n")
    result = LocalBackend().run(spec(["python", killer], str(tmp_path / "b")))
    assert "non-zero status of 137" in result.error


def test_preemption_sends_sigterm_then_restarts(tmp_path):
    worker = script(
        tmp_path,
        """
        import os, signal, sys, time
        marker = os.path.join(os.environ["AIP_CHECKPOINT_DIR"], "seen")
        if os.path.exists(marker):
            print("restarted after preemption"); sys.exit(0)
        def on_term(*a):
            open(marker, "w").write("1"); print("got SIGTERM"); sys.exit(143)
        signal.signal(signal.SIGTERM, on_term)
        print("working", flush=True)
        time.sleep(30)
    """,
    )
    backend = LocalBackend(preempt_after=parse_durations("1s", "--preempt-after"), grace_s=5)
    result = backend.run(spec(["python", worker], str(tmp_path / "b")))
    assert result.succeeded and result.restarts == 1
    assert "got SIGTERM" in result.log_tail and "restarted after preemption" in result.log_tail


def test_a_worker_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path):
    stubborn = script(
        tmp_path,
        """
        import os, signal, sys, time
        marker = os.path.join(os.environ["AIP_CHECKPOINT_DIR"], "seen")
        if os.path.exists(marker):
            sys.exit(0)
        open(marker, "w").write("1")
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ignoring SIGTERM", flush=True)
        time.sleep(60)
    """,
    )
    backend = LocalBackend(preempt_after=[1.0], grace_s=0.5)
    result = backend.run(spec(["python", stubborn], str(tmp_path / "b")))
    assert result.succeeded and result.restarts == 1
    assert result.duration_s < 20


def test_restart_job_on_worker_restart_retries_a_crash(tmp_path):
    flaky = script(
        tmp_path,
        """
        import os, sys
        marker = os.path.join(os.environ["AIP_CHECKPOINT_DIR"], "crashed")
        if not os.path.exists(marker):
            open(marker, "w").write("1"); sys.exit(3)
    """,
    )
    job = spec(["python", flaky], str(tmp_path / "b"), restart_job_on_worker_restart=True)
    result = LocalBackend().run(job)
    assert result.succeeded and result.restarts == 1
    plain = spec(["python", flaky], str(tmp_path / "c"))
    assert LocalBackend().run(plain).state == "FAILED"


def test_a_spec_without_command_or_output_dir_is_bad_input(tmp_path):
    with pytest.raises(ConfigError, match="command is empty"):
        LocalBackend().run(spec(None, str(tmp_path)))
    with pytest.raises(ConfigError, match="output directory"):
        LocalBackend().run(spec([sys.executable, "-c", "1"], None))


def test_pool_env_reaches_the_worker(tmp_path):
    echo = script(tmp_path, "import os; print('LR=' + os.environ['LR'])\n")
    data = {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "containerSpec": {
                    "imageUri": "i",
                    "command": ["python", echo],
                    "env": [{"name": "LR", "value": "0.1"}],
                },
            }
        ]
    }
    job = parse_spec(data, project="my-project", region="us-central1")
    result = LocalBackend(output_dir=str(tmp_path / "o")).run(job)
    assert "LR=0.1" in result.log_tail


def test_replicas_sharing_this_machine_split_its_cores_unless_the_user_set_threads(tmp_path, monkeypatch):
    echo = script(
        tmp_path, "import os; print(os.environ['RANK'], 'threads', os.environ.get('OMP_NUM_THREADS'))\n"
    )
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    two = LocalBackend().run(spec(["python", echo], str(tmp_path / "two"), replicas=2))
    assert "0 threads 4" in two.log_tail and "1 threads 4" in two.log_tail
    one = LocalBackend().run(spec(["python", echo], str(tmp_path / "one")))
    assert "0 threads None" in one.log_tail  # a single replica keeps the library's default
    mine = LocalBackend().run(
        spec(["python", echo], str(tmp_path / "mine"), replicas=2, env={"OMP_NUM_THREADS": "3"})
    )
    assert "0 threads 3" in mine.log_tail and "1 threads 3" in mine.log_tail
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    outer = LocalBackend().run(spec(["python", echo], str(tmp_path / "outer"), replicas=2))
    assert "0 threads 2" in outer.log_tail and "1 threads 2" in outer.log_tail


def test_preemption_can_be_triggered_by_a_log_line(tmp_path):
    worker = script(
        tmp_path,
        """
        import os, signal, sys, time
        marker = os.path.join(os.environ["AIP_CHECKPOINT_DIR"], "seen")
        if os.path.exists(marker):
            print("second attempt"); sys.exit(0)
        signal.signal(signal.SIGTERM, lambda *a: (open(marker, "w").write("1"), sys.exit(143)))
        time.sleep(0.3)
        print("READY step 1", flush=True)
        time.sleep(30)
    """,
    )
    backend = LocalBackend(preempt_on=[("READY step", 0.0)], grace_s=5)
    result = backend.run(spec(["python", worker], str(tmp_path / "b")))
    assert result.succeeded and result.restarts == 1
    assert "second attempt" in result.log_tail and result.duration_s < 20


def test_sigterm_to_the_launcher_cancels_the_job_and_leaves_no_orphans(tmp_path):
    pidfile = tmp_path / "worker.pid"
    worker = script(
        tmp_path,
        f"""
        import os, time
        open({str(pidfile)!r}, "w").write(str(os.getpid()))
        time.sleep(60)
    """,
    )
    proc = subprocess.Popen([sys.executable, launcher(tmp_path, worker)], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    worker_pid = int(pidfile.read_text())
    proc.terminate()
    out, _ = proc.communicate(timeout=30)
    assert "STATE CANCELLED" in out
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(worker_pid, 0)


def test_sigkill_to_the_launcher_still_ends_its_replicas(tmp_path):
    """A launcher killed outright (a pipeline task OOM-killed) runs no cleanup: the kernel ends the
    replicas (Linux), so no trainer keeps the machine's GPUs or writes into the next run."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux's")
    pids = tmp_path / "pids"
    pids.mkdir()
    worker = script(
        tmp_path,
        f"""
        import os, time
        open(os.path.join({str(pids)!r}, os.environ["RANK"]), "w").write(str(os.getpid()))
        time.sleep(60)
    """,
    )
    proc = subprocess.Popen([sys.executable, launcher(tmp_path, worker, replicas=2)])
    deadline = time.monotonic() + 30
    while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = [int(p.read_text()) for p in pids.iterdir()]
    assert len(workers) == 2, "the replicas did not start"
    proc.kill()
    proc.wait(timeout=10)
    for pid in workers:  # killed by the kernel, then reaped by init
        assert gone_within(pid), f"replica pid {pid} outlived its SIGKILLed launcher"


def test_replicas_start_without_forking_the_launcher(tmp_path):
    """``subprocess`` with a ``preexec_fn`` forks the launcher and runs Python in the child, which is
    unsafe while threads run (JAX warns of a deadlock at every such fork); the launcher's own log
    readers are threads. No hook registered for a fork runs while a job starts, restarts and ends."""
    forks: list[int] = []
    os.register_at_fork(before=lambda: forks.append(os.getpid()))  # as JAX registers its warning
    worker = script(tmp_path, "import time; print('step 1', flush=True); time.sleep(0.3)\n")
    backend = LocalBackend(preempt_on=[("step 1", 0.0)], grace_s=2)
    result = backend.run(spec(["python", worker], str(tmp_path / "b"), replicas=2))
    assert result.succeeded and result.restarts == 1
    assert forks == []


def test_a_replica_whose_launcher_died_before_it_ran_does_not_run(tmp_path):
    """The launcher can die between starting a replica and the replica asking for the parent-death
    signal: the replica sees that its parent is not the launcher any more and ends at once."""
    from trainguard.launch import die_with_parent

    marker = tmp_path / "ran"
    # A launcher pid that is not this replica's parent: as if it had died and init adopted us.
    argv = [sys.executable, "-I", "-S", die_with_parent.__file__, str(os.getpid() + 10**6)]
    proc = subprocess.run([*argv, sys.executable, "-c", f"open({str(marker)!r}, 'w')"], timeout=30)
    assert proc.returncode == -9 and not marker.exists()


@pytest.mark.parametrize(
    ("command", "reason"),
    [(["no-such-trainer-binary"], "No such file or directory"), (["./data.csv"], "Permission denied")],
)
def test_a_command_that_cannot_start_says_why_in_a_containers_words(tmp_path, monkeypatch, command, reason):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.csv").write_text("a,b\n")  # not executable
    result = LocalBackend().run(spec(command, str(tmp_path / "b")))
    assert result.state == "FAILED" and result.error.endswith("non-zero status of 127.")
    assert f'exec: "{command[0]}": {reason}: executable file not found in $PATH' in result.log_tail


# --- the in-flight watcher ----------------------------------------------------------------------


class StopWhen:
    """Answers a Stop once ``ready()`` is true; records every RunningJob it is shown."""

    def __init__(self, ready, stop=None) -> None:
        self.ready = ready
        self.stop = stop or Stop("non_finite", "loss nan at step 42", "clip gradients", details={"step": 42})
        self.seen: list[RunningJob] = []

    def poll(self, job: RunningJob):
        self.seen.append(job)
        return self.stop if self.ready() else None


def test_a_stop_ends_every_replica_and_their_children_with_no_orphan(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    worker = script(
        tmp_path,
        f"""
        import os, signal, subprocess, sys, time
        rank = os.environ["RANK"]
        # A child in the same process group that ignores SIGTERM, as a data loader may; it
        # writes its pid once it does.
        child_pidfile = os.path.join({str(pids)!r}, f"child-{{rank}}")
        subprocess.Popen([sys.executable, "-c",
            "import os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)", child_pidfile])
        open(os.path.join({str(pids)!r}, f"worker-{{rank}}"), "w").write(str(os.getpid()))
        if rank == "0":  # this worker ignores SIGTERM too; the other exits and leaves its child
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("step 1 loss 0.9", flush=True)
        time.sleep(120)
    """,
    )
    watcher = StopWhen(lambda: len(list(pids.iterdir())) == 4)
    result = LocalBackend(grace_s=0.5, watch_interval_s=0.1).run(
        spec(["python", worker], str(tmp_path / "b"), replicas=2), watcher=watcher
    )

    assert result.state == "CANCELLED"
    assert result.stopped == watcher.stop.to_dict()
    assert result.failure_class == "non_finite"
    assert result.error == "stopped by the trainguard guard [non_finite]: loss nan at step 42"
    assert set(result.exit_codes) == {"workerpool0-0", "workerpool1-0"}
    assert result.duration_s < 60
    for name in ("worker-0", "worker-1", "child-0", "child-1"):
        pid = int((pids / name).read_text())
        assert gone_within(pid), f"{name} (pid {pid}) outlived the job"
    for name in ("worker-0", "worker-1"):  # each replica's process group is gone too
        with pytest.raises(ProcessLookupError):
            os.killpg(int((pids / name).read_text()), 0)


def test_the_watcher_is_shown_the_running_job_about_every_interval(tmp_path):
    worker = script(tmp_path, "import time; time.sleep(1.5)\n")
    watcher = StopWhen(lambda: False)
    result = LocalBackend(watch_interval_s=0.25).run(
        spec(["python", worker], str(tmp_path / "b")), watcher=watcher
    )
    assert result.succeeded and result.stopped == {} and result.failure_class == ""
    assert watcher.seen, "the watcher was never called"
    # Once per interval at most (not once per 50 ms turn of the loop).
    assert len(watcher.seen) <= result.duration_s / 0.25 + 1
    job = watcher.seen[0]
    base = str(tmp_path / "b")
    assert job.job_name == result.job_name and job.job_name.startswith("local/local-")
    assert (job.state, job.base_output_dir) == ("RUNNING", base)
    assert job.history_path == f"{base}/history.jsonl" == result.history_path
    assert job.tensorboard_dir == f"{base}/logs/"
    elapsed = [j.elapsed_s for j in watcher.seen]
    assert elapsed == sorted(elapsed) and elapsed[0] >= 0.25


def test_a_watcher_that_raises_is_reported_once_and_never_stops_the_job(tmp_path):
    worker = script(tmp_path, "import time; time.sleep(1); print('done')\n")

    class Broken:
        calls = 0

        def poll(self, job):
            Broken.calls += 1
            raise RuntimeError("history line 3 is not JSON")

    out = io.StringIO()
    result = LocalBackend(stream=out, watch_interval_s=0.1).run(
        spec(["python", worker], str(tmp_path / "b")), watcher=Broken()
    )
    assert result.succeeded and "done" in result.log_tail
    assert Broken.calls == 1
    lines = [line for line in out.getvalue().splitlines() if "stopped guarding" in line]
    assert len(lines) == 1 and "RuntimeError: history line 3 is not JSON" in lines[0]


# --- what is echoed of the job's output -----------------------------------------------------------


def test_a_token_in_a_workers_output_is_redacted_and_the_tail_is_bounded(tmp_path):
    secret = "ya29.a0AfH6SMB-very-secret-token"
    worker = script(
        tmp_path,
        f"""
        import sys
        print("Authorization: Bearer {secret}")
        print("fetching https://storage.googleapis.com/b/o?X-Goog-Signature=deadbeef01&x=1")
        print("token={secret}")
        print("x" * 200_000)
        sys.exit("RuntimeError: upload failed with access_token={secret}")
    """,
    )
    out = io.StringIO()
    result = LocalBackend(stream=out).run(spec(["python", worker], str(tmp_path / "b")))
    assert result.state == "FAILED"
    for text in (result.log_tail, out.getvalue()):
        assert secret not in text and "deadbeef01" not in text
        assert "[REDACTED]" in text
    assert "upload failed" in result.log_tail
    assert len(result.log_tail) <= 32_000
    assert max(len(line) for line in out.getvalue().splitlines()) <= 2_100


def test_a_replica_count_this_machine_cannot_run_is_refused_before_anything_starts(tmp_path):
    # 20,000 replicas once built 20,000 environments each listing every address (2.9 GB, 37 s,
    # then a MemoryError traceback) before the first process started.
    from tests.fuzz.contract import peak_memory

    # (A command that cannot start: should the cap ever go, this test must not fork 1000 times.)
    job = spec([str(tmp_path / "no-such-trainer")], str(tmp_path / "base"), replicas=1_000)
    started = time.perf_counter()
    outcome, peak = peak_memory(lambda: LocalBackend().run(job))
    assert isinstance(outcome, ConfigError) and "at most 64" in str(outcome)
    assert time.perf_counter() - started < 5 and peak < 4 * 2**20
