#!/usr/bin/env bash
# Everything that still waits for a real GPU, recorded in one go (about 8 minutes on one GPU):
#
#   check --local (quick suite)        the gpu probe through the real NVML, topo -m, xid
#   diagnose --local --seconds 60      gemm sweep (BF16, FP8), HBM copy, sustained load
#                                      under the NVML sampler: TFLOP/s and throttle reasons
#   nccl --local, one rank             the torch engine's NCCL path and CUDA-event timing
#   burnin --recipe llama-1b-lora      about 3 minutes of the reference LoRA fine-tune:
#                                      tokens/s, MFU, peak memory, the telemetry timeline
#
# and the raw tool outputs (nvidia-smi -q, -q -x, topo -m, nvlink -s) beside them. Each step
# has its own deadline and a failed step does not stop the others: what it printed is kept.
#
#     benchmarks/gpu_check.sh [OUT_DIR]        default: $OUT, else a new temporary directory
#
# Then copy OUT_DIR/<gpu>/<date>-<driver>/ to tests/fixtures/<gpu>/ (the script prints the
# line) and name what it holds in tests/fixtures/<gpu>/SOURCES.md.
#
# On a machine whose Python lacks bringup's own dependencies (pydantic, paramiko,
# ansible-core, deepspeed and hjson on an image that has torch), put their wheels in .whl/
# first, as `benchmarks/gpu_wheels.sh` does on a machine with pip: they are installed into
# a private folder (--target), never into the system.
set -uo pipefail
cd "$(dirname "$0")/.."

OUT_DIR=${1:-${OUT:-$(mktemp -d)}}
PYTHON=${PYTHON:-python3}
if [ -d .whl ] && ls .whl/* >/dev/null 2>&1; then
    site=$(mktemp -d)
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --no-build-isolation --target "$site" .whl/* ||
        { echo "gpu_check: installing .whl/ failed" >&2; exit 2; }
    export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
bringup() { "$PYTHON" -m bringup.cli "$@"; }

if ! command -v nvidia-smi >/dev/null; then
    echo "gpu_check: no nvidia-smi here: this script is for a machine with an NVIDIA GPU" >&2
    exit 2
fi
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
case "$name" in
    *B300*) profile=b300 ;; *B200*) profile=b200 ;; *H200*) profile=h200 ;;
    *H100*) profile=h100 ;; *A100*) profile=a100 ;;
    *) echo "gpu_check: no profile for '$name'" >&2; exit 2 ;;
esac
dest="$OUT_DIR/$profile/$(date -u +%Y%m%d)-$driver"
mkdir -p "$dest/smi"
echo "gpu_check: $name, driver $driver, profile $profile -> $dest"

# What the driver says, as the parsers and `bringup inspect` read it.
nvidia-smi -q >"$dest/smi/nvidia-smi-q.txt" 2>&1
nvidia-smi -q -x >"$dest/smi/nvidia-smi-q-x.xml" 2>&1
nvidia-smi topo -m >"$dest/smi/topo-m.txt" 2>&1
nvidia-smi nvlink -s >"$dest/smi/nvlink-s.txt" 2>&1

step() {  # step NAME SECONDS ARGS...: one bringup command, its JSON and its stderr kept
    local label=$1 seconds=$2
    shift 2
    local started=$SECONDS
    timeout --kill-after=10 "$seconds" bringup "$@" --out "$dest/$label" --json \
        >"$dest/$label.json" 2>"$dest/$label.stderr.txt"
    local code=$?
    echo "gpu_check: $label exit $code in $((SECONDS - started)) s"
}

step check 120 check --local --suite quick --profile "$profile"
step diagnose 240 diagnose --local --seconds 60 --profile "$profile"
step nccl 120 nccl --local --ranks 1 --min-bytes 8M --max-bytes 1G --profile "$profile"
step burnin 330 burnin --local --recipe llama-1b-lora --minutes 3 --nproc 1 \
    --profile "$profile" --no-keep-checkpoints

# Checkpoints and the trainer's scratch stay out of what is kept: figures, facts, logs.
find "$dest" -type d \( -name checkpoints -o -name work \) -prune -exec rm -rf {} + 2>/dev/null
du -sh "$dest"
echo "gpu_check: copy $dest to tests/fixtures/$profile/"
