# SPDX-License-Identifier: Apache-2.0
"""benchmarks/ddp_floor.py removes DDP's gradient all-reduce and nothing else: two Gloo ranks
train one step of a DDP linear layer on different data; through ddp_floor their weights
differ afterwards, through the same script alone (the control) they agree."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from benchmark_scripts import load_benchmark

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STEP = textwrap.dedent("""
    import os, sys, torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model(torch.full((3, 4), float(rank + 1))).square().sum().backward()
    opt.step()
    w = model.module.weight.detach().clone()
    others = [torch.empty_like(w) for _ in range(2)]
    dist.all_gather(others, w)
    if rank == 0:
        print("weights", "equal" if torch.equal(others[0], others[1]) else "differ")
    # Plain Gloo keeps its sockets while DDP holds the group, and tearing it down while the
    # peer's does the same aborts now and then (torch's, seen in CI even after a barrier).
    # Once both ranks are past the barrier, as told through the launcher's store rather than
    # Gloo, nothing is left to say: leave without running any destructor.
    dist.barrier()
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
    store.set(f"ddp_floor_done_{rank}", "1")
    store.wait([f"ddp_floor_done_{r}" for r in range(2)])
    sys.stdout.flush()
    os._exit(0)
""")


@pytest.mark.parametrize("through_floor,expected", [(True, "differ"), (False, "equal")])
def test_floor_removes_the_gradient_all_reduce(tmp_path, through_floor, expected):
    script = tmp_path / "step.py"
    script.write_text(STEP)
    program = [os.path.join(ROOT, "benchmarks", "ddp_floor.py")] if through_floor else []
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", "2", *program, str(script)],
                          capture_output=True, text=True, timeout=180,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"weights {expected}" in proc.stdout


def test_floor_line_says_when_a_row_came_in_below_it(capsys):
    # benchmarks/train_compare.py printed "the most any backend can gain: 1.23x" under a topo
    # row 1.37x faster than gloo, without a word (the launches run one after another).
    train_compare = load_benchmark("train_compare")
    floor, gloo = {"median_step_s": 0.0503}, {"median_step_s": 0.0618}
    for topo_s, below in ((0.045, True), (0.0551, False)):
        train_compare.print_floor(floor, gloo, {"median_step_s": topo_s})
        line = capsys.readouterr().out
        assert "(the floor): 50.3 ms per step" in line and f"{0.0618 / 0.0503:.2f}x" in line
        assert ("topo's DDP row, 45.0 ms, came in below it" in line) is below, line


@pytest.mark.parametrize("argv, code, stream, says", [
    (["--help"], 0, "stdout", "python benchmarks/ddp_floor.py examples/train_llama.py --ddp"),
    ([], 2, "stderr", "python benchmarks/ddp_floor.py examples/train_llama.py --ddp"),
    (["no_such_script.py", "--ddp"], 2, "stderr",
     "ddp_floor.py: error: 'no_such_script.py' is no training script; usage: python "
     "benchmarks/ddp_floor.py SCRIPT [its options]")])
def test_usage_without_a_script(argv, code, stream, says):
    # --help and a missing script ran the first argument as a file: a traceback naming the
    # option ('/work/main/--help') or an index error.
    run = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "ddp_floor.py"), *argv],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == code
    assert says in getattr(run, stream) and "Traceback" not in run.stderr
