"""What a person reads of a failed local run: class, evidence, why and remedy, not Markdown."""

from __future__ import annotations

from trainguard.pipelines.local_runner import LocalOutcome
from trainguard.triage import classify


def test_a_failed_train_task_reads_as_class_evidence_and_remedy(tmp_path):
    diagnosis = classify(
        "Traceback (most recent call last):\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    )
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "diagnosis").write_text(diagnosis.to_markdown())
    outcome = LocalOutcome("guarded_training", False, tmp_path, failed_task="train")
    lines = outcome.brief()
    assert lines[0] == "pipeline guarded_training: FAILED at task 'train'"
    assert lines[1].split() == ["class:", "device_oom"]
    assert "CUDA out of memory" in lines[2] and lines[2].lstrip().startswith("evidence:")
    assert any(line.lstrip().startswith("remedy:") and "batch" in line for line in lines)
    assert not any("**" in line or "```" in line for line in lines)
