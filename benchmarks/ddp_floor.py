# SPDX-License-Identifier: Apache-2.0
"""Runs a training script with DDP's gradient all-reduce replaced by nothing: the step time
that no backend can beat on this machine (same ranks, model, batches and cores; the gradients
simply stay local, so the losses are not those of data-parallel training).

    python benchmarks/ddp_floor.py examples/train_llama.py --ddp [its options]

benchmarks/train_compare.py runs it next to the DDP rows: gloo's step over this floor is the
most any backend can gain on that row.
"""

from __future__ import annotations

import os
import runpy
import sys

import torch
from torch.nn.parallel import DistributedDataParallel


def _no_all_reduce(state, bucket):
    # DDP expects the bucket's (averaged) gradients back; handing them back unchanged makes
    # the communication free and leaves everything else in the step as it was.
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def main() -> None:
    init = DistributedDataParallel.__init__

    def init_without_communication(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.register_comm_hook(None, _no_all_reduce)

    if len(sys.argv) >= 2 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    script = sys.argv[1]
    if not os.path.isfile(script):
        print(f"ddp_floor.py: error: {script!r} is no training script; usage: python "
              "benchmarks/ddp_floor.py SCRIPT [its options]", file=sys.stderr)
        sys.exit(2)
    DistributedDataParallel.__init__ = init_without_communication
    sys.argv = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # its sibling modules
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
