#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the extension with CUDA and runs every GPU test and GPU benchmark, on one GPU, within a
# few minutes. Each layer adds its lines to the STEPS list; a summary table ends the run.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python}"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

STEPS=(
  "build|MAX_JOBS=${MAX_JOBS:-8} TORCH_TOPO_BUILD_CUDA=1 $PY setup.py build_ext --inplace"
  "backend tests|$PY -m pytest -q -rs tests/gpu/test_backend_cuda.py"
  "sequence-parallel ops|$PY -m pytest -q -rs tests/gpu/test_ops_cuda.py"
  "overlap ops|$PY -m pytest -q -rs tests/gpu/test_overlap_cuda.py"
)

declare -a SUMMARY
status=0
for step in "${STEPS[@]}"; do
  name="${step%%|*}"
  cmd="${step#*|}"
  echo "== $name: $cmd"
  start=$(date +%s)
  if bash -c "$cmd"; then result=ok; else result=FAILED; status=1; fi
  SUMMARY+=("$(printf '%-28s %-7s %5ss' "$name" "$result" "$(( $(date +%s) - start ))")")
  [ "$name" = build ] && [ "$result" = FAILED ] && break
done
echo
printf '%-28s %-7s %6s\n' step result time
printf '%s\n' "${SUMMARY[@]}"
exit $status
