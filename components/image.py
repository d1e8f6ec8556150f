"""The image the components run in: ``TRAINGUARD_COMPONENT_IMAGE``, read when they are imported.

Unset, it is :func:`trainguard.component_image.default_image`, a name that can be pulled from
nowhere (trainguard publishes no image): the KFP local runner does not use it, and compiling or
submitting for Vertex AI through trainguard refuses it with the fix.
"""

from __future__ import annotations

from trainguard.component_image import REPOSITORY, component_image

__all__ = ["COMPONENT_IMAGE", "DEFAULT_REPOSITORY", "component_image"]

DEFAULT_REPOSITORY = REPOSITORY

COMPONENT_IMAGE = component_image()
