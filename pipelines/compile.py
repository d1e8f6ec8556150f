"""Compile the pipelines and components to YAML (``make compile``)."""

from __future__ import annotations

from pathlib import Path

from kfp import compiler

from trainguard.errors import ConfigError

__all__ = ["compile_all"]


def compile_all(output_dir: str | Path) -> list[Path]:
    """Writes each pipeline and each component as YAML into ``output_dir``; returns the paths.

    Component YAML loads back with ``kfp.components.load_component_from_file``.

    Raises:
        ConfigError: the components image names no registry (it would be pulled from Docker Hub,
            from a repository trainguard does not own), or ``output_dir`` cannot be created.
    """
    from trainguard.component_image import check_component_image
    from trainguard.components import preflight, train, validate
    from trainguard.components.image import COMPONENT_IMAGE
    from trainguard.pipelines import PIPELINES

    check_component_image(COMPONENT_IMAGE, doing="compiling the pipelines")

    out = Path(output_dir)
    targets = [(pipeline, out / f"{name}.yaml") for name, pipeline in PIPELINES.items()]
    targets += [
        (component, out / "components" / f"{component.component_spec.name}.yaml")
        for component in (preflight, train, validate)
    ]
    try:
        (out / "components").mkdir(parents=True, exist_ok=True)
        for item, path in targets:
            compiler.Compiler().compile(item, str(path))
    except OSError as exc:  # a file in the way, no permission: bad input, not a traceback
        raise ConfigError(
            f"cannot write into --output-dir {out}: {exc.strerror or exc} "
            f"({exc.filename or out}); choose another directory"
        ) from None
    return [path for _, path in targets]
