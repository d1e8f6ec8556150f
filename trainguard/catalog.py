"""Facts about Vertex AI training hardware, each in one table, each row with where it was read
and when: machines ↔ accelerators, the machine types training accepts, TPU slices, where each
accelerator is offered, end of support, boot disks, Flex-start (DWS) requirements, quota metrics.

Every row names a key of ``SOURCES`` (a page and the date it was read). Regions change more often
than anything else here, which is why a region missing from ``Accelerator.regions`` is a warning,
not a failure: the quota check, which asks the live API, is authoritative. What a table row says
and a live Vertex AI answer disagree on, the live answer wins; the row is then stale: update it
with its new date.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from datetime import date, timedelta

__all__ = [
    "Source",
    "SOURCES",
    "Accelerator",
    "ACCELERATORS",
    "REGIONS_AS_OF",
    "TRAINING_MACHINE_TYPES",
    "BOOT_DISK_TYPES",
    "BOOT_DISK_SIZE_GB",
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
    "tpu_machine_accelerator",
    "cloud_tpu_counts",
    "replacement_for",
    "FlexStart",
    "FLEX_START",
    "MAX_WAIT_DEFAULT",
    "QUOTA_METRIC_PREFIX",
]

QUOTA_METRIC_PREFIX = "aiplatform.googleapis.com/custom_model_training_"


@dataclass(frozen=True)
class Source:
    """Where a table's facts were read, and when."""

    url: str
    read: str  # ISO date
    says: str = ""  # the sentence or table the facts come from, when short


_CONFIGURE = "https://docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/configure-compute"
SOURCES: dict[str, Source] = {
    "configure-compute": Source(
        _CONFIGURE + " (formerly https://cloud.google.com/vertex-ai/docs/training/configure-compute)",
        "2026-12-01",
        "the list of machine types training accepts, the GPU compatibility table, the TPU v2/v3, "
        "v5e, v6e and 7x sections, boot disk options",
    ),
    "p100-eos": Source(
        _CONFIGURE + "#gpus",
        "2026-12-01",
        "NVIDIA P100 GPUs reach end of support on September 15, 2026 "
        "(https://docs.cloud.google.com/compute/docs/eol/p100-eos)",
    ),
    "k80-eol": Source(
        "https://cloud.google.com/compute/docs/eol/k80-eol",
        "2026-12-01",
        "K80 end of support May 1, 2024; aiplatform v1 AcceleratorType marks NVIDIA_TESLA_K80 "
        "'Deprecated: ... has reached end of support'; Google's samples moved K80 to T4 "
        "(GoogleCloudPlatform/java-docs-samples#9342)",
    ),
    "locations": Source(
        "https://cloud.google.com/vertex-ai/docs/general/locations#accelerators",
        "2026-11-01",
        "accelerators offered for custom training, by region",
    ),
    "h200-europe-west4": Source(
        "https://cloud.google.com/vertex-ai/docs/general/locations#accelerators",
        "2026-12-01",
        "europe-west4 offers NVIDIA_H200_141GB for training (issue 28, checked against the "
        "locations page; public a3-ultragpu-8g jobs are submitted there)",
    ),
    "tpu-zones": Source(
        "https://cloud.google.com/tpu/docs/regions-zones",
        "2026-12-01",
        "v2-8 in us-central1, europe-west4, asia-east1; v2 Pods (v2-32 … v2-512) in "
        "us-central1-a and europe-west4-a; v3-8 in us-central1, europe-west4; v3 Pods "
        "(v3-32 … v3-2048) in europe-west4-a only; v5e us-central1, us-south1, us-west1, "
        "us-west4, us-east5; v6e us-central1, us-east1, us-east5, us-south1; TPU7x us-central1",
    ),
    "dws": Source(
        "https://docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/schedule-jobs-dws",
        "2026-12-01",
        "L4, A100, H100, H200 or B200 GPUs; timeout of 7 days or less; the same machine "
        "configuration for all worker pools; maxWaitDuration 0 waits indefinitely, the default "
        "is 1 day; 'preemptible quota is used only in name. Your resources aren't preemptible'",
    ),
    "private-ip": Source(
        "https://docs.cloud.google.com/vertex-ai/docs/training/using-private-ip",
        "2026-11-01",
        "doesn't support VPC Peering with H100-mega, H200 and B200 accelerators",
    ),
    "sdk-tpu-topology": Source(
        "https://github.com/googleapis/python-aiplatform/blob/main/google/cloud/aiplatform/"
        "utils/worker_spec_utils.py (google-cloud-aiplatform 1.165.1; also the run() docstrings "
        "in training_jobs.py)",
        "2026-12-02",
        "tpu_topology: 'TPU topology for the TPU type. This field is required for the TPU v5 "
        "versions'; run(): 'Only required if the machine type is a TPU v5 version' (no such word "
        "for v6e or 7x; configure-compute's TPU sections give every example with tpuTopology)",
    ),
    "quota-metrics": Source(
        "shared/PROTOCOLS.md (quota metric names as Vertex names them in quota errors and "
        "gcloud quotas info)",
        "2026-11-01",
    ),
}
REGIONS_AS_OF = SOURCES["locations"].read


@dataclass(frozen=True)
class Accelerator:
    """One accelerator type as Vertex names it.

    Attributes:
        name: Vertex's ``acceleratorType`` (for TPU generations with no enum value, the name
            trainguard gives the machine family: ``TPU_V6E``, ``TPU_7X``).
        quota_suffix: the Cloud Quotas metric suffix; '' when Google documents none, and
            ``quota_pattern`` finds it in the project's quota list instead.
        kind: ``gpu`` or ``tpu``.
        regions: training regions (see ``region_source``).
        compute_name: Compute Engine's name for it (reservations list ``guestAccelerators`` so).
        flex_start: Dynamic Workload Scheduler (``FLEX_START``) takes it.
        vpc_peering: training jobs with it may peer with a VPC (``network``).
        cores_per_chip: TPU cores per chip (quota may count cores), 1 for GPUs.
        end_of_support: the day Google stopped (or stops) supporting it, or None.
        replacement: what to use instead once it is out of support.
        pod_regions: for ``cloud-tpu`` (TPU v2/v3), the regions with Pod slices (32+ cores).
        in_enum: ``machineSpec.acceleratorType`` has this value (False: the machine type
            alone names the TPU, as Google documents for v6e and 7x).
        source: key of ``SOURCES`` for the row; ``region_source`` for its regions.
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
    end_of_support: date | None = None
    replacement: str = ""
    pod_regions: tuple[str, ...] = ()
    in_enum: bool = True
    source: str = "configure-compute"
    region_source: str = "locations"

    def out_of_support(self, today: date | None = None) -> bool:
        return self.end_of_support is not None and (today or date.today()) >= self.end_of_support


_US = ("us-central1", "us-east1", "us-east4", "us-west1", "us-west4")
ACCELERATORS: dict[str, Accelerator] = {
    a.name: a
    for a in (
        Accelerator(
            "NVIDIA_TESLA_K80",
            "nvidia_k80_gpus",
            "gpu",
            (),
            compute_name="nvidia-tesla-k80",
            end_of_support=date(2024, 5, 1),
            replacement="NVIDIA_TESLA_T4",
            source="k80-eol",
        ),
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
            end_of_support=date(2026, 9, 15),
            replacement="NVIDIA_TESLA_T4",
            source="p100-eos",
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
            (
                "us-central1",
                "us-east4",
                "us-south1",
                "europe-west1",
                "europe-west4",
                "asia-south1",
                "asia-south2",
            ),
            compute_name="nvidia-h200-141gb",
            flex_start=True,
            vpc_peering=False,
            region_source="h200-europe-west4",
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
        Accelerator(
            "TPU_V2",
            "tpu_v2",
            "tpu",
            ("us-central1", "europe-west4", "asia-east1"),
            pod_regions=("us-central1", "europe-west4"),
            region_source="tpu-zones",
        ),
        Accelerator(
            "TPU_V3",
            "tpu_v3",
            "tpu",
            ("us-central1", "europe-west4"),
            pod_regions=("europe-west4",),
            region_source="tpu-zones",
        ),
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
            region_source="tpu-zones",
        ),
        Accelerator(
            "TPU_V6E",
            "",
            "tpu",
            ("us-central1", "us-east1", "us-east5", "us-south1"),
            in_enum=False,
            quota_pattern=r"custom_model_training_(preemptible_)?tpu_v6e\w*",
            region_source="tpu-zones",
        ),
        Accelerator(
            "TPU_7X",
            "",
            "tpu",
            ("us-central1",),
            in_enum=False,
            quota_pattern=r"custom_model_training_(preemptible_)?tpu_?7x\w*",
            region_source="tpu-zones",
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
    source=SOURCES["dws"].url,
)
#: What an unset ``scheduling.maxWaitDuration`` waits (``dws``: "The default value is 1 day").
MAX_WAIT_DEFAULT = timedelta(days=1)

#: ``diskSpec``: "pd-standard", "pd-ssd" or "hyperdisk-balanced"; "an integer between 100 and
#: 64,000, inclusive. The default value is 100" (``configure-compute``, Boot disk options).
BOOT_DISK_TYPES = ("pd-ssd", "pd-standard", "hyperdisk-balanced")
BOOT_DISK_SIZE_GB = (100, 64_000)


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


_V5E_V6E_MULTI = ("2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
#: Machine type → (accelerator, chips per host, the slices it forms), from ``configure-compute``
#: (TPU v5e, v6e and 7x tables: "ct5lp-hightpu-4t 2x4 8 chips 2 VMs", …) and, for v4, the
#: GKE/xpk machine tables. A machine type's single-host slice is its one-host slice.
_TPU_MACHINES: dict[str, tuple[str, int, dict[str, TpuSlice]]] = {
    "ct5lp-hightpu-1t": ("TPU_V5_LITEPOD", 1, _slices(1, "1x1")),
    "ct5lp-hightpu-4t": ("TPU_V5_LITEPOD", 4, _slices(4, "2x2", *_V5E_V6E_MULTI)),
    "ct5lp-hightpu-8t": ("TPU_V5_LITEPOD", 8, _slices(8, "2x4")),
    "ct6e-standard-1t": ("TPU_V6E", 1, _slices(1, "1x1")),
    "ct6e-standard-4t": ("TPU_V6E", 4, _slices(4, "2x2", *_V5E_V6E_MULTI)),
    "ct6e-standard-8t": ("TPU_V6E", 8, _slices(8, "2x4")),
    "tpu7x-standard-4t": (
        "TPU_7X",
        4,
        _slices(4, "2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x16"),
    ),
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


#: TPU generations whose machineSpec must carry tpuTopology (``sdk-tpu-topology``: "required
#: for the TPU v5 versions"); for the others a missing one is a WARN, the documented form has it.
TPU_TOPOLOGY_REQUIRED = frozenset({"TPU_V5_LITEPOD", "TPU_V5P"})


def tpu_slices(machine_type: str) -> dict[str, TpuSlice]:
    """Every slice ``machine_type`` can form, by topology ({} for a non-TPU machine type)."""
    entry = _TPU_MACHINES.get(machine_type)
    return dict(entry[2]) if entry else {}


def tpu_slice(machine_type: str, topology: str) -> TpuSlice | None:
    """The slice ``topology`` on ``machine_type``, None when it cannot form it."""
    return tpu_slices(machine_type).get(topology)


def tpu_machine_accelerator(machine_type: str) -> str | None:
    """The TPU generation a TPU machine type holds (``TPU_V6E`` for ``ct6e-standard-4t``)."""
    entry = _TPU_MACHINES.get(machine_type)
    return entry[0] if entry else None


def tpu_chips(machine_type: str, accelerator_count: int, topology: str = "") -> int:
    """TPU chips one replica holds (the count quota is charged in): the whole slice for a
    known topology, else the machine type's chips per host, else ``accelerator_count``."""
    found = tpu_slice(machine_type, topology) if topology else None
    if found is not None:
        return found.chips
    entry = _TPU_MACHINES.get(machine_type)
    return entry[1] if entry else accelerator_count


def cloud_tpu_counts(accelerator: str, count: int) -> str:
    """What ``cloud-tpu`` with ``count`` cores of TPU v2/v3 is: ``single`` (8 cores), ``pod``
    (32 or a multiple of 32) or ``invalid`` (``configure-compute``: "8 for single TPU or 32 or
    multiple of 32 for TPU Pods" for v2, "32+" for v3, whose Pods come in multiples of 32)."""
    if count == 8:
        return "single"
    if count >= 32 and count % 32 == 0:
        return "pod"
    return "invalid"


# --- machine types ----------------------------------------------------------------------------


def _names(family: str, kind: str, *sizes: int, suffix: str = "") -> tuple[str, ...]:
    return tuple(f"{family}-{kind}-{n}{suffix}" for n in sizes)


#: Every machine type custom training accepts ("you must specify one of the following machine
#: types", ``configure-compute``), plus the TPU machine types of its TPU sections.
TRAINING_MACHINE_TYPES: frozenset[str] = frozenset(
    ("a4x-highgpu-4g", "a4-highgpu-8g", "a3-ultragpu-8g", "a3-megagpu-8g", "a2-megagpu-16g", "cloud-tpu")
    + _names("a3", "highgpu", 1, 2, 4, 8, suffix="g")
    + _names("a2", "ultragpu", 1, 2, 4, 8, suffix="g")
    + _names("a2", "highgpu", 1, 2, 4, 8, suffix="g")
    + _names("e2", "standard", 4, 8, 16, 32)
    + _names("e2", "highmem", 2, 4, 8, 16)
    + _names("e2", "highcpu", 16, 32)
    + _names("n4", "standard", 2, 4, 8, 16, 32, 48, 64, 80)
    + _names("n4", "highmem", 2, 4, 8, 16, 32, 48, 64, 80)
    + _names("n4", "highcpu", 2, 4, 8, 16, 32, 48, 64, 80)
    + _names("n2", "standard", 4, 8, 16, 32, 48, 64, 80)
    + _names("n2", "highmem", 2, 4, 8, 16, 32, 48, 64, 80)
    + _names("n2", "highcpu", 16, 32, 48, 64, 80)
    + _names("n1", "standard", 4, 8, 16, 32, 64, 96)
    + _names("n1", "highmem", 2, 4, 8, 16, 32, 64, 96)
    + _names("n1", "highcpu", 16, 32, 64, 96)
    + _names("c2", "standard", 4, 8, 16, 30, 60)
    + ("m1-ultramem-40", "m1-ultramem-80", "m1-ultramem-160", "m1-megamem-96")
    + _names("g2", "standard", 4, 8, 12, 16, 24, 32, 48, 96)
    + _names("g4", "standard", 48, 96, 192, 384)
    + tuple(_TPU_MACHINES)
)


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


#: n1 GPU pairings, machine type → {accelerator: counts}, as ``configure-compute``'s "Valid
#: numbers of GPUs for each machine type" table gives them (vCPU *and* memory bounded: "4
#: NVIDIA_TESLA_P100 GPUs only provides up to 64 virtual CPUs and up to 208 GB of memory").
_P4_P100_T4 = ("NVIDIA_TESLA_P4", "NVIDIA_TESLA_P100", "NVIDIA_TESLA_T4")


def _n1(small: tuple[int, ...], v100: tuple[int, ...], p100: bool = True) -> dict[str, tuple[int, ...]]:
    out = {a: small for a in _P4_P100_T4 if p100 or a != "NVIDIA_TESLA_P100"}
    out["NVIDIA_TESLA_V100"] = v100
    return out


_N1_GPUS: dict[str, dict[str, tuple[int, ...]]] = {
    **{m: _n1((1, 2, 4), (1, 2, 4, 8)) for m in ("n1-standard-4", "n1-standard-8")},
    **{m: _n1((1, 2, 4), (1, 2, 4, 8)) for m in ("n1-highmem-2", "n1-highmem-4", "n1-highmem-8")},
    **{m: _n1((1, 2, 4), (2, 4, 8)) for m in ("n1-standard-16", "n1-highmem-16", "n1-highcpu-16")},
    **{m: _n1((2, 4), (4, 8)) for m in ("n1-standard-32", "n1-highmem-32", "n1-highcpu-32")},
    **{m: _n1((4,), (8,), p100=False) for m in ("n1-standard-64", "n1-standard-96")},
    **{m: _n1((4,), (8,), p100=False) for m in ("n1-highmem-64", "n1-highmem-96", "n1-highcpu-96")},
    "n1-highcpu-64": _n1((4,), (8,)),
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
    (re.compile(r"^a4x-highgpu-(4)g$"), "NVIDIA_GB200"),
)
_CPU_FAMILY_NAMES = ("n1", "n2", "n2d", "n4", "e2", "c2", "c2d", "c3", "c3d", "c4", "m1", "m2", "m3")
_CPU_FAMILIES = re.compile(
    rf"^({'|'.join(_CPU_FAMILY_NAMES)})-(standard|highmem|highcpu|megamem|ultramem)-(\d+)$"
)

#: How each known family names its machine types. A family whose types
#: ``TRAINING_MACHINE_TYPES`` lists (``LISTED_FAMILIES``) FAILs a name it does not list (the
#: page lists all the family's types training takes: n1-standard-2 is not one); a family the
#: page does not list at all may be newer than the page (WARN); any other name is a typo (FAIL).
_FAMILY_SHAPES: dict[str, re.Pattern[str]] = {
    "a2": re.compile(r"^a2-(highgpu|megagpu|ultragpu)-\d+g$"),
    "a3": re.compile(r"^a3-(highgpu|megagpu|ultragpu|edgegpu)-\d+g$"),
    "a4": re.compile(r"^a4x?-(highgpu|maxgpu)-\d+g$"),
    "g2": re.compile(r"^g2-standard-\d+$"),
    "g4": re.compile(r"^g4-standard-\d+$"),
    "ct4p": re.compile(r"^ct4p-hightpu-\d+t$"),
    "ct5lp": re.compile(r"^ct5lp-hightpu-\d+t$"),
    "ct5p": re.compile(r"^ct5p-hightpu-\d+t$"),
    "ct6e": re.compile(r"^ct6e-standard-\d+t$"),
    "tpu7x": re.compile(r"^tpu7x-standard-\d+t$"),
    **{f: re.compile(rf"^{f}-(standard|highmem|highcpu|megamem|ultramem)-\d+$") for f in _CPU_FAMILY_NAMES},
}
LISTED_FAMILIES = frozenset(
    {"a2", "a3", "a4", "g2", "g4", "ct5lp", "ct6e", "tpu7x", "n1", "n2", "n4", "e2", "c2", "m1"}
)
_KNOWN_EXAMPLES = sorted(TRAINING_MACHINE_TYPES)


def machine_family(machine_type: str) -> str | None:
    """The known family whose naming ``machine_type`` follows (``a2``, ``n1``…), else None."""
    if machine_type == "cloud-tpu":
        return "cloud-tpu"
    for family, shape in _FAMILY_SHAPES.items():
        if shape.match(machine_type):
            return family
    return None


def suggest_machine(machine_type: str) -> str | None:
    """The closest machine type training accepts, for "did you mean …"."""
    close = difflib.get_close_matches(machine_type.lower(), _KNOWN_EXAMPLES, n=1, cutoff=0.5)
    return close[0] if close else None


def machine_vcpus(machine_type: str) -> int | None:
    """vCPUs of a CPU-family machine type (``n1-standard-8`` → 8), None when not by name."""
    m = _CPU_FAMILIES.match(machine_type)
    return int(m.group(3)) if m else None


def machine_rule(machine_type: str) -> MachineRule | None:
    """The accelerator rule for ``machine_type``; None for a type training does not accept."""
    if machine_type not in TRAINING_MACHINE_TYPES and machine_type not in _TPU_MACHINES:
        return None
    m = re.match(r"^g2-standard-(\d+)$", machine_type)
    if m and int(m.group(1)) in _G2_L4:
        return MachineRule(machine_type, {"NVIDIA_L4": (_G2_L4[int(m.group(1))],)}, {}, int(m.group(1)))
    for pattern, accel in _BUNDLED:
        m = pattern.match(machine_type)
        if m:
            return MachineRule(machine_type, {accel: (int(m.group(1)),)}, {})
    if machine_type.startswith("g4-standard-"):
        count = {48: 1, 96: 2, 192: 4, 384: 8}[int(machine_type.rsplit("-", 1)[1])]
        return MachineRule(machine_type, {"NVIDIA_RTX_PRO_6000": (count,)}, {})
    if machine_type in _TPU_MACHINES:
        accel, chips, slices = _TPU_MACHINES[machine_type]
        single = next(s.topology for s in slices.values() if s.chips == chips)
        return MachineRule(machine_type, {accel: (chips,)}, {chips: single})
    if machine_type == "cloud-tpu":
        return MachineRule(machine_type, {"TPU_V2": (8,), "TPU_V3": (8,)}, {})
    vcpus = machine_vcpus(machine_type)
    return MachineRule(machine_type, dict(_N1_GPUS.get(machine_type, {})), {}, vcpus)


def replacement_for(accelerator: str, machine_type: str, count: int) -> tuple[str, str, int] | None:
    """For an out-of-support ``accelerator``: (machine type, accelerator, count) that works in
    its place, the same machine type when it takes the replacement at that count, else the
    replacement's own machine type; None when there is no replacement."""
    old = ACCELERATORS.get(accelerator)
    if old is None or not old.replacement:
        return None
    new = old.replacement
    rule = machine_rule(machine_type)
    if rule is not None and count in rule.accelerators.get(new, ()):
        return machine_type, new, count
    for candidate in ("n1-standard-8", "n1-standard-16", "n1-standard-32"):
        allowed = _N1_GPUS[candidate].get(new, ())
        if count in allowed:
            return candidate, new, count
    return "n1-standard-8", new, 1


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
