"""trainguard's pipelines: ``guarded_training`` (preflight → train → validate) and
``preflight_only``."""

from trainguard.pipelines.guarded_training import guarded_training
from trainguard.pipelines.preflight_only import preflight_only

__all__ = ["guarded_training", "preflight_only", "PIPELINES"]

PIPELINES = {"guarded_training": guarded_training, "preflight_only": preflight_only}
