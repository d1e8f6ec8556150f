"""The signature table: which text points at which failure class, and how strongly.

Each :class:`Pattern` is one failure signature: a line regex, the class it names, how specific it
is (its weight) and how much it says about why a job stopped (its severity). The table
(:data:`CLASS_PATTERNS`) is the one place a wording is tied to a class; the scan
(:mod:`trainguard.triage.scan`) finds its hits and the decision (:mod:`trainguard.triage.decide`)
picks the root cause among them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainguard.failure_classes import CLASS_NAMES

__all__ = ["ERROR", "EXIT", "WARNING", "SEVERITIES", "RANK", "Pattern", "CLASS_PATTERNS"]

ERROR = "error"
EXIT = "exit"
WARNING = "warning"
SEVERITIES = (ERROR, EXIT, WARNING)
# Errors outrank exits, which outrank warnings (see trainguard.triage.decide).
RANK = {ERROR: 0, EXIT: 1, WARNING: 2}


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
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity of {self.label!r} must be one of {SEVERITIES}")


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
