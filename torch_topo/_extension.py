# SPDX-License-Identifier: Apache-2.0
"""Loads torch_topo._C once its build record matches the running torch (torch_topo.build_info):
a module built against another torch fails here with the fix, not with a symbol error."""

import importlib

from torch_topo import build_info

build_info.check()
try:
    importlib.import_module("torch_topo._C")
except ImportError as err:
    build_info.explain_load_failure(err)
    raise
