"""vCPUs and memory of the machine types training runs on: what their per-vCPU and per-GiB SKUs
are multiplied by.

Source: Compute Engine's ``machineTypes.list`` (``guestCpus``, ``memoryMb`` / 1024 = GiB) as
exported in Cyclenerd/google-cloud-pricing-cost-calculator ``tools/machinetyperegion.csv``
(commit 8bf3293a35613e7ee333e2365d3cf0a3b8a8f347, read 2026-12-01): ``a2-highgpu-1g;12;…;85.00``.
The general-purpose families follow a fixed memory per vCPU there (n1-standard 3.75 GiB, highmem
6.5, highcpu 0.9; n2/e2/c2 standard 4, highmem 8, highcpu 1); the accelerator machines are listed.
"""

from __future__ import annotations

import re
from decimal import Decimal

__all__ = ["Shape", "shape", "SHAPES_SOURCE"]

SHAPES_SOURCE = (
    "Compute Engine machineTypes.list via Cyclenerd/google-cloud-pricing-cost-calculator "
    "tools/machinetyperegion.csv @8bf3293a"
)

Shape = tuple[int, Decimal]  # (vCPUs, memory GiB)

_PER_VCPU = {
    ("n1", "standard"): Decimal("3.75"),
    ("n1", "highmem"): Decimal("6.5"),
    ("n1", "highcpu"): Decimal("0.9"),
    **{(f, "standard"): Decimal(4) for f in ("n2", "n2d", "e2", "c2", "c2d", "c3")},
    **{(f, "highmem"): Decimal(8) for f in ("n2", "n2d", "e2", "c2d", "c3")},
    **{(f, "highcpu"): Decimal(1) for f in ("n2", "n2d", "e2", "c2d", "c3")},
}
_GENERAL = re.compile(r"^(?P<family>[a-z]\d+d?)-(?P<kind>standard|highmem|highcpu)-(?P<n>\d+)$")

_LISTED: dict[str, tuple[int, str]] = {
    **{f"g2-standard-{n}": (n, str(n * 4)) for n in (4, 8, 12, 16, 24, 32, 48, 96)},
    "a2-highgpu-1g": (12, "85"),
    "a2-highgpu-2g": (24, "170"),
    "a2-highgpu-4g": (48, "340"),
    "a2-highgpu-8g": (96, "680"),
    "a2-megagpu-16g": (96, "1360"),
    "a2-ultragpu-1g": (12, "170"),
    "a2-ultragpu-2g": (24, "340"),
    "a2-ultragpu-4g": (48, "680"),
    "a2-ultragpu-8g": (96, "1360"),
    "a3-highgpu-1g": (26, "234"),
    "a3-highgpu-2g": (52, "468"),
    "a3-highgpu-4g": (104, "936"),
    "a3-highgpu-8g": (208, "1872"),
    "a3-megagpu-8g": (208, "1872"),
    "a3-ultragpu-8g": (224, "2952"),
    "a4-highgpu-8g": (224, "3968"),
    "ct5lp-hightpu-1t": (24, "48"),
    "ct5lp-hightpu-4t": (112, "192"),
    "ct5lp-hightpu-8t": (224, "384"),
    "ct6e-standard-1t": (44, "176"),
    "ct6e-standard-4t": (180, "720"),
    "ct6e-standard-8t": (360, "1440"),
}


def shape(machine_type: str) -> Shape | None:
    """(vCPUs, GiB) of ``machine_type``, None when neither the list nor a family rule has it."""
    listed = _LISTED.get(machine_type)
    if listed is not None:
        return listed[0], Decimal(listed[1])
    m = _GENERAL.match(machine_type)
    if m:
        per = _PER_VCPU.get((m["family"], m["kind"]))
        if per is not None:
            n = int(m["n"])
            return n, per * n
    return None
