# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_topo`: the CLI."""

import sys

from torch_topo.cli import main

sys.exit(main())
