"""The few ``aiplatform_v1`` message types the job spec needs, without every service client.

``import google.cloud.aiplatform_v1`` runs the package's ``__init__``, which imports all of its
service clients and all 126 type modules: about 0.75 s of a 1.7 s preflight, to use three
messages. Python imports a package before any module inside it, so even
``import google.cloud.aiplatform_v1.types.custom_job`` pays it. :func:`load` imports the type
modules themselves, under their real names, with stand-ins for the two enclosing packages while
it does; then it takes the stand-ins away. A later ``import google.cloud.aiplatform_v1`` (a
launcher's) runs the real package, which finds these modules already imported and reuses them:
``aiplatform_v1.CustomJob`` is the very class the spec built, and each proto descriptor is
registered once.

When the package is already imported, or cannot be found this way, the plain import is used.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from pathlib import Path

__all__ = ["load"]

_PACKAGE = "google.cloud.aiplatform_v1"
_TYPES = f"{_PACKAGE}.types"
_LOCK = threading.Lock()


def _plain(names: tuple[str, ...]) -> list[types.ModuleType]:
    importlib.import_module(_PACKAGE)
    return [importlib.import_module(f"{_TYPES}.{name}") for name in names]


def _stand_in(name: str, path: list[str]) -> types.ModuleType:
    module = types.ModuleType(name, "stand-in while trainguard imports a few message types")
    module.__path__ = path
    module.__package__ = name
    return module


def load(*names: str) -> list[types.ModuleType]:
    """The modules ``google.cloud.aiplatform_v1.types.<name>`` for ``names``, imported lightly."""
    with _LOCK:
        if _PACKAGE in sys.modules:
            return _plain(names)
        try:
            spec = importlib.util.find_spec(_PACKAGE)  # imports google.cloud, not the package
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            return _plain(names)
        roots = list(spec.submodule_search_locations)
        package = _stand_in(_PACKAGE, roots)
        type_package = _stand_in(_TYPES, [str(Path(root) / "types") for root in roots])
        sys.modules[_PACKAGE], sys.modules[_TYPES] = package, type_package
        try:
            return [importlib.import_module(f"{_TYPES}.{name}") for name in names]
        finally:
            for name, stand_in in ((_TYPES, type_package), (_PACKAGE, package)):
                if sys.modules.get(name) is stand_in:
                    del sys.modules[name]
