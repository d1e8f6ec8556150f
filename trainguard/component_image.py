"""The image trainguard's KFP components run in, and the rule that it names a registry we trust.

trainguard publishes no components image: each team builds ``containers/components/Dockerfile``
and pushes it to its own registry. An image name without a registry host
(``trainguard/components:0.1.0``) is pulled from Docker Hub, from a repository trainguard does not
own: the pipeline dies at the pull, or runs whatever someone published under that name. So the
default is a name that can never be pulled from anywhere — its host is under ``.invalid``, which
RFC 2606 reserves so that it never resolves — and compiling or submitting for Vertex refuses it,
and any other name without a registry, with the fix.
"""

from __future__ import annotations

import os

from trainguard import __version__
from trainguard.errors import ConfigError

__all__ = [
    "IMAGE_ENV",
    "REPOSITORY",
    "UNSET_HOST",
    "default_image",
    "component_image",
    "check_component_image",
]

IMAGE_ENV = "TRAINGUARD_COMPONENT_IMAGE"
REPOSITORY = "trainguard/components"
UNSET_HOST = "trainguard-components-image-not-set.invalid"


def default_image(version: str = __version__) -> str:
    """The placeholder used when no image is given: pullable from nowhere, and says why."""
    return f"{UNSET_HOST}/{REPOSITORY}:{version}"


def component_image(environ: os._Environ[str] | dict[str, str] | None = None) -> str:
    """``TRAINGUARD_COMPONENT_IMAGE`` if set, else :func:`default_image`."""
    env = os.environ if environ is None else environ
    return env.get(IMAGE_ENV, "").strip() or default_image()


def registry_host(image: str) -> str:
    """The registry host an image name gives explicitly ('' when it gives none), by Docker's
    rule: the first path component is a host when it has a ``.`` or ``:`` or is ``localhost``."""
    first, sep, _ = image.strip().partition("/")
    return first if sep and ("." in first or ":" in first or first == "localhost") else ""


def check_component_image(image: str, *, doing: str = "compiling for Vertex AI") -> str:
    """``image`` when it names the registry it comes from.

    Args:
        image: the components image.
        doing: what needs it (``compiling for Vertex AI``, ``submitting to Vertex AI``), for the message.

    Raises:
        ConfigError: the placeholder (no image was given) or a name without a registry host.
    """
    build = (
        "build and push the components image to your own registry (make images "
        "REGISTRY=us-central1-docker.pkg.dev/PROJECT/REPO; without Docker: make cloud-images "
        "REGISTRY=…), then pass --image REGISTRY/trainguard/components:"
        f"{__version__} (or set {IMAGE_ENV}; make compile REGISTRY=… does both)"
    )
    host = registry_host(image)
    if not image.strip() or host == UNSET_HOST:
        raise ConfigError(
            f"{doing} needs the components image: trainguard publishes none, and the default "
            f"{default_image()} can be pulled from nowhere; {build}"
        )
    if not host:
        raise ConfigError(
            f"the components image {image!r} names no registry, so Vertex AI would pull it from "
            "Docker Hub, from a repository trainguard does not own; name your registry: "
            f"us-central1-docker.pkg.dev/PROJECT/REPO/{image.strip()} (write docker.io/{image.strip()} "
            "if you do mean Docker Hub)"
        )
    return image.strip()
