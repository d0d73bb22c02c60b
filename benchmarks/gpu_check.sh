#!/usr/bin/env bash
# Everything that still waits for a real GPU, recorded in one call of at most 540 s on a
# lent machine (docs/gpu-run.md): one H200, no network, a Python with its own torch and
# no `bringup` installed, 10 minutes a call, and at most 8 files back from $OUT.
#
#   step      budget  what it records
#   install     30 s  the carried wheels (.whl/, benchmarks/gpu_wheels.sh), offline
#   captures    50 s  nvidia-smi -q, -q -x, topo -m, nvlink -s, -L; torch/CUDA versions
#   check       60 s  check --local --suite quick: the gpu probe through the real NVML
#   diagnose   140 s  gemm sweep (BF16, FP8), HBM copy, 45 s sustained load under the
#                     NVML sampler: TFLOP/s, clocks, power, temperatures, throttle reasons
#   nccl        60 s  nccl --local, one rank: the torch engine's NCCL path, CUDA events
#   burnin     180 s  2 minutes of the llama-1b-lora fine-tune: tokens/s, MFU, memory
#   ---------------
#   total      520 s  plus 10 s of kill-after per timed step: 560 s at the very worst,
#                     but each step's budget is cut to what is left of TOTAL_S (540 s)
#
# Each bringup step is `"$PYTHON" -m bringup.cli ...` under `timeout --signal=INT
# --kill-after=10`: the controller takes SIGINT (and SIGTERM) as Ctrl-C, kills what it
# started and finishes its run directory as interrupted. After every step the results so
# far are packed into $OUT (benchmarks/gpu_pack.py): gpu-check.tar.gz (every run
# directory, the raw captures, each step's JSON and stderr) and summary.json (the headline
# figures, null with a reason where not measured, and the failed steps), so a kill at any
# moment still returns everything finished before it. Exit status: 0 when every step ran,
# 1 when one failed (named in summary.json), 2 when this is no machine to run it on.
#
#     benchmarks/gpu_check.sh [OUT_DIR]        default: $OUT, else a new temporary directory
#
# GPU_CHECK_SIZE=cpu runs the same steps with CPU-sized work (the tiny recipe, seconds of
# load): `make gpu-rehearsal` runs this script that way on a machine without a GPU, as the
# lent machine will run it (tests/integration/repo/test_gpu_rehearsal.py).
set -uo pipefail
cd "$(dirname "$0")/.."

TOTAL_S=${GPU_CHECK_TOTAL_S:-540}
KILL_AFTER_S=10
PACK_S=15 # what one pack may take, kept free at the end
OUT_DIR=${1:-${OUT:-$(mktemp -d)}}
PYTHON=${PYTHON:-python3}
started=$SECONDS

case ${GPU_CHECK_SIZE:-gpu} in
    gpu)
        load_s=45
        nccl_args=(--min-bytes 8M --max-bytes 1G)
        burnin_args=(--recipe llama-1b-lora --minutes 2)
        burnin_s=180
        ;;
    cpu)
        load_s=3
        nccl_args=(--min-bytes 1M --max-bytes 4M)
        burnin_args=(--recipe tiny --steps 4 --checkpoint-interval 2)
        # DeepSpeed's CPU path compiles its shared-memory op on first use (minutes on a
        # busy CPU); its CUDA path does not. The total stays capped at TOTAL_S.
        burnin_s=420
        ;;
    *)
        echo "gpu_check: GPU_CHECK_SIZE is gpu or cpu, not '$GPU_CHECK_SIZE'" >&2
        exit 2
        ;;
esac

mkdir -p "$OUT_DIR" || exit 2
work=$(mktemp -d) || exit 2
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/runs" "$work/raw/smi"
log="$work/gpu_check.log"
say() { echo "gpu_check: $*" | tee -a "$log"; }
pack() { # everything so far into OUT_DIR: a failed pack must not stop the steps
    timeout --kill-after=5 "$PACK_S" "$PYTHON" benchmarks/gpu_pack.py "$work" "$OUT_DIR" \
        >>"$log" 2>&1 || say "pack failed (exit $?): see gpu_check.log in the tarball"
}
left() { echo $((TOTAL_S - (SECONDS - started) - KILL_AFTER_S - PACK_S)); }
# One line per step: label, exit code, seconds, budget. gpu_pack.py reads it.
record() { printf '%s %s %s %s\n' "$@" >>"$work/steps.txt"; }

# --- install: the carried wheels, into a private folder, offline ----------------------------
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
t0=$SECONDS
if ls .whl/*.whl >/dev/null 2>&1; then
    timeout --kill-after=5 30 "$PYTHON" -m pip install -q --no-index --no-deps --no-compile \
        --no-cache-dir --disable-pip-version-check --target "$work/site" .whl/*.whl \
        >"$work/raw/install.txt" 2>&1
    code=$?
    # The carried versions first: the image's own (an older pynvml, say) come after.
    export PYTHONPATH="$PWD:$work/site${PYTHONPATH#"$PWD"}"
else
    echo "no .whl/: the image's own packages only" >"$work/raw/install.txt"
    code=0
fi
record install "$code" $((SECONDS - t0)) 30
say "install exit $code in $((SECONDS - t0)) s"

# --- captures: what the driver says, as the parsers and `bringup inspect` read it ----------
t0=$SECONDS
if ! command -v nvidia-smi >/dev/null; then
    say "no nvidia-smi here: this script is for a machine with an NVIDIA GPU"
    record captures 127 0 50
    pack
    exit 2
fi
capture() { # capture FILE ARGS...: one nvidia-smi output, its exit code beside it
    local file=$1
    shift
    timeout --kill-after=1 4 nvidia-smi "$@" >"$work/raw/smi/$file" 2>&1
    echo $? >"$work/raw/smi/$file.exit"
}
capture nvidia-smi-q.txt -q
capture nvidia-smi-q-x.xml -q -x
capture topo-m.txt topo -m
capture nvlink-s.txt nvlink -s
capture nvidia-smi-L.txt -L
capture query-gpu.csv --query-gpu=name,driver_version,pci.bus_id,serial --format=csv
timeout --kill-after=2 18 "$PYTHON" -c '
import json, platform, sys
try:
    import torch
    cuda = torch.cuda.is_available()
    print(json.dumps({"python": platform.python_version(), "torch": torch.__version__,
        "torch_cuda": torch.version.cuda, "cuda_available": cuda,
        "device": torch.cuda.get_device_name(0) if cuda else None,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None}))
except Exception as exc:
    print(json.dumps({"python": platform.python_version(), "error": repr(exc)}))
' >"$work/raw/versions.json" 2>>"$log"
name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$name" in
    *B300*) profile=b300 ;; *B200*) profile=b200 ;; *H200*) profile=h200 ;;
    *H100*) profile=h100 ;; *A100*) profile=a100 ;;
    *) profile=auto ;; # judged by what the gpu probe finds; the summary says which
esac
echo "$profile" >"$work/raw/profile.txt"
record captures 0 $((SECONDS - t0)) 50
say "'$name', profile $profile, captures in $((SECONDS - t0)) s"
pack

# --- the bringup steps ----------------------------------------------------------------------
step() { # step LABEL BUDGET_S ARGS...: one bringup command, its JSON and stderr kept
    local label=$1 budget=$2
    shift 2
    local remaining
    remaining=$(left)
    ((budget > remaining)) && budget=$remaining
    if ((budget < 10)); then
        record "$label" skipped 0 "$budget"
        say "$label skipped: ${budget} s left of ${TOTAL_S} s"
        return
    fi
    local t0=$SECONDS
    timeout --signal=INT --kill-after="$KILL_AFTER_S" "$budget" \
        "$PYTHON" -m bringup.cli "$@" --profile "$profile" --out "$work/runs/$label" --json \
        >"$work/runs/$label.json" 2>"$work/runs/$label.stderr.txt"
    local code=$?
    record "$label" "$code" $((SECONDS - t0)) "$budget"
    say "$label exit $code in $((SECONDS - t0)) s (budget $budget s)"
    pack
}

step check 60 check --local --suite quick
step diagnose 140 diagnose --local --seconds "$load_s"
step nccl 60 nccl --local --ranks 1 "${nccl_args[@]}"
step burnin "$burnin_s" burnin --local "${burnin_args[@]}" --nproc 1 --no-keep-checkpoints

say "done in $((SECONDS - started)) s: $OUT_DIR/summary.json, $OUT_DIR/gpu-check.tar.gz"
pack
# The summary names the failed steps; its exit code is this script's.
"$PYTHON" benchmarks/gpu_pack.py --verdict "$OUT_DIR/summary.json"
