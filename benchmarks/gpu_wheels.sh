#!/usr/bin/env bash
# The packages benchmarks/gpu_check.sh needs on a GPU machine that has PyTorch but no
# network, fetched here into .whl/ (git-ignored) to travel with the working tree:
#
#     benchmarks/gpu_wheels.sh [PYTHON_VERSION]      default 3.12, the GPU image's Python
#
# Only what such an image lacks for `check --local`, `diagnose`, `nccl` and `burnin`:
# pydantic (the controller's facts and schemas) and DeepSpeed with hjson (the burn-in).
# DeepSpeed is published as a source archive only; gpu_check.sh builds it there against
# the image's own torch (--no-build-isolation), which needs no network.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-3.12}
mkdir -p .whl
grep -qxF '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >>.git/info/exclude
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64; do
    platforms+=(--platform "$p")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$version" \
    --implementation cp "${platforms[@]}" -d .whl \
    pydantic pydantic-core annotated-types typing-inspection hjson
python3 -m pip download -q --no-deps --no-binary=:all: -d .whl deepspeed
du -sh .whl
