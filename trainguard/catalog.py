"""Facts about Vertex AI training hardware, each in one table: machines ↔ accelerators, quota
metrics, and where each accelerator is offered for custom training.

Sources: shared/PROTOCOLS.md (machine/accelerator pairs, quota metric names), the Compute Engine GPU
pages (n1 vCPU bounds) and the Vertex AI "locations" page (regions; as of ``REGIONS_AS_OF``). Regions
change more often than anything else here, which is why a region missing from ``Accelerator.regions``
is a warning, not a failure: the quota check, which asks the live API, is authoritative.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "Accelerator",
    "ACCELERATORS",
    "REGIONS_AS_OF",
    "MachineRule",
    "machine_rule",
    "quota_metric",
    "tpu_chips",
    "QUOTA_METRIC_PREFIX",
]

REGIONS_AS_OF = "2026-11"
QUOTA_METRIC_PREFIX = "aiplatform.googleapis.com/custom_model_training_"


@dataclass(frozen=True)
class Accelerator:
    """One accelerator type as Vertex names it, its quota metric suffix and training regions."""

    name: str
    quota_suffix: str
    kind: str  # "gpu" or "tpu"
    regions: tuple[str, ...]


_US = ("us-central1", "us-east1", "us-east4", "us-west1", "us-west4")
ACCELERATORS: dict[str, Accelerator] = {a.name: a for a in (
    Accelerator("NVIDIA_TESLA_T4", "nvidia_t4_gpus", "gpu", _US + (
        "us-west2", "northamerica-northeast1", "southamerica-east1", "europe-west1",
        "europe-west2", "europe-west3", "europe-west4", "asia-east1", "asia-northeast1",
        "asia-northeast3", "asia-south1", "asia-southeast1", "australia-southeast1")),
    Accelerator("NVIDIA_TESLA_P4", "nvidia_p4_gpus", "gpu", (
        "us-central1", "us-east4", "us-west2", "northamerica-northeast1", "europe-west4",
        "asia-southeast1", "australia-southeast1")),
    Accelerator("NVIDIA_TESLA_P100", "nvidia_p100_gpus", "gpu", (
        "us-central1", "us-east1", "us-west1", "europe-west1", "europe-west4", "asia-east1")),
    Accelerator("NVIDIA_TESLA_V100", "nvidia_v100_gpus", "gpu", (
        "us-central1", "us-east1", "us-west1", "europe-west4", "asia-east1")),
    Accelerator("NVIDIA_TESLA_A100", "nvidia_a100_gpus", "gpu", (
        "us-central1", "us-east1", "us-west1", "us-west3", "us-west4", "europe-west4",
        "me-west1", "asia-northeast1", "asia-northeast3", "asia-southeast1")),
    Accelerator("NVIDIA_A100_80GB", "nvidia_a100_80gb_gpus", "gpu", (
        "us-central1", "us-east4", "us-east5", "europe-west4", "asia-southeast1")),
    Accelerator("NVIDIA_L4", "nvidia_l4_gpus", "gpu", _US + (
        "europe-west1", "europe-west2", "europe-west3", "europe-west4", "asia-east1",
        "asia-northeast1", "asia-northeast3", "asia-south1", "asia-southeast1")),
    Accelerator("NVIDIA_H100_80GB", "nvidia_h100_gpus", "gpu", (
        "us-central1", "us-east4", "us-east5", "us-west1", "europe-west1", "europe-west4",
        "asia-southeast1")),
    Accelerator("NVIDIA_H100_MEGA_80GB", "nvidia_h100_mega_gpus", "gpu", (
        "us-central1", "us-east4", "us-east5", "europe-west4", "asia-southeast1")),
    Accelerator("NVIDIA_H200_141GB", "nvidia_h200_gpus", "gpu", (
        "us-central1", "us-east4", "us-south1", "europe-west1", "asia-south1")),
    Accelerator("NVIDIA_B200", "nvidia_b200_gpus", "gpu", ("us-central1", "us-east4")),
    Accelerator("TPU_V2", "tpu_v2", "tpu", ("us-central1", "europe-west4", "asia-east1")),
    Accelerator("TPU_V3", "tpu_v3", "tpu", ("us-central1", "europe-west4")),
    Accelerator("TPU_V5_LITEPOD", "tpu_v5e", "tpu", (
        "us-central1", "us-east1", "us-east5", "us-south1", "us-west1", "us-west4",
        "asia-southeast1")),
)}


@dataclass(frozen=True)
class MachineRule:
    """What a machine type accepts: accelerator type → allowed counts (empty: none allowed)."""

    machine_type: str
    accelerators: dict[str, tuple[int, ...]]
    tpu_topologies: dict[int, str]  # chips → topology, for TPU machine types
    vcpus: int | None = None

    @property
    def needs_accelerator(self) -> bool:
        """True for accelerator-optimized families (g2/a2/a3/a4/ct5lp), which bundle them."""
        return bool(self.accelerators) and not self.machine_type.startswith("n1-")


# n1 GPU pairings: accelerator → ((count, max vCPUs), ...) from the Compute Engine GPU pages.
_N1_GPUS: dict[str, tuple[tuple[int, int], ...]] = {
    "NVIDIA_TESLA_T4": ((1, 48), (2, 48), (4, 96)),
    "NVIDIA_TESLA_P4": ((1, 24), (2, 48), (4, 96)),
    "NVIDIA_TESLA_P100": ((1, 16), (2, 32), (4, 96)),
    "NVIDIA_TESLA_V100": ((1, 12), (2, 24), (4, 48), (8, 96)),
}
_G2_L4 = {4: 1, 8: 1, 12: 1, 16: 1, 32: 1, 24: 2, 48: 4, 96: 8}
_BUNDLED = (  # family regex → (accelerator, count from the match)
    (re.compile(r"^a2-highgpu-(1|2|4|8)g$"), "NVIDIA_TESLA_A100"),
    (re.compile(r"^a2-megagpu-(16)g$"), "NVIDIA_TESLA_A100"),
    (re.compile(r"^a2-ultragpu-(1|2|4|8)g$"), "NVIDIA_A100_80GB"),
    (re.compile(r"^a3-highgpu-(1|2|4|8)g$"), "NVIDIA_H100_80GB"),
    (re.compile(r"^a3-megagpu-(8)g$"), "NVIDIA_H100_MEGA_80GB"),
    (re.compile(r"^a3-ultragpu-(8)g$"), "NVIDIA_H200_141GB"),
    (re.compile(r"^a4-highgpu-(8)g$"), "NVIDIA_B200"),
)
_TPU_V5E = {1: "1x1", 4: "2x2", 8: "2x4"}
_CPU_FAMILIES = re.compile(
    r"^(n1|n2|n2d|e2|c2|c2d|c3|m1|m2|m3)-(standard|highmem|highcpu|megamem|ultramem)-(\d+)$")


def machine_rule(machine_type: str) -> MachineRule | None:
    """The accelerator rule for ``machine_type``; None for a type trainguard does not know."""
    m = re.match(r"^g2-standard-(\d+)$", machine_type)
    if m and int(m.group(1)) in _G2_L4:
        return MachineRule(machine_type, {"NVIDIA_L4": (_G2_L4[int(m.group(1))],)}, {},
                           int(m.group(1)))
    for pattern, accel in _BUNDLED:
        m = pattern.match(machine_type)
        if m:
            return MachineRule(machine_type, {accel: (int(m.group(1)),)}, {})
    m = re.match(r"^ct5lp-hightpu-(1|4|8)t$", machine_type)
    if m:
        chips = int(m.group(1))
        return MachineRule(machine_type, {"TPU_V5_LITEPOD": (chips,)}, {chips: _TPU_V5E[chips]})
    if machine_type == "cloud-tpu":
        return MachineRule(machine_type, {"TPU_V2": (8,), "TPU_V3": (8,)}, {})
    m = _CPU_FAMILIES.match(machine_type)
    if m:
        vcpus = int(m.group(3))
        if m.group(1) != "n1":
            return MachineRule(machine_type, {}, {}, vcpus)
        allowed = {
            accel: tuple(count for count, max_vcpus in pairs if vcpus <= max_vcpus)
            for accel, pairs in _N1_GPUS.items()
        }
        return MachineRule(machine_type, allowed, {}, vcpus)
    return None


def quota_metric(accelerator_type: str, preemptible: bool) -> str | None:
    """The Cloud Quotas metric a training job of this accelerator consumes, or None if unknown.

    SPOT and FLEX_START jobs consume the ``preemptible_`` variant.
    """
    accel = ACCELERATORS.get(accelerator_type)
    if accel is None:
        return None
    middle = "preemptible_" if preemptible else ""
    return f"{QUOTA_METRIC_PREFIX}{middle}{accel.quota_suffix}"


def tpu_chips(machine_type: str, accelerator_count: int) -> int:
    """TPU chips a replica of ``machine_type`` holds (the count quota is charged in)."""
    m = re.match(r"^ct5lp-hightpu-(\d+)t$", machine_type)
    return int(m.group(1)) if m else accelerator_count
