"""Preflight of a job's fallbacks: is each alternative viable, and is it near the job's data?

``trainguard preflight --fallback region=us-east4`` (and the pipelines' ``fallbacks``) checks every
alternative (:mod:`trainguard.launch.alternatives`) before the first launch, with the families
that change with where and on what a job runs (:data:`FAMILIES`): compat (the machine, accelerator
and strategy in that region), quota (that region's limits), image (reachable, and from which
continent) and storage (the bucket's region). Then:

* each alternative gets a section: its results, titled ``alternative N (label): …``, and one row
  saying whether it is **viable** (no FAIL) or what stops it;
* an alternative whose region is not the bucket's or the image's gets a WARN naming both: reads
  of the data and every replica's image pull cross regions (egress cost, slower start and input)
  — trainguard never moves a job away from its data without saying so;
* a quota or capacity FAIL, the job's own or an alternative's, is a WARN when another alternative
  is viable: the launcher falls back past it (a create refused for quota costs nothing). Any
  other FAIL of an alternative stays a FAIL: the launcher would stop there with bad input, so
  the list is fixed before anything launches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from trainguard.preflight.results import CheckResult, Status

if TYPE_CHECKING:
    from trainguard.launch.alternatives import Alternative
    from trainguard.preflight.results import Report
    from trainguard.spec import JobSpec

__all__ = ["FAMILIES", "NAME", "combine", "render_sections"]

NAME = "fallback"
#: The families run again for each alternative: the ones whose answer depends on its region,
#: machine, accelerator or strategy (IAM, network and reservations are the job's own).
FAMILIES = ("compat", "quota", "image", "storage")
_FALLBACK_CLASSES = ("quota", "capacity")


def _falls_back(result: CheckResult) -> bool:
    """A FAIL the launcher moves past (quota refused at create, no capacity), not bad input."""
    return result.status == Status.FAIL and (
        result.failure_class in _FALLBACK_CLASSES or result.check in _FALLBACK_CLASSES
    )


def _viable(results: Sequence[CheckResult]) -> bool:
    return not any(r.status.rank >= Status.FAIL.rank for r in results)


def combine(
    spec: JobSpec,
    primary: list[CheckResult],
    alternatives: Sequence[tuple[Alternative, JobSpec, list[CheckResult]]],
) -> list[CheckResult]:
    """The job's own results and each alternative's section, as one list (see the module
    docstring for what is downgraded and what is added)."""
    viable = [_viable(primary)] + [_viable(results) for _, _, results in alternatives]
    sections: list[list[CheckResult]] = []
    for n, (alternative, alt_spec, results) in enumerate(alternatives, start=1):
        label = f"alternative {n} ({alternative.label()})"
        others = [i for i, ok in enumerate(viable) if ok and i != n]
        rows = [_in_section(r, n, label, others) for r in results]
        rows.append(_verdict(n, label, alt_spec, results))
        rows.append(_locality(n, label, alt_spec, spec, results))
        sections.append(rows)
    own_others = [i for i, ok in enumerate(viable) if ok and i != 0]
    own = [_downgraded(r, own_others) if _falls_back(r) and own_others else r for r in primary]
    own.append(_verdict(0, "the job as specified", spec, primary))
    return own + [row for rows in sections for row in rows]


def _in_section(result: CheckResult, n: int, label: str, others: list[int]) -> CheckResult:
    changed = _downgraded(result, others) if _falls_back(result) and others else result
    return replace(
        changed,
        title=f"{label}: {result.title}",
        details={**result.details, "alternative": n, "alternative_label": label},
    )


def _downgraded(result: CheckResult, viable: list[int]) -> CheckResult:
    where = ", ".join("the job as specified" if i == 0 else f"alternative {i}" for i in viable)
    return replace(
        result,
        status=Status.WARN,
        evidence=f"{result.evidence} (not a stop: the launcher falls back to {where}, "
        "which preflight found viable)",
    )


def _verdict(n: int, label: str, alt_spec: JobSpec, results: Sequence[CheckResult]) -> CheckResult:
    from trainguard.launch.alternatives import shape_of

    shape = shape_of(alt_spec)
    where = f"{shape['region']}, {shape['machine']}" + (
        f", {shape['count']}×{shape['accelerator']}" if shape["accelerator"] else ""
    )
    where += f", {shape['strategy']}"
    details = {"alternative": n, "alternative_label": label, "viable": _viable(results), **shape}
    if _viable(results):
        return CheckResult(
            NAME, f"{label}: viable", Status.PASS, f"{where}: no check failed", details=details
        )
    failing = [r for r in results if r.status.rank >= Status.FAIL.rank]
    first = failing[0]
    return CheckResult(
        NAME,
        f"{label}: not viable",
        Status.WARN,
        f"{where}: {len(failing)} check(s) fail, first {first.check}: {first.title}: {first.evidence}",
        first.remedy or "fix or drop this alternative",
        first.failure_class,
        details=details,
    )


def _locality(
    n: int, label: str, alt_spec: JobSpec, spec: JobSpec, results: Sequence[CheckResult]
) -> CheckResult:
    """WARN when the alternative's region is not the bucket's or an image's."""
    from trainguard.preflight.image import geography, image_location
    from trainguard.preflight.oci_client import ImageRef

    region = alt_spec.region
    far: list[str] = []
    bucket = next((r.details for r in results if r.check == "storage" and "location" in r.details), None)
    if bucket is not None:
        location = str(bucket.get("location", "")).lower()
        kind = str(bucket.get("location_type", "")).lower()
        if location and not (kind == "region" and location == region):
            far.append(f"the output bucket gs://{bucket.get('bucket', '')} is {kind or 'in'} {location}")
    for uri in dict.fromkeys(p.image_uri for p in alt_spec.pools):
        try:
            host = ImageRef.parse(uri).host
        except ValueError:  # a malformed reference is the image family's to report
            continue
        stored = image_location(host)
        # A multi-region (``us``, ``europe``) serves the regions of its continent alike.
        if stored and stored != region and not ("-" not in stored and geography(stored) == geography(region)):
            far.append(f"the image {uri} is stored in {stored}")
    details = {"alternative": n, "alternative_label": label, "region": region, "job_region": spec.region}
    if not far:
        checked = "the bucket and images" if bucket is not None else "the images (the bucket was not read)"
        return CheckResult(
            NAME, f"{label}: near its data", Status.PASS, f"{checked} are in {region}", details=details
        )
    return CheckResult(
        NAME,
        f"{label}: away from its data",
        Status.WARN,
        f"it runs in {region}, but {'; '.join(far)}: every read of the data and every image pull "
        "crosses regions (egress charges, slower start and input)",
        f"copy the data (and push the image) to {region} for this alternative, or put it last; "
        "trainguard falls back to it only when those before it have no capacity or quota",
        details=details,
    )


def render_sections(report: Report) -> str:
    """A Markdown section per alternative (its verdict, then its rows), '' without any."""
    by_alternative: dict[int, list[CheckResult]] = {}
    for r in report.results:
        n = r.details.get("alternative") if isinstance(r.details, Mapping) else None
        if isinstance(n, int) and n > 0:
            by_alternative.setdefault(n, []).append(r)
    if not by_alternative:
        return ""
    lines = ["", "## Fallbacks", ""]
    for n, rows in sorted(by_alternative.items()):
        verdict = next(
            (r for r in rows if r.check == NAME and r.title.endswith(("viable", "not viable"))), None
        )
        label = str(rows[0].details.get("alternative_label", f"alternative {n}"))
        state = "viable" if verdict is not None and verdict.status == Status.PASS else "not viable"
        lines += [f"### {label[0].upper()}{label[1:]}: {state}", ""]
        for r in sorted(rows, key=lambda r: -r.status.rank):
            title = r.title.removeprefix(f"{label}: ")
            lines.append(f"- **{r.status.value}** {r.check}: {title}: {r.evidence}".replace("\n", " "))
        lines.append("")
    return "\n".join(lines)
