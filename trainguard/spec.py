"""The job spec: a gcloud-compatible CustomJobSpec file → a validated ``aiplatform_v1.CustomJob``.

The file is what ``gcloud ai custom-jobs create --config`` accepts: the CustomJobSpec in the Vertex
REST API's camelCase JSON (``workerPoolSpecs``, ``machineSpec``, ``containerSpec``, ``scheduling``,
``serviceAccount``, ``baseOutputDirectory.outputUriPrefix``, …), as YAML or JSON. A whole CustomJob
body (``{"displayName": …, "jobSpec": {…}}``) is accepted too. Project, region and display name come
from flags or component parameters.

Every field is checked against the proto descriptor before conversion, so an unknown or ill-typed
field is reported with its path (``workerPoolSpecs[0].machineSpec.acceleratorCount``) and what to do,
instead of protobuf's bare parse error.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from google.protobuf import json_format

from trainguard import safe_yaml
from trainguard.aiplatform_types import load as _load_types
from trainguard.errors import SpecError
from trainguard.proto_walk import (
    Problems,
    check_message,
    kind,
    normalise_durations,
    normalise_keys,
    show,
    wrap_singletons,
)
from trainguard.redaction import bound, redact

__all__ = ["JobSpec", "Pool", "load_spec", "parse_spec", "validate_project", "validate_region"]

# Only the message modules the spec uses, not the package with every service client (see
# trainguard.aiplatform_types): CustomJob, CustomJobSpec, Scheduling, EncryptionSpec.
if TYPE_CHECKING:
    from google.cloud.aiplatform_v1.types.custom_job import CustomJob, CustomJobSpec, Scheduling
    from google.cloud.aiplatform_v1.types.encryption_spec import EncryptionSpec
else:
    _custom_job, _encryption_spec = _load_types("custom_job", "encryption_spec")
    CustomJob = _custom_job.CustomJob
    CustomJobSpec = _custom_job.CustomJobSpec
    Scheduling = _custom_job.Scheduling
    EncryptionSpec = _encryption_spec.EncryptionSpec

_PROJECT_RE = re.compile(r"^(?:[a-z][a-z0-9-]{4,28}[a-z0-9]|\d{6,20})$")
_REGION_RE = re.compile(r"^[a-z]+-[a-z]+\d+$")
_SPEC_DESC = CustomJobSpec.meta.pb.DESCRIPTOR
_JOB_DESC = CustomJob.meta.pb.DESCRIPTOR
_OUTPUT_ONLY = {
    "name",
    "state",
    "createTime",
    "startTime",
    "endTime",
    "updateTime",
    "error",
    "webAccessUris",
    "satisfiesPzs",
    "satisfiesPzi",
}
_MAX_LISTED = 20  # problems listed in one message; the rest are counted
# Vertex AI gives each position in workerPoolSpecs[] a role: [0] the primary (chief), [1]
# workers, [2] parameter servers / Reduction Server, [3] evaluators; there is no fifth.
MAX_WORKER_POOLS = 4
# Reduction Server replicas go in the third worker pool, the parameter servers' place: the SDK
# builds them as ``server_spec`` (googleapis/python-aiplatform
# google/cloud/aiplatform/utils/worker_spec_utils.py, ``reduction_server_spec``).
REDUCTION_SERVER_POOL = 2


def validate_project(project: str) -> str:
    """Returns ``project`` if it is a valid project ID or number, else raises SpecError."""
    if not project or not _PROJECT_RE.match(project):
        raise SpecError(
            f"{show(project)} is not a Google Cloud project ID (6-30 lowercase letters, digits and "
            "hyphens, starting with a letter) or project number; pass --project",
            "project",
        )
    return project


def validate_region(region: str) -> str:
    """Returns ``region`` if it looks like a Google Cloud region, else raises SpecError."""
    if not region or not _REGION_RE.match(region):
        raise SpecError(
            f"{show(region)} is not a region such as us-central1 or europe-west4 (a zone like "
            "us-central1-a is not a region); pass --region",
            "region",
        )
    return region


# --- the validated object --------------------------------------------------------------------


@dataclass(frozen=True)
class Pool:
    """One worker pool, flattened for checks and launchers."""

    index: int
    machine_type: str
    accelerator_type: str | None
    accelerator_count: int
    replica_count: int
    image_uri: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    tpu_topology: str = ""
    reduction_server: bool = False

    @property
    def accelerators_requested(self) -> int:
        """accelerator_count × replica_count (0 without accelerators)."""
        return self.accelerator_count * self.replica_count if self.accelerator_type else 0


@dataclass(frozen=True)
class JobSpec:
    """A validated CustomJobSpec plus where and under which name it runs."""

    project: str
    region: str
    display_name: str
    job_spec: CustomJobSpec
    labels: dict[str, str] = field(default_factory=dict)
    kms_key_name: str = ""

    # -- construction --

    @classmethod
    def create(
        cls,
        project: str,
        region: str,
        *,
        machine_type: str,
        image_uri: str,
        accelerator_type: str | None = None,
        accelerator_count: int = 0,
        replica_count: int = 1,
        command: Sequence[str] | None = None,
        args: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        spot: bool = False,
        base_output_dir: str | None = None,
        service_account: str | None = None,
        tpu_topology: str | None = None,
        display_name: str = "trainguard-job",
        restart_job_on_worker_restart: bool = False,
        timeout_s: int | None = None,
    ) -> JobSpec:
        """Builds a spec from keyword arguments, for users who don't write YAML.

        ``replica_count`` > 1 makes a multi-worker job: one chief in pool 0 and
        ``replica_count - 1`` workers of the same shape in pool 1.
        """
        if replica_count < 1:
            raise SpecError("must be at least 1", "replica_count")
        machine: dict[str, Any] = {"machineType": machine_type}
        if accelerator_type:
            machine["acceleratorType"] = accelerator_type
            machine["acceleratorCount"] = accelerator_count or 1
        elif accelerator_count:
            raise SpecError("is set but accelerator_type is not; name the accelerator", "accelerator_count")
        if tpu_topology:
            machine["tpuTopology"] = tpu_topology
        container: dict[str, Any] = {"imageUri": image_uri}
        if command:
            container["command"] = list(command)
        if args:
            container["args"] = list(args)
        if env:
            container["env"] = [{"name": k, "value": str(v)} for k, v in env.items()]
        pool = {"machineSpec": machine, "replicaCount": 1, "containerSpec": container}
        pools = [pool]
        if replica_count > 1:
            pools.append({**pool, "replicaCount": replica_count - 1})
        data: dict[str, Any] = {"workerPoolSpecs": pools}
        scheduling: dict[str, Any] = {}
        if spot:
            scheduling["strategy"] = "SPOT"
        if restart_job_on_worker_restart:
            scheduling["restartJobOnWorkerRestart"] = True
        if timeout_s:
            scheduling["timeout"] = f"{int(timeout_s)}s"
        if scheduling:
            data["scheduling"] = scheduling
        if base_output_dir:
            data["baseOutputDirectory"] = {"outputUriPrefix": base_output_dir}
        if service_account:
            data["serviceAccount"] = service_account
        return parse_spec(data, project=project, region=region, display_name=display_name)

    # -- views --

    @property
    def pools(self) -> list[Pool]:
        """The non-empty worker pools, in order (an empty ``{}`` placeholder is skipped)."""
        out = []
        for i, wp in enumerate(self.job_spec.worker_pool_specs):
            if not wp.machine_spec.machine_type:
                continue
            ms = wp.machine_spec
            acc = ms.accelerator_type.name if ms.accelerator_type else None
            cs = wp.container_spec
            image = cs.image_uri or wp.python_package_spec.executor_image_uri
            out.append(
                Pool(
                    index=i,
                    machine_type=ms.machine_type,
                    accelerator_type=acc,
                    accelerator_count=int(ms.accelerator_count),
                    replica_count=int(wp.replica_count),
                    image_uri=image,
                    command=tuple(cs.command),
                    args=tuple(cs.args) or tuple(wp.python_package_spec.args),
                    env={e.name: e.value for e in cs.env},
                    tpu_topology=ms.tpu_topology,
                    reduction_server=(i == REDUCTION_SERVER_POOL and not acc and "reductionserver" in image),
                )
            )
        return out

    @property
    def strategy(self) -> str:
        """STANDARD, SPOT or FLEX_START (STANDARD when unset)."""
        value = self.job_spec.scheduling.strategy
        name = Scheduling.Strategy(value).name
        return "STANDARD" if name in ("STRATEGY_UNSPECIFIED", "ON_DEMAND") else name

    @property
    def preemptible(self) -> bool:
        """True when the job runs on preemptible capacity (SPOT, FLEX_START)."""
        return self.strategy in ("SPOT", "FLEX_START", "LOW_COST")

    @property
    def base_output_dir(self) -> str:
        """``baseOutputDirectory.outputUriPrefix`` or ''."""
        return self.job_spec.base_output_directory.output_uri_prefix

    def with_base_output_dir(self, uri: str) -> JobSpec:
        """This spec with ``baseOutputDirectory.outputUriPrefix`` set to ``uri`` (a copy)."""
        job_spec = CustomJobSpec.deserialize(CustomJobSpec.serialize(self.job_spec))
        job_spec.base_output_directory.output_uri_prefix = uri
        return dataclasses.replace(self, job_spec=job_spec)

    @property
    def service_account(self) -> str:
        """The job's service account, '' for the Vertex AI Custom Code Service Agent."""
        return self.job_spec.service_account

    def custom_job(self) -> CustomJob:
        """The CustomJob to create (an ``aiplatform_v1.CustomJob``)."""
        job = CustomJob(display_name=self.display_name, job_spec=self.job_spec, labels=dict(self.labels))
        if self.kms_key_name:
            job.encryption_spec = EncryptionSpec(kms_key_name=self.kms_key_name)
        return job

    def to_body(self) -> dict[str, Any]:
        """The whole CustomJob body (display name, labels, encryption, jobSpec): what survives a
        round trip through a pipeline parameter."""
        body: dict[str, Any] = {"displayName": self.display_name, "jobSpec": self.to_dict()}
        if self.labels:
            body["labels"] = dict(self.labels)
        if self.kms_key_name:
            body["encryptionSpec"] = {"kmsKeyName": self.kms_key_name}
        return body

    def to_dict(self) -> dict[str, Any]:
        """The CustomJobSpec as camelCase JSON (what the spec file holds)."""
        return json_format.MessageToDict(CustomJobSpec.pb(self.job_spec))

    @property
    def parent(self) -> str:
        """``projects/P/locations/R``."""
        return f"projects/{self.project}/locations/{self.region}"


def _count(value: Any) -> int | None:
    """A count the walker accepted (an int, an integral float, a string of digits), or None."""
    if value in (None, ""):
        return None
    return int(float(value)) if isinstance(value, float) else int(value)


def _pool_errors(i: int, pool: Mapping[str, Any]) -> Problems:
    errors: Problems = []
    path = f"workerPoolSpecs[{i}]"
    machine = pool.get("machineSpec") or {}
    if not machine.get("machineType"):
        errors.append(
            (f"{path}.machineSpec.machineType", "is required (for example n1-standard-8 or a2-highgpu-1g)")
        )
    acc_type = machine.get("acceleratorType")
    acc_count = _count(machine.get("acceleratorCount"))
    if acc_type and acc_type != "ACCELERATOR_TYPE_UNSPECIFIED" and not acc_count:
        errors.append(
            (
                f"{path}.machineSpec.acceleratorCount",
                f"is required with acceleratorType {show(acc_type)} (at least 1)",
            )
        )
    if acc_count and not acc_type:
        errors.append(
            (f"{path}.machineSpec.acceleratorType", f"is required when acceleratorCount is {acc_count}")
        )
    container, package = pool.get("containerSpec"), pool.get("pythonPackageSpec")
    if container and package:
        errors.append((path, "has both containerSpec and pythonPackageSpec; keep one"))
    elif not container and not package:
        errors.append(
            (f"{path}.containerSpec", "is required: give containerSpec.imageUri (and command/args)")
        )
    elif container and not container.get("imageUri"):
        errors.append((f"{path}.containerSpec.imageUri", "is required"))
    replicas = _count(pool.get("replicaCount"))
    if replicas is not None and replicas < 1:
        errors.append((f"{path}.replicaCount", f"must be at least 1, got {replicas}"))
    if i == 0 and replicas is not None and replicas > 1:
        errors.append(
            (
                f"{path}.replicaCount",
                f"the first pool is the chief and must have replicaCount 1, got "
                f"{replicas}; put the other {replicas - 1} replicas in "
                "workerPoolSpecs[1]",
            )
        )
    for j, env in enumerate((container or {}).get("env") or []):
        if isinstance(env, Mapping) and not env.get("name"):
            errors.append((f"{path}.containerSpec.env[{j}].name", "is required"))
    return errors


def _semantic_errors(data: Mapping[str, Any]) -> Problems:
    """What the descriptor cannot say: required fields and how they go together (camelCase keys,
    already checked by the walker)."""
    pools = data.get("workerPoolSpecs")
    if not pools:
        return [
            (
                "workerPoolSpecs",
                "is missing or empty; give at least one worker pool with a machineSpec and a containerSpec",
            )
        ]
    errors: Problems = []
    if len(pools) > MAX_WORKER_POOLS:
        errors.append(
            (
                "workerPoolSpecs",
                f"has {len(pools)} worker pools; Vertex AI takes at most "
                f"{MAX_WORKER_POOLS}: [0] the chief, [1] workers, [2] parameter servers, "
                "[3] evaluators (more replicas go in a pool's replicaCount)",
            )
        )
    for i, pool in enumerate(pools[:MAX_WORKER_POOLS]):
        if pool:
            errors += _pool_errors(i, pool)
        elif i == 0:
            errors.append(("workerPoolSpecs[0]", "the first worker pool (the chief) cannot be empty"))
    base = data.get("baseOutputDirectory") or {}
    if base and not base.get("outputUriPrefix") and set(base) - {"outputUriPrefix"}:
        errors.append(
            (
                "baseOutputDirectory.outputUriPrefix",
                "is required when baseOutputDirectory is given (for example gs://my-bucket/runs/r1)",
            )
        )
    return errors


def _drop_empty_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """The spec without the empty values GCPC's CustomTrainingJobOp sends on every job
    (``baseOutputDirectory: {outputUriPrefix: ""}``): they mean "unset", as proto3's defaults
    do, and must not read as a directory to write to."""
    base = data.get("baseOutputDirectory")
    if isinstance(base, Mapping) and not base.get("outputUriPrefix"):
        return {k: v for k, v in data.items() if k != "baseOutputDirectory"}
    return data


# AI Platform Training's (legacy) job config, the ``--config`` of ``gcloud ai-platform jobs submit
# training``: people hand it to ``gcloud ai custom-jobs create`` when they move (two in the spec
# corpus, tests/fixtures/specs). Its keys name no CustomJobSpec field, so without this the message
# would only list the fields a CustomJobSpec has.
_LEGACY_KEYS = ("trainingInput", "training_input")
_MIGRATION_GUIDE = "https://cloud.google.com/vertex-ai/docs/start/migrating-to-vertex-ai"


def _refuse_legacy_config(spec: Mapping[str, Any], source: str) -> None:
    key = next((k for k in _LEGACY_KEYS if k in spec), None)
    if key is None:
        return
    where = f" ({bound(redact(source), 200)})" if source else ""
    raise SpecError(
        f"is AI Platform Training's (legacy) job config{where}, not a Vertex AI CustomJobSpec: "
        "Vertex takes workerPoolSpecs (machineSpec, replicaCount, containerSpec or "
        f"pythonPackageSpec) instead of scaleTier/masterType/workerType; see {_MIGRATION_GUIDE}",
        key,
    )


def _raise(errors: Problems, source: str) -> None:
    where = f" in {bound(redact(source), 200)}" if source else ""
    if len(errors) == 1:
        path, message = errors[0]
        raise SpecError(f"{bound(message, 2000)}{where}", bound(path, 300))
    listed = "\n".join(f"  - {bound(p, 300)}: {bound(m, 500)}" for p, m in errors[:_MAX_LISTED])
    more = f"\n  … and {len(errors) - _MAX_LISTED} more" if len(errors) > _MAX_LISTED else ""
    raise SpecError(f"{len(errors)} problems{where}:\n{listed}{more}", bound(errors[0][0], 300))


def _check(desc, data: Any) -> tuple[Any, Problems]:
    """Normalised keys and singletons, then the walk: (the data, every problem found)."""
    errors: Problems = []
    data = wrap_singletons(desc, normalise_keys(desc, data, "", errors))
    if not errors:
        check_message(desc, data, "", errors)
    return data, errors


#: CustomJob fields that --config files carry beside the CustomJobSpec they hold, and the flag
#: gcloud takes each as instead (``gcloud ai custom-jobs create``: --display-name, --labels,
#: --kms-key; https://cloud.google.com/sdk/gcloud/reference/ai/custom-jobs/create, read 2026-12-02).
_JOB_FIELD_FLAGS = {"displayName": "--display-name", "labels": "--labels", "encryptionSpec": "--kms-key"}


def _job_field_hints(errors: Problems) -> Problems:
    """An unknown top-level key that is a CustomJob field: say where it belongs instead."""
    out: Problems = []
    for path, message in errors:
        camel = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), path)
        flag = _JOB_FIELD_FLAGS.get(camel)
        if flag and message.startswith("unknown field"):
            message = (
                "is a field of the CustomJob, not of the CustomJobSpec a --config file holds: "
                f"give it as {flag} (gcloud"
                + (" and trainguard" if flag == "--display-name" else "")
                + "), or write the whole CustomJob body with the spec under jobSpec"
            )
        out.append((path, message))
    return out


_ACCELERATOR_PATH = re.compile(r"^workerPoolSpecs\[(\d+)\]\.machineSpec\.acceleratorType$")


def _accelerator_hints(data: Any, errors: Problems) -> Problems:
    """An accelerator type that is no name at all gets the names its pool's machine type takes
    (``NVIDIA_A100`` on an ``a2-highgpu-1g`` means ``NVIDIA_TESLA_A100``, not the spelling
    nearest in letters)."""
    from trainguard.catalog import machine_rule

    found = data.get("workerPoolSpecs") if isinstance(data, Mapping) else None
    pools: list = found if isinstance(found, list) else []
    out: Problems = []
    for path, message in errors:
        m = _ACCELERATOR_PATH.match(path)
        index = int(m.group(1)) if m else -1
        if 0 <= index < len(pools) and "is not a valid value" in message:
            pool = pools[index]
            spec = pool.get("machineSpec") if isinstance(pool, Mapping) else None
            machine = spec.get("machineType") if isinstance(spec, Mapping) else None
            rule = machine_rule(machine) if isinstance(machine, str) else None
            if rule is not None and rule.accelerators:
                message = _machine_hint(message, str(machine), sorted(rule.accelerators))
        out.append((path, message))
    return out


def _machine_hint(message: str, machine: str, takes: list[str]) -> str:
    """A machine that bundles one accelerator type names it (the walker's nearest spelling may be
    another GPU); one that takes several keeps the walker's guess and lists them when the guess
    is not among them."""
    said = re.search(r" \(did you mean ([A-Z0-9_]+)\?\)", message)
    if len(takes) == 1:
        hint = f" ({machine} takes {takes[0]})"
    elif said and said.group(1) not in takes:
        hint = f" (did you mean {said.group(1)}? {machine} takes {' or '.join(takes)})"
    else:
        return message
    if said:
        return message.replace(said.group(0), hint, 1)
    return re.sub(r"(?= *;)", hint, message, count=1)


def _unwrap_body(data: Mapping[str, Any], source: str) -> tuple[Mapping[str, Any], dict]:
    """A whole CustomJob body → (its jobSpec, {display_name, labels, kms_key_name})."""
    body, errors = _check(_JOB_DESC, {k: v for k, v in data.items() if k not in ("jobSpec", "job_spec")})
    errors += [(k, "is set by Vertex AI (output only); remove it") for k in sorted(set(body) & _OUTPUT_ONLY)]
    if errors:
        _raise(errors, source)
    spec = data.get("jobSpec", data.get("job_spec"))
    if not isinstance(spec, Mapping):
        raise SpecError(f"must be a mapping of CustomJobSpec fields, got {kind(spec)}", "jobSpec")
    extra = {
        "display_name": body.get("displayName"),
        "labels": {str(k): str(v) for k, v in (body.get("labels") or {}).items()},
        "kms_key_name": (body.get("encryptionSpec") or {}).get("kmsKeyName") or "",
    }
    return spec, extra


def parse_spec(
    data: Mapping[str, Any] | str,
    *,
    project: str,
    region: str,
    display_name: str | None = None,
    source: str = "",
) -> JobSpec:
    """Validates a CustomJobSpec mapping (or its JSON/YAML text) and returns a JobSpec.

    Keys may be camelCase (as gcloud writes them) or snake_case; a whole CustomJob body
    (``{"displayName": …, "jobSpec": {…}}``) is accepted too.

    Raises:
        SpecError: naming the field path and what to do; also for text too big, nested too
            deep or expanding past the caps of :mod:`trainguard.safe_yaml`.
    """
    where = source or "spec"
    if isinstance(data, str):
        data = safe_yaml.load(data, where)
    else:
        safe_yaml.check_shape(data, where)
    if not isinstance(data, Mapping):
        raise SpecError(f"must be a mapping with workerPoolSpecs, got {kind(data)}", where)
    extra: dict[str, Any] = {"display_name": None, "labels": {}, "kms_key_name": ""}
    spec: Mapping[str, Any] = data
    if "jobSpec" in spec or "job_spec" in spec:  # a whole CustomJob body
        spec, extra = _unwrap_body(spec, source)
    validate_project(project)
    validate_region(region)
    _refuse_legacy_config(spec, source)
    checked, errors = _check(_SPEC_DESC, spec)
    errors = _accelerator_hints(checked, _job_field_hints(errors)) or _semantic_errors(checked)
    if errors:
        _raise(errors, source)
    normalised = normalise_durations(_SPEC_DESC, _drop_empty_defaults(checked))
    normalised["workerPoolSpecs"] = [
        {**pool, "replicaCount": 1} if pool and "replicaCount" not in pool else pool
        for pool in normalised["workerPoolSpecs"]
    ]  # like gcloud's --worker-pool-spec, a pool without replicaCount has one replica
    try:
        pb = json_format.ParseDict(json.loads(json.dumps(normalised)), CustomJobSpec.meta.pb())
    except (json_format.ParseError, TypeError, ValueError) as exc:
        # the walker should have caught it; keep the message, bounded
        raise SpecError(f"cannot be converted: {bound(redact(str(exc)), 500)}", where) from None
    name = display_name or extra["display_name"] or "trainguard-job"
    if len(name) > 128:
        raise SpecError("must be at most 128 characters", "display_name")
    return JobSpec(
        project=project,
        region=region,
        display_name=name,
        job_spec=CustomJobSpec.wrap(pb),
        labels=extra["labels"],
        kms_key_name=extra["kms_key_name"],
    )


def load_spec(path: str | Path, *, project: str, region: str, display_name: str | None = None) -> JobSpec:
    """Reads a YAML/JSON spec file and validates it.

    Raises:
        SpecError: the file is missing, unreadable or invalid.
    """
    p = Path(path)
    shown = show(str(p))
    try:
        if p.exists() and not p.is_file():  # a directory, a FIFO (reading it would wait forever)
            raise SpecError(f"spec file {shown} is not a regular file; give a YAML or JSON file", "spec")
        with p.open("rb") as stream:
            raw = stream.read(4 * safe_yaml.MAX_TEXT_CHARS + 1)
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise SpecError(f"spec file {shown} does not exist", "spec") from None
    except UnicodeDecodeError as exc:
        what = (
            "UTF-16 text, not UTF-8"
            if raw[:2] in (b"\xff\xfe", b"\xfe\xff")
            else f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})"
        )
        raise SpecError(f"spec file {shown} is {what}: save the YAML or JSON spec as UTF-8", "spec") from None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or bound(str(exc), 300)
        raise SpecError(f"cannot read spec file {shown}: {reason}", "spec") from None
    if not text.strip():
        raise SpecError(
            f"spec file {shown} is empty; it must hold a CustomJobSpec with workerPoolSpecs", "spec"
        )
    return parse_spec(text, project=project, region=region, display_name=display_name, source=str(p))
