# SPDX-License-Identifier: Apache-2.0
"""scripts/gpu_check.sh keeps its whole run, summary included, within GPU_CHECK_SECONDS: a lease
that stops the script at that bound must still get gpu_check.json. Checked with a stand-in for
python (the script under test is the real one, copied into a scratch checkout), so no GPU, torch
build or network is involved."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The summary (a script on stdin, "-") runs on the real python; the NCCL_HOSTID step ignores
# SIGINT and never ends, as a rank stuck in a CUDA call does; every other call succeeds at once.
FAKE_PYTHON = """#!/usr/bin/env bash
if [ "${1:-}" = - ]; then exec "$REAL_PYTHON" "$@"; fi
case " $* " in
  *" --pick-compiler "*) echo /usr/bin/g++ ;;
  *"nccl_hostid_check.py"*) trap '' INT; sleep 300 ;;
esac
exit 0
"""

BUDGET_S = 40


@pytest.mark.timeout(150)
@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils timeout")
def test_stuck_step_leaves_room_for_the_summary(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "scripts", "gpu_check.sh"), checkout / "scripts")
    # The carried build libraries, as gpu_prepare.sh leaves them (installed by the stand-in).
    (checkout / ".gpu-deps" / "wheels").mkdir(parents=True)
    (checkout / ".gpu-deps" / "wheels" / "carried-0-py3-none-any.whl").write_text("")
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    out = tmp_path / "out"
    env = dict(os.environ, PYTHON=str(fake), REAL_PYTHON=sys.executable, GPU_CHECK_OUT=str(out),
               GPU_CHECK_SECONDS=str(BUDGET_S), GPU_CHECK_SKIP_BUILD="1", TMPDIR=str(tmp_path),
               GPU_CHECK_ONLY="^(build|rehearsal: NCCL_HOSTID)$")
    start = time.monotonic()
    proc = subprocess.run(["bash", str(checkout / "scripts" / "gpu_check.sh")], env=env,
                          capture_output=True, text=True, timeout=140)
    elapsed = time.monotonic() - start
    # Before, the steps ran to the bound itself: the stuck step's SIGKILL came 15 s after it and
    # the summary after that (about 60 s in all here).
    assert elapsed < BUDGET_S + 5, (elapsed, proc.stdout[-2000:] + proc.stderr[-2000:])
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert [(s["name"], s["result"]) for s in report["steps"]] == [
        ("build", "ok"), ("rehearsal: NCCL_HOSTID", "TIMEOUT")]
