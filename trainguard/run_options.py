"""What ``trainguard run`` passes to a pipeline: its options, checked at construction.

Each option is one parameter of ``guarded_training`` and, for preflight's, of ``preflight_only``
(``PARAMETERS``, the one table). An option given for a pipeline that lacks it, or a value a task
would refuse (a malformed gate, an unknown threshold or check family), is bad input before anything
runs, not a failed task minutes later.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from trainguard.choices import FailOn, GateAt, GuardMode, ModelChoice, parse
from trainguard.errors import ConfigError

__all__ = ["PIPELINE_NAMES", "PARAMETERS", "SEPARATORS", "RunOptions"]

PIPELINE_NAMES = ("guarded_training", "preflight_only")

#: option -> {pipeline: its parameter}
PARAMETERS: dict[str, dict[str, str]] = {
    "only": {"guarded_training": "preflight_checks", "preflight_only": "only"},
    "skip": {"guarded_training": "preflight_skip", "preflight_only": "skip"},
    "fail_on": {"guarded_training": "preflight_fail_on", "preflight_only": "fail_on"},
    "output_dir": {"guarded_training": "output_dir"},
    "resume": {"guarded_training": "resume"},
    "guard": {"guarded_training": "guard"},
    "model": {"guarded_training": "model_choice"},
    "max_queued": {"guarded_training": "max_queued"},
    "train_metric": {"guarded_training": "train_metric"},
    "val_metric": {"guarded_training": "val_metric"},
    "validate_fail_on": {"guarded_training": "validate_fail_on"},
    "validate_warn_on": {"guarded_training": "validate_warn_on"},
    "gate": {"guarded_training": "validate_gates"},
    "threshold": {"guarded_training": "validate_thresholds"},
    "direction": {"guarded_training": "validate_directions"},
    "gate_at": {"guarded_training": "validate_gate_at"},
    "budget": {"guarded_training": "budget", "preflight_only": "budget"},
    "fallback": {"guarded_training": "fallbacks", "preflight_only": "fallbacks"},
    "retries": {"guarded_training": "retries"},
    "hang_after": {"guarded_training": "hang_after"},
    "inject": {"guarded_training": "inject"},
    "serving_image": {"guarded_training": "serving_image"},
    "parent_model": {"guarded_training": "parent_model"},
    "model_display_name": {"guarded_training": "model_display_name"},
}

#: How a repeatable option's values are joined into its one string parameter (default ``,``):
#: one fallback is itself a comma-separated list, so fallbacks are separated by ``;``.
SEPARATORS: dict[str, str] = {"fallback": ";"}


@dataclass(frozen=True)
class RunOptions:
    """``trainguard run``'s options for one pipeline (empty: the pipeline's default).

    Raises (at construction):
        ConfigError: an unknown pipeline, an option that pipeline does not take, a bad value.
    """

    pipeline: str = "guarded_training"
    only: str = ""
    skip: str = ""
    fail_on: str = ""
    output_dir: str = ""
    resume: bool = False
    guard: str = ""
    model: str = ""
    max_queued: str = ""
    train_metric: str = ""
    val_metric: str = ""
    validate_fail_on: str = ""
    validate_warn_on: str = ""
    gate: tuple[str, ...] = field(default_factory=tuple)
    threshold: tuple[str, ...] = field(default_factory=tuple)
    direction: tuple[str, ...] = field(default_factory=tuple)
    gate_at: str = ""
    budget: float = 0.0
    fallback: tuple[str, ...] = field(default_factory=tuple)
    retries: tuple[str, ...] = field(default_factory=tuple)
    hang_after: str = ""
    inject: tuple[str, ...] = field(default_factory=tuple)
    serving_image: str = ""
    parent_model: str = ""
    model_display_name: str = ""

    def __post_init__(self) -> None:
        if self.pipeline not in PIPELINE_NAMES:
            raise ConfigError(f"--pipeline {self.pipeline!r}: use one of {', '.join(PIPELINE_NAMES)}")
        for option in self._given():
            if self.pipeline not in PARAMETERS[option]:
                flag = "--" + option.replace("_", "-")
                raise ConfigError(
                    f"{flag} applies to --pipeline {', '.join(PARAMETERS[option])}, not {self.pipeline}"
                )
        self._check_values()

    def _given(self) -> list[str]:
        return [f.name for f in fields(self) if f.name != "pipeline" and getattr(self, f.name)]

    def _check_values(self) -> None:
        from trainguard.guard.hang import HangPolicy
        from trainguard.launch.alternatives import parse_fallbacks
        from trainguard.launch.attempts import RetryBudget
        from trainguard.launch.inject import parse_injections
        from trainguard.launch.queueing import parse_max_queued
        from trainguard.preflight.checks import FAMILIES
        from trainguard.preflight.cost import parse_budget
        from trainguard.stages import split_names
        from trainguard.validation import RuleConfig, parse_assignments, parse_gates
        from trainguard.validation.pairs import parse_directions

        for option, choice in (
            ("fail_on", FailOn),
            ("guard", GuardMode),
            ("model", ModelChoice),
            ("gate_at", GateAt),
        ):
            value = getattr(self, option)
            if value:
                parse(choice, value, "--" + option.replace("_", "-"))
        for option in ("only", "skip"):
            unknown = [n for n in split_names(getattr(self, option)) if n not in FAMILIES]
            if unknown:
                raise ConfigError(
                    f"--{option}: {', '.join(unknown)} is not a check family; use {', '.join(FAMILIES)}"
                )
        parse_max_queued(self.max_queued)
        parse_budget(self.budget)
        RuleConfig().with_overrides(
            parse_assignments(list(self.threshold) or None, "--threshold", RuleConfig.names())
        )
        parse_gates(list(self.gate) or None, default_at=parse(GateAt, self.gate_at or "best", "--gate-at"))
        parse_directions(list(self.direction) or None)
        parse_fallbacks(list(self.fallback))
        RetryBudget.parse(list(self.retries))
        HangPolicy.parse(self.hang_after)
        parse_injections(",".join(self.inject))

    def parameters(self) -> dict[str, object]:
        """The pipeline's parameters for the options given (lists joined with commas)."""
        out: dict[str, object] = {}
        for option in self._given():
            value = getattr(self, option)
            joined = SEPARATORS.get(option, ",").join(value) if isinstance(value, tuple) else value
            out[PARAMETERS[option][self.pipeline]] = joined
        return out
