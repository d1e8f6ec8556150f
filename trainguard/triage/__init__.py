"""Failure triage: read a failed job's error message and log tail, name its failure class.

The first rule of troubleshooting training is to classify the failure before fixing it: a fix
from the wrong class looks plausible and does nothing (adding workers to an out-of-memory job,
checking your own IAM instead of the job's service account). :func:`classify` scans the text
against one table of signatures (:data:`CLASS_PATTERNS`) and picks the root cause:
the earliest error that names a cause, else how the process ended, else a strong warning
(the rules: :mod:`trainguard.triage.decide`).

The package, one job a module: :mod:`~trainguard.triage.signatures` (the table, each signature
with the real text it was written against), :mod:`~trainguard.triage.scan` (one pass over the
lines, the table only where a prefilter lets it), :mod:`~trainguard.triage.decide` (the root
cause, the evidence, the confidence) and :mod:`~trainguard.triage.input` (a text, bytes, a
stream or a file, read in bounded blocks).

Remedies and traps come from :mod:`trainguard.failure_classes`, the one table of classes.
"""

from __future__ import annotations

from trainguard.redaction import redact
from trainguard.triage.decide import MAX_EVIDENCE_CHARS, Diagnosis
from trainguard.triage.input import BLOCK_BYTES, classify, classify_file, classify_stream
from trainguard.triage.signatures import CLASS_PATTERNS, DETAIL, ERROR, EXIT, WARNING, Pattern

__all__ = [
    "ERROR",
    "EXIT",
    "WARNING",
    "DETAIL",
    "MAX_EVIDENCE_CHARS",
    "Pattern",
    "Diagnosis",
    "CLASS_PATTERNS",
    "classify",
    "classify_stream",
    "classify_file",
    "BLOCK_BYTES",
    "redact",
]
