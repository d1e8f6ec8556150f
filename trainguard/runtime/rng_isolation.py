"""Keeps Google's client libraries off the training's own Python ``random`` stream.

google-cloud-storage draws a multipart boundary from the module-level ``random`` at every
multipart upload (``_media/_upload.py``: ``random.randrange(sys.maxsize)``), and its retries draw
their jitter from it (google-api-core ``retry_base.exponential_sleep_generator``:
``random.uniform``; google-auth's and resumable-media's backoffs likewise). A checkpoint saved on
``gs://`` would then move the user's ``random`` by a draw the resumed run never makes — on the
saver thread, at moments that vary — and a run resumed from Cloud Storage would not end
bit-identical. Each of those modules gets a private ``random.Random`` instead, seeded from the
OS: the same methods, its own state.
"""

from __future__ import annotations

import importlib
import random
import threading

__all__ = ["LIBRARY_MODULES", "isolate_library_randomness"]

#: Modules that call the module-level ``random`` (read in the installed versions, 2026-12-02).
LIBRARY_MODULES = (
    "google.cloud.storage._media._upload",  # multipart boundary at every multipart upload
    "google.resumable_media._upload",  # the same, in the older separate package
    "google.resumable_media._helpers",  # its retry jitter (random.randint)
    "google.api_core.retry.retry_base",  # exponential_sleep_generator's jitter
    "google.auth._exponential_backoff",  # credential refresh retries
)

_lock = threading.Lock()


def isolate_library_randomness() -> list[str]:
    """Gives each module of ``LIBRARY_MODULES`` that is installed its own ``random.Random``.

    Idempotent; returns the modules changed by this call.
    """
    changed = []
    with _lock:
        for name in LIBRARY_MODULES:
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            if getattr(module, "random", None) is random:
                module.random = random.Random()  # type: ignore[attr-defined]  # seeded from the OS
                changed.append(name)
    return changed
