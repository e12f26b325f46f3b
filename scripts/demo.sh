#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's first command: sets up (once) and runs the main demo, examples/train_llama.py on
# a 2 x 4 emulated cluster (1 Gbit/s, 1 ms between nodes; local processes where namespaces are
# unavailable) as plain DDP over Gloo, FSDP2 tp x dp over Gloo and "topo" with its plan,
# overlap and sequence parallelism, ending with their throughput side by side.
# Usage: bash scripts/demo.sh [train_compare.py args]; the default is the quick run (a few min).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$(bash "$ROOT/scripts/setup_env.sh" | tail -n 1)"
cd "$ROOT"
if [ "$#" -eq 0 ]; then set -- --quick; fi
exec "$VENV/bin/python" benchmarks/train_compare.py "$@"
