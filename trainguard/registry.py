"""The shipped model into the Vertex AI Model Registry, with its verdict, and only when it passed.

:func:`model_card` turns the validate task's verdict and the train task's model metadata into
what travels with the model: labels within Vertex's label rules (:func:`label_value`) and a
description. :func:`register_model` refuses a failing verdict, a model with no serving files or one
not on Cloud Storage, then calls the Model Service's ``models:upload`` (the real ``aiplatform_v1``
client, REST transport; ``TRAINGUARD_ENDPOINT_AIPLATFORM`` points it elsewhere) and follows its
long-running operation to the end: as a new model, or as a new version of ``parent_model``.

The operation is written to ``gcp_resources`` (resource type ``VertexLro``, as GCPC's
``ModelUploadOp`` writes it, so the Vertex console links it); a retried task that finds one there
follows that operation instead of uploading a second version.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainguard.errors import ConfigError, GuardFailed, TrainguardError

__all__ = [
    "LABEL_KEYS",
    "ModelCard",
    "Registered",
    "RegistrationFailed",
    "RegistrationRefused",
    "label_value",
    "model_card",
    "register_model",
    "register_stage",
    "system_labels",
    "upload",
]

# Vertex's label rules, as its 400 states them (statmike/vertex-ai-mlops#6: "Label keys and values
# can only contain lowercase letters, numbers, dashes and underscores. Label keys must start with a
# letter or number, must be less than 64 characters in length … Label values must be less than 64
# characters", "no more than 64 labels attached to a single resource"). trainguard writes ASCII
# only, and starts a value with a letter or digit too, which every Google API's rules accept.
MAX_LABEL_CHARS = 63
MAX_LABELS = 64
# GCPC's launchers add the labels Vertex Pipelines gives a run (gcp_labels_util.attach_system_labels:
# the JSON in this variable; the user's own labels win on a clash). trainguard does the same.
SYSTEM_LABELS_ENV = "VERTEX_AI_PIPELINES_RUN_LABELS"
# Vertex documents no limit on a description; the card is kept to what a person reads.
MAX_DESCRIPTION_CHARS = 2000
# What display_name may hold (GCPC's model_upload docstring: "up to 128 characters").
MAX_DISPLAY_NAME_CHARS = 128

#: The labels trainguard puts on a registered model, and what each says.
LABEL_KEYS = {
    "trainguard-passed": "the verdict: true (a failing verdict is never registered)",
    "trainguard-warnings": "the failure classes of the verdict's warnings, '-'-joined, or none",
    "trainguard-step": "the shipped step (the checkpoint's, or the final weights'), or final",
    "trainguard-metric": "the validation metric judged at that step (val_loss for val/loss)",
    "trainguard-value": "its value there, '.' written as 'p' (labels allow no dots): 0p3123",
    "trainguard-run": "the pipeline run that trained, validated and registered it",
}

_NOT_LABEL = re.compile(r"[^a-z0-9_-]+")
_MODEL_NAME = re.compile(r"^projects/[^/]+/locations/[^/]+/models/[^/@]+(@[^/]+)?$")


class RegistrationRefused(GuardFailed):
    """The model may not be registered: its verdict failed, or it has nothing to serve."""


class RegistrationFailed(TrainguardError):
    """The Model Registry refused or failed the upload (the message quotes Vertex and says what to
    do)."""


def label_value(text: object) -> str:
    """``text`` as a label value Vertex accepts: lowercase ASCII letters, digits, ``_`` and ``-``,
    63 characters at most, starting and ending with a letter or digit ('' stays ''); a number is
    written with 4 significant digits, ``p`` for its point and ``neg`` for its sign (``0.31234`` →
    ``0p3123``, ``-0.5`` → ``neg0p5``)."""
    if isinstance(text, float | int) and not isinstance(text, bool):
        # 0.3123 → 0p3123 and -0.5 → neg0p5: labels allow no dots, and start with a letter or digit
        number = _number(float(text)).replace(".", "p")
        text = f"neg{number[1:]}" if number.startswith("-") else number
    value = _NOT_LABEL.sub("-", str(text).strip().lower()).strip("-_")
    return value[:MAX_LABEL_CHARS].rstrip("-_")


def _number(value: float) -> str:
    if not math.isfinite(value):
        return "nan" if math.isnan(value) else "inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}".replace("e+", "e")


@dataclass(frozen=True)
class ModelCard:
    """What travels with the model: ``labels``, ``description``, and the verdict's gist."""

    labels: dict[str, str]
    description: str
    passed: bool
    warnings: tuple[str, ...] = ()
    step: int | None = None
    serving_files: tuple[str, ...] = field(default_factory=tuple)


def model_card(
    verdict: Mapping[str, Any],
    model: Mapping[str, Any],
    *,
    run: str = "",
    verdict_uri: str = "",
    history_uri: str = "",
) -> ModelCard:
    """The labels and description of a model from its verdict and the train task's metadata.

    Args:
        verdict: the validate task's verdict (its JSON).
        model: the model's metadata (train's ``model``, or ``serving_model``'s ``trainguard``).
        run: the pipeline run.
        verdict_uri, history_uri: where the verdict and the history are, for the description.
    """
    passed = bool(verdict.get("passed"))
    findings = [f for f in verdict.get("findings") or [] if isinstance(f, Mapping)]
    warned = [f for f in findings if f.get("severity") == "warn"]
    classes = tuple(dict.fromkeys(str(f.get("failure_class") or "unknown") for f in warned))
    step = model.get("model_step")
    step = int(step) if isinstance(step, int | float) and not isinstance(step, bool) else None
    metric = str(model.get("model_metric") or "")
    value = model.get("model_metric_value")
    value = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    labels = {
        "trainguard-passed": "true" if passed else "false",
        "trainguard-warnings": label_value("-".join(classes)) or "none",
        "trainguard-step": str(step) if step is not None else "final",
    }
    if metric:
        labels["trainguard-metric"] = label_value(metric.replace("/", "_"))
    if value is not None:
        labels["trainguard-value"] = label_value(value)
    if label_value(run):
        labels["trainguard-run"] = label_value(run)
    labels = {k: v for k, v in labels.items() if v}
    return ModelCard(
        labels,
        _description(verdict, model, passed, warned, step, metric, value, run, verdict_uri, history_uri),
        passed,
        classes,
        step,
        tuple(str(n) for n in model.get("serving_files") or ()),
    )


def _description(verdict, model, passed, warned, step, metric, value, run, verdict_uri, history_uri) -> str:
    headline = str(verdict.get("headline") or "").strip()
    lines = [
        f"trainguard verdict: {'passed' if passed else 'FAILED'}"
        + (f" with {len(warned)} warning(s)" if warned else "")
        + (f": {headline}" if headline else "")
    ]
    for f in warned[:3]:
        lines.append(f"warning [{f.get('failure_class')}]: {str(f.get('message') or '').strip()}")
    where = f"checkpoint step {step}" if model.get("model_source") == "checkpoint" else "the final weights"
    if step is not None and model.get("model_source") != "checkpoint":
        where += f" (step {step})"
    shipped = f"shipped: {where}"
    if metric and value is not None:
        shipped += f", {metric} {value:.6g}"
    best = model.get("best_step")
    if isinstance(best, int | float) and not isinstance(best, bool):
        shipped += f"; best validation step {best:g}"
    lines.append(shipped)
    if model.get("model_reason"):
        lines.append(f"why: {model['model_reason']}")
    for name, text in (("pipeline run", run), ("verdict", verdict_uri), ("history", history_uri)):
        if text:
            lines.append(f"{name}: {text}")
    text = "\n".join(lines)
    return text if len(text) <= MAX_DESCRIPTION_CHARS else text[: MAX_DESCRIPTION_CHARS - 1] + "…"


def system_labels(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The labels Vertex Pipelines gives this run (``VERTEX_AI_PIPELINES_RUN_LABELS``), as GCPC
    attaches them; none outside Vertex Pipelines or when the variable is not JSON."""
    raw = (os.environ if environ is None else environ).get(SYSTEM_LABELS_ENV, "")
    try:
        found = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


@dataclass(frozen=True)
class Registered:
    """A registered model version.

    Attributes:
        model: ``projects/P/locations/L/models/ID`` (as Vertex names it: the project number).
        version_id: its version (``1`` for a new model).
        operation: the upload's long-running operation.
    """

    model: str
    version_id: str
    operation: str

    @property
    def resource_name(self) -> str:
        """``…/models/ID@VERSION``: this version (what GCPC's ``VertexModel`` names)."""
        return f"{self.model}@{self.version_id}" if self.version_id else self.model


def _refuse(card: ModelCard, artifact_uri: str, image: str, parent_model: str) -> None:
    if not card.passed:
        raise RegistrationRefused(
            "validation failed: a model whose verdict failed is never registered; fix what the "
            "validate task's report names and train again"
        )
    if not card.serving_files:
        raise RegistrationRefused(
            f"the model at {artifact_uri} has no serving files (see its trainguard-model.json): "
            "nothing a serving container could load was shipped"
        )
    if not image:
        raise ConfigError("serving_image is empty: name the serving container that loads the model")
    if not artifact_uri.startswith("gs://"):
        raise ConfigError(
            f"the model is at {artifact_uri!r}: the Model Registry reads a model from Cloud Storage; "
            "train with a gs:// output directory (baseOutputDirectory or output_dir)"
        )
    if parent_model and not _MODEL_NAME.match(parent_model):
        raise ConfigError(
            f"parent_model {parent_model!r} is not a model's resource name: use "
            "projects/PROJECT/locations/REGION/models/MODEL_ID (empty: register a new model)"
        )


def register_model(
    *,
    project: str,
    region: str,
    display_name: str,
    artifact_uri: str,
    serving_image: str,
    card: ModelCard,
    parent_model: str = "",
    pipeline_job: str = "",
    gcp_resources_path: str | None = None,
    timeout_s: float = 1800.0,
    poll_initial_s: float = 1.0,
) -> Registered:
    """Registers the model when its card allows it (see the module docstring).

    Raises:
        RegistrationRefused: the verdict failed, or the model has no serving files.
        ConfigError: no serving image, a model not on ``gs://``, a malformed ``parent_model``.
        RegistrationFailed: Vertex refused the upload or its operation failed.
        EndpointUnreachable / TransientError: the Model Service did not answer in time.
    """
    _refuse(card, artifact_uri, serving_image, parent_model)
    labels = {**system_labels(), **card.labels}
    model: dict[str, Any] = {
        "display_name": display_name[:MAX_DISPLAY_NAME_CHARS] or "trainguard-model",
        "description": card.description,
        "version_description": card.description,
        "artifact_uri": artifact_uri.rstrip("/") + "/",
        "container_spec": {"image_uri": serving_image},
        "labels": dict(list(labels.items())[:MAX_LABELS]),
    }
    if pipeline_job:
        model["pipeline_job"] = pipeline_job
    return upload(
        project=project,
        region=region,
        model=model,
        parent_model=parent_model.rsplit("@", 1)[0],
        gcp_resources_path=gcp_resources_path,
        timeout_s=timeout_s,
        poll_initial_s=poll_initial_s,
    )


def model_client(region: str):
    """A Vertex AI ModelServiceClient for ``region`` (REST transport; the endpoint override and
    credentials as :mod:`trainguard.gcp` resolves them)."""
    from google.cloud import aiplatform_v1

    from trainguard.gcp import credentials, endpoint

    ep = endpoint("AIPLATFORM", region)
    return aiplatform_v1.ModelServiceClient(
        credentials=credentials(ep),
        transport="rest",
        client_options={"api_endpoint": ep.base_url if ep.overridden else ep.host},
    )


def upload(
    *,
    project: str,
    region: str,
    model: Mapping[str, Any],
    parent_model: str = "",
    gcp_resources_path: str | None = None,
    timeout_s: float = 1800.0,
    poll_initial_s: float = 1.0,
) -> Registered:
    """``models:upload`` and its operation, followed to the end.

    Args:
        project, region: where the model goes.
        model: the Model (``aiplatform_v1.Model`` fields, snake_case).
        parent_model: upload as a new version of this model ('' for a new model).
        gcp_resources_path: where the operation is written; one already named there is followed
            instead of uploading again (a retried task).
        timeout_s: how long to follow the operation.
        poll_initial_s: the first wait between polls (it grows by half each time, to 20 s).

    Raises:
        RegistrationFailed, EndpointUnreachable, TransientError: see :func:`register_model`.
    """
    import requests
    from google.api_core import exceptions as gexc
    from google.api_core import operation as lro
    from google.api_core import retry as gretry
    from google.cloud import aiplatform_v1

    from trainguard.retry import RetryPolicy, transient_types, unreachable_types

    client = model_client(region)
    where = f"projects/{project}/locations/{region}"
    policy = RetryPolicy.from_env()
    pending = _pending_operation(gcp_resources_path, where)
    # A connection refused or a 429/503 means the request was not taken: safe to send again. A
    # read that timed out may have created the version: it is not retried.
    not_taken = (gexc.TooManyRequests, gexc.ServiceUnavailable, requests.ConnectionError, ConnectionError)
    op: Any = None
    try:
        if pending:
            raw = policy.call(
                lambda: client.get_operation(request={"name": pending}),
                transient=transient_types(),
                what="Vertex AI operations.get",
                where=pending,
            )
            op = lro.from_gapic(
                raw,
                client.transport.operations_client,
                aiplatform_v1.UploadModelResponse,
                metadata_type=aiplatform_v1.UploadModelOperationMetadata,
            )
        else:
            request = aiplatform_v1.UploadModelRequest(
                parent=where, model=aiplatform_v1.Model(**model), parent_model=parent_model or None
            )
            op = policy.call(
                lambda: client.upload_model(request=request),
                transient=not_taken,
                unreachable=unreachable_types(),
                what="Vertex AI models:upload",
                where=where,
            )
            _write_gcp_resources(gcp_resources_path, client, op.operation.name, region)
        polling = gretry.Retry(
            initial=poll_initial_s, maximum=20.0, multiplier=1.5, timeout=timeout_s, predicate=_not_done
        )
        response = op.result(timeout=timeout_s, polling=polling)
    except TrainguardError:
        raise
    except gexc.GoogleAPICallError as exc:
        raise RegistrationFailed(_explain(exc, where, parent_model)) from None
    except (TimeoutError, gexc.RetryError):
        raise RegistrationFailed(
            f"the Model Registry's upload operation {_name(op)} was still running after {timeout_s:g} s: "
            "it may still finish; look for the model in the Model Registry before running again"
        ) from None
    return Registered(response.model, response.model_version_id, _name(op))


def _not_done(exc: BaseException) -> bool:
    from google.api_core.future.polling import _OperationNotComplete

    return isinstance(exc, _OperationNotComplete)


def _name(op: Any) -> str:
    return str(getattr(getattr(op, "operation", None), "name", "") or "(unknown)")


def _explain(exc: Any, where: str, parent_model: str) -> str:
    """One message for a refused upload or a failed operation: Vertex's words and what to do."""
    from google.api_core import exceptions as gexc

    said = (getattr(exc, "message", "") or str(exc)).strip()
    reasons = {getattr(e, "reason", "") for e in getattr(exc, "details", None) or []}
    info = getattr(exc, "reason", "") or ""
    if "SERVICE_DISABLED" in reasons or info == "SERVICE_DISABLED":
        project = where.split("/")[1]
        return (
            f"the Vertex AI API is disabled in the project ({said}); enable it with "
            f"gcloud services enable aiplatform.googleapis.com --project {project}"
        )
    if isinstance(exc, gexc.Forbidden | gexc.PermissionDenied):
        return (
            f"Vertex AI refused the upload: {said}; the pipeline's service account needs "
            f"aiplatform.models.upload in {where.split('/')[1]} (roles/aiplatform.user)"
        )
    if isinstance(exc, gexc.NotFound) and parent_model:
        return (
            f"the parent model {parent_model} was not found ({said}); give the resource name of a "
            "model in the same project and region, or leave parent_model empty to register a new model"
        )
    return f"the Model Registry refused the model: {said}"


def _pending_operation(path: str | None, where: str) -> str:
    """The upload operation a previous try of this task wrote to ``gcp_resources``, if any."""
    if not path or not os.path.isfile(path):
        return ""
    try:
        with open(path, encoding="utf-8") as handle:
            resources = json.loads(handle.read() or "{}").get("resources", [])
    except (OSError, ValueError, AttributeError):
        return ""
    for r in resources if isinstance(resources, list) else []:
        uri = str(r.get("resourceUri", "")) if isinstance(r, dict) else ""
        name = uri.split("/v1/", 1)[-1]
        # Vertex names the operation with the project *number*: match the region and the shape.
        region = where.rsplit("/", 1)[-1]
        if r.get("resourceType") == "VertexLro" and re.fullmatch(
            rf"projects/[^/]+/locations/{re.escape(region)}/models/[^/]+/operations/[^/]+", name
        ):
            return name
    return ""


def _write_gcp_resources(path: str | None, client: Any, name: str, region: str) -> None:
    if not path:
        return
    from trainguard.gcp import endpoint
    from trainguard.output_files import write_output

    base = endpoint("AIPLATFORM", region).base_url
    body = {"resources": [{"resourceType": "VertexLro", "resourceUri": f"{base}/v1/{name}"}]}
    write_output(path, json.dumps(body))


def register_stage(
    *,
    project: str,
    region: str,
    serving_model: Any,
    verdict: Any,
    vertex_model: Any = None,
    history: Any = None,
    display_name: str = "",
    parent_model: str = "",
    pipeline_run: str = "",
    pipeline_job_id: str = "",
    gcp_resources_path: str | None = None,
    stream: Any = None,
    poll_initial_s: float = 1.0,
) -> Registered:
    """The ``register`` component's body: the verdict and the shipped model in, a model version out.

    Args:
        project, region: where the model is registered.
        serving_model: train's ``serving_model`` (``.uri``; ``.metadata``: GCPC's
            ``containerSpec`` and trainguard's ``trainguard``).
        verdict: validate's ``verdict`` artifact (``.path``: its JSON; ``.uri``).
        vertex_model: the ``google.VertexModel`` output: ``resourceName`` and the model's URI,
            as GCPC's ``ModelUploadOp`` fills it.
        history: train's ``history`` artifact (its URI goes into the description).
        display_name: the model's display name (ignored by Vertex for a new version).
        parent_model: register as a new version of this model ('' for a new model).
        pipeline_run: the pipeline run's name (the ``trainguard-run`` label).
        pipeline_job_id: the pipeline job's ID: in Vertex Pipelines the model names its
            pipeline job (``pipelineJob``), so the console links them.
        gcp_resources_path: the upload operation, for the console and a retried task.
        stream: where the lines for people go.
        poll_initial_s: the first wait between polls of the operation.

    Raises:
        see :func:`register_model`; ConfigError also for an unreadable verdict.
    """
    try:
        with open(verdict.path, encoding="utf-8") as handle:
            judged = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the verdict at {verdict.path}: {exc}") from None
    if not isinstance(judged, dict):
        raise ConfigError(f"the verdict at {verdict.path} is not validate's JSON verdict")
    meta = dict(serving_model.metadata or {})
    card = model_card(
        judged,
        dict(meta.get("trainguard") or {}),
        run=pipeline_run,
        verdict_uri=str(getattr(verdict, "uri", "") or ""),
        history_uri=str(getattr(history, "uri", "") or ""),
    )
    image = str((meta.get("containerSpec") or {}).get("imageUri") or "")
    in_vertex = bool(system_labels())
    registered = register_model(
        project=project,
        region=region,
        display_name=display_name,
        artifact_uri=str(serving_model.uri or ""),
        serving_image=image,
        card=card,
        parent_model=parent_model,
        pipeline_job=f"projects/{project}/locations/{region}/pipelineJobs/{pipeline_job_id}"
        if in_vertex and pipeline_job_id
        else "",
        gcp_resources_path=gcp_resources_path,
        poll_initial_s=poll_initial_s,
    )
    if vertex_model is not None:
        from trainguard.gcp import endpoint

        vertex_model.uri = f"{endpoint('AIPLATFORM', region).base_url}/v1/{registered.resource_name}"
        vertex_model.metadata["resourceName"] = registered.resource_name
        vertex_model.metadata["trainguard"] = {"labels": card.labels, "verdict": str(verdict.uri)}
    if stream is not None:
        print(
            f"[trainguard] registered {registered.resource_name} (labels: "
            + ", ".join(f"{k}={v}" for k, v in card.labels.items())
            + ")",
            file=stream,
            flush=True,
        )
    return registered
