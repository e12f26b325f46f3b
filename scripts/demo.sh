#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's first command: sets up (once) and runs the main demo, examples/train_llama.py on
# a 2 x 4 emulated cluster (1 Gbit/s, 1 ms between nodes; local processes where namespaces are
# unavailable): DDP, FSDP2 tp x dp, FSDP2 Ulysses sp x dp and FSDP2 ring sp x dp, each the same
# program over plain Gloo and over "topo", ending with their throughput side by side and
# topo's worst and best ratio to the same program over Gloo.
# Usage: bash scripts/demo.sh [train_compare.py args]; the default is the quick run (about 4 min;
# add --profile for where each step's time goes, --overlap for the overlap ops' figure).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$(bash "$ROOT/scripts/setup_env.sh" | tail -n 1)"
cd "$ROOT"
if [ "$#" -eq 0 ]; then set -- --quick; fi
exec "$VENV/bin/python" benchmarks/train_compare.py "$@"
