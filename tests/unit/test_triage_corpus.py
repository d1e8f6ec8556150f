"""Triage on 528 real error texts from public issue threads, against the goals of issues 13 and 29.

The corpus (tests/fixtures/triage/corpus, README.md there) is labelled by the cause each thread
found and split by a hash of the thread's URL; patterns were written against ``dev`` and ``test``
only measures. ``pytest -s`` prints the per-class table (also: tests/benchmarks/bench_triage_corpus.py).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.triage_corpus import (
    CORPUS_DIR,
    GOAL_ACCURACY,
    GOAL_WRONG_CLASS,
    SPLITS,
    format_score,
    load,
    score,
    split_of,
)
from trainguard import failure_classes
from trainguard.triage import classify

# Every class triage can name from a failed job's output; ``unknown`` holds healthy logs and
# failures no class covers.
TRIAGED = (
    "container",
    "permission",
    "quota",
    "capacity",
    "device_oom",
    "host_oom",
    "input_pipeline",
    "non_finite",
    "distributed_init",
    "preemption",
    "unknown",
)
FRAMEWORKS = (
    "pytorch",
    "tensorflow",
    "keras",
    "jax",
    "deepspeed",
    "horovod",
    "lightning",
    "huggingface",
    "kubernetes",
    "kubeflow",
    "vertex",
    "sagemaker",
    "azureml",
    "slurm",
)


@pytest.fixture(scope="module")
def corpus() -> dict[str, list]:
    return {split: load(split) for split in SPLITS}


# --- the corpus itself --------------------------------------------------------------------------


def test_the_corpus_is_large_and_covers_every_class_and_platform(corpus):
    entries = corpus["dev"] + corpus["test"]
    classes = Counter(e.failure_class for e in entries)
    frameworks = Counter(e.framework for e in entries)

    assert len(entries) >= 300
    assert set(TRIAGED) <= set(classes), set(TRIAGED) - set(classes)
    assert all(classes[c] >= 20 for c in TRIAGED if c not in ("input_pipeline", "preemption"))
    assert set(FRAMEWORKS) <= set(frameworks), set(FRAMEWORKS) - set(frameworks)


def test_each_entry_is_real_program_output_with_its_source(corpus):
    for entries in corpus.values():
        for entry in entries:
            assert entry.failure_class in failure_classes.CLASS_NAMES, entry.id
            # A GitHub issue or pull-request thread, or (a few) a public page of program output.
            assert entry.source.startswith("https://"), entry.id
            assert entry.text.strip() and len(entry.text.encode()) <= 4096, entry.id
            assert entry.why, entry.id


def test_each_entry_sits_in_the_part_its_source_hashes_to(corpus):
    for split, entries in corpus.items():
        for entry in entries:
            assert split_of(entry.source) == split, entry.id
    dev_sources = {e.source for e in corpus["dev"]}
    assert not dev_sources & {e.source for e in corpus["test"]}


def test_ids_are_unique_and_texts_are_not_repeated():
    ids, texts = [], []
    for split in SPLITS:
        with open(CORPUS_DIR / f"{split}.jsonl", encoding="utf-8") as handle:
            for line in handle:
                raw = json.loads(line)
                ids.append(raw["id"])
                texts.append(raw["text"])
    assert len(ids) == len(set(ids))
    assert len(texts) == len(set(texts))


# --- the goals ----------------------------------------------------------------------------------


def test_the_test_part_rarely_names_a_wrong_class(corpus):
    result = score(corpus["test"], classify)
    print("\n" + format_score(result, "triage on the corpus' test part (never tuned on)"))

    assert result.wrong_class_rate <= GOAL_WRONG_CLASS, format_score(result)


def test_the_test_part_meets_the_accuracy_goal(corpus):
    result = score(corpus["test"], classify)

    assert result.accuracy >= GOAL_ACCURACY, format_score(result)


# What the test part scores today (corpus README.md): no change may take it lower.
MEASURED_TEST_ACCURACY = 236 / 248


def test_the_test_part_never_falls_below_what_it_scores_today(corpus):
    result = score(corpus["test"], classify)

    assert result.accuracy >= MEASURED_TEST_ACCURACY - 1e-9, format_score(result)


def test_the_dev_part_stays_as_good(corpus):
    result = score(corpus["dev"], classify)
    print("\n" + format_score(result, "triage on the corpus' dev part (patterns written against it)"))

    assert result.accuracy >= GOAL_ACCURACY, format_score(result)
    assert result.wrong_class_rate <= 2 * GOAL_WRONG_CLASS, format_score(result)


# The classes whose test-part figures are below 0.9 (corpus README.md); strict, so the mark goes
# once one holds.
BELOW_THE_GOAL = {
    "preemption": "5 preemption texts in the test part; recall or precision is below 0.9",
    "container": "14 container texts in the test part; 12 are named (recall 0.86)",
}


@pytest.mark.parametrize(
    "cls",
    [
        pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=BELOW_THE_GOAL[c]))
        if c in BELOW_THE_GOAL
        else c
        for c in TRIAGED
        if c != "unknown"
    ],
)
def test_every_class_is_found_and_never_mistaken_on_the_test_part(corpus, cls):
    result = score(corpus["test"], classify)

    assert (result.recall(cls) or 0.0) >= 0.9, format_score(result)
    assert (result.precision(cls) or 0.0) >= 0.9, format_score(result)


# --- what the corpus taught, on texts a user sees -----------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # capacity, not quota: the zone has no machines, the project has quota.
        (
            "ERROR: (gcloud.compute.instances.create) Could not fetch resource:\n"
            " - code: ZONE_RESOURCE_POOL_EXHAUSTED",
            "capacity",
        ),
        (
            "botocore.exceptions.ClientError: An error occurred (InsufficientInstanceCapacity) when "
            "calling the RunInstances operation: Insufficient capacity.",
            "capacity",
        ),
        (
            '"code": "AllocationFailed", "message": "Allocation failed. We do not have sufficient '
            'capacity for the requested VM size in this region."',
            "capacity",
        ),
        # quota from other clouds and orchestrators; a quota message beats the 403 it comes in.
        (
            "ResourceLimitExceeded: An error occurred (ResourceLimitExceeded) when calling the "
            "CreateTrainingJob operation: The account-level service limit 'ml.p3.2xlarge for "
            "training job usage' is 0 Instances",
            "quota",
        ),
        (
            'Insufficient regional quota to satisfy request for resource: "CPUS".",'
            '"status":"PERMISSION_DENIED","statusMessage":"Forbidden"',
            "quota",
        ),
        # an accelerator OOM that says RESOURCE_EXHAUSTED is device memory, not quota.
        (
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request "
            "for 2.99GiB (3206250496B) on device ordinal 0",
            "device_oom",
        ),
        # host memory as people see it.
        (
            "slurmstepd: error: Detected 1 oom_kill event in StepId=11300781.0. Some of the step "
            "tasks have been OOM Killed.",
            "host_oom",
        ),
        ("The node was low on resource: memory.", "host_oom"),
        (
            "ERROR: Unexpected bus error encountered in worker. This might be caused by "
            "insufficient shared memory (shm).",
            "host_oom",
        ),
        # distributed start-up.
        (
            "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. "
            "Barrier_id: PjRT_Client_Connect.",
            "distributed_init",
        ),
        ("RuntimeError: Address already in use", "distributed_init"),
        # NaN as frameworks print it.
        ("FloatingPointError: Loss became infinite or NaN at iteration=27!", "non_finite"),
        ("InvalidArgumentError: LossTensor is inf or nan : Tensor had NaN values", "non_finite"),
        # preemption as schedulers word it.
        ("AzureMLCompute job failed. PreemptionError: Nodes of this job got pre-empted.", "preemption"),
        ("Message:      Pod was terminated in response to imminent node shutdown.", "preemption"),
        # an image that is not there is the container's; healthy fp16 warnings are nothing.
        (
            "docker: Error response from daemon: manifest for gcr.io/p/i:r1.9 not found: manifest unknown",
            "container",
        ),
        ("Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 131072.0", "unknown"),
    ],
)
def test_real_wordings_are_named_their_class(text: str, expected: str):
    assert classify(text).failure_class == expected


# Lines copied from the dev part's entries (named beside each) that the grown corpus taught.
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # host memory as Slurm, Ray, Colab and the DataLoader report it.
        (
            "slurmstepd-falkor7: error: Step 1141810.0 exceeded memory limit (52917772 > 20971520), "
            "being killed",
            "host_oom",
        ),  # host_oom-openbabel-2657
        (
            "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
            "host_oom",
        ),  # host_oom-flingbot-11
        ("Workers (tasks / actors) killed due to memory pressure (OOM)", "host_oom"),  # openrlhf-198
        (
            "> Your session crashed after using all available RAM. If you are interested in access to "
            "high-RAM runtimes, you may want to check out [Colab Pro]",
            "host_oom",
        ),  # host_oom-ftcp-8
        (
            "RuntimeError: DataLoader worker (pid 8102) is killed by signal: Terminated.",
            "host_oom",
        ),  # host_oom-mmsegmentation-2085
        # Slurm's "at some point" is printed for steps that finished too: alone, a hint, no verdict.
        ("slurmstepd: error: Exceeded job memory limit at some point.", "unknown"),  # geofetch-13
        # non-finite values across frameworks.
        (
            "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. "
            "Try lowering the learning rate, using gradient clipping or increasing the batch size.",
            "non_finite",
        ),  # non_finite-bert-nmt-47
        ("    raise NanLossDuringTrainingError", "non_finite"),  # non_finite-easyrec-24
        (
            "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 5e-05, 'epoch': 0.54}",
            "non_finite",
        ),  # non_finite-time-moe-31
        (
            "[2021-11-27 00:36:54,800] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 "
            "Skipping step. Attempted loss scale: 1, reducing to 1",
            "non_finite",
        ),  # non_finite-transformers-14531
        # distributed start-up: NCCL sockets and bootstrap, the c10d store, horovodrun.
        (
            "ubuntu:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to "
            "10.0.0.2<45763> failed : Software caused connection abort",
            "distributed_init",
        ),  # distributed_init-nccl-tests-166
        (
            "hpc-25-14:18569:18835 [0] bootstrap.cc:131 NCCL WARN Bootstrap Root : rank 1 of 8 ranks "
            "has already checked in",
            "distributed_init",
        ),  # distributed_init-pytorch-lightning-14986
        (
            "Waiting in store based barrier to initialize process group for rank: 0, key: "
            "store_based_barrier_key:1 (world_size=4, worker_count=8, timeout=0:30:00)",
            "distributed_init",
        ),  # distributed_init-yolov5-4574
        ("Launching horovodrun task function was not successful:", "distributed_init"),  # horovod-1338
        # a node going away, in Kubernetes' and Argo's words.
        ("Message:        Node is shutting, evicting pods", "preemption"),  # kubernetes-102820
        (
            "WorkflowNodeFailed\nPod was terminated due to imminent node shutdown",
            "preemption",
        ),  # preemption-argo-workflows-9880
        # Ray lists what might have killed a worker; that list names no segmentation fault.
        (
            "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a "
            "connection error code 2. End of file. There are some potential root causes. (1) The "
            "process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force "
            "is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected "
            "errors.\nSome of the step tasks have been OOM Killed",
            "host_oom",
        ),  # host_oom-openrlhf-1139
        # TensorFlow 1 names the device of an OOM on the op's node line below it.
        (
            "W tensorflow/core/common_runtime/executor.cc:1076] 0x579eaa0 Compute status: Resource "
            "exhausted: OOM when allocating tensor with shapedim { size: 5000 }\n"
            '\t [[Node: Conv2D_2 = Conv2D[T=DT_FLOAT, padding="SAME", strides=[1, 1, 1, 1], '
            'use_cudnn_on_gpu=true, _device="/job:localhost/replica:0/task:0/cpu:0"](Cons',
            "host_oom",
        ),  # host_oom-tensorflow-576
        (
            "ResourceExhaustedError (see above for traceback): OOM when allocating tensor with "
            "shape[1,1024,51,38]\n"
            "\t [[Node: FirstStageFeatureExtractor/BatchNorm/FusedBatchNorm = FusedBatchNorm["
            'T=DT_FLOAT, _device="/job:localhost/replica:0/task:0/device:GPU:0"](Conv2D)]]\n'
            "\t [[Node: Reshape_24/_1255 = _HostRecv[client_terminated=false, "
            'recv_device="/job:localhost/replica:0/task:0/device:CPU:0", '
            '_device="/job:localhost/replica:0/task:0/device:CPU:0"]()]]',
            "device_oom",
        ),  # device_oom-custom-object-detection-12: the first node line below decides
        # A traceback pasted as one line goes on with the error after the frame.
        (
            'File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", '
            "line 1906, in broadcast 10: work = default_pg.broadcast([tensor], opts) 10: "
            "torch.distributed.DistBackendError: NCCL error in: /opt/conda/conda-bld/pytorch_1696588393313"
            "/work/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1331, unhandled system error",
            "distributed_init",
        ),  # distributed_init-awsome-distributed-ai-192
        # SIGKILL as supervisors and launchers report it; C++'s allocation failure.
        ("stress: FAIL: [168] (425) <-- worker 172 got signal 9", "host_oom"),  # amazon-ecs-agent-2467
        (
            "] exits with return code = -9",
            "host_oom",
        ),  # host_oom-anomalygpt-43 (DeepSpeed's launcher)
        (
            "terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc",
            "host_oom",
        ),  # host_oom-ssd-tensorflow-8
    ],
)
def test_wordings_the_grown_dev_part_taught_are_named_their_class(text: str, expected: str):
    assert classify(text).failure_class == expected


def test_a_wall_time_limit_before_a_sigterm_is_not_a_preemption():
    text = (
        "slurmstepd: error: *** STEP 55595933.0 ON n1 CANCELLED AT 2025-01-10T15:27:25 DUE TO "
        "TIME LIMIT ***\n[rank: 0] Received SIGTERM: 15\n"
    )
    diagnosis = classify(text)

    assert diagnosis.failure_class == "unknown"
    assert diagnosis.confidence < 0.3
    assert "wall-time limit" in diagnosis.reason
    assert "consequences" in diagnosis.reason
    assert "DUE TO TIME LIMIT" in diagnosis.evidence


def test_a_code_bug_before_the_collective_timeout_it_causes_is_not_a_distributed_failure():
    text = (
        "RuntimeError: CUDA error: device-side assert triggered\n"
        "[rank1]:[E626 06:24:44 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE) ran for 600020 milliseconds\n"
    )

    assert classify(text).failure_class == "unknown"


def test_a_preemption_is_still_named_when_a_timeout_follows():
    text = (
        "slurmstepd: error: *** JOB 32391783 ON cn119 CANCELLED AT 2021-06-18T13:05:36 DUE TO "
        "PREEMPTION ***\n[rank: 0] Received SIGTERM: 15\n"
    )
    diagnosis = classify(text)

    assert diagnosis.failure_class == "preemption"
    assert "DUE TO PREEMPTION" in diagnosis.evidence


# --- what the programs' own sources say their words mean ----------------------------------------


def test_kubectls_terminated_container_state_is_not_a_sigterm():
    # kubectl describe prints "State:  Terminated" for every container that ended, and the reason
    # on the line below (kubernetes/kubectl, pkg/describe/describe.go, describeStatus).
    text = "State:          Terminated\n  Reason:       OOMKilled\n  Exit Code:    137\n"
    diagnosis = classify(text)

    assert diagnosis.failure_class == "host_oom"
    assert "OOMKilled" in diagnosis.evidence


def test_the_coordination_services_list_of_what_a_silent_task_may_have_done_is_not_a_preemption():
    # openxla/xla, coordination_service.cc; the line as EleutherAI/architecture-objective#26 shows it.
    line = (
        "2022-11-15 16:03:15.140058: E external/org_tensorflow/tensorflow/core/distributed_runtime/"
        "coordination/coordination_service.cc:954] /job:jax_worker/replica:0/task:37 has been set to "
        "ERROR in coordination service: UNAVAILABLE: Task /job:jax_worker/replica:0/task:37 heartbeat "
        "timeout. This indicates that the remote task has failed, got preempted, or crashed "
        "unexpectedly. [type.googleapis.com/tensorflow.CoordinationServiceError='']"
    )
    diagnosis = classify(line)

    assert diagnosis.failure_class == "distributed_init"
    assert "heartbeat" in diagnosis.reason


def test_nccls_last_error_without_its_prefix_is_still_ncclss():
    # NCCL keeps its last WARN's text bare (src/debug.cc) and torch prints it under "Last error:";
    # the wording is that of distributed_init-awsome-distributed-ai-192.
    text = (
        "Last error:\n"
        "socketStartConnect: Connect to 127.0.0.1<45069> failed : Software caused connection abort\n"
    )

    assert classify(text).failure_class == "distributed_init"


# The third round (issue 29, item 7): wordings of the dev part's new texts, each a shape the corpus
# had not held (README.md there).
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # TensorFlow's trace of a failed CheckNumerics op, without the message line above it.
        (
            "Caused by op 'CheckNumerics', defined at:\n"
            '  File "object_detection/legacy/train.py", line 184, in <module>\n'
            "    tf.app.run()",
            "non_finite",
        ),  # non_finite-custom-mask-rcnn-using-tensorfow-object-detection-api-11
        ("ValueError:Network outputs is NAN! Stop Training", "non_finite"),  # non_finite-jointnlt-18
        (
            "Step      Train loss    Test loss     Test metric\n"
            "1000      [5.47e+03]    [6.44e+03]    [1.00e+00]\n"
            "2000      [nan]         [nan]         [nan]",
            "non_finite",
        ),  # non_finite-deepxde-491
        (
            "[WinError 1455] The paging file is too small for this operation to complete.",
            "host_oom",
        ),  # host_oom-tqdm-1467
        (
            "  message: 'Pod Node didn''t have enough resource: memory, requested: 2097152000,\n"
            "  reason: OutOfmemory",
            "host_oom",
        ),  # host_oom-gitpod-8463 (YAML doubles the quote)
        # NCCL 2.2-2.4: no "NCCL" before WARN/INFO, .cu files.
        (
            "host:18553:18611 [0] include/socket.h:360 WARN Call to connect failed : Connection timed out\n"
            "host:18553:18611 [0] INFO bootstrap.cu:28 -> 2 [Net]",
            "distributed_init",
        ),  # distributed_init-nccl-tests-15
    ],
)
def test_wordings_the_third_round_taught_are_named_their_class(text: str, expected: str):
    assert classify(text).failure_class == expected


def test_a_healthy_step_log_that_names_outputs_and_nan_free_tensors_stays_unknown():
    # The outputs signature wants the word for NaN itself, not a metric that merely holds "nan".
    text = (
        "step 100 outputs are finite, loss 0.4121\n"
        "epoch 2 predictions saved to /tmp/predictions_nanoset.csv\n"
    )

    assert classify(text).failure_class == "unknown"
