"""A loopback Vertex AI Model Registry: ``models:upload`` as a long-running operation.

It speaks what the ``aiplatform_v1`` REST transport of ``ModelServiceClient`` sends and polls:

* ``POST /v1/projects/P/locations/L/models:upload`` — body an ``UploadModelRequest`` (camelCase:
  ``model``, ``parentModel``, ``modelId``) → a ``google.longrunning.Operation`` named
  ``projects/NUMBER/locations/L/models/ID/operations/OP`` (the shape python-aiplatform logs as
  "Create Model backing LRO: projects/849075740253/locations/us-central1/models/
  8596246888255062016/operations/1775381459729645568", palladius/clouddeploy-vertex-demo), its
  ``metadata`` an ``UploadModelOperationMetadata`` (``genericMetadata.createTime/updateTime``);
* ``GET /ui/projects/P/locations/L/models/ID/operations/OP`` — ``operations.get``, as the REST
  transport sends it: its http rules (``ModelServiceRestTransport.operations_client``, from the
  API's service config) list ``/ui/{name=projects/*/locations/*/models/*/operations/*}`` before
  the ``/v1/…`` binding, and the first template that fits is used; ``/v1/…`` is answered too. Not ``done``
  for the first :attr:`ModelRegistryServer.polls_before_done` GETs, then ``done: true`` with the
  ``UploadModelResponse`` (``model`` without a version, ``modelVersionId``; GCPC's upload launcher
  reads exactly these two, ``container/v1/model/upload_model/remote_runner.py``) or an ``error``
  (``google.rpc.Status``: ``code``, ``message``), as the Operation proto defines;
* ``GET /v1/projects/P/locations/L/models/ID`` (``@VERSION`` for one version) — the Model.

Versions: a new model's first version is ``1`` and carries the ``default`` alias ("the first
version automatically gets assigned the default alias", Vertex AI docs, "How to use model version
aliases"); an upload with ``parentModel`` adds the next integer ("the version ID is just an
automatically assigned ascending integer"; "specifying a display name for an existing model will
just be ignored", the Model Registry write-up at iron-football-358.notion.site) to the same model
ID. Names carry the project *number* whatever the request used, as every Vertex resource name does
("Model created. Resource name: projects/849075740253/…/models/8596246888255062016@1").

Refusals, in the bodies Vertex sends: labels outside its rules are a 400 ``INVALID_ARGUMENT``
"List of found errors:\\t1.Field: model.labels; Message: There can be no more than 64 labels …"
with a ``BadRequest`` field violation (word for word from statmike/vertex-ai-mlops#6, which shows
it for ``endpoint.labels``); a model for one of Vertex's prebuilt serving images whose directory
lacks the file that image loads is a 400 ``FAILED_PRECONDITION`` "Model directory gs://… is
expected to contain exactly one of: [model.mar]." (GoogleCloudPlatform/vertex-ai-samples#1796,
the prebuilt PyTorch image; the TensorFlow one wants saved_model.pb, cloudml-samples#33); a caller
without ``aiplatform.models.upload`` a 403 ``IAM_PERMISSION_DENIED``; faults and a disabled API
come from :class:`~tests.servers.googleapi.GoogleApiServer`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from tests.servers.googleapi import ApiError, GoogleApiServer, Request, error_body

__all__ = ["ModelRegistryServer", "LABEL_ERROR"]

_BASE = r"/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
_OPS = r"/(?:v1|ui)/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
# statmike/vertex-ai-mlops#6, word for word (Vertex writes "less that 128 bytes").
LABEL_ERROR = (
    "There can be no more than 64 labels attached to a single resource. Label keys and values can "
    "only contain lowercase letters, numbers, dashes and underscores. Label keys must start with a "
    "letter or number, must be less than 64 characters in length, and must be less that 128 bytes "
    "in length when encoded in UTF-8. Label values must be less than 64 characters in length, and "
    "must be less that 128 bytes in length when encoded in UTF-8."
)
# Vertex's prebuilt prediction images and the one file each loads from the model directory
# (the PyTorch one: vertex-ai-samples#1796; TensorFlow: cloudml-samples#33).
_PREBUILT = {
    "/vertex-ai/prediction/pytorch-": ("model.mar",),
    "/vertex-ai/prediction/tf2-": ("saved_model.pb", "saved_model.pbtxt"),
}
_MODEL_NAME = re.compile(r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/models/(?P<id>[^/@]+)$")
_METADATA_TYPE = "type.googleapis.com/google.cloud.aiplatform.v1.UploadModelOperationMetadata"
_RESPONSE_TYPE = "type.googleapis.com/google.cloud.aiplatform.v1.UploadModelResponse"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _label_ok(text: str, key: bool) -> bool:
    """Vertex's rule (LABEL_ERROR): lowercase letters (international ones too), digits, '-', '_';
    under 64 characters and 128 bytes; a key non-empty and starting with a letter or digit."""
    if len(text) > 63 or len(text.encode()) >= 128 or (key and not text):
        return False
    if key and not (text[0].isdigit() or text[0].islower()):
        return False
    return all(c.isdigit() or c.islower() or c in "-_" for c in text)


class ModelRegistryServer(GoogleApiServer):
    """The Model Registry of some projects.

    Attributes:
        projects: project ID → number.
        polls_before_done: how many ``operations.get`` answer "not done" before it is.
        denied: permissions the caller lacks (``aiplatform.models.upload``).
        list_artifacts: ``artifactUri`` → the file names under it (the storage emulator's), for
            the prebuilt-image check; None skips it.
        models: model ID → its versions (Model JSON, oldest first).
        operations: operation name → its state.
    """

    domain = "aiplatform.googleapis.com"
    service = "aiplatform.googleapis.com"

    def __init__(
        self,
        projects: dict[str, str] | None = None,
        *,
        polls_before_done: int = 2,
        list_artifacts: Callable[[str], list[str]] | None = None,
    ) -> None:
        self.projects = dict(projects or {"tg-proj": "123456789012"})
        self.polls_before_done = polls_before_done
        self.list_artifacts = list_artifacts
        self.denied: set[str] = set()
        self.models: dict[str, list[dict]] = {}
        self.operations: dict[str, dict] = {}
        self._fail_operations: list[tuple[int, str]] = []
        self._ids = itertools.count(8596246888255062016)
        self._op_ids = itertools.count(1775381459729645568)
        super().__init__()

    # -- configuration --

    def fail_next_operation(self, message: str, code: int = 13) -> None:
        """The next upload is accepted, but its operation ends with ``error: {code, message}``
        (``google.rpc.Code``: 13 INTERNAL by default) and no model is made."""
        self._fail_operations.append((code, message))

    def add_model(self, project: str, location: str, display_name: str = "existing") -> str:
        """A model already in the registry (version 1); returns its resource name."""
        model_id = str(next(self._ids))
        name = f"projects/{self._number(project)}/locations/{location}/models/{model_id}"
        self.models[model_id] = [
            {
                "name": name,
                "versionId": "1",
                "versionAliases": ["default"],
                "displayName": display_name,
                "createTime": _now(),
                "versionCreateTime": _now(),
            }
        ]
        return name

    # -- what tests read --

    def uploads(self) -> list[Request]:
        """The ``models:upload`` requests received."""
        return self.calls(r"/models:upload$", "POST")

    def versions(self, model_id_or_name: str) -> list[dict]:
        """A model's versions, oldest first."""
        return self.models.get(model_id_or_name.rsplit("/", 1)[-1].split("@")[0], [])

    # -- routes --

    def routes(self):
        return [
            ("POST", _BASE + r"/models:upload", self._upload),
            ("GET", _OPS + r"/models/(?P<model>[^/]+)/operations/(?P<op>[^/:]+)", self._get_operation),
            ("GET", _BASE + r"/models/(?P<model>[^/:]+)", self._get_model),
        ]

    def _number(self, project: str) -> str:
        return self.projects.get(project, project)

    def _dispatch(self, request: Request) -> tuple[int, Any]:
        status, payload = super()._dispatch(request)
        if status == 400 and LABEL_ERROR in str(payload.get("error", {}).get("message", "")):
            return status, label_error_body()  # with its BadRequest field violation
        return status, payload

    def _upload(self, request: Request, m: re.Match) -> dict:
        project, location = m["project"], m["location"]
        parent = f"projects/{project}/locations/{location}"
        if "aiplatform.models.upload" in self.denied:
            raise self.forbidden("aiplatform.models.upload", parent)
        body = request.body or {}
        model = dict(body.get("model") or {})
        labels = model.get("labels") or {}
        if len(labels) > 64 or not all(
            _label_ok(k, True) and _label_ok(str(v), False) for k, v in labels.items()
        ):
            raise _BadLabels()
        self._check_artifacts(model)
        parent_model = body.get("parentModel") or ""
        if parent_model:
            found = _MODEL_NAME.match(parent_model)
            if found is None or found["id"] not in self.models:
                # The status is Google's for a missing resource; the wording is ours (no public
                # answer shows Vertex's), and trainguard reads only the status.
                raise ApiError(404, f"Model {parent_model} not found.", reason="RESOURCE_NOT_FOUND")
            model_id = found["id"]
        else:
            model_id = body.get("modelId") or str(next(self._ids))
        name = f"projects/{self._number(project)}/locations/{location}/models/{model_id}"
        op_name = f"{name}/operations/{next(self._op_ids)}"
        created = _now()
        self.operations[op_name] = {
            "gets": 0,
            "model_id": model_id,
            "model": {**model, "name": name},
            "parent": bool(parent_model),
            "fail": self._fail_operations.pop(0) if self._fail_operations else None,
            "created": created,
            "done": None,
        }
        return {
            "name": op_name,
            "metadata": {
                "@type": _METADATA_TYPE,
                "genericMetadata": {"createTime": created, "updateTime": created},
            },
        }

    def _check_artifacts(self, model: dict) -> None:
        image = str((model.get("containerSpec") or {}).get("imageUri") or "")
        uri = str(model.get("artifactUri") or "")
        wants = next((files for marker, files in _PREBUILT.items() if marker in image), None)
        if wants is None or self.list_artifacts is None or not uri:
            return
        present = set(self.list_artifacts(uri))
        if not present & set(wants):
            raise ApiError(
                400,
                f"Model directory {uri.rstrip('/')} is expected to contain exactly one of: "
                f"[{', '.join(wants)}].",
            )

    def _get_operation(self, request: Request, m: re.Match) -> dict:
        name = request.path.split("/", 2)[2]
        state = self.operations.get(name)
        if state is None:
            raise ApiError(404, f"Operation {name} not found.")
        state["gets"] += 1
        answer: dict[str, Any] = {
            "name": name,
            "metadata": {
                "@type": _METADATA_TYPE,
                "genericMetadata": {"createTime": state["created"], "updateTime": _now()},
            },
        }
        if state["done"] is None and state["gets"] > self.polls_before_done:
            state["done"] = self._finish(state)
        if state["done"] is not None:
            answer.update(done=True, **state["done"])
        return answer

    def _finish(self, state: dict) -> dict:
        if state["fail"] is not None:
            code, message = state["fail"]
            return {"error": {"code": code, "message": message}}
        versions = self.models.setdefault(state["model_id"], [])
        version = str(len(versions) + 1)
        model = dict(state["model"])
        now = _now()
        if versions:  # a new version keeps the model's display name
            model["displayName"] = versions[0].get("displayName", model.get("displayName"))
        model.update(
            versionId=version,
            versionAliases=list(model.get("versionAliases") or []) + ([] if versions else ["default"]),
            createTime=versions[0]["createTime"] if versions else now,
            versionCreateTime=now,
        )
        versions.append(model)
        return {"response": {"@type": _RESPONSE_TYPE, "model": model["name"], "modelVersionId": version}}

    def _get_model(self, request: Request, m: re.Match) -> dict:
        model_id, _, version = m["model"].partition("@")
        versions = self.models.get(model_id)
        if not versions:
            raise ApiError(404, f"Model {request.path.removeprefix('/v1/')} not found.")
        if not version:
            return next(v for v in versions if "default" in v.get("versionAliases", []))
        found = [v for v in versions if v["versionId"] == version or version in v.get("versionAliases", [])]
        if not found:
            raise ApiError(404, f"Model {request.path.removeprefix('/v1/')} not found.")
        return found[0]


class _BadLabels(ApiError):
    """The 400 Vertex answers for labels outside its rules (see LABEL_ERROR; its body is
    :func:`label_error_body`)."""

    def __init__(self) -> None:
        super().__init__(400, LABEL_ERROR)


def label_error_body() -> dict:
    """The whole body of that 400, with its ``BadRequest`` field violation."""
    body = error_body(400, f"List of found errors:\t1.Field: model.labels; Message: {LABEL_ERROR}\t")
    body["error"]["details"] = [
        {
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"field": "model.labels", "description": LABEL_ERROR}],
        }
    ]
    return body
