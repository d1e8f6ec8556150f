"""Facts about Vertex AI training hardware, each in one table: machines ↔ accelerators, TPU slices,
machine-type naming, quota metrics, Flex-start (DWS) requirements, and where each accelerator is
offered for custom training.

Sources (as of ``REGIONS_AS_OF``):

- machine/accelerator pairs, quota metric names: shared/PROTOCOLS.md; n1 vCPU bounds: the Compute
  Engine GPU pages; regions: the Vertex AI "locations" page. Regions change more often than
  anything else here, which is why a region missing from ``Accelerator.regions`` is a warning,
  not a failure: the quota check, which asks the live API, is authoritative.
- Flex-start: https://cloud.google.com/vertex-ai/docs/training/schedule-jobs-dws ("requests L4,
  A100, H100, H200, or B200 GPUs", "a maximum timeout of 7 days or less", "the same machine
  configuration for all worker pools").
- VPC peering: https://docs.cloud.google.com/vertex-ai/docs/training/using-private-ip ("doesn't
  support VPC Peering with H100-mega, H200 and B200 accelerators"; PSC-I is the alternative).
- TPU slices: https://cloud.google.com/tpu/docs/supported-tpu-configurations (v5e 2D shapes 1x1 …
  16x16) and the GKE/xpk machine tables (google/xpk ``system_characteristics``): v5e single-host
  ``ct5lp-hightpu-1t`` 1x1, ``-4t`` 2x2, ``-8t`` 2x4; multi-host slices 4x4 … 16x16 on
  ``ct5lp-hightpu-4t`` (4 chips per host); v4 ``ct4p-hightpu-4t`` 2x2x1 … (4 chips per host).
- CPU quota metrics: ``custom_model_training_cpus`` (N1/E2), ``custom_model_training_n2_cpus``,
  ``custom_model_training_c2_cpus`` and ``custom_model_training_preemptible_cpus`` as Vertex names
  them in quota errors and ``gcloud quotas info`` output; other families follow the same
  ``custom_model_training_<family>_cpus`` pattern (the quota check reports UNKNOWN, naming the
  metric, when a project lists no such metric).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from datetime import timedelta

__all__ = [
    "Accelerator",
    "ACCELERATORS",
    "REGIONS_AS_OF",
    "MachineRule",
    "machine_rule",
    "machine_family",
    "suggest_machine",
    "quota_metric",
    "quota_metric_pattern",
    "cpu_quota_metric",
    "machine_vcpus",
    "tpu_chips",
    "TpuSlice",
    "tpu_slice",
    "tpu_slices",
    "FlexStart",
    "FLEX_START",
    "QUOTA_METRIC_PREFIX",
]

REGIONS_AS_OF = "2026-11"
QUOTA_METRIC_PREFIX = "aiplatform.googleapis.com/custom_model_training_"


@dataclass(frozen=True)
class Accelerator:
    """One accelerator type as Vertex names it.

    Attributes:
        name: Vertex's ``acceleratorType``.
        quota_suffix: the Cloud Quotas metric suffix; '' when Google documents none, and
            ``quota_pattern`` finds it in the project's quota list instead.
        kind: ``gpu`` or ``tpu``.
        regions: training regions (see ``REGIONS_AS_OF``).
        compute_name: Compute Engine's name for it (reservations list ``guestAccelerators`` so).
        flex_start: Dynamic Workload Scheduler (``FLEX_START``) takes it.
        vpc_peering: training jobs with it may peer with a VPC (``network``).
        cores_per_chip: TPU cores per chip (quota may count cores), 1 for GPUs.
    """

    name: str
    quota_suffix: str
    kind: str
    regions: tuple[str, ...]
    compute_name: str = ""
    flex_start: bool = False
    vpc_peering: bool = True
    cores_per_chip: int = 1
    quota_pattern: str = ""


_US = ("us-central1", "us-east1", "us-east4", "us-west1", "us-west4")
ACCELERATORS: dict[str, Accelerator] = {
    a.name: a
    for a in (
        Accelerator(
            "NVIDIA_TESLA_T4",
            "nvidia_t4_gpus",
            "gpu",
            _US
            + (
                "us-west2",
                "northamerica-northeast1",
                "southamerica-east1",
                "europe-west1",
                "europe-west2",
                "europe-west3",
                "europe-west4",
                "asia-east1",
                "asia-northeast1",
                "asia-northeast3",
                "asia-south1",
                "asia-southeast1",
                "australia-southeast1",
            ),
            compute_name="nvidia-tesla-t4",
        ),
        Accelerator(
            "NVIDIA_TESLA_P4",
            "nvidia_p4_gpus",
            "gpu",
            (
                "us-central1",
                "us-east4",
                "us-west2",
                "northamerica-northeast1",
                "europe-west4",
                "asia-southeast1",
                "australia-southeast1",
            ),
            compute_name="nvidia-tesla-p4",
        ),
        Accelerator(
            "NVIDIA_TESLA_P100",
            "nvidia_p100_gpus",
            "gpu",
            ("us-central1", "us-east1", "us-west1", "europe-west1", "europe-west4", "asia-east1"),
            compute_name="nvidia-tesla-p100",
        ),
        Accelerator(
            "NVIDIA_TESLA_V100",
            "nvidia_v100_gpus",
            "gpu",
            ("us-central1", "us-east1", "us-west1", "europe-west4", "asia-east1"),
            compute_name="nvidia-tesla-v100",
        ),
        Accelerator(
            "NVIDIA_TESLA_A100",
            "nvidia_a100_gpus",
            "gpu",
            (
                "us-central1",
                "us-east1",
                "us-west1",
                "us-west3",
                "us-west4",
                "europe-west4",
                "me-west1",
                "asia-northeast1",
                "asia-northeast3",
                "asia-southeast1",
            ),
            compute_name="nvidia-tesla-a100",
            flex_start=True,
        ),
        Accelerator(
            "NVIDIA_A100_80GB",
            "nvidia_a100_80gb_gpus",
            "gpu",
            ("us-central1", "us-east4", "us-east5", "europe-west4", "asia-southeast1"),
            compute_name="nvidia-a100-80gb",
            flex_start=True,
        ),
        Accelerator(
            "NVIDIA_L4",
            "nvidia_l4_gpus",
            "gpu",
            _US
            + (
                "europe-west1",
                "europe-west2",
                "europe-west3",
                "europe-west4",
                "asia-east1",
                "asia-northeast1",
                "asia-northeast3",
                "asia-south1",
                "asia-southeast1",
            ),
            compute_name="nvidia-l4",
            flex_start=True,
        ),
        Accelerator(
            "NVIDIA_H100_80GB",
            "nvidia_h100_gpus",
            "gpu",
            (
                "us-central1",
                "us-east4",
                "us-east5",
                "us-west1",
                "europe-west1",
                "europe-west4",
                "asia-southeast1",
            ),
            compute_name="nvidia-h100-80gb",
            flex_start=True,
        ),
        Accelerator(
            "NVIDIA_H100_MEGA_80GB",
            "nvidia_h100_mega_gpus",
            "gpu",
            ("us-central1", "us-east4", "us-east5", "europe-west4", "asia-southeast1"),
            compute_name="nvidia-h100-mega-80gb",
            flex_start=True,
            vpc_peering=False,
        ),
        Accelerator(
            "NVIDIA_H200_141GB",
            "nvidia_h200_gpus",
            "gpu",
            ("us-central1", "us-east4", "us-south1", "europe-west1", "asia-south1"),
            compute_name="nvidia-h200-141gb",
            flex_start=True,
            vpc_peering=False,
        ),
        Accelerator(
            "NVIDIA_B200",
            "nvidia_b200_gpus",
            "gpu",
            ("us-central1", "us-east4"),
            compute_name="nvidia-b200",
            flex_start=True,
            vpc_peering=False,
        ),
        Accelerator("TPU_V2", "tpu_v2", "tpu", ("us-central1", "europe-west4", "asia-east1")),
        Accelerator("TPU_V3", "tpu_v3", "tpu", ("us-central1", "europe-west4")),
        # No documented metric name for v4 pods: found by pattern in the project's quota list; a
        # v4 chip has two TensorCores, so a limit in cores counts 2 per chip.
        Accelerator(
            "TPU_V4_POD",
            "",
            "tpu",
            (),
            cores_per_chip=2,
            quota_pattern=r"custom_model_training_(preemptible_)?tpu_v4\w*",
        ),
        Accelerator(
            "TPU_V5_LITEPOD",
            "tpu_v5e",
            "tpu",
            ("us-central1", "us-east1", "us-east5", "us-south1", "us-west1", "us-west4", "asia-southeast1"),
        ),
    )
}


@dataclass(frozen=True)
class FlexStart:
    """Dynamic Workload Scheduler's requirements for a training job (one table, one source)."""

    accelerators: frozenset[str]
    max_timeout: timedelta
    same_machine_for_all_pools: bool
    source: str


FLEX_START = FlexStart(
    accelerators=frozenset(a.name for a in ACCELERATORS.values() if a.flex_start),
    max_timeout=timedelta(days=7),
    same_machine_for_all_pools=True,
    source="https://cloud.google.com/vertex-ai/docs/training/schedule-jobs-dws",
)


# --- TPU slices -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TpuSlice:
    """One TPU slice shape a machine type can form: ``chips`` in all, ``hosts`` VMs."""

    topology: str
    chips: int
    hosts: int

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1


def _slices(chips_per_host: int, *topologies: str) -> dict[str, TpuSlice]:
    out = {}
    for topology in topologies:
        chips = 1
        for dim in topology.split("x"):
            chips *= int(dim)
        out[topology] = TpuSlice(topology, chips, max(1, chips // chips_per_host))
    return out


#: Machine type → (accelerator, chips per host, the slices it forms). A machine type's
#: single-host slice is the one with ``hosts == 1`` and ``chips == chips per host``.
_TPU_MACHINES: dict[str, tuple[str, int, dict[str, TpuSlice]]] = {
    "ct5lp-hightpu-1t": ("TPU_V5_LITEPOD", 1, _slices(1, "1x1")),
    "ct5lp-hightpu-4t": ("TPU_V5_LITEPOD", 4, _slices(4, "2x2", "4x4", "4x8", "8x8", "8x16", "16x16")),
    "ct5lp-hightpu-8t": ("TPU_V5_LITEPOD", 8, _slices(8, "2x4")),
    "ct4p-hightpu-4t": (
        "TPU_V4_POD",
        4,
        _slices(
            4,
            "2x2x1",
            "2x2x2",
            "2x2x4",
            "2x4x4",
            "4x4x4",
            "4x4x8",
            "4x8x8",
            "8x8x8",
            "8x8x12",
            "8x8x16",
            "8x16x16",
        ),
    ),
}


def tpu_slices(machine_type: str) -> dict[str, TpuSlice]:
    """Every slice ``machine_type`` can form, by topology ({} for a non-TPU machine type)."""
    entry = _TPU_MACHINES.get(machine_type)
    return dict(entry[2]) if entry else {}


def tpu_slice(machine_type: str, topology: str) -> TpuSlice | None:
    """The slice ``topology`` on ``machine_type``, None when it cannot form it."""
    return tpu_slices(machine_type).get(topology)


def tpu_chips(machine_type: str, accelerator_count: int, topology: str = "") -> int:
    """TPU chips one replica holds (the count quota is charged in): the whole slice for a
    known topology, else the machine type's chips per host, else ``accelerator_count``."""
    found = tpu_slice(machine_type, topology) if topology else None
    if found is not None:
        return found.chips
    entry = _TPU_MACHINES.get(machine_type)
    return entry[1] if entry else accelerator_count


# --- machine types ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MachineRule:
    """What a machine type accepts: accelerator type → allowed counts (empty: none allowed)."""

    machine_type: str
    accelerators: dict[str, tuple[int, ...]]
    tpu_topologies: dict[int, str]  # chips → single-host topology, for TPU machine types
    vcpus: int | None = None

    @property
    def needs_accelerator(self) -> bool:
        """True for GPU accelerator-optimized families (g2/a2/a3/a4), which bundle them."""
        return bool(self.accelerators) and not self.machine_type.startswith("n1-") and not self.is_tpu

    @property
    def is_tpu(self) -> bool:
        return self.machine_type in _TPU_MACHINES or self.machine_type == "cloud-tpu"


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
_CPU_FAMILY_NAMES = ("n1", "n2", "n2d", "n4", "e2", "c2", "c2d", "c3", "c3d", "c4", "m1", "m2", "m3")
_CPU_FAMILIES = re.compile(
    rf"^({'|'.join(_CPU_FAMILY_NAMES)})-(standard|highmem|highcpu|megamem|ultramem)-(\d+)$"
)

#: How each known family names its machine types: a name of a family's shape that is not in the
#: tables above may be a type trainguard has not learnt yet (WARN); any other name is a typo
#: (FAIL, with the closest known name).
_FAMILY_SHAPES: dict[str, re.Pattern[str]] = {
    "a2": re.compile(r"^a2-(highgpu|megagpu|ultragpu)-\d+g$"),
    "a3": re.compile(r"^a3-(highgpu|megagpu|ultragpu|edgegpu)-\d+g$"),
    "a4": re.compile(r"^a4x?-(highgpu|maxgpu)-\d+g$"),
    "g2": re.compile(r"^g2-standard-\d+$"),
    "ct4p": re.compile(r"^ct4p-hightpu-\d+t$"),
    "ct5lp": re.compile(r"^ct5lp-hightpu-\d+t$"),
    "ct5p": re.compile(r"^ct5p-hightpu-\d+t$"),
    "ct6e": re.compile(r"^ct6e-standard-\d+t$"),
    **{f: re.compile(rf"^{f}-(standard|highmem|highcpu|megamem|ultramem)-\d+$") for f in _CPU_FAMILY_NAMES},
}
_KNOWN_EXAMPLES = (
    [f"g2-standard-{n}" for n in sorted(_G2_L4)]
    + [f"a2-highgpu-{n}g" for n in (1, 2, 4, 8)]
    + ["a2-megagpu-16g"]
    + [f"a2-ultragpu-{n}g" for n in (1, 2, 4, 8)]
    + [f"a3-highgpu-{n}g" for n in (1, 2, 4, 8)]
    + ["a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g", "cloud-tpu"]
    + list(_TPU_MACHINES)
    + [
        f"{f}-{k}-{n}"
        for f in ("n1", "n2", "e2", "c2")
        for k in ("standard", "highmem", "highcpu")
        for n in (2, 4, 8, 16, 32, 64, 96)
    ]
)


def machine_family(machine_type: str) -> str | None:
    """The known family whose naming ``machine_type`` follows (``a2``, ``n1``…), else None."""
    if machine_type == "cloud-tpu":
        return "cloud-tpu"
    for family, shape in _FAMILY_SHAPES.items():
        if shape.match(machine_type):
            return family
    return None


def suggest_machine(machine_type: str) -> str | None:
    """The closest known machine type name, for "did you mean …"."""
    close = difflib.get_close_matches(machine_type.lower(), _KNOWN_EXAMPLES, n=1, cutoff=0.5)
    return close[0] if close else None


def machine_vcpus(machine_type: str) -> int | None:
    """vCPUs of a CPU-family machine type (``n1-standard-8`` → 8), None when not by name."""
    m = _CPU_FAMILIES.match(machine_type)
    return int(m.group(3)) if m else None


def machine_rule(machine_type: str) -> MachineRule | None:
    """The accelerator rule for ``machine_type``; None for a type trainguard does not know."""
    m = re.match(r"^g2-standard-(\d+)$", machine_type)
    if m and int(m.group(1)) in _G2_L4:
        return MachineRule(machine_type, {"NVIDIA_L4": (_G2_L4[int(m.group(1))],)}, {}, int(m.group(1)))
    for pattern, accel in _BUNDLED:
        m = pattern.match(machine_type)
        if m:
            return MachineRule(machine_type, {accel: (int(m.group(1)),)}, {})
    if machine_type in _TPU_MACHINES:
        accel, chips, slices = _TPU_MACHINES[machine_type]
        single = next(s.topology for s in slices.values() if s.chips == chips)
        return MachineRule(machine_type, {accel: (chips,)}, {chips: single})
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


# --- quota metrics ----------------------------------------------------------------------------


def quota_metric(accelerator_type: str, preemptible: bool) -> str | None:
    """The Cloud Quotas metric a training job of this accelerator consumes, or None if unknown
    (see ``quota_metric_pattern`` for the accelerators whose metric is found by pattern).

    SPOT and FLEX_START jobs consume the ``preemptible_`` variant.
    """
    accel = ACCELERATORS.get(accelerator_type)
    if accel is None or not accel.quota_suffix:
        return None
    middle = "preemptible_" if preemptible else ""
    return f"{QUOTA_METRIC_PREFIX}{middle}{accel.quota_suffix}"


def quota_metric_pattern(accelerator_type: str, preemptible: bool) -> re.Pattern[str] | None:
    """A pattern that finds the accelerator's metric in a project's quota list, for accelerators
    whose metric Google does not document; None for the others."""
    accel = ACCELERATORS.get(accelerator_type)
    if accel is None or not accel.quota_pattern:
        return None
    body = accel.quota_pattern.replace("(preemptible_)?", "preemptible_" if preemptible else "")
    return re.compile(rf"^aiplatform\.googleapis\.com/{body}$")


_CPU_METRIC_BY_FAMILY = {"n1": "cpus", "e2": "cpus"}  # "for N1/E2 machine types"


def cpu_quota_metric(machine_type: str, preemptible: bool) -> str | None:
    """The vCPU quota metric a CPU-only pool of ``machine_type`` consumes, None if not by name."""
    m = _CPU_FAMILIES.match(machine_type)
    if not m:
        return None
    family = m.group(1)
    suffix = _CPU_METRIC_BY_FAMILY.get(family, f"{family}_cpus")
    middle = "preemptible_" if preemptible else ""
    return f"{QUOTA_METRIC_PREFIX}{middle}{suffix}"
