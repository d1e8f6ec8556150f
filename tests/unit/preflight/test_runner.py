"""The runner: concurrency, deadlines (UNKNOWN), crashes as internal errors (ERROR), rendering."""

from __future__ import annotations

import json
import time

import pytest

from trainguard.errors import ConfigError
from trainguard.preflight import CHECKS, CheckResult, Status, run_preflight
from trainguard.preflight.checks import Check
from trainguard.spec import JobSpec

SPEC = JobSpec.create(
    "my-project", "us-central1", machine_type="n1-standard-4", image_uri="i", command=["true"]
)


@pytest.fixture
def caplog_stderr():
    """What the runner's logger wrote (the suite runs without pytest's logging plugin)."""
    import io
    import logging

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("trainguard.preflight.runner")
    logger.addHandler(handler)
    yield stream.getvalue
    logger.removeHandler(handler)


@pytest.fixture
def extra_checks():
    added = []

    def add(name, func):
        CHECKS[name] = Check(name, func, ("vertex",), False, name)
        added.append(name)

    yield add
    for name in added:
        CHECKS.pop(name, None)


def test_a_crashing_check_is_an_internal_error_with_its_trace_logged(extra_checks, caplog_stderr):
    def boom(ctx):
        raise RuntimeError("no route to host\nsecond line")

    extra_checks("zz_boom", boom)
    report = run_preflight(SPEC, only=["compat", "zz_boom"])
    (r,) = [r for r in report.results if r.check == "zz_boom"]
    assert r.status == Status.ERROR and r.title.startswith("internal error")
    assert "RuntimeError: no route to host" in r.evidence and "second line" not in r.evidence
    assert "defect in trainguard" in r.remedy
    assert any(r.check == "compat" for r in report.results)
    assert not report.passed()  # an internal error proves nothing: the run fails
    assert report.counts()["ERROR"] == 1 and report.summary_metrics()["errors"] == 1.0
    assert "Traceback" in caplog_stderr() and "in boom" in caplog_stderr()


def test_a_slow_check_misses_the_deadline_as_unknown(extra_checks):
    extra_checks("zz_slow", lambda ctx: time.sleep(3) or [])
    started = time.perf_counter()
    report = run_preflight(SPEC, only=["zz_slow"], timeout_s=0.3)
    assert time.perf_counter() - started < 2
    (r,) = report.results
    assert r.status == Status.UNKNOWN and "deadline" in r.evidence


def test_checks_run_concurrently(extra_checks):
    for i in range(4):
        extra_checks(f"zz_{i}", lambda ctx: time.sleep(0.4) or [CheckResult("x", "t", Status.PASS, "e")])
    report = run_preflight(SPEC, only=[f"zz_{i}" for i in range(4)])
    assert report.wall_s < 1.0  # 4 × 0.4 s sequentially would be 1.6 s


def test_unknown_check_or_backend_is_bad_input():
    with pytest.raises(ConfigError, match="unknown check quotaa"):
        run_preflight(SPEC, only=["quotaa"])
    with pytest.raises(ConfigError, match="unknown backend"):
        run_preflight(SPEC, backend="gke")


def test_fail_on_warn_and_the_rendered_reports():
    spec = JobSpec.create(
        "my-project",
        "us-central1",
        machine_type="g2-standard-8",
        image_uri="i",
        accelerator_type="NVIDIA_L4",
        accelerator_count=1,
        spot=True,
    )
    report = run_preflight(spec, only=["compat"])
    assert report.passed("fail") and not report.passed("warn")
    data = json.loads(report.to_json("warn"))
    assert data["passed"] is False and data["counts"]["WARN"] == 1
    md = report.to_markdown("warn")
    assert md.startswith("# Preflight FAILED") and "| WARN | compat:" in md
    assert report.summary_metrics()["warnings"] == 1.0


def test_only_must_select_checks_of_the_backend():
    with pytest.raises(ConfigError, match="not a check of the vertex backend"):
        run_preflight(SPEC, only=["local"])
    with pytest.raises(ConfigError, match="cannot pass"):
        run_preflight(SPEC, backend="local", skip=["local"])


def test_a_hung_check_does_not_keep_the_process_alive(tmp_path):
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import time
        from trainguard.preflight import CHECKS, run_preflight
        from trainguard.preflight.checks import Check
        from trainguard.spec import JobSpec
        CHECKS["zz_hang"] = Check("zz_hang", lambda ctx: time.sleep(60) or [], ("vertex",),
                                  False, "hangs")
        spec = JobSpec.create("my-project", "us-central1", machine_type="n1-standard-4",
                              image_uri="i")
        report = run_preflight(spec, only=["zz_hang"], timeout_s=0.5)
        print(report.results[0].status.value)
    """)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.stdout.strip() == "UNKNOWN", proc.stderr
    assert time.perf_counter() - started < 15


def test_only_the_families_that_run_are_imported():
    """``--only compat`` must not pay for the online families or any Google client."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import sys
        from trainguard.preflight import available_checks, run_preflight
        from trainguard.spec import JobSpec
        assert "network" in available_checks() and "trainguard.preflight.network" not in sys.modules
        spec = JobSpec.create("my-project", "us-central1", machine_type="a2-highgpu-1g",
                              image_uri="i", accelerator_type="NVIDIA_TESLA_A100",
                              accelerator_count=1)
        run_preflight(spec, only=["compat"])
        print(" ".join(sorted(m for m in sys.modules if m.startswith((
            "trainguard.preflight.", "google.cloud.cloudquotas", "google.cloud.kms",
            "google.cloud.policytroubleshooter", "google.cloud.storage", "google.cloud.compute",
            "requests")))))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded = set(proc.stdout.split())
    assert {"trainguard.preflight.compat", "trainguard.preflight.runner"} <= loaded
    for absent in (
        "trainguard.preflight.quota",
        "trainguard.preflight.iam",
        "trainguard.preflight.image",
        "trainguard.preflight.network",
        "trainguard.preflight.capacity",
        "trainguard.preflight.cmek",
        "google.cloud.cloudquotas_v1",
        "google.cloud.kms_v1",
        "google.cloud.policytroubleshooter_iam_v3",
        "google.cloud.storage",
    ):
        assert absent not in loaded, absent


def test_an_unknown_fail_on_is_bad_input_listing_the_choices():
    report = run_preflight(SPEC, only=["compat"])
    with pytest.raises(ConfigError, match="fail, unknown, warn"):
        report.passed("sometimes")


def test_what_a_check_quotes_from_the_spec_or_environment_is_shown_redacted(tmp_path):
    # A machine type, an output URI, an endpoint override with user:password: echoed by the
    # checks' evidence into stdout, the JSON and the Markdown report.
    spec = JobSpec.create(
        "my-project",
        "us-central1",
        machine_type="ya29.a0AfB_mtypeSECRET",
        image_uri="i",
        command=["true"],
        base_output_dir="gs://u:pwSECRET@bucket/runs/r1",
        display_name="nightly ghp_" + "d" * 36,
    )
    report = run_preflight(spec, only=["compat"])
    text = report.to_json("fail") + report.to_markdown("fail") + report.subject
    assert "SECRET" not in text and "ddddddddd" not in text and "[REDACTED]" in text
    many = CheckResult("zz", "t", Status.WARN, "e" * 100_000, "r" * 100_000)
    assert len(many.evidence) <= 2_000 and len(many.remedy) <= 2_000


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf")])
def test_a_deadline_that_is_not_a_positive_number_is_bad_input(timeout):
    # --timeout nan once ran every online check into "still running after the nan s deadline"
    # and passed.
    with pytest.raises(ConfigError, match="--timeout must be a finite number of seconds"):
        run_preflight(SPEC, only=["compat"], timeout_s=timeout)


def test_a_malformed_endpoint_override_is_bad_input_when_an_online_check_runs(monkeypatch):
    monkeypatch.setenv("TRAINGUARD_ENDPOINT_CLOUDQUOTAS", "cloudquotas.local:8080")
    with pytest.raises(ConfigError, match="TRAINGUARD_ENDPOINT_CLOUDQUOTAS"):
        run_preflight(SPEC, only=["quota"])
    assert run_preflight(SPEC, only=["compat"]).passed()  # offline checks do not read it
