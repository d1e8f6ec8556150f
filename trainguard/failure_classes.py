"""The shared vocabulary of failure classes: one table, used by preflight, triage and validation.

Each class carries what the user sees, what to check first, the first remedy to try and the trap
(the plausible fix from the wrong class that does nothing). Source: shared/FAILURE-CLASSES.md.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FailureClass", "FAILURE_CLASSES", "CLASS_NAMES", "get"]


@dataclass(frozen=True)
class FailureClass:
    """One failure class and its playbook."""

    name: str
    symptom: str
    checks: str
    remedy: str
    trap: str = ""


_TABLE = (
    FailureClass(
        "container",
        "the job fails at once, with no training logs",
        "does the image build and run locally? is the entrypoint/command right? are args parsed?",
        "fix the image entrypoint or the spec's `command`; run the image locally first",
    ),
    FailureClass(
        "permission",
        "PermissionDenied / 403 on a bucket, table or API",
        "does the job's service account (not your user) hold the role?",
        "grant the missing role to the job's service account",
        "checking your own user's IAM instead of the job's service account: a notebook that "
        "reads the bucket proves nothing",
    ),
    FailureClass(
        "quota",
        "ResourceExhausted before any step; on Vertex a job that stays QUEUED",
        "accelerator quota of that type, in that region (Spot uses the preemptible metric)",
        "request a quota increase, or use a region that has quota",
        "'works on small, fails at scale' is quota, not the model",
    ),
    FailureClass(
        "device_oom",
        "CUDA out of memory (or TPU HBM exhausted) mid-training",
        "per-device batch size, model size, activation memory",
        "smaller per-device batch with gradient accumulation to keep the effective batch; "
        "bf16/fp16 mixed precision; gradient checkpointing; shard the model; a larger-memory "
        "accelerator",
        "adding data-parallel workers: each holds a full model copy, per-device memory does not drop",
    ),
    FailureClass(
        "host_oom",
        "the process is killed (exit 137, OOMKilled)",
        "host RAM vs data-loader workers, prefetch, in-memory datasets",
        "a larger machine type, fewer loader workers / smaller prefetch, stream the data",
        "shrinking the GPU batch: the host, not the accelerator, ran out of memory",
    ),
    FailureClass(
        "input_pipeline",
        "the job runs, but accelerator utilisation is low",
        "many small files, cross-region reads, too little prefetch",
        "larger shards, same-region data, more prefetch; profile before guessing",
        "treating slow as failed",
    ),
    FailureClass(
        "non_finite",
        "the loss becomes NaN or Inf",
        "learning rate, gradient explosion, log(0) or division by zero in a custom loss, "
        "unnormalised inputs, NaN in the data, fp16 without loss scaling",
        "lower the learning rate and add a linear warm-up; clip gradients by global norm; add an "
        "epsilon to log/division; normalise inputs; check the data for NaN; enable loss scaling "
        "in fp16",
        "raising the learning rate when the loss already diverges",
    ),
    FailureClass(
        "divergence",
        "the loss explodes (finite) and stays far above its best",
        "learning rate, gradient explosion, unnormalised inputs, fp16 without loss scaling",
        "lower the learning rate and add a linear warm-up; clip gradients by global norm; "
        "normalise inputs; enable loss scaling in fp16",
        "raising the learning rate when the loss already diverges",
    ),
    FailureClass(
        "instability",
        "the loss oscillates wildly with no downward trend",
        "learning rate vs the optimiser's defaults (Adam ~1e-3 to 1e-4)",
        "lower the learning rate with a warm-up first; only then change the batch size",
        "more epochs on an unstable curve: it keeps oscillating",
    ),
    FailureClass(
        "plateau",
        "the training loss is flat far above expectation (under-fitting)",
        "learning rate too low, labels, capacity, broken features, over-regularisation",
        "raise the learning rate, use a larger model, better features, less regularisation, train longer",
        "adding regularisation",
    ),
    FailureClass(
        "stalled",
        "the loss is identical across consecutive steps",
        "the input pipeline: the same batch fed again and again, or a frozen model",
        "fix sharding/iterator/shuffling (and check that parameters get gradients) before tuning anything",
        "tuning hyperparameters on a data bug",
    ),
    FailureClass(
        "no_learning",
        "training ran to the end but the model learnt nothing: validation never got better than its "
        "first evaluations, or stayed at chance (a loss of ln k with an accuracy of 1/k on k classes)",
        "labels (shuffled, misaligned with inputs, one class only), the loss matching the model's "
        "outputs (logits vs probabilities, the target's dtype), a frozen backbone or "
        "requires_grad=False, a learning rate of 0 or far too small, inputs that are constant",
        "check on one batch that the model can overfit it (the loss must fall to near 0); print a "
        "few (input, label) pairs; then check that the optimiser holds the trainable parameters "
        "and that the learning rate is what you meant",
        "training longer or tuning the learning rate schedule on a model that cannot fit one batch",
    ),
    FailureClass(
        "overfit",
        "training loss falls while validation loss rises",
        "the train/validation gap and its trend; data leakage",
        "early stopping at the best validation step; L1/L2, dropout, augmentation; more data; a "
        "smaller model",
        "more depth and more rounds",
    ),
    FailureClass(
        "distributed_init",
        "works on one worker, hangs or fails on many",
        "cluster spec agreement, worker count, reachable chief, open ports, quota at that scale",
        "fix the cluster spec / rendezvous (MASTER_ADDR, MASTER_PORT, WORLD_SIZE); check quota at that scale",
    ),
    FailureClass(
        "preemption",
        "the job dies partway with no error",
        "Spot/preemptible reclaim, maintenance events",
        "checkpoint to Cloud Storage (weights, optimiser state, step) at regular intervals and "
        "resume from the latest",
        "Spot without checkpointing: the saving is only real if a reclaim costs minutes, not the run",
    ),
    FailureClass(
        "capacity",
        "the project has quota, but the zone has no free accelerators: a Flex-start (DWS) or "
        "reservation wait that ran out, ZONE_RESOURCE_POOL_EXHAUSTED, a stockout",
        "maxWaitDuration of a FLEX_START job, the reservation's free capacity, other regions "
        "offering the accelerator",
        "wait longer (a larger maxWaitDuration), use a reservation, or run in a region with "
        "capacity; Flex-start or Spot trade certainty of start for availability",
        "requesting more quota: the limit was not what stopped the job",
    ),
    FailureClass(
        "gate",
        "training ended normally, but a metric missed a bar its owner set (val_accuracy < 0.9)",
        "the gated metric's best and last values, and where they were reached",
        "train longer or tune (learning rate, capacity, data) until the metric clears the bar; "
        "or revisit the bar if it was set without a baseline",
        "lowering the bar to make the pipeline green",
    ),
    FailureClass(
        "budget",
        "the guard cancelled a running job whose spend (time run × the price of what ran, every "
        "replica of every pool) reached the budget given with --budget",
        "the spend, price per hour and budget the stop names; whether the run was slower than "
        "planned (low accelerator utilisation: an input pipeline) or planned for more than the "
        "budget buys (preflight --budget says what the timeout costs)",
        "resume it from its checkpoint with a budget that covers the rest (the same command with "
        "--resume and a larger --budget); or make it cheaper: Spot or Flex-start, fewer or smaller "
        "accelerators, fewer steps",
        "raising the budget on a run that is slow for another reason: a starved input pipeline "
        "burns money at the same rate; profile it first",
    ),
    FailureClass(
        "hang",
        "the job is RUNNING but no step completes: its history stops growing and its logs go "
        "quiet, often after one rank died or a collective waits for ever",
        "which rank is stuck (each rank's last log line); collective timeouts (NCCL_DEBUG=INFO, "
        "the process group's timeout); data-loader workers deadlocked; a storage read that never "
        "returns",
        "stop it and restart from the checkpoint; set a collective timeout (e.g. "
        "torch.distributed.init_process_group(timeout=...)) so a hang becomes an error; fix the "
        "stuck rank's input or loader (num_workers=0 to rule out a deadlocked loader)",
        "waiting for the job's timeout: Vertex's default is 7 days of every accelerator in the job",
    ),
    FailureClass(
        "unknown",
        "no known failure signature",
        "read the job's full logs; run the same command locally with `trainguard train --local`",
        "inspect the logs around the first error; reproduce locally",
    ),
)

FAILURE_CLASSES: dict[str, FailureClass] = {fc.name: fc for fc in _TABLE}
CLASS_NAMES: tuple[str, ...] = tuple(FAILURE_CLASSES)


def get(name: str) -> FailureClass:
    """Returns the failure class called ``name``.

    Raises:
        KeyError: with the list of known classes, when ``name`` is not one.
    """
    try:
        return FAILURE_CLASSES[name]
    except KeyError:
        raise KeyError(f"unknown failure class {name!r}; known: {', '.join(CLASS_NAMES)}") from None
