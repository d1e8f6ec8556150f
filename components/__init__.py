"""trainguard's KFP components: ``preflight``, ``train``, ``validate`` and ``register``.

Lightweight Python components whose body is one call into the core (``trainguard.stages``). They
run in the trainguard components image (``containers/components/Dockerfile``); its reference is
``COMPONENT_IMAGE``: ``trainguard/components:<version>`` unless ``TRAINGUARD_COMPONENT_IMAGE`` is set
when this package is first imported (``trainguard compile --image …`` does that for you).
"""

from trainguard.components.image import COMPONENT_IMAGE
from trainguard.components.preflight import preflight
from trainguard.components.register import register
from trainguard.components.train import train
from trainguard.components.validate import validate

__all__ = ["COMPONENT_IMAGE", "preflight", "register", "train", "validate"]
