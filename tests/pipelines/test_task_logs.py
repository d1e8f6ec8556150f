"""The runner's output filed per task, and one line per task start and end for a person."""

from __future__ import annotations

import io

from trainguard.pipelines.task_logs import TaskLogSplitter, TaskReporter


def test_each_line_lands_in_the_log_of_the_task_that_printed_it(tmp_path):
    events = []
    splitter = TaskLogSplitter(tmp_path, events.append)
    splitter.write("\x1b[95mRunning pipeline: 'p'\x1b[0m\n")
    splitter.write("[KFP Executor] Executing task \x1b[96m'preflight'\x1b[0m\n    checking")
    splitter.write(
        " quota\n[KFP Executor] Task \x1b[96m'preflight'\x1b[0m finished with status \x1b[92mSUCCESS\x1b[0m\n"
    )
    splitter.write(
        "Executing task 'train'\nepoch 0 loss 2.3\nTask 'train' finished with status "
        "FAILURE\ntrailing without newline"
    )
    splitter.close()
    assert [(e.task, e.status) for e in events] == [
        ("preflight", ""),
        ("preflight", "SUCCESS"),
        ("train", ""),
        ("train", "FAILURE"),
    ]
    assert (tmp_path / "pipeline.log").read_text() == "Running pipeline: 'p'\n"
    preflight = (tmp_path / "preflight.log").read_text()
    assert "    checking quota\n" in preflight and "\x1b" not in preflight
    train = (tmp_path / "train.log").read_text()
    assert "epoch 0 loss 2.3" in train and train.endswith("trailing without newline\n")
    assert events[-1].log_path == tmp_path / "train.log"


def test_a_log_gets_plain_lines_one_per_start_and_end(tmp_path):
    out = io.StringIO()
    report = TaskReporter(out, indent="  ")
    splitter = TaskLogSplitter(tmp_path, report)
    splitter.write(
        "Executing task 'validate'\nlots\nof\nexecutor json\nTask 'validate' finished with status FAILURE\n"
    )
    splitter.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "  validate: started"
    assert lines[1].startswith("  validate: FAILED in ") and len(lines) == 2


def test_a_secret_the_executor_echoes_from_the_job_spec_is_not_filed(tmp_path):
    # `trainguard run` once filed the spec's env values (an HF token, a database URL) verbatim
    # in preflight.log and train.log, the files its summary tells people to open.
    splitter = TaskLogSplitter(tmp_path, lambda event: None)
    splitter.write(
        "Executing task 'train'\n"
        '    "env": [{"name": "HF_TOKEN", "value": "hf_0123456789abcdefghijABCDEFGHIJklmn"},\n'
        '            {"name": "DB", "value": "postgres://u:pw0rdXYZ@db/x"}]\n'
        "Task 'train' finished with status SUCCESS\n"
    )
    splitter.close()
    train = (tmp_path / "train.log").read_text()
    assert "0123456789abcdefghij" not in train and "pw0rdXYZ" not in train
    assert '"name": "HF_TOKEN"' in train and "[REDACTED]" in train


def test_the_verbose_stream_passes_everything_but_secrets():
    from trainguard.pipelines.task_logs import RedactingStream

    out = io.StringIO()
    stream = RedactingStream(out)
    stream.write('{"env": [{"name": "HF_TOKEN", "value": "hf_abcdefghijklmnopqrstuvwxyz0123"}]}\nep')
    stream.write("och 1 loss 0.5\nAuthorization: Bearer ya29.a0AfH6SMBsecretsecret\n")
    stream.close()
    text = out.getvalue()
    assert "epoch 1 loss 0.5" in text and "HF_TOKEN" in text
    assert "hf_abcdefghijklmnopqrstuvwxyz0123" not in text and "ya29.a0AfH6SMB" not in text


def test_the_jobs_preemptions_and_the_guards_stop_are_shown_as_they_happen(tmp_path):
    out = io.StringIO()
    splitter = TaskLogSplitter(tmp_path, TaskReporter(out, indent="  "))
    splitter.write(
        "Executing task 'train'\n"
        "    [trainguard] local job local-1: 1 replica(s), outputs in /x\n"
        "    [workerpool0-0] epoch 0 step 23: train loss 2.1339\n"
        "    [trainguard] preempting the job (SIGTERM, SIGKILL after 10 s), as a Spot reclaim would\n"
        "    [trainguard] guard: stopping the job: divergence: token=ya29.a0AfH6SMBqwertyuiopasdfghjkl\n"
        "Task 'train' finished with status FAILURE\n"
    )
    splitter.close()
    lines = out.getvalue().splitlines()
    assert lines[1] == "  train: preempting the job (SIGTERM, SIGKILL after 10 s), as a Spot reclaim would"
    assert lines[2] == "  train: guard: stopping the job: divergence"
    assert "ya29.a0AfH6SMBqwertyuiop" not in out.getvalue()
    assert len(lines) == 4  # started, two notes, FAILED: worker output and routine lines stay in the log
