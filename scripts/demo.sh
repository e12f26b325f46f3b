#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's first command: sets up (once) and runs the main demo, DDP over "topo" on local
# processes. Usage: bash scripts/demo.sh [ddp_demo.py args]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$(bash "$ROOT/scripts/setup_env.sh" | tail -n 1)"
cd "$ROOT"
exec "$VENV/bin/python" examples/ddp_demo.py "$@"
