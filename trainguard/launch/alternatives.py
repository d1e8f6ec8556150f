"""Fallbacks: the other shapes and places a job may run when its own has no capacity or quota.

``--fallback region=us-east4 --fallback region=europe-west4,strategy=FLEX_START`` lists
:class:`Alternative` s, tried in order after the job as specified. Each is comma-separated
``key=value`` changes to the job:

* ``region``: where the job runs (``us-east4``);
* ``machine``: the machine type of the job's training pools (``a3-highgpu-1g``); a machine that
  bundles its GPUs (a2, a3, a4, g2) brings their type and count unless they are given;
* ``accelerator``: the accelerator type (``NVIDIA_H100_80GB``);
* ``count``: accelerators per replica (``1``);
* ``strategy``: ``STANDARD``, ``SPOT`` or ``FLEX_START``.

The *training pools* are the pools shaped like the chief's (``workerPoolSpecs[0]``): the chief and
its workers; a parameter-server, Reduction Server or evaluator pool of another shape is left as it
is. Everything else — the image, the command, the output directory and so its checkpoints — stays
the job's own, so every alternative resumes where the last one stopped.

In a KFP parameter (one string) alternatives are separated by ``;``:
``region=us-east4;region=europe-west4,strategy=FLEX_START``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from trainguard.errors import ConfigError, SpecError

if TYPE_CHECKING:
    from trainguard.spec import JobSpec

__all__ = ["Alternative", "parse_fallbacks", "KEYS", "STRATEGIES", "shape_of"]

KEYS = ("region", "machine", "accelerator", "count", "strategy")
STRATEGIES = ("STANDARD", "SPOT", "FLEX_START")
_EXAMPLE = "e.g. --fallback region=us-east4 or --fallback machine=a3-highgpu-1g,strategy=FLEX_START"
_ACCELERATOR = re.compile(r"[A-Z][A-Z0-9_]*")
_MACHINE = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+")


@dataclass(frozen=True)
class Alternative:
    """One way to run the job: the changes to make to it ('' / 0: keep the job's own).

    Raises (at construction):
        ConfigError: a value that is not a region, machine type, accelerator name, positive
            count or strategy (the message says what to pass).
    """

    region: str = ""
    machine: str = ""
    accelerator: str = ""
    count: int = 0
    strategy: str = ""

    def __post_init__(self) -> None:
        from trainguard.spec import validate_region

        if self.region:
            try:
                validate_region(self.region)
            except SpecError as exc:
                raise ConfigError(
                    f"--fallback region={self.region}: {exc}".replace("; pass --region", "")
                ) from None
        if self.machine and not _MACHINE.fullmatch(self.machine):
            raise ConfigError(
                f"--fallback machine={self.machine[:60]}: not a machine type such as "
                "a2-highgpu-1g or g2-standard-8"
            )
        if self.accelerator and not _ACCELERATOR.fullmatch(self.accelerator):
            raise ConfigError(
                f"--fallback accelerator={self.accelerator[:60]}: not an accelerator type such as "
                "NVIDIA_H100_80GB or NVIDIA_L4 (Vertex's names, upper case)"
            )
        if self.count < 0:
            raise ConfigError(f"--fallback count={self.count}: accelerators per replica is a positive number")
        if self.strategy and self.strategy not in STRATEGIES:
            raise ConfigError(f"--fallback strategy={self.strategy[:40]}: use one of {', '.join(STRATEGIES)}")

    @classmethod
    def parse(cls, text: str) -> Alternative:
        """``region=us-east4,strategy=FLEX_START`` → an Alternative.

        Raises:
            ConfigError: not ``key=value`` items, an unknown or repeated key, a bad value, or no
                change at all.
        """
        values: dict[str, Any] = {}
        for item in (p.strip() for p in text.split(",")):
            if not item:
                continue
            key, sep, value = item.partition("=")
            key, value = key.strip().lower(), value.strip()
            if not sep or not value:
                raise ConfigError(f"--fallback {text[:80]!r}: {item[:40]!r} is not key=value; {_EXAMPLE}")
            if key not in KEYS:
                raise ConfigError(
                    f"--fallback {text[:80]!r}: unknown key {key[:30]!r}; use {', '.join(KEYS)} ({_EXAMPLE})"
                )
            if key in values:
                raise ConfigError(f"--fallback {text[:80]!r}: {key} is given twice; give it once")
            if key == "count":
                if not value.isdigit() or int(value) < 1:
                    raise ConfigError(
                        f"--fallback count={value[:20]}: accelerators per replica is 1, 2, 4, 8…"
                    )
                values[key] = int(value)
            elif key in ("accelerator", "strategy"):
                values[key] = value.upper()
            else:
                values[key] = value.lower() if key == "region" else value
        if not values:
            raise ConfigError(f"--fallback {text[:80]!r}: names no change to the job; {_EXAMPLE}")
        return cls(**values)

    def label(self) -> str:
        """``region=us-east4,strategy=FLEX_START``; ``as specified`` for the job itself."""
        parts = [f"{f.name}={getattr(self, f.name)}" for f in fields(self) if getattr(self, f.name)]
        return ",".join(parts) or "as specified"

    def apply(self, spec: JobSpec) -> JobSpec:
        """``spec`` with these changes (a copy; the job itself when there are none).

        Raises:
            SpecError: the changed job is not a valid CustomJobSpec (the field is named, and
                ``--fallback`` with it).
        """
        if not any(getattr(self, f.name) for f in fields(self)):
            return spec
        from trainguard.spec import parse_spec

        body = spec.to_body()
        job = body["jobSpec"]
        pools = job.get("workerPoolSpecs", [])
        chief = dict((pools[0] if pools else {}).get("machineSpec", {}))
        machine = self._machine_spec(chief)
        for pool in pools:
            if pool and pool.get("machineSpec") == chief:
                pool["machineSpec"] = dict(machine)
        if self.strategy:
            scheduling = job.setdefault("scheduling", {})
            scheduling["strategy"] = self.strategy
            if self.strategy != "FLEX_START":
                scheduling.pop("maxWaitDuration", None)  # Vertex takes it with FLEX_START only
        try:
            return parse_spec(
                body, project=spec.project, region=self.region or spec.region, display_name=spec.display_name
            )
        except SpecError as exc:
            raise SpecError(f"--fallback {self.label()}: {exc}") from None

    def _machine_spec(self, chief: dict[str, Any]) -> dict[str, Any]:
        from trainguard.catalog import machine_rule

        out = dict(chief)
        if self.machine:
            out["machineType"] = self.machine
            rule = machine_rule(self.machine)
            bundled = rule.accelerators if rule is not None and rule.needs_accelerator else {}
            if len(bundled) == 1 and not self.accelerator:
                ((accel, counts),) = bundled.items()
                out["acceleratorType"] = accel
                if len(counts) == 1 and not self.count:
                    out["acceleratorCount"] = counts[0]
        if self.accelerator:
            out["acceleratorType"] = self.accelerator
        if self.count:
            out["acceleratorCount"] = self.count
        return out


def parse_fallbacks(values: str | Sequence[str] | None) -> tuple[Alternative, ...]:
    """The alternatives in ``values``: a KFP string (``;`` between alternatives) or the list a
    repeatable flag gives (each item may hold several, ``;``-separated).

    Raises:
        ConfigError: an alternative that :meth:`Alternative.parse` refuses.
    """
    if values is None:
        return ()
    items: Iterable[str] = [values] if isinstance(values, str) else values
    return tuple(
        Alternative.parse(part) for item in items for part in (p.strip() for p in item.split(";")) if part
    )


def shape_of(spec: JobSpec) -> dict[str, Any]:
    """Where and on what ``spec`` runs: region, machine, accelerator, count, strategy (its chief's)."""
    pools = spec.pools
    chief = pools[0] if pools else None
    return {
        "region": spec.region,
        "machine": chief.machine_type if chief else "",
        "accelerator": (chief.accelerator_type or "") if chief else "",
        "count": chief.accelerator_count if chief else 0,
        "strategy": spec.strategy,
    }
