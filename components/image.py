"""The image the components run in: its tag is the package version, overridable."""

from __future__ import annotations

import os

from trainguard import __version__

__all__ = ["COMPONENT_IMAGE", "DEFAULT_REPOSITORY", "component_image"]

DEFAULT_REPOSITORY = "trainguard/components"


def component_image() -> str:
    """``TRAINGUARD_COMPONENT_IMAGE`` if set, else ``trainguard/components:<version>``."""
    return os.environ.get("TRAINGUARD_COMPONENT_IMAGE") or f"{DEFAULT_REPOSITORY}:{__version__}"


COMPONENT_IMAGE = component_image()
