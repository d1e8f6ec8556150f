"""When to save and which checkpoints to keep: small policy objects, validated when made.

As in orbax-checkpoint (``save_decision_policy.py``, ``preservation_policy.py``), the decision to
save and the choice of what to keep are plain values a run is configured with, one file each:

* :class:`SavePolicy` (``save.py``): every N steps and/or every S seconds;
* :class:`RetentionPolicy` (``retention.py``): the last K and the best B by a metric.

A policy that could never do what its name says (``SavePolicy()`` that saves never,
``RetentionPolicy(keep_last=-2)``, ``mode="MAX"`` read as "min") is refused when it is made, with a
:class:`~trainguard.errors.ConfigError` that says what to pass.
"""

from trainguard.runtime.policies.retention import RetentionPolicy
from trainguard.runtime.policies.save import DEFAULT_EVERY_STEPS, SavePolicy, save_policy

__all__ = ["DEFAULT_EVERY_STEPS", "RetentionPolicy", "SavePolicy", "save_policy"]
