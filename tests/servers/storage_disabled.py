"""Cloud Storage's JSON API as it answers in a project where the API is off.

``gcp-storage-emulator`` serves the storage checks' happy and unhappy paths; it cannot answer as a
disabled API does. This server answers every call (point ``STORAGE_EMULATOR_HOST`` at it) with the
403 the JSON API sends then: "Cloud Storage JSON API has not been used in project N before or it
is disabled" (cloudyr/googleCloudStorageR#5), service ``storage-api.googleapis.com``, in the
discovery-era shape with ``errors[].reason accessNotConfigured`` and the ``SERVICE_DISABLED``
ErrorInfo (:func:`tests.servers.googleapi.disabled_body`).
"""

from __future__ import annotations

import re

from tests.servers.googleapi import GoogleApiServer, Request

__all__ = ["DisabledStorageServer"]


class DisabledStorageServer(GoogleApiServer):
    """Every Cloud Storage JSON API call answers SERVICE_DISABLED for ``consumer``."""

    domain = "storage.googleapis.com"
    service = "storage-api.googleapis.com"
    legacy_errors = True

    def __init__(self, consumer: str = "123456789012") -> None:
        super().__init__()
        self.disable(consumer=consumer)

    def routes(self):
        return [(m, r"/.*", self._never) for m in ("GET", "POST", "PUT", "PATCH", "DELETE")]

    def _never(self, request: Request, m: re.Match) -> dict:  # pragma: no cover - always disabled
        return {}
