"""Compile the pipelines and components to YAML (``make compile``)."""

from __future__ import annotations

from pathlib import Path

from kfp import compiler

__all__ = ["compile_all"]


def compile_all(output_dir: str | Path) -> list[Path]:
    """Writes each pipeline and each component as YAML into ``output_dir``; returns the paths.

    Component YAML loads back with ``kfp.components.load_component_from_file``.
    """
    from trainguard.components import preflight, train, validate
    from trainguard.pipelines import PIPELINES

    out = Path(output_dir)
    (out / "components").mkdir(parents=True, exist_ok=True)
    written = []
    for name, pipeline in PIPELINES.items():
        path = out / f"{name}.yaml"
        compiler.Compiler().compile(pipeline, str(path))
        written.append(path)
    for component in (preflight, train, validate):
        path = out / "components" / f"{component.component_spec.name}.yaml"
        compiler.Compiler().compile(component, str(path))
        written.append(path)
    return written
