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

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from google.cloud import aiplatform_v1
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from trainguard.errors import SpecError

__all__ = ["JobSpec", "Pool", "load_spec", "parse_spec", "validate_project", "validate_region"]

_PROJECT_RE = re.compile(r"^(?:[a-z][a-z0-9-]{4,28}[a-z0-9]|\d{6,20})$")
_REGION_RE = re.compile(r"^[a-z]+-[a-z]+\d+$")
_DURATION_RE = re.compile(r"^-?\d+(\.\d{1,9})?s$")
_INT_TYPES = {
    FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_FIXED64,
}
_FLOAT_TYPES = {FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE}
_SPEC_PB = aiplatform_v1.CustomJobSpec.meta.pb
_JOB_PB = aiplatform_v1.CustomJob.meta.pb
_OUTPUT_ONLY = {"name", "state", "createTime", "create_time", "startTime", "start_time",
                "endTime", "end_time", "updateTime", "update_time", "error", "webAccessUris",
                "web_access_uris", "satisfiesPzs", "satisfies_pzs", "satisfiesPzi",
                "satisfies_pzi"}


def validate_project(project: str) -> str:
    """Returns ``project`` if it is a valid project ID or number, else raises SpecError."""
    if not project or not _PROJECT_RE.match(project):
        raise SpecError(
            f"{project!r} is not a Google Cloud project ID (6-30 lowercase letters, digits and "
            "hyphens, starting with a letter) or project number; pass --project",
            "project",
        )
    return project


def validate_region(region: str) -> str:
    """Returns ``region`` if it looks like a Google Cloud region, else raises SpecError."""
    if not region or not _REGION_RE.match(region):
        raise SpecError(
            f"{region!r} is not a region such as us-central1 or europe-west4 (a zone like "
            "us-central1-a is not a region); pass --region",
            "region",
        )
    return region


# --- structural check against the proto descriptor -------------------------------------------


def _repeated(f: FieldDescriptor) -> bool:
    return f.is_repeated if hasattr(f, "is_repeated") else f.label == f.LABEL_REPEATED


def _suggest(value: str, names: Sequence[str]) -> str | None:
    """The closest valid name: one containing the typed text first, then by similarity."""
    upper = value.upper()
    contained = [n for n in names if upper and upper.replace("_", "") in n.replace("_", "")]
    if contained:
        return min(contained, key=len)
    close = difflib.get_close_matches(upper, names, n=1)
    return close[0] if close else None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, Sequence):
        return "a list"
    return type(value).__name__


def _fields_by_key(desc: Descriptor) -> dict[str, FieldDescriptor]:
    out = {}
    for f in desc.fields:
        out[f.json_name] = f
        out[f.name] = f
    return out


def _check_scalar(f: FieldDescriptor, value: Any, path: str, errors: list[tuple[str, str]]) -> None:
    if f.type == FieldDescriptor.TYPE_STRING:
        if not isinstance(value, str):
            errors.append((path, f"must be a string, got {_kind(value)} ({value!r})"))
    elif f.type == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            errors.append((path, f"must be true or false, got {_kind(value)} ({value!r})"))
    elif f.type in _INT_TYPES:
        ok = (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip() or "x"))
        if isinstance(value, float) and value.is_integer():
            ok = True
        if not ok:
            errors.append((path, f"must be a whole number, got {_kind(value)} ({value!r})"))
        elif int(value) < 0:
            errors.append((path, f"must not be negative, got {value}"))
    elif f.type in _FLOAT_TYPES:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            errors.append((path, f"must be a number, got {_kind(value)} ({value!r})"))
    elif f.type == FieldDescriptor.TYPE_ENUM:
        names = [v.name for v in f.enum_type.values]
        if isinstance(value, bool):
            errors.append((path, f"must be one of {', '.join(names)}"))
        elif isinstance(value, int):
            if value not in [v.number for v in f.enum_type.values]:
                errors.append((path, f"{value} is not a valid value; use one of {', '.join(names)}"))
        elif not isinstance(value, str) or value not in names:
            close = _suggest(str(value), names)
            hint = f" (did you mean {close}?)" if close else ""
            errors.append((path, f"{value!r} is not a valid value{hint}; use one of "
                                 f"{', '.join(n for n in names if not n.endswith('UNSPECIFIED'))}"))


def _check_message(desc: Descriptor, data: Any, path: str, errors: list[tuple[str, str]]) -> None:
    if desc.full_name == "google.protobuf.Duration":
        if isinstance(data, int | float) and not isinstance(data, bool):
            return  # normalised to "Ns" before conversion
        if not isinstance(data, str) or not _DURATION_RE.match(data.strip()):
            errors.append((path, f"must be a duration such as \"3600s\", got {data!r}"))
        return
    if desc.full_name in ("google.protobuf.Struct", "google.protobuf.Value"):
        return
    if not isinstance(data, Mapping):
        errors.append((path, f"must be a mapping of fields, got {_kind(data)} ({data!r})"))
        return
    fields = _fields_by_key(desc)
    for key, value in data.items():
        sub = f"{path}.{key}" if path else str(key)
        f = fields.get(key)
        if f is None:
            names = sorted({x.json_name for x in desc.fields})
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            errors.append((sub, f"unknown field; {hint}{desc.name} has: {', '.join(names)}"))
            continue
        if value is None:
            continue
        is_map = f.message_type is not None and f.message_type.GetOptions().map_entry
        if is_map:
            if not isinstance(value, Mapping):
                errors.append((sub, f"must be a mapping, got {_kind(value)}"))
                continue
            value_field = f.message_type.fields_by_name["value"]
            for k, v in value.items():
                _check_field(value_field, v, f"{sub}.{k}", errors)
        elif _repeated(f):
            if isinstance(value, str) or not isinstance(value, Sequence):
                errors.append((sub, f"must be a list, got {_kind(value)} ({value!r})"))
                continue
            for i, item in enumerate(value):
                _check_field(f, item, f"{sub}[{i}]", errors)
        else:
            _check_field(f, value, sub, errors)


def _check_field(f: FieldDescriptor, value: Any, path: str, errors: list[tuple[str, str]]) -> None:
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        _check_message(f.message_type, value, path, errors)
    else:
        _check_scalar(f, value, path, errors)


def _wrap_singletons(desc: Descriptor, data: Any) -> Any:
    """A single mapping where a list of messages belongs becomes a one-item list, as gcloud's
    ``--config`` reader does (its own example writes ``workerPoolSpecs:`` as one mapping)."""
    if not isinstance(data, Mapping):
        return data
    fields = _fields_by_key(desc)
    out = {}
    for key, value in data.items():
        f = fields.get(key)
        if f is not None and f.type == FieldDescriptor.TYPE_MESSAGE and value is not None \
                and not f.message_type.GetOptions().map_entry:
            if _repeated(f):
                items = [value] if isinstance(value, Mapping) else value
                if isinstance(items, list):
                    value = [_wrap_singletons(f.message_type, v) for v in items]
            else:
                value = _wrap_singletons(f.message_type, value)
        out[key] = value
    return out


def _normalise_durations(desc: Descriptor, data: Any) -> Any:
    """Accepts plain seconds for Duration fields (``timeout: 3600``), as people write them."""
    if not isinstance(data, Mapping):
        return data
    fields = _fields_by_key(desc)
    out = {}
    for key, value in data.items():
        f = fields.get(key)
        if f is not None and f.type == FieldDescriptor.TYPE_MESSAGE and value is not None:
            if f.message_type.full_name == "google.protobuf.Duration":
                if isinstance(value, int | float) and not isinstance(value, bool):
                    value = f"{value}s"
            elif not f.message_type.GetOptions().map_entry:
                if _repeated(f) and isinstance(value, list):
                    value = [_normalise_durations(f.message_type, v) for v in value]
                else:
                    value = _normalise_durations(f.message_type, value)
        out[key] = value
    return out


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
    job_spec: aiplatform_v1.CustomJobSpec
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
            raise SpecError("is set but accelerator_type is not; name the accelerator",
                            "accelerator_count")
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
            out.append(Pool(
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
                reduction_server=(i == 3 and not acc and "reductionserver" in image),
            ))
        return out

    @property
    def strategy(self) -> str:
        """STANDARD, SPOT or FLEX_START (STANDARD when unset)."""
        value = self.job_spec.scheduling.strategy
        name = aiplatform_v1.Scheduling.Strategy(value).name
        return "STANDARD" if name in ("STRATEGY_UNSPECIFIED", "ON_DEMAND") else name

    @property
    def preemptible(self) -> bool:
        """True when the job runs on preemptible capacity (SPOT, FLEX_START)."""
        return self.strategy in ("SPOT", "FLEX_START", "LOW_COST")

    @property
    def base_output_dir(self) -> str:
        """``baseOutputDirectory.outputUriPrefix`` or ''."""
        return self.job_spec.base_output_directory.output_uri_prefix

    @property
    def service_account(self) -> str:
        """The job's service account, '' for the Vertex AI Custom Code Service Agent."""
        return self.job_spec.service_account

    def custom_job(self) -> aiplatform_v1.CustomJob:
        """The CustomJob to create."""
        job = aiplatform_v1.CustomJob(display_name=self.display_name, job_spec=self.job_spec,
                                      labels=dict(self.labels))
        if self.kms_key_name:
            job.encryption_spec = aiplatform_v1.EncryptionSpec(kms_key_name=self.kms_key_name)
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
        return json_format.MessageToDict(aiplatform_v1.CustomJobSpec.pb(self.job_spec))

    @property
    def parent(self) -> str:
        """``projects/P/locations/R``."""
        return f"projects/{self.project}/locations/{self.region}"


def _semantic_errors(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    errors: list[tuple[str, str]] = []
    pools = data.get("workerPoolSpecs") or data.get("worker_pool_specs")
    if not pools:
        return [("workerPoolSpecs", "is missing or empty; give at least one worker pool with a "
                                    "machineSpec and a containerSpec")]
    for i, pool in enumerate(pools):
        path = f"workerPoolSpecs[{i}]"
        if not pool:
            if i == 0:
                errors.append((path, "the first worker pool (the chief) cannot be empty"))
            continue
        machine = pool.get("machineSpec") or pool.get("machine_spec") or {}
        if not machine.get("machineType") and not machine.get("machine_type"):
            errors.append((f"{path}.machineSpec.machineType",
                           "is required (for example n1-standard-8 or a2-highgpu-1g)"))
        acc_type = machine.get("acceleratorType") or machine.get("accelerator_type")
        acc_count = machine.get("acceleratorCount", machine.get("accelerator_count"))
        acc_count = int(acc_count) if acc_count not in (None, "") else None
        if acc_type and acc_type != "ACCELERATOR_TYPE_UNSPECIFIED" and not acc_count:
            errors.append((f"{path}.machineSpec.acceleratorCount",
                           f"is required with acceleratorType {acc_type} (at least 1)"))
        if acc_count and not acc_type:
            errors.append((f"{path}.machineSpec.acceleratorType",
                           f"is required when acceleratorCount is {acc_count}"))
        container = pool.get("containerSpec") or pool.get("container_spec")
        package = pool.get("pythonPackageSpec") or pool.get("python_package_spec")
        if container and package:
            errors.append((path, "has both containerSpec and pythonPackageSpec; keep one"))
        elif not container and not package:
            errors.append((f"{path}.containerSpec",
                           "is required: give containerSpec.imageUri (and command/args)"))
        elif container and not (container.get("imageUri") or container.get("image_uri")):
            errors.append((f"{path}.containerSpec.imageUri", "is required"))
        replicas = pool.get("replicaCount", pool.get("replica_count"))
        if replicas is not None and int(replicas) < 1:
            errors.append((f"{path}.replicaCount", f"must be at least 1, got {replicas}"))
        if i == 0 and replicas is not None and int(replicas) != 1:
            errors.append((f"{path}.replicaCount",
                           f"the first pool is the chief and must have replicaCount 1, got "
                           f"{replicas}; put the other {int(replicas) - 1} replicas in "
                           "workerPoolSpecs[1]"))
        for j, env in enumerate((container or {}).get("env") or []):
            if isinstance(env, Mapping) and not env.get("name"):
                errors.append((f"{path}.containerSpec.env[{j}].name", "is required"))
    base = (data.get("baseOutputDirectory") or data.get("base_output_directory") or {})
    if base and not (base.get("outputUriPrefix") or base.get("output_uri_prefix")):
        errors.append(("baseOutputDirectory.outputUriPrefix", "is required when "
                       "baseOutputDirectory is given (for example gs://my-bucket/runs/r1)"))
    return errors


def _raise(errors: list[tuple[str, str]], source: str) -> None:
    where = f" in {source}" if source else ""
    if len(errors) == 1:
        path, message = errors[0]
        raise SpecError(f"{message}{where}", path)
    lines = "\n".join(f"  - {p}: {m}" for p, m in errors)
    raise SpecError(f"{len(errors)} problems{where}:\n{lines}", errors[0][0])


def parse_spec(
    data: Mapping[str, Any] | str,
    *,
    project: str,
    region: str,
    display_name: str | None = None,
    source: str = "",
) -> JobSpec:
    """Validates a CustomJobSpec mapping (or its JSON/YAML text) and returns a JobSpec.

    Raises:
        SpecError: naming the field path and what to do.
    """
    if isinstance(data, str):
        try:
            data = yaml.safe_load(data)
        except yaml.YAMLError as exc:
            raise SpecError(f"is not valid YAML or JSON: {exc}", source or "spec") from None
    if not isinstance(data, Mapping):
        raise SpecError(f"must be a mapping with workerPoolSpecs, got {_kind(data)}",
                        source or "spec")
    labels: dict[str, str] = {}
    kms_key = ""
    if "jobSpec" in data or "job_spec" in data:  # a whole CustomJob body
        data = _wrap_singletons(_JOB_PB.DESCRIPTOR, data)
        errors: list[tuple[str, str]] = []
        extra = {k: v for k, v in data.items() if k not in ("jobSpec", "job_spec")}
        _check_message(_JOB_PB.DESCRIPTOR, extra, "", errors)
        output_only = sorted(set(extra) & _OUTPUT_ONLY)
        errors += [(k, "is set by Vertex AI (output only); remove it") for k in output_only]
        if errors:
            _raise(errors, source)
        display_name = display_name or data.get("displayName") or data.get("display_name")
        labels = {str(k): str(v) for k, v in (data.get("labels") or {}).items()}
        encryption = data.get("encryptionSpec") or data.get("encryption_spec") or {}
        kms_key = encryption.get("kmsKeyName") or encryption.get("kms_key_name") or ""
        data = data.get("jobSpec") or data.get("job_spec") or {}
        if not isinstance(data, Mapping):
            raise SpecError("must be a mapping", "jobSpec")
    validate_project(project)
    validate_region(region)
    data = _wrap_singletons(_SPEC_PB.DESCRIPTOR, data)
    errors = []
    _check_message(_SPEC_PB.DESCRIPTOR, data, "", errors)
    if errors:
        _raise(errors, source)
    errors = _semantic_errors(data)
    if errors:
        _raise(errors, source)
    normalised = _normalise_durations(_SPEC_PB.DESCRIPTOR, data)
    pools_key = "workerPoolSpecs" if "workerPoolSpecs" in normalised else "worker_pool_specs"
    normalised[pools_key] = [
        {**pool, "replicaCount": 1}
        if pool and "replicaCount" not in pool and "replica_count" not in pool else pool
        for pool in normalised[pools_key]
    ]  # like gcloud's --worker-pool-spec, a pool without replicaCount has one replica
    try:
        pb = json_format.ParseDict(json.loads(json.dumps(normalised)), _SPEC_PB())
    except json_format.ParseError as exc:  # the walker should have caught it; keep the message
        raise SpecError(f"cannot be converted: {exc}", source or "spec") from None
    name = display_name or "trainguard-job"
    if len(name) > 128:
        raise SpecError("must be at most 128 characters", "display_name")
    return JobSpec(project=project, region=region, display_name=name,
                   job_spec=aiplatform_v1.CustomJobSpec.wrap(pb), labels=labels,
                   kms_key_name=kms_key)


def load_spec(path: str | Path, *, project: str, region: str,
              display_name: str | None = None) -> JobSpec:
    """Reads a YAML/JSON spec file and validates it.

    Raises:
        SpecError: the file is missing, unreadable or invalid.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"spec file {str(p)!r} does not exist", "spec") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read spec file {str(p)!r}: {exc}", "spec") from None
    if not text.strip():
        raise SpecError(f"spec file {str(p)!r} is empty; it must hold a CustomJobSpec with "
                        "workerPoolSpecs", "spec")
    return parse_spec(text, project=project, region=region, display_name=display_name,
                      source=str(p))
