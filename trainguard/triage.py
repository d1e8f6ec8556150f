"""Failure triage: read a failed job's error message and log tail, name its failure class.

The first rule of troubleshooting training is to classify the failure before fixing it: a fix
from the wrong class looks plausible and does nothing (adding workers to an out-of-memory job,
checking your own IAM instead of the job's service account). :func:`classify` scans the text
against one table of signatures (:data:`CLASS_PATTERNS`) and picks the root cause:

* an *error* (an exception or message that names why the job stopped) beats an *exit* signal
  (an exit status or kill signal, which says how the process ended but not why), which beats a
  *warning* (a signal that does not stop a job by itself, such as ``loss: nan`` in a progress
  line);
* among errors, the earliest wins: later errors are usually consequences (an NCCL timeout on the
  other ranks after one rank was preempted); on one line, the most specific signature wins;
* when the earliest error has no class in the table (a wall-time limit, labels out of range, a
  checkpoint that does not fit the model), the answer is ``unknown``: the class signals after it
  are its consequences, and naming one would send the user after the wrong fix;
* a weak warning in a text that shows no failure at all is not a diagnosis: healthy logs come
  back ``unknown`` with a confidence below 0.3.

Remedies and traps come from :mod:`trainguard.failure_classes`, the one table of classes.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from trainguard.failure_classes import CLASS_NAMES
from trainguard.failure_classes import get as get_failure_class
from trainguard.prefilter import Prefilter, gate_words, has_folded
from trainguard.redaction import printable, redact

__all__ = [
    "ERROR",
    "EXIT",
    "WARNING",
    "MAX_EVIDENCE_CHARS",
    "Pattern",
    "Diagnosis",
    "CLASS_PATTERNS",
    "classify",
    "classify_stream",
    "classify_file",
    "BLOCK_BYTES",
    "redact",
]

ERROR = "error"
EXIT = "exit"
WARNING = "warning"
_SEVERITIES = (ERROR, EXIT, WARNING)
_RANK = {ERROR: 0, EXIT: 1, WARNING: 2}

MAX_EVIDENCE_CHARS = 300
# Evidence from a huge line is redacted within this many characters either side of the signal
# (far wider than what is shown, so a secret cut at the edge is never on display).
_REDACT_MARGIN = 8_000
# A warning alone is a diagnosis only when it is strong, or when the text shows the job failed.
_STRONG_WARNING = 0.7
_WARNING_DISCOUNT = 0.75
_MIN_CONFIDENCE = 0.3
_UNKNOWN_NO_SIGNAL = 0.1
_UNKNOWN_WITH_SIGNAL = 0.2


@dataclass(frozen=True)
class Pattern:
    """One failure signature: a compiled regex, the class it points at, and how much it says.

    Attributes:
        failure_class: a class name from :mod:`trainguard.failure_classes` (``unknown`` marks a
            generic failure signal, such as a traceback, that names no class).
        regex: matched against each line of the text (``re.search``).
        weight: how specific the signature is, in (0, 1]; the base of the confidence.
        severity: ``error`` (names why the job stopped), ``exit`` (how the process ended) or
            ``warning`` (does not stop a job by itself).
        label: a few words a user reads in the diagnosis' reason.
    """

    failure_class: str
    regex: re.Pattern[str]
    weight: float
    severity: str
    label: str

    def __post_init__(self) -> None:
        if self.failure_class not in CLASS_NAMES:
            raise ValueError(f"unknown failure class {self.failure_class!r} for {self.label!r}")
        if not 0.0 < self.weight <= 1.0:
            raise ValueError(f"weight of {self.label!r} must be in (0, 1], got {self.weight}")
        if self.severity not in _SEVERITIES:
            raise ValueError(f"severity of {self.label!r} must be one of {_SEVERITIES}")


def _p(failure_class: str, regex: str, weight: float, severity: str, label: str) -> Pattern:
    return Pattern(failure_class, re.compile(regex), weight, severity, label)


# Exit-status phrasings: "exit status 127", "returned non-zero exit status 126", docker's "exited
# with code 137", Kubernetes' "Exit Code:    137" and "exitCode: 137", torchrun's "exitcode  : -9",
# Flyte's "exit code (137)".
_EXIT = (
    r"(?i:\b(?:exit(?:ed)?(?: with)?[ _]?(?:code|status)|returned non-zero exit status|exitcode))"
    r"\W{0,8}"
)

# The one table. Order does not matter: the earliest line wins, then the highest weight. Signals
# are chosen to survive rewording: exit codes and signals, exception types, and the subsystem that
# speaks (the kernel, the CUDA/XLA runtime, NCCL, a cloud API's error code).
# fmt: off
CLASS_PATTERNS: tuple[Pattern, ...] = (
    # --- container: the image, its entrypoint or its arguments --------------------------------
    _p("container", r"ModuleNotFoundError: No module named", 0.9, ERROR,
       "ModuleNotFoundError: a module is missing from the image"),
    _p("container", r"No module named \S+|Error while finding module specification", 0.85, ERROR,
       "python -m cannot find the entrypoint module"),
    _p("container", r"\bImportError: ", 0.6, ERROR, "ImportError: the image's packages disagree"),
    _p("container", r"can't open file .*No such file or directory", 0.9, ERROR,
       "python cannot open the entrypoint script"),
    _p("container", r"executable file not found in \$PATH", 0.95, ERROR,
       "the command is not in the image's PATH"),
    _p("container",
       r"\] exec \S+ failed: No such file or directory|no such file or directory: unknown",
       0.9, ERROR, "the container's command does not exist in the image"),
    _p("container", r"(?i)exec format error", 0.9, ERROR,
       "exec format error: wrong CPU architecture, or a script without a shebang"),
    _p("container", r"^(?:\S+: )?(?:line \d+: |\d+: )?\S+: command not found"
                    r"|^(?:/bin/|/usr/bin/)?(?:da|ba)?sh: \d+: \S+: not found", 0.85, ERROR,
       "command not found (exit 127)"),
    _p("container", r"^\S*sh: (?:line \d+: )?\S+: Permission denied\s*$", 0.75, ERROR,
       "the entrypoint is not executable (exit 126)"),
    _p("container", r"FileNotFoundError: \[Errno 2\] No such file or directory", 0.6, ERROR,
       "a file the command needs does not exist"),
    _p("container", r"(?i)no such file or directory", 0.4, WARNING, "a missing file"),
    _p("container",
       r"OCI runtime (?:create|exec) failed|failed to create (?:containerd|shim) task"
       r"|Termination reason: StartError|starting container process caused", 0.9, ERROR,
       "the container could not start"),
    _p("container",
       r"error(?<![\w-]error): (?:unrecognized arguments|the following arguments are required"
       r"|argument \S+|ambiguous option|invalid choice)", 0.85, ERROR,
       "the training script rejected its arguments (argparse)"),
    _p("container", r"arguments are not used by the HfArgumentParser", 0.85, ERROR,
       "the training script rejected its arguments (HfArgumentParser)"),
    _p("container", r"FATAL Flags parsing error", 0.85, ERROR,
       "the training script rejected its flags (absl)"),
    _p("container",
       r"^Error: (?:No such option|Missing option|Missing argument|Invalid value for"
       r"|Got unexpected extra argument)", 0.8, ERROR,
       "the training script rejected its arguments (click)"),
    _p("container", r"non-zero status of 12[67]\b", 0.85, EXIT,
       "exit status 127/126: command not found or not executable"),
    _p("container", _EXIT + r"12[67]\b", 0.8, EXIT,
       "exit status 127/126: command not found or not executable"),
    _p("container",
       r"[Uu]nable to pull image|[Ee]rror pulling image|[Ff]ail(?:ed|ing) to pull image|ErrImagePull"
       r"|ImagePullBackOff|Back-off pulling image|manifest unknown|manifest for \S+ not found"
       r"|name unknown: The repository|pull access denied",
       0.85, ERROR, "the image could not be pulled"),
    _p("container",
       r"[Ii]mage build failed|Unable to run conda package manager"
       r"|[Cc]reating conda environment failed", 0.8, ERROR,
       "the job's environment image could not be built"),
    # --- permission: an identity lacks a role --------------------------------------------------
    _p("permission",
       r"(?i)\b403\b.{0,300}?(?:forbidden|denied|does not have|permission)"
       r"|(?:Forbidden|PermissionDenied|AccessDenied\w*)\W{0,3}403\b", 0.9, ERROR,
       "HTTP 403: an identity lacks a permission"),
    _p("permission", r"PERMISSION_DENIED", 0.9, ERROR, "PERMISSION_DENIED"),
    _p("permission", r"(?i)does not have\b.{0,200}?\b(?:access|permission)", 0.9, ERROR,
       "an identity lacks an IAM permission"),
    _p("permission",
       r"Permission ['\"`]?[\w.]+['\"`]? (?:denied|is required)|Required '[\w.]+' permission",
       0.9, ERROR, "an IAM permission was denied"),
    _p("permission", r"google\.api_core\.exceptions\.(?:Forbidden|PermissionDenied)\b", 0.85,
       ERROR, "google.api_core Forbidden / PermissionDenied"),
    _p("permission",
       r"ACCESS_TOKEN_SCOPE_INSUFFICIENT|(?i:insufficient authentication scopes)", 0.85, ERROR,
       "the credentials lack an OAuth scope"),
    _p("permission",
       r"(?i)\b401\b.{0,80}?(?:unauthorized|unauthenticated)|UNAUTHENTICATED"
       r"|Could not automatically determine credentials", 0.75, ERROR,
       "no valid credentials"),
    _p("permission",
       r"AccessDenied|is not authorized to perform|Access Denied", 0.9,
       ERROR, "AWS AccessDenied: the role lacks a permission"),
    _p("permission",
       r"AuthorizationFailed|does not have authorization to perform action", 0.9, ERROR,
       "Azure AuthorizationFailed: the identity lacks a role"),
    _p("permission",
       r"is forbidden: User\b|User \\?\"[^\"\\]+\\?\" cannot (?:get|list|create|patch|update|delete|watch)\b",
       0.9, ERROR, "Kubernetes RBAC: the service account may not do this"),
    _p("permission", r"Reason: Forbidden\b|status code '?Forbidden\b", 0.8, ERROR,
       "HTTP 403 Forbidden"),
    _p("permission",
       r"GatedRepoError|Cannot access gated repo|trying to access a gated repo", 0.9, ERROR,
       "Hugging Face gated model: no token, or the token's account has no access"),
    _p("permission", r"PermissionError: \[Errno 13\]", 0.6, ERROR,
       "file permission denied (a /gcs path needs a storage role for the job's service account)"),
    # --- quota: the project may not use that much -----------------------------------------------
    _p("quota", r"quota metrics exceed quota limits", 0.95, ERROR,
       "Vertex AI quota exceeded"),
    _p("quota", r"(?i)quota exceeded for", 0.95, ERROR, "quota exceeded"),
    _p("quota", r"Quota '[\w-]+' exceeded", 0.95, ERROR, "Compute Engine quota exceeded"),
    # A quota message outranks the HTTP status it arrives in (GCE reports quota as a 403).
    _p("quota", r"[Ii]nsufficient '?[\w-]+'? quota|QUOTA_EXCEEDED|QuotaExceeded|OutOfQuota",
       0.95, ERROR, "insufficient quota"),
    _p("quota",
       r"[Qq]uotas?\b[^\n]{0,80}?\b(?:exceeded|reached|cannot accomm?odate)\b"
       r"|(?:[Ee]xceed(?:s|ed|ing)?|[Ii]nsufficient|not enough|short)\b[^\n]{0,80}?\bquotas?\b"
       r"|[Qq]uota failure\b|exceeds the allowed maximum of",
       0.92, ERROR, "a quota or limit is exhausted"),
    _p("quota",
       r"ResourceLimitExceeded|account-level service limit|LimitExceededException", 0.95,
       ERROR, "AWS service limit reached"),
    _p("quota", r"stayed QUEUED for \d+ ?s", 0.85, ERROR,
       "job never left QUEUED: Vertex waits for accelerator capacity or quota"),
    _p("quota", r"RESOURCE_EXHAUSTED|\bResourceExhausted\b", 0.55, ERROR,
       "RESOURCE_EXHAUSTED (a quota or a rate limit)"),
    _p("quota",
       r"TooManyRequests\b|429(?<!\d429)(?!\d).{0,80}?(?i:too many requests|rate limit)"
       r"|ThrottlingException|Rate exceeded\b", 0.75,
       ERROR, "a quota or API rate limit"),
    # --- capacity: the project has quota, the zone has no free machines -------------------------
    _p("capacity",
       r"ZONE_RESOURCE_POOL_EXHAUSTED|STOCKOUT\b|reason: resource_availability", 0.9, ERROR,
       "the zone has no free machines of that type (stockout)"),
    _p("capacity",
       r"does not have enough(?: resources available to fulfill|\s*$)"
       r"|[Rr]esources are insufficient in (?:region|zone)|no more capacity in the zone",
       0.9, ERROR, "the zone or region has no free capacity for that machine"),
    _p("capacity",
       r"Insufficient(?:Instance)?Capacity|CapacityError\b|do not have sufficient \S+ capacity"
       r"|[Ii]nsufficient capacity|[Uu]nable to provision requested [^\n]{0,40}capacity",
       0.9, ERROR, "the cloud has no capacity for that instance type now"),
    _p("capacity",
       r"AllocationFailed\b|Allocation failed\. (?:We do not|Please try)"
       r"|is currently (?:not available|unavailable) in (?:location|the \S+ zone)"
       r"|temporarily unavailable in",
       0.85, ERROR, "Azure/GCE allocation failure: no capacity for that size there"),
    # --- device_oom: accelerator memory ---------------------------------------------------------
    _p("device_oom", r"(?i)CUDA out of memory", 0.97, ERROR, "CUDA out of memory"),
    _p("device_oom", r"\b(?:HIP|XPU|MPS|NPU) (?:backend )?out of memory", 0.95, ERROR,
       "accelerator out of memory"),
    _p("device_oom", r"torch\.(?:cuda\.)?OutOfMemoryError", 0.95, ERROR,
       "torch OutOfMemoryError"),
    _p("device_oom",
       r"CUDA error: out of memory|cudaErrorMemoryAllocation|[Cc]uda [Ee]rror\b[^\n]{0,60}?\(out of"
       r" memory\)|out_of_memory: CUDA error", 0.95, ERROR, "CUDA out of memory"),
    _p("device_oom", r"CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED", 0.9, ERROR,
       "cuBLAS/cuDNN could not allocate GPU memory"),
    _p("device_oom", r"Ran out of memory in memory space (?:hbm|vmem)|CompileTimeHbmOom", 0.97,
       ERROR, "TPU HBM exhausted (XLA)"),
    _p("device_oom",
       r"[Oo]ut of memory (?:while trying to )?allocat|Failed to allocate request for [\d.]+ ?\w+"
       r" \(\d+B\) on device", 0.9, ERROR, "XLA device out of memory"),
    _p("device_oom", r"Allocator \(GPU_\d+_bfc\) ran out of memory", 0.6, WARNING,
       "the GPU allocator ran short of memory"),
    _p("device_oom", r"OOM when allocating tensor(?!.*device:CPU)", 0.95, ERROR,
       "TensorFlow GPU out of memory"),
    # --- host_oom: the machine's RAM ------------------------------------------------------------
    _p("host_oom", r"ran out[- ]of[- ]memory and exited with a non-zero status of 9", 0.95, EXIT,
       "Vertex: the replica ran out of host memory and was killed (SIGKILL)"),
    _p("host_oom", r"non-zero status of 137\b", 0.85, EXIT,
       "exit status 137: SIGKILL, usually the host's out-of-memory killer"),
    _p("host_oom", _EXIT + r"(?:137|-9)\b", 0.8, EXIT,
       "exit status 137: SIGKILL, usually the host's out-of-memory killer"),
    _p("host_oom", r"OOMKilled", 0.9, EXIT, "OOMKilled"),
    _p("host_oom", r"^(?:\S+: )?(?:line \d+: )?\s*(?:\d+\s+)?\**Killed\b", 0.75, EXIT,
       "the process was Killed (SIGKILL), usually for host memory"),
    _p("host_oom", r"Signal 9 \(SIGKILL\) received by PID", 0.75, EXIT,
       "torchrun: a worker got SIGKILL, usually for host memory"),
    _p("host_oom", r"DataLoader\b[^\n]{0,60}?killed by signal: (?:Killed|Bus error)", 0.9, ERROR,
       "a DataLoader worker was killed (host memory or /dev/shm)"),
    _p("host_oom", r"DataLoader worker \(pid\(s\) [^)]*\) exited unexpectedly", 0.65, ERROR,
       "a DataLoader worker died (host memory or /dev/shm)"),
    _p("host_oom", r"insufficient shared memory|out of shared memory", 0.85, ERROR,
       "data-loader workers exhausted shared memory (/dev/shm)"),
    _p("host_oom", r"(?<!\w)MemoryError\b", 0.8, ERROR, "Python MemoryError: host RAM exhausted"),
    _p("host_oom", r"Unable to allocate [\d.]+ \w+ for an array", 0.85, ERROR,
       "NumPy could not allocate host memory"),
    _p("host_oom", r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)", 0.9,
       ERROR, "torch could not allocate host memory"),
    _p("host_oom", r"Cannot allocate memory", 0.75, ERROR, "ENOMEM: host memory exhausted"),
    _p("host_oom", r"java\.lang\.OutOfMemoryError", 0.8, ERROR, "JVM heap exhausted"),
    _p("host_oom",
       r"Out of memory: Kill(?:ed)? process|oom-kill|invoked oom-killer|Killed process \d+ \(",
       0.9, ERROR, "the kernel's out-of-memory killer"),
    _p("host_oom", r"Detected \d+ oom[-_]kill event|: task \d+: Out Of Memory", 0.9, ERROR,
       "Slurm: the job's cgroup ran out of memory"),
    _p("host_oom", r"The node was low on resource: memory", 0.85, ERROR,
       "Kubernetes evicted the pod: the node ran out of memory"),
    _p("host_oom", r"OOM when allocating tensor.*device:CPU", 0.9, ERROR,
       "TensorFlow host out of memory"),
    # --- input_pipeline: the data loader cannot keep up -----------------------------------------
    _p("input_pipeline",
       r"DataLoader timed out after \d+ seconds|Worker timed out after \d+ seconds"
       r"|Prefetcher thread timed out", 0.8, ERROR,
       "the data loader did not deliver a batch in time"),
    # --- non_finite: NaN / Inf ------------------------------------------------------------------
    _p("non_finite",
       r"(?i)(?<!best )(?<!min )(?<!lowest )\b(?!(?:best|min|lowest)_)(?:\w+_)?loss(?:es)?\b"
       r"(?: is)?\s*[:=]?\s*(?:tensor\()?[-+]?(?:nan|inf)\b", 0.75, WARNING,
       "the loss is NaN/Inf"),
    _p("non_finite", r"Invalid loss, terminating training", 0.95, ERROR,
       "Keras TerminateOnNaN stopped training"),
    _p("non_finite", r"The loss returned in `training_step` is", 0.95, ERROR,
       "Lightning: the training_step loss is not finite"),
    _p("non_finite", r"is not finite\. Previous best value was", 0.9, ERROR,
       "Lightning EarlyStopping: the monitored metric is not finite"),
    _p("non_finite", r"returned nan values in its \w+ output", 0.95, ERROR,
       "autograd anomaly detection found NaN"),
    _p("non_finite", r"is non-finite, so it cannot be clipped", 0.95, ERROR,
       "the gradient norm is NaN/Inf"),
    _p("non_finite", r"Detected nan and/or inf values? in", 0.9, ERROR,
       "NaN/Inf in the parameters"),
    _p("non_finite",
       r"(?i)loss(?<!\wloss)(?:tensor)?\b[^\n]{0,12}?\b(?:is|became|becomes) (?:inf(?:inite)?|nan)\b",
       0.9, ERROR, "the loss is NaN/Inf"),
    _p("non_finite", r"Tensor had (?:NaN|Inf) values", 0.9, ERROR,
       "TensorFlow CheckNumerics: a tensor is NaN/Inf"),
    _p("non_finite", r"invalid value \((?:nan|inf)\) encountered", 0.9, ERROR,
       "JAX debug_nans: an operation produced NaN/Inf"),
    _p("non_finite",
       r"[Mm]inimum loss scale|loss scale already at minimum|FloatingPointError: Minimum loss",
       0.9, ERROR, "fp16 loss scale collapsed: the loss is exploding"),
    _p("non_finite", r"loss scale to:? (?:0\.\d+|[\d.]+e-\d+)\b", 0.75, WARNING,
       "fp16 loss scale driven below 1: gradients overflow step after step"),
    _p("non_finite", r"NaN or Inf found in input tensor", 0.75, WARNING,
       "NaN/Inf values were logged"),
    _p("non_finite", r"(?i)\bnan (?:loss|gradients?) (?:detected|encountered)", 0.6, WARNING,
       "NaN detected"),
    # --- distributed_init: rendezvous, collectives ----------------------------------------------
    _p("distributed_init", r"Timed out after \d+ seconds waiting for (?:clients|workers)", 0.95,
       ERROR, "not every worker joined the rendezvous: world size or worker count mismatch"),
    _p("distributed_init", r"\bDistStoreError\b", 0.9, ERROR,
       "torch.distributed store (rendezvous) error"),
    _p("distributed_init", r"\bDistNetworkError\b", 0.9, ERROR,
       "torch.distributed cannot reach the chief (MASTER_ADDR:MASTER_PORT)"),
    _p("distributed_init", r"Watchdog caught collective operation timeout", 0.85, ERROR,
       "an NCCL collective timed out: a rank is missing or stuck"),
    _p("distributed_init",
       r"NCCL error\b|nccl(?:Internal|System|InvalidUsage|InvalidArgument|Remote)Error"
       r"|ProcessGroupNCCL\.cpp:\d+, unhandled", 0.85,
       ERROR, "NCCL error"),
    _p("distributed_init",
       r"Rendezvous(?:Timeout|Closed|Connection|State)Error|[Rr]endezvous (?:timed out|failed)"
       r"|to join the rendezvous",
       0.9, ERROR, "torchrun rendezvous failed"),
    _p("distributed_init", r"Gloo connectFullMesh failed|gloo/transport/\S+\] (?!.*shutdown)",
       0.8, ERROR, "Gloo could not connect the ranks"),
    _p("distributed_init",
       r"environment variable (?:MASTER_ADDR|MASTER_PORT|RANK|WORLD_SIZE) expected, but not set",
       0.95, ERROR, "the rendezvous environment is incomplete"),
    _p("distributed_init", r"The server socket has failed to listen on any local network", 0.85,
       ERROR, "the chief cannot listen on MASTER_PORT"),
    _p("distributed_init", r"Address already in use|errno: 98\b", 0.7, ERROR,
       "the rendezvous port is already taken (MASTER_PORT)"),
    _p("distributed_init",
       r"[Bb]arrier timed out|CoordinationService/(?:RegisterTask|Barrier|Heartbeat)"
       r"|[Cc]oordination service\b[^\n]{0,40}?(?:error|failed)", 0.85, ERROR,
       "the JAX/TF coordination service timed out: not every process registered"),
    _p("distributed_init",
       r"set by init_process_group|[Ww]orld[ _]size mismatch"
       r"|Default process group has not been initialized"
       r"|Collective ops must be configured at program startup", 0.85, ERROR,
       "the process group's ranks and world size disagree with the launch"),
    _p("distributed_init",
       r"ssh[: ][^\n]{0,80}?(?:Connection refused|exit status 255)", 0.8, ERROR,
       "the multi-node launcher cannot reach a host over ssh"),
    _p("distributed_init",
       r"The client socket has timed out after \S+ while trying to connect to"
       r"|TCP client failed to connect", 0.6, WARNING,
       "a worker cannot reach the chief yet"),
    _p("distributed_init", r"connect\(\) timed out\. Original timeout", 0.6, WARNING,
       "a worker cannot reach the chief's store yet"),
    _p("distributed_init", r"\bConnection refused\b", 0.45, WARNING,
       "connection refused (is the chief reachable on MASTER_ADDR:MASTER_PORT?)"),
    # --- preemption: the VM was taken away ------------------------------------------------------
    _p("preemption",
       r"(?<![Bb]e )(?<![Ii]f )(?<!not )[Pp]re-?empted\b|[Dd]ue to (?:a )?preemption|DUE TO PREEMPTION"
       r"|PreemptionError", 0.85, ERROR, "the VM was preempted"),
    _p("preemption",
       r"termination is imminent|[Pp]re-?emption (?:notice|warning)|[Ss]pot (?:[Ii]nstance )?[Ii]nterrupt",
       0.85, ERROR, "a Spot/preemptible reclaim notice"),
    _p("preemption",
       r"in response to (?:imminent )?node shutdown|Node is shutting\b", 0.8,
       ERROR, "the node shut down (Spot reclaim or maintenance)"),
    _p("preemption", r"Host EC2 (?:instance )?Terminated", 0.7, ERROR,
       "AWS Batch: the host EC2 instance was terminated (Spot reclaim)"),
    _p("preemption", r"ShutdownHook: lame workers found", 0.6, ERROR,
       "TPU workers were lost mid-training (preemptible TPU)"),
    _p("preemption",
       r"Received SIGTERM|got signal: 15\b|Received 15 death signal|Signals\.SIGTERM", 0.75,
       ERROR, "the process received SIGTERM (sent on preemption, maintenance or cancellation)"),
    _p("preemption", r"(?i)\bmaintenance event\b", 0.6, WARNING, "a host maintenance event"),
    _p("preemption", r"non-zero status of 143\b", 0.6, EXIT, "exit status 143: SIGTERM"),
    _p("preemption", _EXIT + r"(?:143|-15)\b", 0.55, EXIT, "exit status 143: SIGTERM"),
    _p("preemption", r"^(?:\S+: )?(?:line \d+: )?\s*(?:\d+\s+)?Terminated\b", 0.55, EXIT,
       "the process was Terminated (SIGTERM)"),
    _p("preemption", r"CANCELLED AT \S+ \*\*\*", 0.5, EXIT,
       "the scheduler cancelled the job step"),
    # --- failures outside the table's classes: fatal, but no trainguard class --------------------
    # An earlier one of these makes later class signals read as consequences (see classify).
    _p("unknown", r"DUE TO TIME LIMIT", 0.5, ERROR, "the scheduler's wall-time limit"),
    _p("unknown", r"device-side assert triggered|Assertion `t >= 0 && t < n_classes` failed", 0.5,
       ERROR, "a CUDA device-side assert (labels out of range)"),
    _p("unknown",
       r"Error\(s\) in loading state_dict|size mismatch for \S+: copying a param", 0.5, ERROR,
       "the checkpoint does not match the model"),
    _p("unknown",
       r"Expected all tensors to be on the same device|shapes cannot be multiplied", 0.5, ERROR,
       "a device-placement or shape bug in the training code"),
    _p("unknown", r"killed by signal: Segmentation fault|SIGSEGV\b", 0.5, ERROR,
       "a segmentation fault"),
    # --- generic failure signals: a failure, but no class ---------------------------------------
    _p("unknown", r"Traceback \(most recent call last\)", 0.2, EXIT, "a Python traceback"),
    _p("unknown", r"exited with a non-zero status of [1-9]\d*", 0.2, EXIT,
       "a replica exited with a non-zero status"),
    _p("unknown", _EXIT + r"-?[1-9]\d*\b", 0.2, EXIT, "a non-zero exit status"),
    _p("unknown", r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b", 0.2, EXIT, "an exception"),
    _p("unknown", r"JOB_STATE_FAILED|\bFAILED\b", 0.2, EXIT, "the job failed"),
)

# fmt: on


@dataclass(frozen=True)
class Diagnosis:
    """What failed, the line that shows it, and what to do first.

    Attributes:
        failure_class: a class name from :mod:`trainguard.failure_classes`.
        evidence: the line that shows the class, trimmed and redacted (at most
            ``MAX_EVIDENCE_CHARS`` characters); empty when nothing matched.
        remedy: the class's first remedy.
        trap: the plausible fix from the wrong class that does nothing (may be empty).
        confidence: 0..1; below 0.3 means "no real diagnosis".
        reason: why this class, in words (which signal won and what else was seen).
        line_number: 1-based line of the evidence in the text, or None.
    """

    failure_class: str
    evidence: str
    remedy: str
    trap: str
    confidence: float
    reason: str
    line_number: int | None = None

    def to_dict(self) -> dict[str, object]:
        """Returns the diagnosis as a JSON-ready dict."""
        return {
            "failure_class": self.failure_class,
            "evidence": self.evidence,
            "remedy": self.remedy,
            "trap": self.trap,
            "confidence": round(self.confidence, 3),
            "reason": self.reason,
            "line_number": self.line_number,
        }

    def to_markdown(self) -> str:
        """Returns a short report a user reads: class, evidence, first remedy, what not to do."""
        if self.failure_class == "unknown":
            title = "## Training failure: no known failure class"
        else:
            title = f"## Training failure: `{self.failure_class}`"
        lines = [title, "", f"**Why:** {self.reason} (confidence {self.confidence:.2f})", ""]
        if self.evidence:
            where = f" (line {self.line_number})" if self.line_number else ""
            fence = "`" * max(3, _longest_backtick_run(self.evidence) + 1)
            lines += [f"**Evidence**{where}:", "", f"{fence}text", self.evidence, fence, ""]
        lines.append(f"**First remedy:** {self.remedy}")
        if self.trap:
            lines += ["", f"**Do not:** {self.trap}"]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class _Hit:
    line_number: int
    segment: int
    text: str
    pattern: Pattern

    @property
    def order(self) -> tuple[int, int, float]:
        return (self.line_number, self.segment, -self.pattern.weight)


def classify(text: str | bytes) -> Diagnosis:
    """Names the failure class of a job from its error message and/or the tail of its logs.

    Args:
        text: the job's error message, its log tail, or both concatenated (bytes are decoded
            as UTF-8, undecodable bytes as U+FFFD).

    Returns:
        The diagnosis: the root-cause class, the evidence line, the class's first remedy and
        trap, a confidence and the reason. Text with no known failure signature, such as a
        healthy training log, is ``unknown`` with a confidence below 0.3.
    """
    if isinstance(text, bytes | bytearray):  # a process's raw output: read like a log file
        return classify_stream(io.BytesIO(text))
    # surrogatepass: any str round-trips, so the evidence is the caller's text exactly.
    data = (text or "").encode("utf-8", "surrogatepass")
    return _decide(_scan(io.BytesIO(data), errors="surrogatepass"))


def classify_stream(stream: BinaryIO) -> Diagnosis:
    """Like :func:`classify`, for a binary stream of any size (a log file, stdin), read once.

    Memory stays bounded: the stream is read in blocks of ``BLOCK_BYTES``; undecodable bytes
    read as U+FFFD.
    """
    return _decide(_scan(stream, errors="replace"))


def classify_file(path: str | os.PathLike[str]) -> Diagnosis:
    """Like :func:`classify`, for a log file of any size (streamed, see :func:`classify_stream`).

    Raises:
        OSError: the file cannot be opened or read.
    """
    with open(path, "rb") as stream:
        return classify_stream(stream)


def _decide(hits: list[_Hit]) -> Diagnosis:
    known = [h for h in hits if h.pattern.failure_class != "unknown"]
    generic = [h for h in hits if h.pattern.failure_class == "unknown"]

    fatal = [h for h in hits if h.pattern.severity == ERROR]
    first_fatal = min(fatal, key=lambda h: h.order) if fatal else None
    if first_fatal is not None and first_fatal.pattern.failure_class == "unknown":
        # The job died of something no class covers (a wall-time limit, a code bug); the class
        # signals after it are its consequences (SIGTERM to the other ranks, a collective timeout).
        return _unknown(
            first_fatal,
            _UNKNOWN_WITH_SIGNAL,
            f"the earliest fatal error ({first_fatal.pattern.label}, line "
            f"{first_fatal.line_number}) has no known failure class; later signals read as its "
            "consequences",
        )

    for severity in (ERROR, EXIT):
        candidates = [h for h in known if h.pattern.severity == severity]
        if candidates:
            chosen = min(candidates, key=lambda h: h.order)
            return _diagnose(chosen, known, _reason(chosen, known))

    warnings = [h for h in known if h.pattern.severity == WARNING]
    if warnings:
        # The strongest hint; the earliest among equals.
        chosen = min(warnings, key=lambda h: (-h.pattern.weight, h.order))
        if chosen.pattern.weight >= _STRONG_WARNING or generic:
            return _diagnose(chosen, known, _reason(chosen, known))
        return _unknown(
            chosen,
            _UNKNOWN_WITH_SIGNAL,
            f"only a weak hint ({chosen.pattern.label}, line {chosen.line_number}) and no sign "
            "that the job failed",
        )
    if generic:
        first = min(generic, key=lambda h: h.order)
        return _unknown(
            first,
            _UNKNOWN_WITH_SIGNAL,
            f"a failure signal ({first.pattern.label}, line {first.line_number}) but no known "
            "failure signature",
        )
    return _unknown(None, _UNKNOWN_NO_SIGNAL, "no known failure signature")


# Stack frames name functions and quote source code (``c10::DistNetworkError::DistNetworkError``,
# ``raise ValueError("... MASTER_ADDR expected ...")``): they echo an error, they are not one.
_FRAME = re.compile(r'^\s*(?:frame #\d+: |File "[^"]*", line \d+|[\^~]+\s*$)')
_PYTHON_FRAME = re.compile(r'^\s*File "[^"]*", line \d+')
# The replica prefix trainguard's launchers put on each log line ("[workerpool0-0] ").
_REPLICA_PREFIX = re.compile(r"^\[[\w.:-]+\] ")

# --- the scan: one pass over the text, in blocks, the whole table only on candidate lines ------

BLOCK_BYTES = 4 << 20
# A line longer than this is read in pieces of this size (each piece numbered as a line).
_MAX_LINE_BYTES = 8 << 20
# The first hits of each signature are all a diagnosis uses (the earliest wins; a few more count
# towards the confidence): a log that repeats one line a million times keeps this many.
_HITS_PER_PATTERN = 64
# When most lines of a block are distinct, de-duplicating costs more than it saves: the next
# blocks are searched as they are, then de-duplication is tried again.
_MOSTLY_DISTINCT = 0.8
_PLAIN_BLOCKS = 8
# Candidate lines up to this long are remembered (at most this many at once) with what they show.
_SEEN_LINE_BYTES = 4096
_SEEN_LINES = 4096


@dataclass(frozen=True)
class _Table:
    """:data:`CLASS_PATTERNS` compiled for the scan: one prefilter, and which signatures each word
    a line may hold lets through (a signature without words always runs)."""

    patterns: tuple[Pattern, ...]
    prefilter: Prefilter
    words: tuple[str, ...]
    by_word: dict[str, tuple[int, ...]]
    ungated: tuple[int, ...]

    @classmethod
    def of(cls, patterns: tuple[Pattern, ...]) -> _Table:
        by_word: dict[str, list[int]] = {}
        ungated = []
        for index, pattern in enumerate(patterns):
            words = gate_words(pattern.regex)
            if words is None:
                ungated.append(index)
            for word in words or ():
                by_word.setdefault(word, []).append(index)
        return cls(
            patterns,
            Prefilter([p.regex for p in patterns]),
            tuple(by_word),
            {w: tuple(i) for w, i in by_word.items()},
            tuple(ungated),
        )

    def gated(self, piece: str) -> list[int]:
        """The signatures worth running on ``piece``: those whose words it holds, in order."""
        if has_folded(piece):
            return list(range(len(self.patterns)))
        lowered = piece.lower()
        chosen = set(self.ungated)
        for word in [w for w in self.words if w in lowered]:
            chosen.update(self.by_word[word])
        return sorted(chosen)


_TABLES: dict[int, _Table] = {}


def _table(patterns: tuple[Pattern, ...] | None = None) -> _Table:
    """The compiled table, built on first use (importing triage stays cheap)."""
    patterns = CLASS_PATTERNS if patterns is None else patterns
    table = _TABLES.get(id(patterns))
    if table is None or table.patterns is not patterns:
        table = _TABLES[id(patterns)] = _Table.of(patterns)
    return table


def _blocks(stream: BinaryIO) -> Iterator[bytes]:
    """Whole lines, ``\\r\\n`` and ``\\r`` turned into ``\\n``, each block ending with one."""
    pending = b""
    while True:
        chunk = stream.read(BLOCK_BYTES)
        if not chunk:
            break
        data = pending + chunk
        cut = data.rfind(b"\n") + 1
        if cut == 0 and len(data) >= _MAX_LINE_BYTES:
            # One very long line: a lone \r is a line end too; else cut it (not inside a \r\n).
            cut = data.rfind(b"\r", 0, len(data) - 1) + 1 or len(data) - (data[-1:] == b"\r")
        pending, data = data[cut:], data[:cut]
        if data:
            yield _lf(data)
    if pending:
        yield _lf(pending)


def _lf(data: bytes) -> bytes:
    """Line ends made ``\\n``, one at the end guaranteed."""
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return data if data.endswith(b"\n") else data + b"\n"


def _scan(
    stream: BinaryIO,
    *,
    errors: str,
    patterns: tuple[Pattern, ...] | None = None,
) -> list[_Hit]:
    table = _table(patterns)
    hits: list[_Hit] = []
    counts = [0] * len(table.patterns)
    # A log repeats its lines (warnings, progress lines that mention a loss of inf): each
    # distinct candidate line is matched against the table once.
    seen: dict[tuple[bytes, bool], list[tuple[int, int, str]]] = {}
    line_number = 1  # of the first line of the block
    previous = b""  # the last line of the previous block
    plain = 0  # blocks left to search without de-duplicating (their lines were all different)
    for block in _blocks(stream):
        lines = block.split(b"\n")  # the block ends with a line end: the last item is empty
        candidates, distinct = table.prefilter.lines(block, dedup=plain == 0)
        plain = max(0, plain - 1) if plain else (_PLAIN_BLOCKS if distinct > _MOSTLY_DISTINCT else 0)
        for index in candidates:
            before = lines[index - 1] if index else previous
            key = (lines[index], _ends_in_frame(before.decode("utf-8", errors)))
            found = seen.get(key)
            if found is None:
                found = _matches(table, key[0].decode("utf-8", errors), key[1])
                if len(key[0]) <= _SEEN_LINE_BYTES:
                    if len(seen) >= _SEEN_LINES:
                        seen.clear()
                    seen[key] = found
            for segment, pattern_index, piece in found:
                if counts[pattern_index] < _HITS_PER_PATTERN:
                    counts[pattern_index] += 1
                    hits.append(_Hit(line_number + index, segment, piece, table.patterns[pattern_index]))
        line_number += len(lines) - 1
        previous = lines[-2] if len(lines) > 1 else previous
    return hits


def _pieces(line: str) -> list[str]:
    line = _REPLICA_PREFIX.sub("", line, count=1)
    # Error messages printed through repr() carry literal "\n": read them as lines too.
    return line.split("\\n")


def _ends_in_frame(line: str) -> bool:
    """Whether the last piece of a line is a Python frame (``File "…", line N``)."""
    return bool(_PYTHON_FRAME.match(_pieces(line)[-1]))


def _matches(table: _Table, line: str, after_python_frame: bool) -> list[tuple[int, int, str]]:
    """(segment, signature index, piece) for every signature the line shows."""
    found = []
    for segment, piece in enumerate(_pieces(line)):
        # The source line a traceback quotes is indented; the exception line is not (and
        # comes straight after "File …" when the source is not available).
        quoted_source = after_python_frame and piece[:1] in (" ", "\t")
        after_python_frame = bool(_PYTHON_FRAME.match(piece))
        if quoted_source or _FRAME.match(piece):
            continue
        found += [
            (segment, index, piece)
            for index in table.gated(piece)
            if table.patterns[index].regex.search(piece)
        ]
    return found


def _diagnose(chosen: _Hit, known: list[_Hit], reason: str) -> Diagnosis:
    cls = chosen.pattern.failure_class
    confidence = chosen.pattern.weight
    if chosen.pattern.severity == WARNING:
        confidence *= _WARNING_DISCOUNT
    agreeing = {h.line_number for h in known if h.pattern.failure_class == cls}
    confidence += min(0.1, 0.03 * len(agreeing - {chosen.line_number}))
    # A weaker reading of the chosen line itself (RESOURCE_EXHAUSTED on a TPU HBM line) is no
    # rival: the more specific signature already explains it.
    rivals = {h.pattern.failure_class for h in _others(chosen, known) if h.pattern.severity != WARNING}
    confidence -= min(0.3, 0.1 * len(rivals))
    confidence = max(_MIN_CONFIDENCE, min(0.99, confidence))
    fc = get_failure_class(cls)
    return Diagnosis(
        failure_class=cls,
        evidence=_evidence(chosen),
        remedy=fc.remedy,
        trap=fc.trap,
        confidence=round(confidence, 3),
        reason=reason,
        line_number=chosen.line_number,
    )


def _unknown(hit: _Hit | None, confidence: float, reason: str) -> Diagnosis:
    fc = get_failure_class("unknown")
    return Diagnosis(
        failure_class="unknown",
        evidence=_evidence(hit) if hit else "",
        remedy=fc.remedy,
        trap=fc.trap,
        confidence=confidence,
        reason=reason,
        line_number=hit.line_number if hit else None,
    )


def _reason(chosen: _Hit, known: list[_Hit]) -> str:
    label, line = chosen.pattern.label, chosen.line_number
    severity = chosen.pattern.severity
    if severity == ERROR:
        parts = [f"earliest fatal error: {label} (line {line})"]
    elif severity == EXIT:
        parts = [f"no error names a cause; the process ended: {label} (line {line})"]
    else:
        parts = [f"only a non-fatal signal: {label} (line {line}); no fatal error names a cause"]
    others = _others(chosen, known)
    earlier = sorted((h for h in others if h.order < chosen.order), key=lambda h: h.order)
    for hit in _first_per_class(earlier):
        if hit.pattern.severity == WARNING:
            parts.append(
                f"a non-fatal {hit.pattern.failure_class} signal came first ({hit.pattern.label}, "
                f"line {hit.line_number}) but did not stop the job"
            )
        else:
            # Only an exit signal can precede an error that wins (errors outrank exits).
            parts.append(
                f"the earlier {hit.pattern.failure_class} exit signal (line {hit.line_number}) "
                "says how the process ended, not why"
            )
    later = sorted((h for h in others if h.order > chosen.order), key=lambda h: h.order)
    for hit in _first_per_class(later):
        if _RANK[hit.pattern.severity] <= _RANK[severity]:
            parts.append(
                f"the later {hit.pattern.failure_class} signal ({hit.pattern.label}, line "
                f"{hit.line_number}) reads as a consequence"
            )
        elif hit.pattern.severity == EXIT:
            parts.append(
                f"the {hit.pattern.failure_class} exit signal (line {hit.line_number}) says how "
                "the process ended, not why"
            )
    return "; ".join(parts)


def _others(chosen: _Hit, known: list[_Hit]) -> list[_Hit]:
    """Hits of other classes, less those on the chosen hit's own line."""
    here = (chosen.line_number, chosen.segment)
    return [
        h
        for h in known
        if h.pattern.failure_class != chosen.pattern.failure_class and (h.line_number, h.segment) != here
    ]


def _first_per_class(hits: list[_Hit]) -> list[_Hit]:
    seen: set[str] = set()
    firsts = []
    for hit in hits:
        if hit.pattern.failure_class not in seen:
            seen.add(hit.pattern.failure_class)
            firsts.append(hit)
    return firsts


def _evidence(hit: _Hit) -> str:
    line = hit.text.strip()
    match = hit.pattern.regex.search(line)
    start = match.start() if match else 0
    if len(line) > 2 * _REDACT_MARGIN:  # redact the signal's neighbourhood, not megabytes
        begin = max(0, start - _REDACT_MARGIN)
        line, start = line[begin : begin + 2 * _REDACT_MARGIN], start - begin
    before = len(line)
    line = printable(redact(line))
    if len(line) <= MAX_EVIDENCE_CHARS:
        return line
    if len(line) != before:  # redaction moved the signal: find it again
        match = hit.pattern.regex.search(line)
        start = match.start() if match else 0
    keep = MAX_EVIDENCE_CHARS - 2  # room for an ellipsis at each end
    begin = max(0, min(start - 80, len(line) - keep))
    window = line[begin : begin + keep]
    return ("…" if begin > 0 else "") + window + ("…" if begin + keep < len(line) else "")


def _longest_backtick_run(text: str) -> int:
    runs = [len(m.group(0)) for m in re.finditer(r"`+", text)]
    return max(runs, default=0)
