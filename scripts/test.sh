#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Sets up (once) and runs every test: the C++ core under CTest, plain and with ASan/UBSan, then
# the Python suite. Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$(bash "$ROOT/scripts/setup_env.sh" | tail -n 1)"
export PATH="$VENV/bin:$PATH"
export CCACHE_DIR="${CCACHE_DIR:-/opt/torch-topo/ccache}" CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
cd "$ROOT"

echo "== C++ core (CTest) =="
cmake -S . -B build/core -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/core -j2 >/dev/null
ctest --test-dir build/core --output-on-failure
echo "== C++ core under AddressSanitizer + UBSan (CTest) =="
cmake -S . -B build/core-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTORCH_TOPO_SANITIZE=ON >/dev/null
cmake --build build/core-asan -j2 >/dev/null
ctest --test-dir build/core-asan --output-on-failure

echo "== Python (pytest) =="
python -m pytest -q --durations=15 tests/py tests/gpu "$@"
