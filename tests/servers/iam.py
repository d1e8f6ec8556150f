"""Loopback Resource Manager v3, IAM v1 and IAM Credentials v1, sharing one IAM state.

One server answers the three APIs (their paths do not collide), so
``TRAINGUARD_ENDPOINT_CLOUDRESOURCEMANAGER``, ``…_IAM`` and ``…_IAMCREDENTIALS`` may all point at it:

- ``GET /v3/projects/P`` → ``{"name": "projects/NUMBER", "projectId", "state": "ACTIVE", …}``
  (the caller needs ``resourcemanager.projects.get``; an unknown project is a 403, as Google says
  "or it may not exist");
- ``POST /v3/projects/P:testIamPermissions {"permissions": [...]}`` → the subset the *caller* holds;
- ``POST /v1/projects/-/serviceAccounts/EMAIL:testIamPermissions`` → same, on a service account;
- ``POST /v1/projects/-/serviceAccounts/EMAIL:generateAccessToken`` → ``{"accessToken",
  "expireTime"}`` when the caller holds ``iam.serviceAccounts.getAccessToken`` on it. Requests that
  carry that token are then made *as the service account*, which is how a test sees the
  impersonated testIamPermissions answer for the job's service account.

``IamState`` is the policy truth (bindings of predefined roles on projects, buckets and service
accounts, inherited from the project) that ``TroubleshooterServer`` also explains.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from tests.servers.googleapi import ApiError, GoogleApiServer, Request

__all__ = ["IamServer", "IamState", "ROLE_PERMISSIONS", "Binding"]

# Google's predefined roles, the permissions of each that these tests touch (from the IAM roles
# reference). Deliberately separate from trainguard's own table: this is the server's truth.
ROLE_PERMISSIONS: dict[str, frozenset[str]] = {
    "roles/owner": frozenset({"*"}),
    "roles/viewer": frozenset(
        {
            "resourcemanager.projects.get",
            "storage.buckets.get",
            "monitoring.timeSeries.list",
            "cloudquotas.quotas.get",
        }
    ),
    "roles/browser": frozenset({"resourcemanager.projects.get"}),
    "roles/storage.objectViewer": frozenset({"storage.objects.get", "storage.objects.list"}),
    "roles/storage.objectCreator": frozenset({"storage.objects.create"}),
    "roles/storage.objectUser": frozenset(
        {
            "storage.objects.create",
            "storage.objects.delete",
            "storage.objects.get",
            "storage.objects.list",
            "storage.objects.update",
        }
    ),
    "roles/storage.objectAdmin": frozenset(
        {
            "storage.objects.create",
            "storage.objects.delete",
            "storage.objects.get",
            "storage.objects.list",
            "storage.objects.update",
            "storage.objects.setIamPolicy",
        }
    ),
    "roles/aiplatform.user": frozenset(
        {
            "aiplatform.customJobs.create",
            "aiplatform.customJobs.get",
            "aiplatform.tensorboardExperiments.write",
            "aiplatform.tensorboardRuns.write",
            "aiplatform.metadataStores.get",
            "aiplatform.contexts.update",
        }
    ),
    "roles/aiplatform.viewer": frozenset(
        {"aiplatform.customJobs.get", "aiplatform.tensorboards.get", "aiplatform.persistentResources.get"}
    ),
    "roles/cloudkms.cryptoKeyEncrypterDecrypter": frozenset(
        {"cloudkms.cryptoKeyVersions.useToEncrypt", "cloudkms.cryptoKeyVersions.useToDecrypt"}
    ),
    "roles/cloudkms.cryptoKeyEncrypter": frozenset({"cloudkms.cryptoKeyVersions.useToEncrypt"}),
    "roles/cloudkms.cryptoKeyDecrypter": frozenset({"cloudkms.cryptoKeyVersions.useToDecrypt"}),
    "roles/cloudkms.viewer": frozenset({"cloudkms.cryptoKeys.get", "cloudkms.keyRings.get"}),
    "roles/iam.serviceAccountUser": frozenset({"iam.serviceAccounts.actAs"}),
    "roles/iam.serviceAccountTokenCreator": frozenset({"iam.serviceAccounts.getAccessToken"}),
}
_SA_RE = re.compile(r"^[^@]+@(?P<project>[a-z][-a-z0-9]*)\.iam\.gserviceaccount\.com$")


@dataclass(frozen=True)
class Binding:
    """``member`` holds ``role`` on ``resource`` (a full resource name); maybe conditionally."""

    resource: str
    role: str
    member: str
    conditional: bool = False


@dataclass
class IamState:
    """Who holds what: projects, buckets, service accounts and role bindings.

    Attributes:
        projects: project ID → number.
        buckets: bucket → the project it lives in (its policies inherit the project's).
        service_accounts: emails that exist.
        caller: the member anonymous requests act as (the person running preflight).
        unreadable: full resource names whose policy the caller may not read (troubleshooting them
            answers UNKNOWN_INFO).
    """

    projects: dict[str, str] = field(default_factory=lambda: {"tg-proj": "123456789012"})
    buckets: dict[str, str] = field(default_factory=dict)
    service_accounts: set[str] = field(default_factory=set)
    bindings: list[Binding] = field(default_factory=list)
    caller: str = "user:alice@example.com"
    unreadable: set[str] = field(default_factory=set)
    tokens: dict[str, str] = field(default_factory=dict)

    # -- names --

    @staticmethod
    def project_resource(project: str) -> str:
        return f"//cloudresourcemanager.googleapis.com/projects/{project}"

    @staticmethod
    def bucket_resource(bucket: str) -> str:
        return f"//storage.googleapis.com/projects/_/buckets/{bucket}"

    @staticmethod
    def kms_resource(name: str) -> str:
        """A key's (or key ring's) full resource name from ``projects/P/locations/L/…``."""
        return f"//cloudkms.googleapis.com/{name}"

    @staticmethod
    def sa_resource(email: str) -> str:
        m = _SA_RE.match(email)
        project = m["project"] if m else "-"
        return f"//iam.googleapis.com/projects/{project}/serviceAccounts/{email}"

    def project_id(self, key: str) -> str | None:
        """The project ID for an ID or number, None if unknown."""
        if key in self.projects:
            return key
        return next((p for p, n in self.projects.items() if n == key), None)

    # -- configuration --

    def grant(self, member: str, role: str, resource: str, *, conditional: bool = False) -> None:
        """Binds ``role`` to ``member`` (``serviceAccount:…``/``user:…``) on ``resource``."""
        assert role in ROLE_PERMISSIONS, f"unknown role {role} for the test server"
        self.bindings.append(Binding(resource, role, member, conditional))

    def revoke(self, member: str, role: str | None = None) -> None:
        self.bindings = [b for b in self.bindings if not (b.member == member and role in (None, b.role))]

    # -- evaluation --

    def ancestors(self, resource: str) -> list[str]:
        """``resource`` and the resources whose policies it inherits, nearest first."""
        chain = [resource]
        m = re.match(r"^//storage\.googleapis\.com/projects/_/buckets/(?P<b>[^/]+)$", resource)
        if m and m["b"] in self.buckets:
            chain.append(self.project_resource(self.buckets[m["b"]]))
        m = re.match(r"^//iam\.googleapis\.com/projects/(?P<p>[^/]+)/serviceAccounts/", resource)
        if m and m["p"] in self.projects:
            chain.append(self.project_resource(m["p"]))
        m = re.match(
            r"^//cloudkms\.googleapis\.com/(?P<ring>projects/(?P<p>[^/]+)/locations/"
            r"[^/]+/keyRings/[^/]+)/cryptoKeys/[^/]+$",
            resource,
        )
        if m:  # key → key ring → project
            chain.append(self.kms_resource(m["ring"]))
            if self.project_id(m["p"]):
                chain.append(self.project_resource(self.project_id(m["p"])))
        return chain

    def bindings_for(self, member: str, permission: str, resource: str) -> list[Binding]:
        """The bindings that grant ``permission`` on ``resource`` to ``member``."""
        found = []
        for res in self.ancestors(resource):
            for b in self.bindings:
                perms = ROLE_PERMISSIONS[b.role]
                if b.resource == res and b.member == member and (permission in perms or "*" in perms):
                    found.append(b)
        return found

    def has(self, member: str, permission: str, resource: str) -> bool:
        """True when an unconditional binding grants the permission."""
        return any(not b.conditional for b in self.bindings_for(member, permission, resource))

    def member_for(self, email: str) -> str:
        return f"serviceAccount:{email}" if email.endswith("gserviceaccount.com") else f"user:{email}"

    def caller_of(self, request: Request) -> str:
        """The member a request acts as: the impersonated account for a minted token."""
        return self.tokens.get(request.bearer, self.caller)


class IamServer(GoogleApiServer):
    """Resource Manager v3 + IAM v1 + IAM Credentials v1 over one ``IamState``."""

    domain = "iam.googleapis.com"
    service = "iam.googleapis.com"

    def __init__(self, state: IamState | None = None) -> None:
        self.state = state or IamState()
        super().__init__()

    def service_for(self, path: str) -> str:
        """Three APIs answer here: Resource Manager (/v3/projects), IAM Credentials
        (:generateAccessToken) and IAM; each can be disabled on its own."""
        if path.startswith("/v3/projects"):
            return "cloudresourcemanager.googleapis.com"
        if path.endswith(":generateAccessToken"):
            return "iamcredentials.googleapis.com"
        return "iam.googleapis.com"

    def routes(self):
        return [
            ("GET", r"/v3/projects/(?P<project>[^/:]+)", self._get_project),
            ("POST", r"/v3/projects/(?P<project>[^/:]+):testIamPermissions", self._test_project),
            ("POST", r"/v1/projects/-/serviceAccounts/(?P<email>[^/:]+):testIamPermissions", self._test_sa),
            (
                "POST",
                r"/v1/projects/-/serviceAccounts/(?P<email>[^/:]+):generateAccessToken",
                self._generate_token,
            ),
        ]

    # -- Resource Manager --

    def _known_project(self, key: str, permission: str) -> str:
        project = self.state.project_id(key)
        if project is None:
            raise ApiError(
                403,
                f"Permission '{permission}' denied on resource "
                f"'//cloudresourcemanager.googleapis.com/projects/{key}' (or it "
                "may not exist).",
                reason="IAM_PERMISSION_DENIED",
                domain="cloudresourcemanager.googleapis.com",
                metadata={"permission": permission, "resource": f"projects/{key}"},
            )
        return project

    def _get_project(self, request: Request, m: re.Match) -> dict:
        permission = "resourcemanager.projects.get"
        project = self._known_project(m["project"], permission)
        if not self.state.has(
            self.state.caller_of(request), permission, self.state.project_resource(project)
        ):
            raise ApiError(
                403,
                f"Permission '{permission}' denied on resource "
                f"'//cloudresourcemanager.googleapis.com/projects/{m['project']}' "
                "(or it may not exist).",
                reason="IAM_PERMISSION_DENIED",
                domain="cloudresourcemanager.googleapis.com",
                metadata={"permission": permission, "resource": f"projects/{m['project']}"},
            )
        number = self.state.projects[project]
        return {
            "name": f"projects/{number}",
            "parent": "organizations/1000000000001",
            "projectId": project,
            "state": "ACTIVE",
            "displayName": project,
            "createTime": "2024-01-15T10:00:00.000Z",
            "etag": 'W/"5d3c1f"',
        }

    def _test_project(self, request: Request, m: re.Match) -> dict:
        project = self._known_project(m["project"], "resourcemanager.projects.get")
        return self._subset(request, self.state.project_resource(project))

    # -- IAM --

    def _service_account(self, email: str) -> str:
        if email not in self.state.service_accounts:
            raise ApiError(
                404, f"Not found; Gaia id not found for email {email}", reason="", domain="iam.googleapis.com"
            )
        return self.state.sa_resource(email)

    def _test_sa(self, request: Request, m: re.Match) -> dict:
        return self._subset(request, self._service_account(m["email"]))

    def _subset(self, request: Request, resource: str) -> dict:
        body = request.body or {}
        wanted = body.get("permissions")
        if not isinstance(wanted, list) or not wanted:
            raise ApiError(
                400,
                "Request contains an invalid argument: permissions must be set.",
                reason="INVALID_ARGUMENT",
            )
        caller = self.state.caller_of(request)
        granted = [p for p in wanted if self.state.has(caller, p, resource)]
        return {"permissions": granted} if granted else {}  # Google omits empty lists

    # -- IAM Credentials --

    def _generate_token(self, request: Request, m: re.Match) -> dict:
        email = m["email"]
        resource = self._service_account(email)
        permission = "iam.serviceAccounts.getAccessToken"
        if not self.state.has(self.state.caller_of(request), permission, resource):
            raise ApiError(
                403,
                f"Permission '{permission}' denied on resource (or it may not exist).",
                reason="IAM_PERMISSION_DENIED",
                domain="iamcredentials.googleapis.com",
                metadata={"permission": permission, "resource": f"projects/-/serviceAccounts/{email}"},
            )
        body = request.body or {}
        if not body.get("scope"):
            raise ApiError(400, "Scope required.", reason="INVALID_ARGUMENT")
        lifetime = int(str(body.get("lifetime", "3600s")).rstrip("s"))
        token = "ya29.loopback-" + secrets.token_urlsafe(24)
        self.state.tokens[token] = f"serviceAccount:{email}"
        expire = datetime.now(UTC) + timedelta(seconds=lifetime)
        return {"accessToken": token, "expireTime": expire.strftime("%Y-%m-%dT%H:%M:%SZ")}
