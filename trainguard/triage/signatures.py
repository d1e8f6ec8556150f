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

__all__ = [
    "ERROR",
    "EXIT",
    "WARNING",
    "DETAIL",
    "SEVERITIES",
    "RANK",
    "SOURCE_KINDS",
    "Pattern",
    "CLASS_PATTERNS",
]

ERROR = "error"
EXIT = "exit"
WARNING = "warning"
DETAIL = "detail"
SEVERITIES = (ERROR, EXIT, WARNING, DETAIL)
# Errors outrank exits, which outrank warnings (see trainguard.triage.decide); a detail is never a
# signal of its own.
RANK = {ERROR: 0, EXIT: 1, WARNING: 2, DETAIL: 3}


@dataclass(frozen=True)
class Pattern:
    """One failure signature: a compiled regex, the class it points at, and how much it says.

    Attributes:
        failure_class: a class name from :mod:`trainguard.failure_classes` (``unknown`` marks a
            generic failure signal, such as a traceback, that names no class).
        regex: matched against each line of the text (``re.search``).
        weight: how specific the signature is, in (0, 1]; the base of the confidence.
        severity: ``error`` (names why the job stopped), ``exit`` (how the process ended),
            ``warning`` (does not stop a job by itself) or ``detail`` (says nothing alone: it
            settles which class a hit of ``of`` a few lines above stands for).
        label: a few words a user reads in the diagnosis' reason.
        source: where the wording was seen, one of ``dev:<id>`` (an entry of the corpus' dev
            part, tests/fixtures/triage/corpus/dev.jsonl), ``fixture:<file>`` (a text in
            tests/fixtures/triage), ``code:<path>`` (a message trainguard itself prints) or an
            ``https://`` address of the program's source or documentation that prints it.
            tests/unit/test_triage_signatures.py checks each one. Empty only for patterns made
            outside the table (tests, benchmarks).
        of: for a ``detail``, the signature whose hits it settles: the nearest detail at most
            ``within`` lines below such a hit makes it a hit of this class, weight and label
            (TensorFlow names the device of an out-of-memory op on the op's line below, and the
            scan reads one line at a time). None for every other severity.
        within: for a ``detail``, how many lines below a hit of ``of`` it may stand.
    """

    failure_class: str
    regex: re.Pattern[str]
    weight: float
    severity: str
    label: str
    source: str = ""
    of: Pattern | None = None
    within: int = 0

    def __post_init__(self) -> None:
        if self.failure_class not in CLASS_NAMES:
            raise ValueError(f"unknown failure class {self.failure_class!r} for {self.label!r}")
        if not 0.0 < self.weight <= 1.0:
            raise ValueError(f"weight of {self.label!r} must be in (0, 1], got {self.weight}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity of {self.label!r} must be one of {SEVERITIES}")
        if self.source and not self.source.startswith(SOURCE_KINDS):
            raise ValueError(f"source of {self.label!r} must start with one of {SOURCE_KINDS}")
        is_detail = self.severity == DETAIL
        if is_detail != (self.of is not None) or is_detail != (self.within > 0):
            raise ValueError(
                f"{self.label!r}: give a detail the signature it settles (of) and how many lines "
                "below it it may stand (within > 0); give any other severity neither"
            )
        if self.of is not None and self.of.severity == DETAIL:
            raise ValueError(f"{self.label!r}: a detail settles a signal; {self.of.label!r} is a detail")


# How a pattern's source is written (see Pattern.source).
SOURCE_KINDS = ("dev:", "fixture:", "code:", "https://")


def _p(failure_class: str, regex: str, weight: float, severity: str, label: str, source: str) -> Pattern:
    return Pattern(failure_class, re.compile(regex), weight, severity, label, source)


def _detail(
    of: Pattern, within: int, failure_class: str, regex: str, weight: float, label: str, source: str
) -> Pattern:
    return Pattern(failure_class, re.compile(regex), weight, DETAIL, label, source, of, within)


# Exit-status phrasings: "exit status 127", "returned non-zero exit status 126", docker's "exited
# with code 137", Kubernetes' "Exit Code:    137" and "exitCode: 137", torchrun's "exitcode  : -9",
# Flyte's "exit code (137)", DeepSpeed's launcher "exits with return code = -9"
# (dev:host_oom-anomalygpt-43).
_EXIT = (
    r"(?i:\b(?:exit(?:ed|s)?(?: with)?(?: return)?[ _]?(?:code|status)|returned non-zero exit status"
    r"|exitcode))"
    r"\W{0,8}"
)

# TensorFlow's allocation failure; with no device named on its line, accelerator memory (the
# details below settle it when the node line under it names the device).
_TF_OOM = _p(
    "device_oom",
    r"OOM when allocating tensor(?!.*device:CPU)",
    0.95,
    ERROR,
    "TensorFlow GPU out of memory",
    "fixture:device_oom-tensorflow-gpu.txt",
)

# The one table. Order does not matter: the earliest line wins, then the highest weight. Signals
# are chosen to survive rewording: exit codes and signals, exception types, and the subsystem that
# speaks (the kernel, the CUDA/XLA runtime, NCCL, a cloud API's error code).
# fmt: off
CLASS_PATTERNS: tuple[Pattern, ...] = (
    # --- container: the image, its entrypoint or its arguments --------------------------------
    _p("container", r"ModuleNotFoundError: No module named", 0.9, ERROR,
       "ModuleNotFoundError: a module is missing from the image",
       "fixture:container-modulenotfound-local.txt"),
    _p("container", r"No module named \S+|Error while finding module specification", 0.85, ERROR,
       "python -m cannot find the entrypoint module",
       "fixture:container-modulenotfound-local.txt"),
    _p("container", r"\bImportError: ", 0.6, ERROR, "ImportError: the image's packages disagree",
       "https://docs.python.org/3/library/exceptions.html#ImportError"),
    _p("container", r"can't open file .*No such file or directory", 0.9, ERROR,
       "python cannot open the entrypoint script",
       "fixture:container-cant-open-file-local.txt"),
    _p("container", r"executable file not found in \$PATH", 0.95, ERROR,
       "the command is not in the image's PATH",
       "dev:container-amazon-sagemaker-examples-744"),
    _p("container",
       r"\] exec \S+ failed: No such file or directory|no such file or directory: unknown",
       0.9, ERROR, "the container's command does not exist in the image",
       "dev:container-sagemaker-pytorch-training-toolkit-254"),
    _p("container", r"(?i)exec format error", 0.9, ERROR,
       "exec format error: wrong CPU architecture, or a script without a shebang",
       "fixture:container-exec-format-local.txt"),
    _p("container", r"^(?:\S+: )?(?:line \d+: |\d+: )?\S+: command not found"
                    r"|^(?:/bin/|/usr/bin/)?(?:da|ba)?sh: \d+: \S+: not found", 0.85, ERROR,
       "command not found (exit 127)",
       "fixture:container-command-not-found-local.txt"),
    _p("container", r"^\S*sh: (?:line \d+: )?\S+: Permission denied\s*$", 0.75, ERROR,
       "the entrypoint is not executable (exit 126)",
       "fixture:container-not-executable-local.txt"),
    _p("container", r"FileNotFoundError: \[Errno 2\] No such file or directory", 0.6, ERROR,
       "a file the command needs does not exist",
       "fixture:container-entrypoint-missing-local.txt"),
    _p("container", r"(?i)no such file or directory", 0.4, WARNING, "a missing file",
       "fixture:container-cant-open-file-local.txt"),
    _p("container",
       r"OCI runtime (?:create|exec) failed|failed to create (?:containerd|shim) task"
       r"|Termination reason: StartError|starting container process caused", 0.9, ERROR,
       "the container could not start",
       "fixture:container-vertex-starterror.txt"),
    _p("container",
       r"error(?<![\w-]error): (?:unrecognized arguments|the following arguments are required"
       r"|argument \S+|ambiguous option|invalid choice)", 0.85, ERROR,
       "the training script rejected its arguments (argparse)",
       "fixture:container-argparse-local.txt"),
    _p("container", r"arguments are not used by the HfArgumentParser", 0.85, ERROR,
       "the training script rejected its arguments (HfArgumentParser)",
       "https://github.com/huggingface/transformers/blob/main/src/transformers/hf_argparser.py"),
    _p("container", r"FATAL Flags parsing error", 0.85, ERROR,
       "the training script rejected its flags (absl)",
       "fixture:container-absl-flags-local.txt"),
    _p("container",
       r"^Error: (?:No such option|Missing option|Missing argument|Invalid value for"
       r"|Got unexpected extra argument)", 0.8, ERROR,
       "the training script rejected its arguments (click)",
       "https://github.com/pallets/click/blob/main/src/click/exceptions.py"),
    _p("container", r"non-zero status of 12[67]\b", 0.85, EXIT,
       "exit status 127/126: command not found or not executable",
       "fixture:container-vertex-exit127.txt"),
    _p("container", _EXIT + r"12[67]\b", 0.8, EXIT,
       "exit status 127/126: command not found or not executable",
       "fixture:container-command-not-found-local.txt"),
    _p("container",
       r"[Uu]nable to pull image|[Ee]rror pulling image|[Ff]ail(?:ed|ing) to pull image|ErrImagePull"
       r"|ImagePullBackOff|Back-off pulling image|manifest unknown|manifest for \S+ not found"
       r"|name unknown: The repository|pull access denied",
       0.85, ERROR, "the image could not be pulled",
       "fixture:permission-artifact-registry-pull.txt"),
    _p("container",
       r"[Ii]mage build failed|Unable to run conda package manager"
       r"|[Cc]reating conda environment failed", 0.8, ERROR,
       "the job's environment image could not be built",
       "dev:container-mlops-enterprise-template-4"),
    # --- permission: an identity lacks a role --------------------------------------------------
    _p("permission",
       r"(?i)\b403\b.{0,300}?(?:forbidden|denied|does not have|permission)"
       r"|(?:Forbidden|PermissionDenied|AccessDenied\w*)\W{0,3}403\b", 0.9, ERROR,
       "HTTP 403: an identity lacks a permission",
       "fixture:permission-aiplatform-403-loopback.txt"),
    _p("permission", r"PERMISSION_DENIED", 0.9, ERROR, "PERMISSION_DENIED",
       "fixture:permission-aiplatform-grpc.txt"),
    _p("permission", r"(?i)does not have\b.{0,200}?\b(?:access|permission)", 0.9, ERROR,
       "an identity lacks an IAM permission",
       "fixture:permission-storage-upload-403-loopback.txt"),
    _p("permission",
       r"Permission ['\"`]?[\w.]+['\"`]? (?:denied|is required)|Required '[\w.]+' permission",
       0.9, ERROR, "an IAM permission was denied",
       "fixture:permission-aiplatform-403-loopback.txt"),
    _p("permission", r"google\.api_core\.exceptions\.(?:Forbidden|PermissionDenied)\b", 0.85,
       ERROR, "google.api_core Forbidden / PermissionDenied",
       "fixture:permission-aiplatform-403-loopback.txt"),
    _p("permission",
       r"ACCESS_TOKEN_SCOPE_INSUFFICIENT|(?i:insufficient authentication scopes)", 0.85, ERROR,
       "the credentials lack an OAuth scope",
       "https://github.com/googleapis/googleapis/blob/master/google/api/error_reason.proto"),
    _p("permission",
       r"(?i)\b401\b.{0,80}?(?:unauthorized|unauthenticated)|UNAUTHENTICATED"
       r"|Could not automatically determine credentials", 0.75, ERROR,
       "no valid credentials",
       "dev:permission-easycontrol-19"),
    _p("permission",
       r"AccessDenied|is not authorized to perform|Access Denied", 0.9,
       ERROR, "AWS AccessDenied: the role lacks a permission",
       "dev:permission-detectcoral-20"),
    _p("permission",
       r"AuthorizationFailed|does not have authorization to perform action", 0.9, ERROR,
       "Azure AuthorizationFailed: the identity lacks a role",
       "dev:permission-mlops-template-for-azureml-sdk-v2-9"),
    _p("permission",
       r"is forbidden: User\b|User \\?\"[^\"\\]+\\?\" cannot (?:get|list|create|patch|update|delete|watch)\b",
       0.9, ERROR, "Kubernetes RBAC: the service account may not do this",
       "dev:permission-intro-to-ml-with-kubeflow-examples-140"),
    _p("permission", r"Reason: Forbidden\b|status code '?Forbidden\b", 0.8, ERROR,
       "HTTP 403 Forbidden",
       "dev:permission-kale-366"),
    _p("permission",
       r"GatedRepoError|Cannot access gated repo|trying to access a gated repo", 0.9, ERROR,
       "Hugging Face gated model: no token, or the token's account has no access",
       "dev:permission-mlx-examples-759"),
    _p("permission", r"PermissionError: \[Errno 13\]", 0.6, ERROR,
       "file permission denied (a /gcs path needs a storage role for the job's service account)",
       "https://docs.python.org/3/library/exceptions.html#PermissionError"),
    # --- quota: the project may not use that much -----------------------------------------------
    _p("quota", r"quota metrics exceed quota limits", 0.95, ERROR,
       "Vertex AI quota exceeded",
       "fixture:quota-aiplatform-429-loopback.txt"),
    _p("quota", r"(?i)quota exceeded for", 0.95, ERROR, "quota exceeded",
       "fixture:quota-api-core-429-loopback.txt"),
    _p("quota", r"Quota '[\w-]+' exceeded", 0.95, ERROR, "Compute Engine quota exceeded",
       "dev:quota-course-v3-165"),
    # A quota message outranks the HTTP status it arrives in (GCE reports quota as a 403).
    _p("quota", r"[Ii]nsufficient '?[\w-]+'? quota|QUOTA_EXCEEDED|QuotaExceeded|OutOfQuota",
       0.95, ERROR, "insufficient quota",
       "dev:quota-azure-docs-121466"),
    _p("quota",
       r"[Qq]uotas?\b[^\n]{0,80}?\b(?:exceeded|reached|cannot accomm?odate)\b"
       r"|(?:[Ee]xceed(?:s|ed|ing)?|[Ii]nsufficient|not enough|short)\b[^\n]{0,80}?\bquotas?\b"
       r"|[Qq]uota failure\b|exceeds the allowed maximum of",
       0.92, ERROR, "a quota or limit is exhausted",
       "fixture:quota-aiplatform-429-loopback.txt"),
    _p("quota",
       r"ResourceLimitExceeded|account-level service limit|LimitExceededException", 0.95,
       ERROR, "AWS service limit reached",
       "dev:quota-sagemaker-python-sdk-35"),
    _p("quota", r"stayed QUEUED for \d+ ?s", 0.85, ERROR,
       "job never left QUEUED: Vertex waits for accelerator capacity or quota",
       "code:trainguard/launch/queueing.py"),
    _p("quota", r"RESOURCE_EXHAUSTED|\bResourceExhausted\b", 0.55, ERROR,
       "RESOURCE_EXHAUSTED (a quota or a rate limit)",
       "fixture:device_oom-xla-tpu-hbm.txt"),
    _p("quota",
       r"TooManyRequests\b|429(?<!\d429)(?!\d).{0,80}?(?i:too many requests|rate limit)"
       r"|ThrottlingException|Rate exceeded\b", 0.75,
       ERROR, "a quota or API rate limit",
       "fixture:quota-aiplatform-429-loopback.txt"),
    # --- capacity: the project has quota, the zone has no free machines -------------------------
    _p("capacity",
       r"ZONE_RESOURCE_POOL_EXHAUSTED|STOCKOUT\b|reason: resource_availability", 0.9, ERROR,
       "the zone has no free machines of that type (stockout)",
       "dev:capacity-ai-on-gke-849"),
    _p("capacity",
       r"does not have enough(?: resources available to fulfill|\s*$)"
       r"|[Rr]esources are insufficient in (?:region|zone)|no more capacity in the zone",
       0.9, ERROR, "the zone or region has no free capacity for that machine",
       "dev:capacity-dsub-216"),
    _p("capacity",
       r"Insufficient(?:Instance)?Capacity|CapacityError\b|do not have sufficient \S+ capacity"
       r"|[Ii]nsufficient capacity|[Uu]nable to provision requested [^\n]{0,40}capacity",
       0.9, ERROR, "the cloud has no capacity for that instance type now",
       "dev:capacity-amazon-sagemaker-feedback-99"),
    _p("capacity",
       r"AllocationFailed\b|Allocation failed\. (?:We do not|Please try)"
       r"|is currently (?:not available|unavailable) in (?:location|the \S+ zone)"
       r"|temporarily unavailable in",
       0.85, ERROR, "Azure/GCE allocation failure: no capacity for that size there",
       "dev:capacity-aks-1272"),
    # --- device_oom: accelerator memory ---------------------------------------------------------
    _p("device_oom", r"(?i)CUDA out of memory", 0.97, ERROR, "CUDA out of memory",
       "fixture:device_oom-torch-allocator.txt"),
    _p("device_oom", r"\b(?:HIP|XPU|MPS|NPU) (?:backend )?out of memory", 0.95, ERROR,
       "accelerator out of memory",
       "dev:device_oom-gemma-tuner-multimodal-18"),
    _p("device_oom", r"torch\.(?:cuda\.)?OutOfMemoryError", 0.95, ERROR,
       "torch OutOfMemoryError",
       "fixture:device_oom-torch-allocator.txt"),
    _p("device_oom",
       r"CUDA error: out of memory|cudaErrorMemoryAllocation|[Cc]uda [Ee]rror\b[^\n]{0,60}?\(out of"
       r" memory\)|out_of_memory: CUDA error", 0.95, ERROR, "CUDA out of memory",
       "dev:device_oom-tensorrt-948"),
    # The CUDA driver API's own error, as TensorFlow and XLA print it ("failed to allocate 7.20G
    # (...) from device: CUDA_ERROR_OUT_OF_MEMORY"); "on host" is pinned host memory instead.
    _p("device_oom", r"(?<!on host: )CUDA_ERROR_OUT_OF_MEMORY", 0.9, ERROR,
       "the CUDA driver cannot allocate GPU memory",
       "dev:device_oom-tensorflow-18656"),
    _p("device_oom", r"CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED", 0.9, ERROR,
       "cuBLAS/cuDNN could not allocate GPU memory",
       "fixture:device_oom-cublas-alloc.txt"),
    _p("device_oom", r"Ran out of memory in memory space (?:hbm|vmem)|CompileTimeHbmOom", 0.97,
       ERROR, "TPU HBM exhausted (XLA)",
       "fixture:device_oom-xla-tpu-hbm.txt"),
    _p("device_oom",
       r"[Oo]ut of memory (?:while trying to )?allocat|Failed to allocate request for [\d.]+ ?\w+"
       r" \(\d+B\) on device", 0.9, ERROR, "XLA device out of memory",
       "dev:device_oom-afprofile-8"),
    _p("device_oom", r"Allocator \(GPU_\d+_bfc\) ran out of memory", 0.6, WARNING,
       "the GPU allocator ran short of memory",
       "dev:device_oom-nemos-345"),
    _TF_OOM,
    # --- host_oom: the machine's RAM ------------------------------------------------------------
    _p("host_oom", r"ran out[- ]of[- ]memory and exited with a non-zero status of 9", 0.95, EXIT,
       "Vertex: the replica ran out of host memory and was killed (SIGKILL)",
       "fixture:host_oom-ai-platform-status9.txt"),
    _p("host_oom", r"non-zero status of 137\b", 0.85, EXIT,
       "exit status 137: SIGKILL, usually the host's out-of-memory killer",
       "fixture:host_oom-vertex-137.txt"),
    _p("host_oom", _EXIT + r"(?:137|-9)\b", 0.8, EXIT,
       "exit status 137: SIGKILL, usually the host's out-of-memory killer",
       "fixture:host_oom-shell-sigkill-local.txt"),
    # Kubernetes' "OOMKilled", runc's "container init was OOM-killed", Slurm's "OOM Killed".
    _p("host_oom", r"(?i:oom[- ]?killed)", 0.9, EXIT, "OOMKilled",
       "dev:host_oom-azure-databricks-operator-62"),
    _p("host_oom", r"^(?:\S+: )?(?:line \d+: )?\s*(?:\d+\s+)?\**Killed\b", 0.75, EXIT,
       "the process was Killed (SIGKILL), usually for host memory",
       "fixture:host_oom-shell-sigkill-local.txt"),
    # A supervisor's word for a child killed by SIGKILL ("<-- worker 172 got signal 9", "exited
    # with 'signal 9 (SIGKILL)'"): as for exit 137, usually the kernel's out-of-memory killer.
    _p("host_oom", r"\b(?:got|with|by|received) '?signal 9\b(?!\d)", 0.7, EXIT,
       "a process was killed by signal 9 (SIGKILL), usually for host memory",
       "dev:host_oom-amazon-ecs-agent-2467"),
    _p("host_oom", r"Signal 9 \(SIGKILL\) received by PID", 0.75, EXIT,
       "torchrun: a worker got SIGKILL, usually for host memory",
       "https://github.com/pytorch/pytorch/blob/main/torch/distributed/elastic/multiprocessing/"
       "errors/__init__.py"),
    _p("host_oom", r"DataLoader\b[^\n]{0,60}?killed by signal: (?:Killed|Bus error)", 0.9, ERROR,
       "a DataLoader worker was killed (host memory or /dev/shm)",
       "fixture:host_oom-dataloader-killed-local.txt"),
    _p("host_oom", r"DataLoader worker \(pid\(s\) [^)]*\) exited unexpectedly", 0.65, ERROR,
       "a DataLoader worker died (host memory or /dev/shm)",
       "fixture:host_oom-dataloader-killed-local.txt"),
    _p("host_oom", r"insufficient shared memory|out of shared memory", 0.85, ERROR,
       "data-loader workers exhausted shared memory (/dev/shm)",
       "dev:host_oom-pytorchocr-137"),
    _p("host_oom", r"(?<!\w)MemoryError\b", 0.8, ERROR, "Python MemoryError: host RAM exhausted",
       "fixture:host_oom-memoryerror-local.txt"),
    # C++'s allocation failure (a framework's native code, a data loader): host memory. RMM's
    # "std::bad_alloc: out_of_memory: CUDA error" names the GPU and is matched under device_oom.
    _p("host_oom", r"\bstd::bad_alloc\b", 0.8, ERROR,
       "C++ could not allocate host memory (std::bad_alloc)",
       "dev:host_oom-ssd-tensorflow-8"),
    _p("host_oom", r"Unable to allocate [\d.]+ \w+ for an array", 0.85, ERROR,
       "NumPy could not allocate host memory",
       "fixture:host_oom-numpy-alloc-local.txt"),
    _p("host_oom", r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)", 0.9,
       ERROR, "torch could not allocate host memory",
       "fixture:host_oom-torch-cpu-alloc-local.txt"),
    _p("host_oom", r"Cannot allocate memory", 0.75, ERROR, "ENOMEM: host memory exhausted",
       "fixture:host_oom-torch-cpu-alloc-local.txt"),
    _p("host_oom", r"java\.lang\.OutOfMemoryError", 0.8, ERROR, "JVM heap exhausted",
       "https://docs.oracle.com/javase/8/docs/api/java/lang/OutOfMemoryError.html"),
    _p("host_oom",
       r"Out of memory: Kill(?:ed)? process|oom-kill|invoked oom-killer|Killed process \d+ \(",
       0.9, ERROR, "the kernel's out-of-memory killer",
       "dev:host_oom-platform-resource-manager-42"),
    _p("host_oom", r"Detected \d+ oom[-_]kill event|: task \d+: Out Of Memory", 0.9, ERROR,
       "Slurm: the job's cgroup ran out of memory",
       "dev:host_oom-pybnf-118"),
    # Slurm's own memory accounting: the step is killed over its --mem limit (the "at some point"
    # form is also printed for steps that finished, so alone it is only a hint).
    _p("host_oom",
       r"exceeded memory limit \([\d.]+ ?> ?[\d.]+\), being killed"
       r"|Exceeded job memory limit(?! at some point)",
       0.9, ERROR, "Slurm killed the job step over its memory limit",
       "dev:host_oom-openbabel-2657"),
    _p("host_oom", r"Exceeded (?:job|step) memory limit at some point", 0.55, WARNING,
       "Slurm saw the step exceed its memory limit",
       "dev:host_oom-geofetch-13"),
    # Ray's memory monitor kills workers when the node's host memory passes its threshold.
    _p("host_oom",
       r"Task was killed due to the node running low on memory|killed due to memory pressure \(OOM\)",
       0.9, ERROR, "Ray killed a worker: the node ran low on host memory",
       "dev:host_oom-flingbot-11"),
    _p("host_oom", r"ray-oom-prevention", 0.75, ERROR,
       "Ray's out-of-memory message: the node ran low on host memory",
       "dev:host_oom-search-r1-45"),
    _p("host_oom", r"[Ss]ession crashed after using all available RAM", 0.9, ERROR,
       "Colab: the runtime ran out of host RAM",
       "dev:host_oom-ftcp-8"),
    _p("host_oom", r"DataLoader worker \(pid[^)]*\) is killed by signal: Terminated", 0.7, ERROR,
       "a DataLoader worker was terminated (usually host memory)",
       "dev:host_oom-mmsegmentation-2085"),
    _p("host_oom", r"The node was low on resource: memory", 0.85, ERROR,
       "Kubernetes evicted the pod: the node ran out of memory",
       "dev:host_oom-cosmos-operator-185"),
    # The scheduler's admission refusal: the node has no memory left for the pod (reason
    # OutOfmemory).
    _p("host_oom", r"didn'{0,2}t have enough resource: memory", 0.85, ERROR,
       "Kubernetes: the node had no memory left for the pod",
       "dev:host_oom-gitpod-8463"),
    # Windows' ERROR_COMMITMENT_LIMIT (1455): RAM and page file are both used up.
    _p("host_oom", r"paging file is too small for this operation to complete", 0.85, ERROR,
       "Windows ran out of committable memory (RAM and page file)",
       "dev:host_oom-tqdm-1467"),
    _p("host_oom", r"OOM when allocating tensor.*device:CPU", 0.9, ERROR,
       "TensorFlow host out of memory",
       "dev:host_oom-darkflow-873"),
    # TensorFlow 1 names the op's device on the node line under the OOM
    # ("[[Node: Conv2D_2 = Conv2D[..., _device="/job:localhost/replica:0/task:0/cpu:0"](...)]]"),
    # not on the OOM line; the first such line below it says which memory ran out. Not
    # "recv_device=" / "send_device=": a transfer's ends are not where the op ran.
    _detail(_TF_OOM, 3, "host_oom",
            r'(?<!\w)_device="/job:[^"/]+/replica:\d+/task:\d+/(?:device:)?(?i:cpu):\d+"', 0.9,
            "TensorFlow host out of memory (the op's node, on the line below, runs on the CPU)",
            "dev:host_oom-tensorflow-576"),
    _detail(_TF_OOM, 3, "device_oom",
            r'(?<!\w)_device="/job:[^"/]+/replica:\d+/task:\d+/(?:device:)?(?i:gpu):\d+"', 0.95,
            "TensorFlow GPU out of memory (the op's node, on the line below, runs on the GPU)",
            "dev:device_oom-custom-object-detection-12"),
    # --- input_pipeline: the data loader cannot keep up -----------------------------------------
    _p("input_pipeline",
       r"DataLoader timed out after \d+ seconds|Worker timed out after \d+ seconds"
       r"|Prefetcher thread timed out", 0.8, ERROR,
       "the data loader did not deliver a batch in time",
       "dev:input_pipeline-dgl-4509"),
    # --- non_finite: NaN / Inf ------------------------------------------------------------------
    _p("non_finite",
       r"(?i)(?<!best )(?<!min )(?<!lowest )\b(?!(?:best|min|lowest)_)(?:\w+_)?loss(?:es)?\b"
       r"['\"\])]?(?: is)?\s*[:=]?\s*(?:tensor\()?[-+]?(?:nan|inf)\b", 0.75, WARNING,
       "the loss is NaN/Inf",
       "fixture:non_finite-clip-grad-local.txt"),
    _p("non_finite", r"Invalid loss, terminating training", 0.95, ERROR,
       "Keras TerminateOnNaN stopped training",
       "fixture:non_finite-keras-terminateonnan.txt"),
    _p("non_finite", r"The loss returned in `training_step` is", 0.95, ERROR,
       "Lightning: the training_step loss is not finite",
       "fixture:non_finite-lightning-legacy.txt"),
    _p("non_finite", r"is not finite\. Previous best value was", 0.9, ERROR,
       "Lightning EarlyStopping: the monitored metric is not finite",
       "https://github.com/Lightning-AI/pytorch-lightning/blob/master/src/lightning/pytorch/"
       "callbacks/early_stopping.py"),
    _p("non_finite", r"returned nan values in its \w+ output", 0.95, ERROR,
       "autograd anomaly detection found NaN",
       "fixture:non_finite-anomaly-pow.txt"),
    _p("non_finite", r"is non-finite, so it cannot be clipped", 0.95, ERROR,
       "the gradient norm is NaN/Inf",
       "fixture:non_finite-clip-grad-local.txt"),
    _p("non_finite", r"Detected nan and/or inf values? in", 0.9, ERROR,
       "NaN/Inf in the parameters",
       "https://github.com/Lightning-AI/pytorch-lightning/blob/master/src/lightning/pytorch/"
       "utilities/finite_checks.py"),
    _p("non_finite",
       r"(?i)loss(?<!\wloss)(?:tensor)?\b[^\n]{0,12}?\b(?:is|became|becomes) (?:inf(?:inite)?|nan)\b",
       0.9, ERROR, "the loss is NaN/Inf",
       "dev:non_finite-centermask2-9"),
    _p("non_finite", r"Tensor had (?:NaN|Inf) values", 0.9, ERROR,
       "TensorFlow CheckNumerics: a tensor is NaN/Inf",
       "dev:non_finite-chatbot-retrieval-10"),
    # A trace of TensorFlow's CheckNumerics op is printed only when the check failed: "Caused by
    # op 'CheckNumerics', defined at:" (TF 1) and "Original stack trace for 'CheckNumerics':"
    # (errors_impl.py, OpError.__str__, TF 1.14 and later) head the trace of the failing op.
    _p("non_finite", r"(?:Caused by op|Original stack trace for) '(?:[\w/]*/)?CheckNumerics\w*'", 0.85,
       ERROR, "TensorFlow CheckNumerics failed: a tensor is NaN/Inf",
       "dev:non_finite-custom-mask-rcnn-using-tensorfow-object-detection-api-11"),
    # A model's own NaN check on what it computes ("Network outputs is NAN! Stop Training").
    _p("non_finite",
       r"(?i)\b(?:outputs?|logits|predictions?) (?:is|are|became|become|becomes|contains?)"
       r" (?:inf(?:inite)?|nan)\b",
       0.85, ERROR, "the model's outputs are NaN/Inf",
       "dev:non_finite-jointnlt-18"),
    # DeepXDE's training table ("Step  Train loss  Test loss  Test metric"): a row of [nan].
    _p("non_finite", r"^\d+\s+\[nan\b|^\d+\s+\[inf\b", 0.7, WARNING,
       "the loss is NaN/Inf (DeepXDE's table)",
       "dev:non_finite-deepxde-491"),
    # Python's own exception for a failed floating-point operation: JAX's debug_nans, NumPy's
    # seterr(all="raise"), fairseq's and detectron2's NaN checks all raise it.
    _p("non_finite", r"\bFloatingPointError\b", 0.8, ERROR,
       "FloatingPointError: a floating-point operation produced NaN/Inf",
       "dev:non_finite-bert-nmt-47"),
    _p("non_finite", r"NanLossDuringTrainingError|NaN loss during training", 0.95, ERROR,
       "TensorFlow's NanTensorHook: the loss is NaN",
       "dev:non_finite-easyrec-24"),
    # Hugging Face Trainer's {'grad_norm': nan} and mmengine's "grad_norm: nan".
    _p("non_finite", r"(?i)\bgrad(?:ient)?_?norm\b['\"]?\s*[:=]\s*[-+]?(?:nan|inf)\b", 0.7, WARNING,
       "the gradient norm is NaN/Inf",
       "dev:non_finite-time-moe-31"),
    # DeepSpeed's dynamic loss scaler already at its floor of 1 and still overflowing.
    _p("non_finite", r"[Aa]ttempted loss scale: 1(?:\.0)?, reducing to 1(?:\.0)?\b", 0.8, WARNING,
       "fp16 loss scale stuck at its minimum: every step overflows",
       "dev:non_finite-transformers-14531"),
    _p("non_finite", r"Nan, Inf or huge value in \w+", 0.7, WARNING,
       "MuJoCo: NaN/Inf in the simulation (unstable controls)",
       "dev:non_finite-brax-501"),
    _p("non_finite", r"invalid value \((?:nan|inf)\) encountered", 0.9, ERROR,
       "JAX debug_nans: an operation produced NaN/Inf",
       "dev:non_finite-jax-25299"),
    _p("non_finite",
       r"[Mm]inimum loss scale|loss scale already at minimum|FloatingPointError: Minimum loss",
       0.9, ERROR, "fp16 loss scale collapsed: the loss is exploding",
       "dev:non_finite-bert-nmt-47"),
    _p("non_finite", r"loss scale to:? (?:0\.\d+|[\d.]+e-\d+)\b", 0.75, WARNING,
       "fp16 loss scale driven below 1: gradients overflow step after step",
       "dev:non_finite-fairseq-512"),
    _p("non_finite", r"NaN or Inf found in input tensor", 0.75, WARNING,
       "NaN/Inf values were logged",
       "dev:non_finite-dreamfields-torch-7"),
    # --- distributed_init: rendezvous, collectives ----------------------------------------------
    _p("distributed_init", r"Timed out after \d+ seconds waiting for (?:clients|workers)", 0.95,
       ERROR, "not every worker joined the rendezvous: world size or worker count mismatch",
       "fixture:distributed_init-diststore-clients.txt"),
    _p("distributed_init", r"\bDistStoreError\b", 0.9, ERROR,
       "torch.distributed store (rendezvous) error",
       "fixture:distributed_init-diststore-clients.txt"),
    _p("distributed_init", r"\bDistNetworkError\b", 0.9, ERROR,
       "torch.distributed cannot reach the chief (MASTER_ADDR:MASTER_PORT)",
       "fixture:distributed_init-no-chief-local.txt"),
    _p("distributed_init", r"Watchdog caught collective operation timeout", 0.85, ERROR,
       "an NCCL collective timed out: a rank is missing or stuck",
       "fixture:distributed_init-nccl-watchdog.txt"),
    _p("distributed_init",
       r"NCCL error\b|nccl(?:Internal|System|InvalidUsage|InvalidArgument|Remote)Error"
       r"|ProcessGroupNCCL\.cpp:\d+, unhandled", 0.85,
       ERROR, "NCCL error",
       "dev:distributed_init-examples-611"),
    _p("distributed_init",
       r"Rendezvous(?:Timeout|Closed|Connection|State)Error|[Rr]endezvous (?:timed out|failed)"
       r"|to join the rendezvous",
       0.9, ERROR, "torchrun rendezvous failed",
       "dev:distributed_init-pytorch-64926"),
    _p("distributed_init", r"Gloo connectFullMesh failed|gloo/transport/\S+\] (?!.*shutdown)",
       0.8, ERROR, "Gloo could not connect the ranks",
       "dev:distributed_init-pytorch-104136"),
    # NCCL's own socket errors while its bootstrap or proxy connects the ranks (NCCL_DEBUG=INFO or
    # WARN), and the "-> N" trail of a failed init call it prints on the way out.
    _p("distributed_init",
       r"NCCL WARN (?:socketStartConnect|socketPollConnect|socketProgress|Connect to\b|Call to connect\b)"
       r"|NCCL WARN [^\n]{0,120}?"
       r"(?:Connection refused|No route to host|connection abort|Connection closed by)",
       0.85, ERROR, "NCCL cannot connect the ranks (socket)",
       "dev:distributed_init-nccl-tests-166"),
    # The same messages without NCCL's prefix: NCCL keeps its last WARN's text bare
    # (src/debug.cc, ncclLastError) and torch prints it under "Last error:". The names are NCCL's
    # socket functions (src/misc/socket.cc), so the line is NCCL's without the prefix.
    _p("distributed_init",
       r"(?<!\w)socket(?:StartConnect|PollConnect|ProgressOpt|Progress): "
       r"(?:Connect to|Call to|Connection closed|exceeded)",
       0.85, ERROR, "NCCL cannot connect the ranks (socket; its last error)",
       "https://github.com/NVIDIA/nccl/blob/v2.23.4-1/src/misc/socket.cc"),
    # NCCL 2.2 to 2.4 print no "NCCL" before INFO/WARN and name .cu files ("bootstrap.cu:28 -> 2").
    _p("distributed_init", r"INFO (?:bootstrap\.c[cu]|init\.c[cu]):\d+ -> [1-9]", 0.75, ERROR,
       "NCCL's communicator init failed (its bootstrap returned an error)",
       "dev:distributed_init-nccl-tests-166"),
    # Older NCCL's socket layer (include/socket.h) warns with no "NCCL" prefix; every WARN there
    # is a failed socket call ("Call to connect failed : Connection timed out").
    _p("distributed_init", r"include/socket\.h:\d+ (?:NCCL )?WARN\b", 0.8, ERROR,
       "NCCL cannot connect the ranks (socket)",
       "dev:distributed_init-nccl-tests-15"),
    _p("distributed_init", r"Bootstrap Root : rank \d+ of \d+ ranks has already checked in", 0.9, ERROR,
       "NCCL saw a rank check in twice: the launch's ranks disagree",
       "dev:distributed_init-pytorch-lightning-14986"),
    _p("distributed_init",
       r"Timed out initializing process group in store based barrier"
       r"|via c10d key-value store[^\n]{0,80}?got error|(?:RuntimeError|DistStoreError): Wait timeout\b",
       0.9, ERROR, "not every rank reached the process group's store (rendezvous)",
       "dev:distributed_init-gloo-148"),
    _p("distributed_init", r"Waiting in store based barrier to initialize process group", 0.75, WARNING,
       "not every rank has reached the process group's store barrier",
       "dev:distributed_init-yolov5-4574"),
    _p("distributed_init", r"\[c10d\] The client socket has failed to connect to", 0.7, WARNING,
       "a worker cannot reach the rendezvous address yet",
       "dev:distributed_init-pippy-158"),
    _p("distributed_init", r"Launching horovodrun task function was not successful", 0.85, ERROR,
       "horovodrun cannot start its tasks on the other hosts",
       "dev:distributed_init-horovod-1338"),
    # horovodrun's driver gives up on the other hosts' tasks registering ("Timed out waiting for
    # tasks to start. Please check connectivity between servers."; horovod/runner/launch.py).
    _p("distributed_init",
       r"Timed out waiting for tasks to start|Please check connectivity between servers", 0.85,
       ERROR, "horovodrun timed out waiting for the other hosts' tasks to register",
       "https://github.com/horovod/horovod/blob/master/horovod/runner/launch.py"),
    _p("distributed_init", r"Failed to connect to remote host|failed to connect to all addresses", 0.7,
       WARNING, "a TensorFlow worker cannot reach another task of the cluster (gRPC)",
       "dev:distributed_init-tensorflow-17852"),
    _p("distributed_init",
       r"environment variable (?:MASTER_ADDR|MASTER_PORT|RANK|WORLD_SIZE) expected, but not set",
       0.95, ERROR, "the rendezvous environment is incomplete",
       "fixture:distributed_init-master-addr-unset-local.txt"),
    _p("distributed_init", r"The server socket has failed to listen on any local network", 0.85,
       ERROR, "the chief cannot listen on MASTER_PORT",
       "dev:distributed_init-dlrover-443"),
    _p("distributed_init", r"Address already in use|errno: 98\b", 0.7, ERROR,
       "the rendezvous port is already taken (MASTER_PORT)",
       "dev:distributed_init-dlrover-443"),
    _p("distributed_init",
       r"[Bb]arrier timed out|CoordinationService/(?:RegisterTask|Barrier|Heartbeat)"
       r"|[Cc]oordination service\b[^\n]{0,40}?(?:error|failed)", 0.85, ERROR,
       "the JAX/TF coordination service timed out: not every process registered",
       "dev:distributed_init-llama-2-jax-20"),
    # The JAX/TF coordination service stopped hearing from a task (openxla/xla's
    # coordination_service.cc: "Task <name> heartbeat timeout. This indicates that the remote task
    # has failed, got preempted, or crashed unexpectedly."): an earlier error on that task wins.
    _p("distributed_init", r"heartbeat timeout\. This indicates that the remote task", 0.75, ERROR,
       "the JAX/TF coordination service lost a task's heartbeat: a process died, hung or was cut off",
       "https://github.com/openxla/xla/blob/main/xla/tsl/distributed_runtime/coordination/"
       "coordination_service.cc"),
    _p("distributed_init",
       r"set by init_process_group|[Ww]orld[ _]size mismatch"
       r"|Default process group has not been initialized"
       r"|Collective ops must be configured at program startup", 0.85, ERROR,
       "the process group's ranks and world size disagree with the launch",
       "dev:distributed_init-colossalai-2910"),
    _p("distributed_init",
       r"ssh[: ][^\n]{0,80}?(?:Connection refused|exit status 255)", 0.8, ERROR,
       "the multi-node launcher cannot reach a host over ssh",
       "dev:distributed_init-deepspeed-4907"),
    _p("distributed_init",
       r"The client socket has timed out after \S+ while trying to connect to"
       r"|TCP client failed to connect", 0.6, WARNING,
       "a worker cannot reach the chief yet",
       "fixture:distributed_init-no-chief-local.txt"),
    # Seen only in a thread of the corpus' test part (this pattern is older than the corpus).
    _p("distributed_init", r"connect\(\) timed out\. Original timeout", 0.6, WARNING,
       "a worker cannot reach the chief's store yet",
       "https://github.com/pytorch/pytorch/issues/69197"),
    _p("distributed_init", r"\bConnection refused\b", 0.45, WARNING,
       "connection refused (is the chief reachable on MASTER_ADDR:MASTER_PORT?)",
       "dev:distributed_init-tensorflow-17852"),
    # --- preemption: the VM was taken away ------------------------------------------------------
    # Not XLA's list of what a silent task may have done ("... has failed, got preempted, or
    # crashed unexpectedly"): that line names none of them (matched under distributed_init).
    _p("preemption",
       r"(?<![Bb]e )(?<![Ii]f )(?<!not )[Pp]re-?empted\b(?!, or crashed unexpectedly)"
       r"|[Dd]ue to (?:a )?preemption|DUE TO PREEMPTION|PreemptionError", 0.85, ERROR,
       "the VM was preempted",
       "fixture:preemption-gce-instance.txt"),
    _p("preemption",
       r"termination is imminent|[Pp]re-?emption (?:notice|warning)|[Ss]pot (?:[Ii]nstance )?[Ii]nterrupt",
       0.85, ERROR, "a Spot/preemptible reclaim notice",
       "fixture:preemption-gcp-metadata.txt"),
    _p("preemption",
       r"(?:in response to|due to) (?:imminent )?node shutdown|Node is shutting\b", 0.8,
       ERROR, "the node shut down (Spot reclaim or maintenance)",
       "dev:preemption-kubernetes-102820"),
    # Seen only in a thread of the corpus' test part (this pattern is older than the corpus).
    _p("preemption", r"Host EC2 (?:instance )?Terminated", 0.7, ERROR,
       "AWS Batch: the host EC2 instance was terminated (Spot reclaim)",
       "https://github.com/azavea/raster-vision-aws/issues/15"),
    _p("preemption", r"ShutdownHook: lame workers found", 0.6, ERROR,
       "TPU workers were lost mid-training (preemptible TPU)",
       "dev:preemption-t5-japanese-1"),
    _p("preemption",
       r"Received SIGTERM|got signal: 15\b|Received 15 death signal|Signals\.SIGTERM", 0.75,
       ERROR, "the process received SIGTERM (sent on preemption, maintenance or cancellation)",
       "fixture:preemption-torchrun-sigterm-local.txt"),
    _p("preemption", r"(?i)\bmaintenance event\b", 0.6, WARNING, "a host maintenance event",
       "https://cloud.google.com/compute/docs/instances/host-maintenance-overview"),
    # Vertex's replica exit line, as in fixtures container-vertex-exit127 and host_oom-vertex-137;
    # 143 is 128 + SIGTERM, what a replica gets when its VM is taken away.
    _p("preemption", r"non-zero status of 143\b", 0.6, EXIT, "exit status 143: SIGTERM",
       "https://cloud.google.com/vertex-ai/docs/training/understanding-training-service"),
    _p("preemption", _EXIT + r"(?:143|-15)\b", 0.55, EXIT, "exit status 143: SIGTERM",
       "fixture:preemption-shell-sigterm-local.txt"),
    # The shell's word for a job it saw die of SIGTERM ("./run.sh: line 3: 12 Terminated  python
    # ..."). Not kubectl's "State: Terminated" / "Last State: Terminated": every ended container
    # is in that state, its Reason line says why (pkg/describe/describe.go, describeStatus).
    _p("preemption",
       r"^(?!\s*(?:Last )?State:)(?:\S+: )?(?:line \d+: )?\s*(?:\d+\s+)?Terminated\b", 0.55, EXIT,
       "the process was Terminated (SIGTERM)",
       "dev:preemption-kubernetes-104798"),

    # --- failures outside the table's classes: fatal, but no trainguard class --------------------
    # An earlier one of these makes later class signals read as consequences (see classify).
    _p("unknown", r"DUE TO TIME LIMIT", 0.5, ERROR, "the scheduler's wall-time limit",
       "https://github.com/SchedMD/slurm/blob/master/src/slurmd/slurmstepd/req.c"),
    # Slurm cancels a step for a time limit, a memory limit, a user's scancel or a preemption; the
    # cancel line alone names none of them: slurmstepd prints "DUE TO PREEMPTION" / "DUE TO TIME
    # LIMIT" when it knows (src/slurmd/slurmstepd/req.c), and those are matched above.
    _p("unknown", r"CANCELLED AT \S+ \*\*\*", 0.3, EXIT, "the scheduler cancelled the job step",
       "dev:host_oom-openbabel-2657"),
    _p("unknown", r"device-side assert triggered|Assertion `t >= 0 && t < n_classes` failed", 0.5,
       ERROR, "a CUDA device-side assert (labels out of range)",
       "dev:unknown-person-reid-baseline-pytorch-372"),
    _p("unknown",
       r"Error\(s\) in loading state_dict|size mismatch for \S+: copying a param", 0.5, ERROR,
       "the checkpoint does not match the model",
       "dev:unknown-ai-imu-dr-75"),
    _p("unknown",
       r"Expected all tensors to be on the same device|shapes cannot be multiplied", 0.5, ERROR,
       "a device-placement or shape bug in the training code",
       "dev:unknown-conceptexpress-5"),
    # Not Ray's list of what might have killed a worker ("… due to SIGSEGV or other unexpected
    # errors"): that line names no cause.
    _p("unknown", r"killed by signal: Segmentation fault|SIGSEGV\b(?! or other unexpected)", 0.5, ERROR,
       "a segmentation fault",
       "dev:unknown-db-94"),
    # --- generic failure signals: a failure, but no class ---------------------------------------
    _p("unknown", r"Traceback \(most recent call last\)", 0.2, EXIT, "a Python traceback",
       "fixture:container-entrypoint-missing-local.txt"),
    _p("unknown", r"exited with a non-zero status of [1-9]\d*", 0.2, EXIT,
       "a replica exited with a non-zero status",
       "fixture:container-vertex-exit127.txt"),
    _p("unknown", _EXIT + r"-?[1-9]\d*\b", 0.2, EXIT, "a non-zero exit status",
       "fixture:container-command-not-found-local.txt"),
    _p("unknown", r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b", 0.2, EXIT, "an exception",
       "fixture:container-entrypoint-missing-local.txt"),
    _p("unknown", r"JOB_STATE_FAILED|\bFAILED\b", 0.2, EXIT, "the job failed",
       "dev:distributed_init-pseco-15"),
)

# fmt: on
