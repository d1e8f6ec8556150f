"""Compile the pipelines and components to YAML (``make compile``)."""

from __future__ import annotations

from pathlib import Path

from kfp import compiler

from trainguard.errors import ConfigError

__all__ = ["compile_all", "with_image"]


def compile_all(output_dir: str | Path, image: str = "") -> list[Path]:
    """Writes each pipeline and each component as YAML into ``output_dir``; returns the paths.

    Component YAML loads back with ``kfp.components.load_component_from_file``.

    Args:
        output_dir: where the YAML goes (``components/`` below it for the components).
        image: the components image (default: ``TRAINGUARD_COMPONENT_IMAGE``).

    Raises:
        ConfigError: the components image names no registry (it would be pulled from Docker Hub,
            from a repository trainguard does not own), or ``output_dir`` cannot be created.
    """
    from trainguard.component_image import check_component_image, component_image

    image = check_component_image(image or component_image(), doing="compiling the pipelines")
    with_image(image)
    from trainguard.components import preflight, register, train, validate
    from trainguard.pipelines import PIPELINES

    out = Path(output_dir)
    targets = [(pipeline, out / f"{name}.yaml") for name, pipeline in PIPELINES.items()]
    targets += [
        (component, out / "components" / f"{component.component_spec.name}.yaml")
        for component in (preflight, train, validate, register)
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


# The modules whose KFP objects carry the image, in the order they build on each other.
_IMAGE_MODULES = (
    "trainguard.components.image",
    "trainguard.components.preflight",
    "trainguard.components.train",
    "trainguard.components.validate",
    "trainguard.components.register",
    "trainguard.components",
    "trainguard.pipelines.guarded_training",
    "trainguard.pipelines.preflight_only",
    "trainguard.pipelines",
)


def with_image(image: str) -> None:
    """Makes the components and pipelines run in ``image``: KFP fixes a component's image when it
    is defined, so modules imported earlier with another one are built again."""
    import importlib
    import os
    import sys

    from trainguard.component_image import IMAGE_ENV

    os.environ[IMAGE_ENV] = image
    current = sys.modules.get("trainguard.components.image")
    if current is None or image == current.COMPONENT_IMAGE:
        return
    for name in _IMAGE_MODULES:
        if name in sys.modules:
            importlib.reload(sys.modules[name])
