"""trainguard: guard costly Vertex AI training jobs.

The core never imports kfp; components and pipelines live in ``trainguard.components`` and
``trainguard.pipelines``.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
