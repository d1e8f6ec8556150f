#!/usr/bin/env bash
# The GPU proof of the checkpoint runtime, in one call (< 5 min on one GPU): kill-and-resume on
# CUDA (fp32, bf16; SIGTERM, SIGKILL) with byte-identical weights, DCP (plain and FSDP2) on CUDA,
# the stall benchmark on a >= 1.5 GB CUDA state (ours and DCP's async_save side by side), and a
# ~400 MB CUDA state saved to gs:// and restored, one stream vs parallel parts, through
# gcp-storage-emulator on loopback (in a child process; "skipped: ..." where gcp-storage-emulator or
# google-cloud-storage is not importable). Needs only torch and this repository (trainguard.runtime);
# no kfp, and the Google packages only for that gs:// measure.
#
#   tests/gpu/run.sh                 # on a CUDA machine; writes $OUT/gpu_report.json when OUT is set
#   tests/gpu/run.sh --cpu-dry-run   # everything on the CPU with tiny sizes (the test suite runs this)
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export CUBLAS_WORKSPACE_CONFIG=:4096:8   # deterministic cuBLAS: byte-identical resumes
exec "${PYTHON:-python3}" tests/gpu/gpu_check.py "$@"
