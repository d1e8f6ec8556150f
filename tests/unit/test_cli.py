"""The CLI as a user meets it: exit codes 0/1/2, one clear message, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PR = ["--project", "my-project", "--region", "us-central1"]


def cli(*args, stdin: str | None = None, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "trainguard.cli", *map(str, args)],
        capture_output=True,
        text=True,
        input=stdin,
        cwd=cwd,
        timeout=120,
    )


def no_traceback(proc):
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr


def test_help_and_version():
    proc = cli("--help")
    assert proc.returncode == 0
    for command in ("preflight", "train", "validate", "triage", "compile", "run"):
        assert command in proc.stdout
    assert cli("--version").stdout.startswith("trainguard ")


def test_preflight_passes_on_the_a100_spot_example(tmp_path):
    proc = cli(
        "preflight",
        EXAMPLES / "a100-spot.yaml",
        *PR,
        "--only",
        "compat",
        "--json",
        tmp_path / "r.json",
        "--markdown",
        tmp_path / "r.md",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "preflight passed" in proc.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["passed"] is True and report["counts"]["FAIL"] == 0
    assert (tmp_path / "r.md").read_text().startswith("# Preflight passed")


def test_preflight_failing_check_exits_1_with_the_fix(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        "workerPoolSpecs:\n"
        "  - machineSpec: {machineType: a2-highgpu-1g, acceleratorType: NVIDIA_TESLA_A100,"
        " acceleratorCount: 2}\n"
        "    containerSpec: {imageUri: img}\n"
    )
    proc = cli("preflight", spec, *PR, "--only", "compat", "--json", tmp_path / "r.json")
    assert proc.returncode == 1
    assert "FAIL" in proc.stdout and "acceleratorCount: 1" in proc.stdout
    assert json.loads((tmp_path / "r.json").read_text())["passed"] is False
    no_traceback(proc)


def test_fail_on_warn_turns_a_warning_into_exit_1(tmp_path):
    spec = tmp_path / "spot.yaml"
    spec.write_text(
        "workerPoolSpecs:\n"
        "  - machineSpec: {machineType: g2-standard-8, acceleratorType: NVIDIA_L4,"
        " acceleratorCount: 1}\n"
        "    containerSpec: {imageUri: img}\n"
        "scheduling: {strategy: SPOT}\n"
    )
    assert cli("preflight", spec, *PR, "--only", "compat").returncode == 0
    assert cli("preflight", spec, *PR, "--only", "compat", "--fail-on", "warn").returncode == 1


@pytest.mark.parametrize(
    "args,needle",
    [
        (["preflight", "missing.yaml", *PR], "does not exist"),
        (
            ["preflight", "examples/a100-spot.yaml", "--project", "Bad_Project", "--region", "us-central1"],
            "project",
        ),
        (["preflight", "examples/a100-spot.yaml", *PR, "--only", "quotaa"], "unknown check"),
        (["preflight", "examples/a100-spot.yaml", *PR, "--fail-on", "sometimes"], "fail_on"),
        (["train", "examples/local-healthy.yaml", *PR, "--preempt-after", "soon"], "not a duration"),
        (["triage", "no-such-log.txt"], "cannot read"),
    ],
)
def test_bad_input_exits_2_with_one_clear_message(args, needle):
    proc = cli(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert needle in proc.stderr
    no_traceback(proc)


def test_bad_spec_field_is_named(tmp_path):
    spec = tmp_path / "typo.yaml"
    spec.write_text("workerPoolSpecs:\n  - machineSpec: {machineTyp: n1-standard-4}\n")
    proc = cli("preflight", spec, *PR)
    assert proc.returncode == 2
    assert "workerPoolSpecs[0].machineSpec.machineTyp" in proc.stderr
    assert "machineType" in proc.stderr
    no_traceback(proc)


def test_unknown_flag_is_a_usage_error():
    assert cli("preflight", "--frobnicate").returncode == 2


def test_triage_reads_stdin_and_writes_json(tmp_path):
    text = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    proc = cli("triage", "-", "--json", tmp_path / "d.json", stdin=text)
    assert proc.returncode == 0
    assert "device_oom" in proc.stdout
    data = json.loads((tmp_path / "d.json").read_text())
    assert data["failure_class"] == "device_oom" and data["remedy"]


def test_train_locally_and_a_failing_job_is_classified(tmp_path):
    ok = tmp_path / "ok.yaml"
    ok.write_text(
        "workerPoolSpecs:\n  - machineSpec: {machineType: n1-standard-4}\n"
        "    containerSpec: {imageUri: img, command: [python, -c, 'print(42)']}\n"
    )
    proc = cli("train", ok, *PR, "--output-dir", tmp_path / "out", "--json", tmp_path / "t.json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "t.json").read_text())["state"] == "SUCCEEDED"
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "workerPoolSpecs:\n  - machineSpec: {machineType: n1-standard-4}\n"
        "    containerSpec: {imageUri: img, command: [python, -m, no_such_trainer_module]}\n"
    )
    proc = cli("train", bad, *PR, "--output-dir", tmp_path / "out2", "--json", tmp_path / "f.json")
    assert proc.returncode == 1
    assert "container" in proc.stderr and "No module named" in proc.stderr
    data = json.loads((tmp_path / "f.json").read_text())
    assert data["state"] == "FAILED" and data["diagnosis"]["failure_class"] == "container"
    no_traceback(proc)


def test_a_local_train_costs_nothing_and_a_bad_budget_is_bad_input(tmp_path):
    ok = tmp_path / "ok.yaml"
    ok.write_text(
        "workerPoolSpecs:\n  - machineSpec: {machineType: n1-standard-4}\n"
        "    containerSpec: {imageUri: img, command: [python, -c, 'print(42)']}\n"
    )
    base = ("train", ok, *PR, "--output-dir", tmp_path / "out")
    proc = cli(*base, "--budget", "5", "--json", tmp_path / "t.json")
    assert proc.returncode == 0, proc.stderr
    assert "[trainguard] cost: $0 (local: it ran on this machine, nothing is billed)" in proc.stdout
    assert proc.stdout.count("a local run costs nothing ($0, local), so the budget never stops it") == 1
    cost = json.loads((tmp_path / "t.json").read_text())["cost"]
    assert cost["usd"] == 0 and cost["local"] is True and cost["budget_usd"] == 5
    bad = cli(*base, "--budget", "-1")
    assert bad.returncode == 2 and "--budget must be an amount of US dollars" in bad.stderr
    no_traceback(bad)


HISTORIES = ROOT / "tests" / "fixtures" / "histories"


def test_validate_exit_codes_and_reports(tmp_path):
    ok = cli(
        "validate",
        HISTORIES / "healthy" / "history.jsonl",
        "--json",
        tmp_path / "v.json",
        "--html",
        tmp_path / "v.html",
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads((tmp_path / "v.json").read_text())["passed"] is True
    assert "data:image/png;base64," in (tmp_path / "v.html").read_text()
    assert not (tmp_path / "v.png").exists()
    bad = cli("validate", HISTORIES / "overfit" / "keras_log.csv", "--plot", tmp_path / "c.png")
    assert bad.returncode == 1 and "overfit" in bad.stdout and "early stopping" in bad.stdout
    assert (tmp_path / "c.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    "content,needle",
    [
        ("", "empty"),
        ('{"step": 1, "metrics": {"loss": 1.0}}\nnot json\n{"step": 3}\n', "line 2"),
    ],
)
def test_validate_bad_history_exits_2(tmp_path, content, needle):
    path = tmp_path / "history.jsonl"
    path.write_text(content)
    proc = cli("validate", path)
    assert proc.returncode == 2 and needle in proc.stderr
    no_traceback(proc)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["run", "examples/local-healthy.yaml", *PR, "--backend", "bogus"], "is not one of: local, vertex"),
        (
            [
                "run",
                "examples/local-healthy.yaml",
                *PR,
                "--pipeline",
                "preflight_only",
                "--preempt-after",
                "5s",
            ],
            "--preempt-after",
        ),
        (
            ["train", "examples/local-healthy.yaml", *PR, "--output-dir", "/proc/nope"],
            "cannot create the output directory",
        ),
        (
            ["preflight", "examples/a100-spot.yaml", *PR, "--only", "compat", "--json", "/proc/x.json"],
            "cannot write",
        ),
        (["preflight", "examples/a100-spot.yaml", *PR, "--only", "local"], "not a check of the vertex"),
    ],
)
def test_more_bad_input_exits_2(args, needle):
    proc = cli(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert needle in proc.stderr
    no_traceback(proc)


def test_markup_like_text_in_errors_is_printed_verbatim(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "workerPoolSpecs:\n  - machineSpec: {machineType: n1-standard-4,"
        " acceleratorType: '[/x]', acceleratorCount: 1}\n"
        "    containerSpec: {imageUri: i}\n"
    )
    proc = cli("preflight", spec, *PR)
    assert proc.returncode == 2 and "'[/x]' is not a valid value" in proc.stderr
    no_traceback(proc)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "workerPoolSpecs:\n  - machineSpec: {machineType: n1-standard-4}\n"
        "    containerSpec: {imageUri: img, command: [python, -c,"
        " 'import sys; print(\"open [/dev/nvidia0] failed\"); sys.exit(3)']}\n"
    )
    proc = cli("train", bad, *PR, "--output-dir", tmp_path / "o", "--json", tmp_path / "t.json")
    assert proc.returncode == 1 and "[workerpool0-0]" in proc.stderr + proc.stdout
    assert json.loads((tmp_path / "t.json").read_text())["state"] == "FAILED"
    no_traceback(proc)


def test_local_runs_need_no_cloud_names_and_vertex_runs_say_which_are_missing(tmp_path):
    env_free = {
        k: v
        for k, v in __import__("os").environ.items()
        if k not in ("GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_REGION")
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainguard.cli",
            "preflight",
            str(EXAMPLES / "local-healthy.yaml"),
            "--backend",
            "local",
            "--output-dir",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env=env_free,
    )
    assert proc.returncode == 0, proc.stderr
    assert "local-project" in proc.stdout  # the placeholder, said where it shows
    for args, local_flag in (  # the message names the flag this command takes for a local run
        (["train", EXAMPLES / "l4.yaml", "--vertex"], "--local"),
        (["preflight", EXAMPLES / "l4.yaml"], "--backend local"),
        (["run", EXAMPLES / "l4.yaml", "--vertex"], "--local --backend local"),
        # preflight_only checks the job as Vertex would run it, in the local runner too
        (["run", EXAMPLES / "l4.yaml", "--pipeline", "preflight_only"], "--local --backend local"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "trainguard.cli", *map(str, args), "-p", "my-project"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
            env=env_free,
        )
        assert proc.returncode == 2, (args, proc.stderr)
        assert "--region required for Vertex AI" in proc.stderr
        assert f"a {local_flag} run needs none" in proc.stderr
        no_traceback(proc)
    proc = subprocess.run(
        [sys.executable, "-m", "trainguard.cli", "train", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env=env_free,
    )
    assert "local runs default to" in " ".join(proc.stdout.split())


def test_a_secret_in_a_usage_error_is_never_echoed_and_the_exit_is_2():
    token = "ya29.a0AfH6SMBqwertyuiopasdfghjklzxcvbnm"
    for args in (
        ["preflight", "examples/l4.yaml", "--backend", token],
        ["validate", "h.jsonl", f"--no-such-flag={token}"],
    ):
        proc = cli(*args)
        assert proc.returncode == 2, proc.stderr
        assert token not in proc.stdout + proc.stderr
        assert "Invalid value" in proc.stderr or "No such option" in proc.stderr
        no_traceback(proc)
