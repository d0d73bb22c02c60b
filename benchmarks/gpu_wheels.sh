#!/usr/bin/env bash
# The packages benchmarks/gpu_check.sh needs on the lent GPU machine and its image lacks,
# fetched here (a machine with pip and a package index) to travel with the working tree as
# the ignored folder .whl/, named in the device call's `carry` (docs/gpu-run.md):
#
#     benchmarks/gpu_wheels.sh [PYTHON_VERSION [DEST]]     default: 3.12 (the image's), .whl
#
# The image (benchmarks/gpu_image.txt lists its packages) has torch, typer, rich, PyYAML,
# Jinja2, transformers, peft and DeepSpeed's other needs. It lacks pydantic (the controller's
# schemas), msgspec (its facts validator) and DeepSpeed with hjson (the burn-in); its nvidia-ml-py and
# typing-extensions are of unknown versions, so ours travel and come first on PYTHONPATH.
# Every version is pinned, so the set resolves together: pydantic pins its pydantic-core
# exactly; pydantic-core, pydantic and typing-inspection need typing-extensions >= 4.16.0;
# nvidia-ml-py at or above pyproject.toml's floor (13.580.65). Change a pin here and
# tests/integration/repo/test_gpu_wheels.py installs the set offline into an image-like
# Python and imports every module the four steps import.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-3.12}
dest=${2:-.whl}
PYTHON=${PYTHON:-python3}

# Wheels for any CPython of that version on x86-64 Linux (the binary ones: pydantic-core,
# msgspec).
BINARY=(
    pydantic==2.14.4
    pydantic-core==2.50.5
    msgspec==0.23.0
    annotated-types==0.8.0
    typing-inspection==0.4.5
    typing-extensions==4.16.0
    nvidia-ml-py==13.615.71
    hjson==3.1.0
)
# DeepSpeed is built into a pure-Python wheel here (DS_BUILD_OPS unset: no op is compiled
# ahead; they are JIT-built on use, and the burn-in uses none), so the device only unpacks it.
DEEPSPEED=deepspeed==0.19.8

mkdir -p "$dest"
if [ "$dest" = .whl ]; then
    grep -qxF '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >>.git/info/exclude
fi
rm -f "$dest"/*.whl
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64; do
    platforms+=(--platform "$p")
done
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version "$version" \
    --implementation cp "${platforms[@]}" -d "$dest" "${BINARY[@]}"
"$PYTHON" -m pip wheel -q --no-deps -w "$dest" "$DEEPSPEED"
ls "$dest"
du -sh "$dest"
