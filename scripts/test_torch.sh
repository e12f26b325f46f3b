#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the extension against another torch release and runs the suites whose code depends on
# torch's version (the backend and its c10d hooks, meshes, config, the build record, the
# attention and overlap ops with their autograd, planning and the cluster exchange) against
# that build. The environment lives outside the clone (/opt/torch-topo/venv-VERSION, made once
# by setup_env.sh); the build goes to build/torch-VERSION, so the checkout's own module (the
# main torch's) is untouched. The C++ core does not use torch: scripts/test.sh covers it.
# Usage: bash scripts/test_torch.sh VERSION [--build-only] [pytest args]
# TORCH_TOPO_BUILD_CUDA=1 compiles the CUDA parts too (build/torch-VERSION-cuda): what
# scripts/gpu_prepare.sh does against the GPU machine's torch, with --build-only.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${1:?usage: bash scripts/test_torch.sh VERSION [--build-only] [pytest args]}"
shift
BUILD_ONLY=0
if [ "${1:-}" = --build-only ]; then BUILD_ONLY=1; shift; fi
# Off unless set; when set, read by setup.py's own parser (1/true/yes/on, any case), so the
# build folder's name says what setup.py builds into it.
CUDA="$(TORCH_TOPO_BUILD_CUDA="${TORCH_TOPO_BUILD_CUDA:-0}" python3 -c '
import os, sys
sys.path.insert(0, sys.argv[1])  # config.py alone: it needs no torch and no built module
from config import parse_bool
print(int(parse_bool("TORCH_TOPO_BUILD_CUDA", os.environ["TORCH_TOPO_BUILD_CUDA"])))
' "$ROOT/torch_topo")"
# An exact release is asked for: a machine's pip constraints (these machines cap torch at the
# wheels they hold) must not refuse it.
VENV="$(PIP_CONSTRAINT=/dev/null TORCH_TOPO_TORCH_VERSION="$VERSION" TORCH_TOPO_VENV= \
        bash "$ROOT/scripts/setup_env.sh" --no-build | tail -n 1)"
BUILD="$ROOT/build/torch-$VERSION"
if [ "$CUDA" = 1 ]; then BUILD="$BUILD-cuda"; fi
export PATH="$VENV/bin:/usr/lib/ccache:$PATH"
export CCACHE_DIR="${CCACHE_DIR:-/opt/torch-topo/ccache}" CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
export MAX_JOBS="${MAX_JOBS:-2}"
cd "$ROOT"
echo "== torch $VERSION: build into ${BUILD#"$ROOT"/} =="
# CPU parts only by default: these suites run on CPU, and nvcc would double the build. The CUDA
# code is compiled against the main torch by scripts/test.sh.
TORCH_TOPO_BUILD_CUDA="$CUDA" python setup.py -q build --build-base "$BUILD" >"$BUILD.log" 2>&1 || {
  tail -n 30 "$BUILD.log"; exit 1; }
LIB="$(echo "$BUILD"/lib.*)"
# The built module must load against this torch (a CUDA one too, without a GPU).
PYTHONPATH="$LIB" python -P -c 'import torch, torch_topo._C as C
print("torch %s: module %s, CUDA parts %s" % (torch.__version__, C.__file__, C.cuda_built))'
if [ "$BUILD_ONLY" = 1 ]; then exit 0; fi
echo "== torch $VERSION: pytest against $LIB =="
# The pytest script, not `python -m pytest`: the latter puts the checkout (and its module for
# the main torch) first on sys.path.
# Tests marked `breadth` repeat a path on more shapes; the main torch's run has them.
PYTHONPATH="$LIB" pytest -q -p no:cacheprovider -m "not breadth" tests/py/backend tests/py/test_mesh.py \
  tests/py/test_mesh_order.py tests/py/test_config.py tests/py/test_build_info.py \
  tests/py/ops tests/py/test_overlap.py tests/py/test_sequence_split.py tests/py/test_plan.py \
  tests/py/test_cluster.py "$@"
