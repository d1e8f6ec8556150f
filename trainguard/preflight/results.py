"""Preflight results: one ``CheckResult`` per check and subject, gathered in a ``Report``.

(``trainguard.validation.render`` renders validation verdicts; this module holds preflight's.)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum

from trainguard.choices import FailOn, parse
from trainguard.redaction import bound, printable, redact

__all__ = ["Status", "CheckResult", "Report", "MAX_TEXT_CHARS"]

MAX_TEXT_CHARS = 2_000  # of one result's evidence or remedy: a few lines a person reads


class Status(StrEnum):
    """A check's outcome, ordered from best to worst by ``rank``.

    UNKNOWN is about the world (an API that did not answer, a role preflight lacks); ERROR is
    about trainguard: a check raised, so what it was to prove is unproven and the run fails
    whatever ``fail_on`` says (the trace is in the log; report it as a bug).
    """

    PASS = "PASS"
    WARN = "WARN"
    UNKNOWN = "UNKNOWN"
    FAIL = "FAIL"
    ERROR = "ERROR"

    @property
    def rank(self) -> int:
        return {"PASS": 0, "WARN": 1, "UNKNOWN": 2, "FAIL": 3, "ERROR": 4}[self.value]


@dataclass(frozen=True)
class CheckResult:
    """What one check found about one subject (a worker pool, a bucket, the spec).

    Attributes:
        check: the check family (``compat``, ``quota``, ``iam``, ``image``, ``storage``,
            ``network``, ``capacity``, ``local``).
        title: what was checked, one line (``A100 quota for workerPoolSpecs[0]``).
        status: PASS, WARN, UNKNOWN, FAIL or ERROR (trainguard's own defect).
        evidence: the facts behind the status (numbers, names), never a credential.
        remedy: the exact fix, '' on PASS.
        failure_class: the class this would have become at run time (``quota``, …) or ''.
        duration_s: wall time of the check, filled in by the runner.
    """

    check: str
    title: str
    status: Status
    evidence: str
    remedy: str = ""
    failure_class: str = ""
    duration_s: float = 0.0
    details: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Title, evidence and remedy quote the spec and the environment (a machine type, a
        # bucket URI, an endpoint override): whatever a check wrote, it is shown redacted and
        # bounded, here once rather than in every check.
        for name, limit in (("title", 500), ("evidence", MAX_TEXT_CHARS), ("remedy", MAX_TEXT_CHARS)):
            text = getattr(self, name)
            if isinstance(text, str) and text:
                object.__setattr__(self, name, bound(printable(redact(text)), limit))

    def to_dict(self) -> dict:
        out = asdict(self)
        out["status"] = self.status.value
        return out


@dataclass
class Report:
    """All results of one preflight run."""

    subject: str
    backend: str
    results: list[CheckResult]
    wall_s: float = 0.0

    def __post_init__(self) -> None:
        # The job's display name, as given.
        self.subject = bound(printable(redact(self.subject), one_line=True), 500)

    def worst(self) -> Status:
        """The worst status, PASS for an empty report."""
        return max((r.status for r in self.results), key=lambda s: s.rank, default=Status.PASS)

    def failing(self, fail_on: FailOn | str = FailOn.FAIL) -> list[CheckResult]:
        """Results that fail the run: FAIL and ERROR, plus WARN/UNKNOWN when ``fail_on`` asks.

        Raises:
            ConfigError: ``fail_on`` is not one of ``FailOn``'s values.
        """
        fail_on = parse(FailOn, fail_on, "fail_on")
        threshold = {FailOn.FAIL: Status.FAIL, FailOn.UNKNOWN: Status.UNKNOWN, FailOn.WARN: Status.WARN}[
            fail_on
        ]
        failing = [r for r in self.results if r.status.rank >= threshold.rank]
        if fail_on is FailOn.UNKNOWN:  # UNKNOWN ranks above WARN; 'unknown' must not fail on WARN
            failing = [r for r in failing if r.status != Status.WARN]
        return failing

    def passed(self, fail_on: FailOn | str = FailOn.FAIL) -> bool:
        return not self.failing(fail_on)

    def unproven(self) -> list[CheckResult]:
        """The checks that could not tell (UNKNOWN): what a pass does not prove."""
        return [r for r in self.results if r.status == Status.UNKNOWN]

    def verdict(self, fail_on: FailOn | str = FailOn.FAIL) -> str:
        """``passed``; ``NOT PROVEN`` when it passed with checks that could not tell; ``FAILED``."""
        if not self.passed(fail_on):
            return "FAILED"
        return "NOT PROVEN" if self.unproven() else "passed"

    def unproven_line(self) -> str:
        """One line naming what could not be checked ('' when everything could)."""
        unknown = self.unproven()
        if not unknown:
            return ""
        names = "; ".join(f"{r.check}: {r.title}" for r in unknown[:6])
        more = f"; and {len(unknown) - 6} more" if len(unknown) > 6 else ""
        return (
            f"not proven: {len(unknown)} check(s) could not tell ({names}{more}); the job may still "
            "fail to start: fix what each UNKNOWN line names, or --fail-on unknown (fail_on=unknown) "
            "to fail on them"
        )

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in Status}
        for r in self.results:
            out[r.status.value] += 1
        return out

    def to_dict(self, fail_on: FailOn | str = FailOn.FAIL) -> dict:
        return {
            "subject": self.subject,
            "backend": self.backend,
            "passed": self.passed(fail_on),
            "verdict": self.verdict(fail_on),
            "fail_on": str(parse(FailOn, fail_on, "fail_on")),
            "worst": self.worst().value,
            "counts": self.counts(),
            "wall_s": round(self.wall_s, 3),
            "results": [r.to_dict() for r in self.results],
        }

    def to_json(self, fail_on: FailOn | str = FailOn.FAIL) -> str:
        return json.dumps(self.to_dict(fail_on), indent=2)

    def to_markdown(self, fail_on: FailOn | str = FailOn.FAIL) -> str:
        verdict = self.verdict(fail_on)
        c = self.counts()
        lines = [
            f"# Preflight {verdict}: {self.subject}",
            "",
            f"Backend `{self.backend}` · {c['PASS']} pass · {c['WARN']} warn · "
            f"{c['UNKNOWN']} unknown · {c['FAIL']} fail"
            + (f" · {c['ERROR']} internal error" if c["ERROR"] else "")
            + f" · {self.wall_s:.2f} s",
            "",
        ]
        if verdict == "NOT PROVEN":
            lines += [f"**{self.unproven_line()}**", ""]
        lines += [
            "| status | check | evidence | remedy |",
            "|---|---|---|---|",
        ]
        for r in sorted(self.results, key=lambda r: -r.status.rank):
            cells = [r.status.value, f"{r.check}: {r.title}", r.evidence, r.remedy or ""]
            lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
        return "\n".join(lines) + "\n"

    def summary_metrics(self) -> dict[str, float]:
        """Numbers for a KFP Metrics artifact."""
        c = self.counts()
        return {
            "checks": float(len(self.results)),
            "failed": float(c["FAIL"]),
            "warnings": float(c["WARN"]),
            "unknown": float(c["UNKNOWN"]),
            "errors": float(c["ERROR"]),
            "wall_seconds": round(self.wall_s, 3),
        }
