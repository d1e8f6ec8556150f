"""Which Catalog SKU prices which part of a Vertex AI custom-training job: the one table.

How Google bills custom training (the rows below follow it):

* infrastructure at Compute Engine's prices — on demand, Spot ("Spot VMs are billed according
  to Compute Engine Spot VMs pricing"), Flex-start ("billed according to Dynamic Workload
  Scheduler pricing") — "plus serverless training management fees in addition to your
  infrastructure usage" (Vertex AI pricing page and the Spot/Flex-start/reservation training
  docs, quoted in ``SOURCES``); a machine is its vCPUs and its memory (separate SKUs per machine
  series) plus its accelerators (a GPU SKU each; TPUs per chip, the host included), plus the boot
  disk per GiB-month;
* the management fee is a Vertex AI SKU. No public copy of its catalog description was found, so
  its row (``FEE``) is the one unverified pattern here: when the live catalog spells it otherwise,
  the fee is UNKNOWN with that reason and the price says it is Compute Engine's alone, never a
  guessed number.

Each description pattern is anchored at the start: the same chip also has ``Commitment v1: …``,
``Reserved … in Calendar Mode``, ``Capacity Optimized …`` and ``Sole Tenancy Premium …`` SKUs in
the same region, some of them priced at $0.00, which an unanchored match would take for the price.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "COMPUTE_ENGINE",
    "VERTEX_AI",
    "SERVICES",
    "Consumption",
    "Rule",
    "SOURCES",
    "SERIES",
    "GPUS",
    "TPUS",
    "DISKS",
    "HOST_IN_ACCELERATOR",
    "host_rules",
    "gpu_rule",
    "tpu_rule",
    "disk_rule",
    "fee_rule",
    "series_of",
]

#: Service IDs of the Catalog (https://cloud.google.com/skus; Compute Engine's is also the example
#: of Google's billing-export docs; Vertex AI's is the one public Vertex SKU tools read, e.g.
#: grafana/cloudcost-exporter's vertex collector).
COMPUTE_ENGINE = "6F81-5844-456A"
VERTEX_AI = "C7E2-9256-1C43"
SERVICES = {COMPUTE_ENGINE: "Compute Engine", VERTEX_AI: "Vertex AI"}


class Consumption(StrEnum):
    """How the job's capacity is bought (``scheduling.strategy``)."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"
    FLEX_START = "flex-start"

    @classmethod
    def of(cls, strategy: str) -> Consumption:
        """STANDARD (and unset) → on demand, SPOT → spot, FLEX_START → flex-start."""
        return {"SPOT": cls.SPOT, "FLEX_START": cls.FLEX_START}.get(strategy, cls.ON_DEMAND)


#: Where each fact below was read. Dates are when it was read.
SOURCES = {
    "vertex-pricing": "https://cloud.google.com/vertex-ai/pricing#custom-trained_models — 'Spot VMs "
    "are billed according to Compute Engine Spot VMs pricing. There are [Vertex AI] custom training "
    "management fees in addition to your infrastructure usage.' (quoted in a public cost model "
    "verified 2026-09-20, which also derives n1-standard-4 in asia-southeast1 as Compute Engine "
    "$0.234386/h + fee $0.035158/h = the page's $0.269544/h); the page's n1-standard-4 in Iowa "
    "(us-central1) is $0.21849885/h = 1.15 × Compute Engine's $0.189999 (transcriptions of "
    "2026-09-08 and 2026-10-07, e.g. api-evangelist/google-vertex-ai "
    "plans/google-vertex-ai-plans-pricing.yml @ 342263c)",
    "vertex-dws": "Vertex AI 'Schedule training jobs with DWS': 'When using DWS flex start, you're "
    "billed according to Dynamic Workload Scheduler pricing. There are serverless training "
    "management fees in addition to your infrastructure usage.' (read 2026-12-01)",
    "ce-series": "Compute Engine SKUs 'A2 Instance Core running in Americas', 'Spot Preemptible A2 "
    "Instance Core …', 'DWS Defined Duration A2 Core|Ram' (a public Catalog API pull of 2026-08-02), "
    "'N1 Predefined Instance Core running in Americas' (resourceGroup N1Standard; Google's billing "
    "export docs use it as their example), 'G2 Instance Core' (hail-is/hail "
    "batch/batch/cloud/gcp/driver/pricing.py), the series names of skypilot-org/skypilot "
    "sky/catalog/data_fetchers/fetch_gcp.py (SERIES_TO_DESCRIPTION)",
    "ce-gpus": "Compute Engine GPU SKUs '<GPU> running in <place>', '<GPU> attached to Spot "
    "Preemptible VMs running in …', '<GPU> attached to DWS Defined Duration VMs running in …'; "
    "H100 Mega is spelled 'H100 80GB Mega', 'H100 Mega 80GB' or 'H100 80GB Plus' by region; B200 is "
    "'A4 Nvidia B200 (1 gpu slice)', which prices the whole A4 machine (no separate A4 vCPU/memory "
    "SKUs) (skypilot fetch_gcp.py; public Catalog pulls of 2026-07/08)",
    "ce-tpus": "Compute Engine TPU SKUs, per chip-hour, resourceGroup TPU: 'TpuV5e running in …' "
    "(OnDemand), 'TpuV5e attached to Spot Preemptible VMs …' (Preemptible), 'DWS Defined Duration "
    "V5e running in …' (OnDemand) — 'verified against the live catalog 2026-08-07' in a public TPU "
    "rig; skypilot fetch_gcp.py: v5e/v6e prices are per chip and live in the Compute Engine catalog",
    "ce-disks": "Compute Engine disk SKUs 'SSD backed PD Capacity' (B188-61DD-52E4, SSD, $0.17 in "
    "us-central1), 'Storage PD Capacity' (D973-5D65-BAB2, PDStandard, $0.04), 'Balanced PD "
    "Capacity' (6AE1-525F-8B80, SSD, $0.10), per GiBy.mo, resourceFamily Storage; elsewhere "
    "'<stem> in <place>'; the replicated disks are 'Regional <stem>' (Cyclenerd/google-cloud-pricing-"
    "cost-calculator build/mapping.csv and pricing.yml @ fd66b26 of 2026-07-30; project-koku/nise "
    "compute_engine_generator.py; read 2026-12-02); Spot discounts 'machine types, GPUs, TPUs, "
    "and Local SSDs' (cloud.google.com/spot-vms/pricing), not persistent disks",
    "unverified": "no public copy of this SKU's description was found (research of 2026-12-01)",
}


@dataclass(frozen=True)
class Rule:
    """A SKU that prices one part: in ``service``, of ``resource_family``/``resource_group`` (''
    any), ``usage_types`` (empty any), whose description matches ``pattern``.

    Attributes:
        what: the part, as the report names it (``A2 vCPU``).
        source: a key of ``SOURCES``.
    """

    what: str
    service: str
    pattern: re.Pattern[str]
    resource_family: str = ""
    resource_group: str = ""
    usage_types: tuple[str, ...] = ()
    source: str = ""

    @property
    def verified(self) -> bool:
        return self.source != "unverified"


@dataclass(frozen=True)
class Series:
    """A machine series' vCPU and memory SKUs: the descriptions' stems per consumption."""

    name: str  # as the report says it: "A2"
    core: str  # on-demand stem of the vCPU SKU: "A2 Instance Core"
    ram: str
    resource_group: str = ""  # N1 puts both in "N1Standard"; the others in CPU / RAM
    spot_prefix: str = "Spot Preemptible "
    dws: tuple[str, str] = ("", "")  # Flex-start stems ('' where the series has no Flex-start)


def _series(name: str, stem: str, *, group: str = "", dws: bool = False) -> Series:
    dws_stems = (f"DWS Defined Duration {name} Core", f"DWS Defined Duration {name} Ram") if dws else ("", "")
    return Series(name, f"{stem} Core", f"{stem} Ram", group, dws=dws_stems)


#: Machine-type prefix → its series (``ce-series``). Flex-start takes L4/A100/H100/H200/B200 GPU
#: machines only (``trainguard.catalog.FLEX_START``), so only those series carry DWS stems.
SERIES: dict[str, Series] = {
    "n1": _series("N1", "N1 Predefined Instance", group="N1Standard"),
    "n2": _series("N2", "N2 Instance"),
    "n2d": _series("N2D", "N2D AMD Instance"),
    "e2": _series("E2", "E2 Instance"),
    "c2": _series("C2", "Compute optimized"),
    "c2d": _series("C2D", "C2D AMD Instance"),
    "c3": _series("C3", "C3 Instance"),
    "g2": _series("G2", "G2 Instance", dws=True),
    "a2": _series("A2", "A2 Instance", dws=True),
    # A3 High; A3 Mega and Ultra are priced apart (the Spot page lists A3-HIGH and A3-MEGA rates)
    # and their descriptions were not found: no row, so their vCPUs and memory are UNKNOWN.
    "a3-highgpu": _series("A3", "A3 Instance", dws=True),
}

#: Machine types whose accelerator SKU prices the whole machine (vCPUs and memory included).
HOST_IN_ACCELERATOR = {"a4": "the A4 machine is priced by its 'A4 Nvidia B200 (1 gpu slice)' SKU"}

#: Accelerator type → the stems of its GPU SKUs (on demand, Spot, Flex-start) (``ce-gpus``).
GPUS: dict[str, tuple[str, str, str]] = {}
for _name, _stem in (
    ("NVIDIA_TESLA_T4", "Nvidia Tesla T4 GPU"),
    ("NVIDIA_TESLA_V100", "Nvidia Tesla V100 GPU"),
    ("NVIDIA_TESLA_P4", "Nvidia Tesla P4 GPU"),
    ("NVIDIA_TESLA_P100", "Nvidia Tesla P100 GPU"),
    ("NVIDIA_TESLA_A100", "Nvidia Tesla A100 GPU"),
    ("NVIDIA_A100_80GB", "Nvidia Tesla A100 80GB GPU"),
    ("NVIDIA_L4", "Nvidia L4 GPU"),
    ("NVIDIA_H100_80GB", "Nvidia H100 80GB GPU"),
    ("NVIDIA_H100_MEGA_80GB", "Nvidia H100 (?:80GB Mega|Mega 80GB|80GB Plus) GPU"),
    ("NVIDIA_H200_141GB", "(?:Nvidia )?H200 141GB GPU"),
):
    GPUS[_name] = (
        rf"{_stem} running in ",
        rf"{_stem} attached to Spot Preemptible VMs",
        rf"{_stem} attached to DWS Defined Duration VMs",
    )
GPUS["NVIDIA_B200"] = (
    r"A4 Nvidia B200 \(1 gpu slice\) running in ",
    r"Spot Preemptible A4 Nvidia B200 \(1 gpu slice\)",
    r"DWS Defined Duration A4 Nvidia B200 \(1 gpu slice\)",  # unverified spelling
)

#: TPU accelerator → the chip's name in its SKUs (``ce-tpus``): TpuV5e, TpuV6e.
TPUS = {"TPU_V5_LITEPOD": "V5e", "TPU_V6E": "V6e"}

#: Boot disk type → its capacity SKU stem (``ce-disks``); Vertex's default boot disk is pd-ssd.
DISKS = {
    "pd-ssd": "SSD backed PD Capacity",
    "pd-standard": "Storage PD Capacity",
    "pd-balanced": "Balanced PD Capacity",
    "hyperdisk-balanced": "Hyperdisk Balanced Capacity",  # unverified spelling
}
_UNVERIFIED_DISKS = frozenset({"hyperdisk-balanced"})
_USAGE = {
    Consumption.ON_DEMAND: ("OnDemand",),
    Consumption.SPOT: ("Preemptible",),
    # The TPU rig above found Flex-start TPU SKUs OnDemand; GPU and host DWS SKUs were not seen
    # with their category: the description alone tells them apart.
    Consumption.FLEX_START: (),
}


def _anchored(stem: str) -> re.Pattern[str]:
    return re.compile("^" + stem, re.IGNORECASE)


def series_of(machine_type: str) -> Series | None:
    """The series of ``machine_type`` (``a2-highgpu-1g`` → A2), None when no row names it."""
    for prefix in sorted(SERIES, key=len, reverse=True):
        if machine_type.startswith(prefix + "-"):
            return SERIES[prefix]
    return None


def host_rules(series: Series, consumption: Consumption) -> tuple[Rule, Rule] | str:
    """The vCPU and memory rules of ``series`` bought ``consumption``, or why there are none."""
    if consumption is Consumption.ON_DEMAND:
        stems = (series.core, series.ram)
    elif consumption is Consumption.SPOT:
        stems = (series.spot_prefix + series.core, series.spot_prefix + series.ram)
    elif all(series.dws):
        stems = series.dws
    else:
        return f"{series.name} machines are not sold Flex-start (DWS)"
    groups = (series.resource_group or "CPU", series.resource_group or "RAM")
    return tuple(  # type: ignore[return-value]
        Rule(
            f"{series.name} {'vCPU' if i == 0 else 'memory'}",
            COMPUTE_ENGINE,
            _anchored(re.escape(stem) + r"\b"),
            "Compute",
            groups[i],
            _USAGE[consumption],
            "ce-series",
        )
        for i, stem in enumerate(stems)
    )


def gpu_rule(accelerator: str, consumption: Consumption) -> Rule | None:
    """The rule of one ``accelerator`` GPU, None when the table has no row for it."""
    stems = GPUS.get(accelerator)
    if stems is None:
        return None
    index = list(Consumption).index(consumption)
    unverified = accelerator == "NVIDIA_B200" and consumption is Consumption.FLEX_START
    return Rule(
        accelerator,
        COMPUTE_ENGINE,
        _anchored(stems[index]),
        "Compute",
        "GPU",
        _USAGE[consumption],
        "unverified" if unverified else "ce-gpus",
    )


def tpu_rule(accelerator: str, consumption: Consumption) -> Rule | None:
    """The per-chip rule of a TPU ``accelerator``, None when the table has no row for it."""
    chip = TPUS.get(accelerator)
    if chip is None:
        return None
    stem = {
        Consumption.ON_DEMAND: rf"Tpu{chip} running in ",
        Consumption.SPOT: rf"Tpu{chip} attached to Spot Preemptible VMs",
        Consumption.FLEX_START: rf"DWS Defined Duration {chip} running in ",
    }[consumption]
    usage = {Consumption.FLEX_START: ("OnDemand",)}.get(consumption, _USAGE[consumption])
    return Rule(f"{accelerator} chip", COMPUTE_ENGINE, _anchored(stem), "", "TPU", usage, "ce-tpus")


def disk_rule(disk_type: str) -> Rule | None:
    """The capacity rule of a boot disk type (Spot does not discount disks), None if unknown."""
    stem = DISKS.get(disk_type)
    if stem is None:
        return None
    # "Regional SSD backed PD" is a replicated disk; the anchor leaves it out.
    return Rule(
        f"{disk_type} boot disk",
        COMPUTE_ENGINE,
        _anchored(re.escape(stem) + r"\b"),
        "Storage",
        "",
        ("OnDemand",),
        "unverified" if disk_type in _UNVERIFIED_DISKS else "ce-disks",
    )


def fee_rule(on_demand: Rule) -> Rule:
    """The Vertex AI management fee on the resource the on-demand rule ``on_demand`` prices
    (unverified: see the module docstring): a Vertex AI SKU that says "management fee" and
    "training" and names the resource as its Compute Engine SKU does (``A2 Instance Core``,
    ``Nvidia Tesla A100 GPU``, ``TpuV5e``). Spot and Flex-start pay the same, undiscounted fee
    (``vertex-pricing``: Spot changes only the infrastructure part)."""
    stem = on_demand.pattern.pattern.removeprefix("^").removesuffix(" running in ")
    pattern = re.compile(rf"(?=.*management fee)(?=.*training).*{stem}", re.IGNORECASE)
    what = on_demand.what.removesuffix(" chip")
    return Rule(f"management fee on {what}", VERTEX_AI, pattern, source="unverified")
