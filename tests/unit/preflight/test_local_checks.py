"""The local backend's preflight: command resolvable, output directory writable."""

from __future__ import annotations

import os
import sys

from trainguard.preflight import Status, run_preflight
from trainguard.spec import JobSpec


def spec(command, base=None):
    return JobSpec.create(
        "my-project",
        "us-central1",
        machine_type="n1-standard-4",
        image_uri="img",
        command=command,
        base_output_dir=base,
    )


def by_title(report):
    return {r.title: r for r in report.results}


def test_resolvable_command_and_writable_dir_pass(tmp_path):
    script = tmp_path / "t.py"
    script.write_text("print(1)")
    report = run_preflight(spec(["python", str(script)], str(tmp_path / "out")), backend="local")
    assert all(r.status == Status.PASS for r in report.results), report.to_markdown()


def test_missing_executable_script_and_module_fail_as_container_class(tmp_path):
    for command, text in (
        (["no-such-binary-xyz"], "not an executable"),
        (["python", str(tmp_path / "missing.py")], "does not exist"),
        (["python", "-m", "no_such_module_xyz"], "not importable"),
    ):
        r = by_title(run_preflight(spec(command, str(tmp_path)), backend="local"))[
            "command of workerPoolSpecs[0]"
        ]
        assert r.status == Status.FAIL and text in r.evidence
        assert r.failure_class == "container"


def test_no_command_fails_with_the_reason(tmp_path):
    r = by_title(run_preflight(spec(None, str(tmp_path)), backend="local"))["command of workerPoolSpecs[0]"]
    assert r.status == Status.FAIL and "cannot use the image's entrypoint" in r.evidence


def test_unwritable_or_missing_output_dir_fails(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.geteuid() != 0:  # root writes anywhere; use a path under a file instead
            target = str(locked / "out")
        else:
            (tmp_path / "afile").write_text("x")
            target = str(tmp_path / "afile" / "out")
        r = by_title(run_preflight(spec([sys.executable, "-c", "1"], target), backend="local"))[
            "output directory"
        ]
        assert r.status == Status.FAIL and "cannot write" in r.evidence
    finally:
        locked.chmod(0o700)
    r = by_title(run_preflight(spec([sys.executable, "-c", "1"]), backend="local"))["output directory"]
    assert r.status == Status.FAIL and "--output-dir" in r.remedy


def test_python_flags_and_inline_code_are_understood(tmp_path):
    script_path = tmp_path / "train.py"
    script_path.write_text("print(1)")
    for command in (
        ["python", "-c", "print(1)"],
        ["python", "-W", "ignore", str(script_path)],
        ["python", "-u", "-X", "dev", str(script_path)],
    ):
        r = by_title(run_preflight(spec(command, str(tmp_path / "o")), backend="local"))[
            "command of workerPoolSpecs[0]"
        ]
        assert r.status == Status.PASS, (command, r.evidence)


def test_a_gcs_output_on_the_local_backend_is_not_a_silent_pass():
    r = by_title(run_preflight(spec([sys.executable, "-c", "1"], "gs://bucket/run"), backend="local"))[
        "output directory"
    ]
    assert r.status == Status.UNKNOWN and "gcloud storage ls gs://bucket/run/" in r.remedy


def test_more_replicas_than_the_local_backend_runs_fail_preflight(tmp_path):
    job = JobSpec.create(
        "my-project",
        "us-central1",
        machine_type="n1-standard-4",
        image_uri="img",
        command=[sys.executable, "-c", "pass"],
        base_output_dir=str(tmp_path),
        replica_count=1000,
    )
    (replicas,) = [r for r in run_preflight(job, backend="local").results if r.title == "replicas"]
    assert replicas.status == Status.FAIL and "at most 64" in replicas.evidence
