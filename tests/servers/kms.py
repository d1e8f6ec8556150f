"""A loopback Cloud KMS v1 server: crypto keys and their IAM policies.

Speaks what ``google-cloud-kms`` (``kms_v1.KeyManagementServiceClient``, REST transport) sends:

- ``GET /v1/projects/P/locations/L/keyRings/R/cryptoKeys/K`` → CryptoKey JSON (``name``,
  ``primary{name, state, algorithm, protectionLevel, createTime}``, ``purpose``, ``createTime``,
  ``versionTemplate``, ``destroyScheduledDuration``), enums as numbers under
  ``$alt=json;enum-encoding=int`` (which the GAPIC transport always asks for), names otherwise;
- ``GET …/cryptoKeys/K:getIamPolicy`` → ``{"version", "etag", "bindings": [{"role", "members"}]}``
  from the shared ``IamState`` (the bindings on the key itself; inherited ones are not there, as
  on the real service);
- a missing key is a 404 ``CryptoKey … not found.`` when the caller may get keys, else a 403, as
  Google answers.

The policy truth is ``IamState`` (shared with ``TroubleshooterServer``, which explains the key's
full resource name ``//cloudkms.googleapis.com/projects/…/cryptoKeys/K`` with the key ring and the
project as ancestors).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.servers.googleapi import ApiError, GoogleApiServer, Request
from tests.servers.iam import IamState

__all__ = ["KmsServer", "Key"]

_PURPOSE = {
    0: "CRYPTO_KEY_PURPOSE_UNSPECIFIED",
    1: "ENCRYPT_DECRYPT",
    5: "ASYMMETRIC_SIGN",
    6: "ASYMMETRIC_DECRYPT",
    7: "RAW_ENCRYPT_DECRYPT",
    9: "MAC",
}
_STATE = {
    0: "CRYPTO_KEY_VERSION_STATE_UNSPECIFIED",
    1: "ENABLED",
    2: "DISABLED",
    3: "DESTROYED",
    4: "DESTROY_SCHEDULED",
    5: "PENDING_GENERATION",
}
_PROTECTION = {0: "PROTECTION_LEVEL_UNSPECIFIED", 1: "SOFTWARE", 2: "HSM"}
_ALGORITHM = {
    0: "CRYPTO_KEY_VERSION_ALGORITHM_UNSPECIFIED",
    1: "GOOGLE_SYMMETRIC_ENCRYPTION",
    2: "RSA_SIGN_PSS_2048_SHA256",
}
_KEY = r"/v1/(?P<name>projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/:]+)"


@dataclass
class Key:
    """A key: its purpose and its primary version's state (None: no primary version)."""

    purpose: int = 1
    primary_state: int | None = 1


class KmsServer(GoogleApiServer):
    """Cloud KMS keys over ``IamState``.

    Attributes:
        keys: resource name → Key.
        denied: permissions the caller lacks (``cloudkms.cryptoKeys.get``,
            ``cloudkms.cryptoKeys.getIamPolicy``): 403.
    """

    domain = "cloudkms.googleapis.com"
    service = "cloudkms.googleapis.com"

    def __init__(self, state: IamState | None = None) -> None:
        self.state = state or IamState()
        self.keys: dict[str, Key] = {}
        self.denied: set[str] = set()
        super().__init__()

    def add_key(self, name: str, *, purpose: int = 1, primary_state: int | None = 1) -> str:
        self.keys[name] = Key(purpose, primary_state)
        return name

    def routes(self):
        return [("GET", _KEY, self._get), ("GET", _KEY + r":getIamPolicy", self._get_iam_policy)]

    def _key(self, name: str, permission: str) -> Key:
        if permission in self.denied:
            raise self.forbidden(permission, name)
        key = self.keys.get(name)
        if key is None:
            raise ApiError(404, f"CryptoKey {name} not found.", reason="NOT_FOUND")
        return key

    def _get(self, request: Request, m: re.Match) -> dict:
        name = m["name"]
        key = self._key(name, "cloudkms.cryptoKeys.get")
        e = lambda names, v: self.enum(request, names, v)  # noqa: E731
        body = {
            "name": name,
            "purpose": e(_PURPOSE, key.purpose),
            "createTime": "2025-02-01T10:00:00.123456789Z",
            "versionTemplate": {
                "protectionLevel": e(_PROTECTION, 1),
                "algorithm": e(_ALGORITHM, 1 if key.purpose == 1 else 2),
            },
            "destroyScheduledDuration": "2592000s",
        }
        if key.primary_state is not None and key.purpose == 1:
            body["primary"] = {
                "name": f"{name}/cryptoKeyVersions/1",
                "state": e(_STATE, key.primary_state),
                "createTime": "2025-02-01T10:00:00.123456789Z",
                "protectionLevel": e(_PROTECTION, 1),
                "algorithm": e(_ALGORITHM, 1),
                "generateTime": "2025-02-01T10:00:00.123456789Z",
            }
        return body

    def _get_iam_policy(self, request: Request, m: re.Match) -> dict:
        name = m["name"]
        self._key(name, "cloudkms.cryptoKeys.getIamPolicy")
        resource = f"//cloudkms.googleapis.com/{name}"
        roles: dict[str, list[str]] = {}
        for b in self.state.bindings:
            if b.resource == resource and not b.conditional:
                roles.setdefault(b.role, []).append(b.member)
        out: dict = {"version": 1, "etag": "BwYqZ3xK0aE="}
        if roles:
            out["bindings"] = [{"role": r, "members": sorted(ms)} for r, ms in roles.items()]
        return out
