"""A loopback Policy Troubleshooter v3 server: ``POST /v3/iam:troubleshoot``.

Explains an access tuple ``{principal, fullResourceName, permission}`` against an ``IamState``
the way the service does: ``overallAccessState`` CAN_ACCESS 1 / CANNOT_ACCESS 2 / UNKNOWN_INFO 3 /
UNKNOWN_CONDITIONAL 4, an ``allowPolicyExplanation`` with one ``explainedPolicies`` entry per
resource in the hierarchy (binding explanations only where the caller may read the policy), and a
``denyPolicyExplanation`` (no deny policies here). Enums are numbers under ``enum-encoding=int``,
which the GAPIC REST transport always asks for.
"""

from __future__ import annotations

import re

from tests.servers.googleapi import ApiError, GoogleApiServer, Request
from tests.servers.iam import ROLE_PERMISSIONS, IamState

__all__ = ["TroubleshooterServer"]

_OVERALL = {
    0: "OVERALL_ACCESS_STATE_UNSPECIFIED",
    1: "CAN_ACCESS",
    2: "CANNOT_ACCESS",
    3: "UNKNOWN_INFO",
    4: "UNKNOWN_CONDITIONAL",
}
_ALLOW = {
    0: "ALLOW_ACCESS_STATE_UNSPECIFIED",
    1: "ALLOW_ACCESS_STATE_GRANTED",
    2: "ALLOW_ACCESS_STATE_NOT_GRANTED",
    3: "ALLOW_ACCESS_STATE_UNKNOWN_CONDITIONAL",
    4: "ALLOW_ACCESS_STATE_UNKNOWN_INFO",
}
_DENY = {
    0: "DENY_ACCESS_STATE_UNSPECIFIED",
    1: "DENY_ACCESS_STATE_DENIED",
    2: "DENY_ACCESS_STATE_NOT_DENIED",
    3: "DENY_ACCESS_STATE_UNKNOWN_CONDITIONAL",
    4: "DENY_ACCESS_STATE_UNKNOWN_INFO",
}
_INCLUSION = {
    0: "ROLE_PERMISSION_INCLUSION_STATE_UNSPECIFIED",
    1: "ROLE_PERMISSION_INCLUDED",
    2: "ROLE_PERMISSION_NOT_INCLUDED",
    3: "ROLE_PERMISSION_UNKNOWN_INFO",
}
_MEMBERSHIP = {
    0: "MEMBERSHIP_MATCHING_STATE_UNSPECIFIED",
    1: "MEMBERSHIP_MATCHED",
    2: "MEMBERSHIP_NOT_MATCHED",
    3: "MEMBERSHIP_UNKNOWN_INFO",
    4: "MEMBERSHIP_UNKNOWN_UNSUPPORTED",
}
_RELEVANCE = {
    0: "HEURISTIC_RELEVANCE_UNSPECIFIED",
    1: "HEURISTIC_RELEVANCE_NORMAL",
    2: "HEURISTIC_RELEVANCE_HIGH",
}


def _fqdn(permission: str) -> str:
    """The v2 permission name: ``storage.objects.create`` → ``storage.googleapis.com/objects.create``."""
    service, rest = permission.split(".", 1)
    return f"{service}.googleapis.com/{rest}"


class TroubleshooterServer(GoogleApiServer):
    """Policy Troubleshooter over an ``IamState`` (shared with ``IamServer``).

    Attributes:
        allowed: False answers every call 403, as when the caller may not use the troubleshooter.
    """

    domain = "policytroubleshooter.googleapis.com"
    service = "policytroubleshooter.googleapis.com"

    def __init__(self, state: IamState | None = None) -> None:
        self.state = state or IamState()
        self.allowed = True
        super().__init__()

    def routes(self):
        return [("POST", r"/v3/iam:troubleshoot", self._troubleshoot)]

    def _troubleshoot(self, request: Request, m: re.Match) -> dict:
        if not self.allowed:
            raise ApiError(
                403,
                "The caller does not have permission",
                reason="IAM_PERMISSION_DENIED",
                metadata={"permission": "iam.roles.get", "resource": "policytroubleshooter.googleapis.com"},
            )
        body = request.body or {}
        tup = body.get("accessTuple") or {}
        principal, resource, permission = (
            tup.get("principal"),
            tup.get("fullResourceName"),
            tup.get("permission"),
        )
        for name, value in (
            ("principal", principal),
            ("full_resource_name", resource),
            ("permission", permission),
        ):
            if not value:
                raise ApiError(400, f"access_tuple.{name} is required.", reason="INVALID_ARGUMENT")
        member = self.state.member_for(principal)
        e = lambda names, v: self.enum(request, names, v)  # noqa: E731
        policies, any_granted, any_conditional, any_unknown = [], False, False, False
        for res in self.state.ancestors(resource):
            if res in self.state.unreadable:
                any_unknown = True
                policies.append({"allowAccessState": e(_ALLOW, 4), "relevance": e(_RELEVANCE, 1)})
                continue
            bindings = [b for b in self.state.bindings if b.resource == res]
            explanations = []
            state_here = 2
            for b in bindings:
                perms = ROLE_PERMISSIONS[b.role]
                included = permission in perms or "*" in perms
                matched = b.member == member
                granted = included and matched
                if granted:
                    state_here = 3 if b.conditional and state_here != 1 else 1
                explanations.append(
                    {
                        "allowAccessState": e(_ALLOW, (3 if b.conditional else 1) if granted else 2),
                        "role": b.role,
                        "rolePermission": e(_INCLUSION, 1 if included else 2),
                        "rolePermissionRelevance": e(_RELEVANCE, 2 if included else 1),
                        "combinedMembership": {
                            "membership": e(_MEMBERSHIP, 1 if matched else 2),
                            "relevance": e(_RELEVANCE, 2 if matched else 1),
                        },
                        "memberships": {
                            b.member: {
                                "membership": e(_MEMBERSHIP, 1 if matched else 2),
                                "relevance": e(_RELEVANCE, 2 if matched else 1),
                            }
                        },
                        "relevance": e(_RELEVANCE, 2 if granted else 1),
                        **(
                            {
                                "condition": {
                                    "expression": 'request.time < timestamp("2030-01-01T00:00:00Z")',
                                    "title": "temporary",
                                }
                            }
                            if b.conditional
                            else {}
                        ),
                    }
                )
            any_granted |= state_here == 1
            any_conditional |= state_here == 3
            roles: dict[str, list[str]] = {}
            for b in bindings:
                roles.setdefault(b.role, []).append(b.member)
            policies.append(
                {
                    "allowAccessState": e(_ALLOW, state_here),
                    "fullResourceName": res,
                    "bindingExplanations": explanations,
                    "relevance": e(_RELEVANCE, 2 if state_here == 1 else 1),
                    "policy": {
                        "version": 1,
                        "etag": "BwXk2pQ3Z0M=",
                        "bindings": [{"role": r, "members": ms} for r, ms in roles.items()],
                    },
                }
            )
        if any_granted:
            overall, allow = 1, 1
        elif any_conditional:
            overall, allow = 4, 3
        elif any_unknown:
            overall, allow = 3, 4
        else:
            overall, allow = 2, 2
        return {
            "overallAccessState": e(_OVERALL, overall),
            "accessTuple": {
                "principal": principal,
                "fullResourceName": resource,
                "permission": permission,
                "permissionFqdn": _fqdn(permission),
            },
            "allowPolicyExplanation": {
                "allowAccessState": e(_ALLOW, allow),
                "explainedPolicies": policies,
                "relevance": e(_RELEVANCE, 2),
            },
            "denyPolicyExplanation": {
                "denyAccessState": e(_DENY, 2),
                "relevance": e(_RELEVANCE, 1),
                "permissionDeniable": True,
            },
        }
