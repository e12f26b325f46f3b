# SPDX-License-Identifier: Apache-2.0
"""The scripts of benchmarks/ as modules, for tests that call their functions: benchmarks/ is
no package, so a script is loaded from its path (a fresh module each call)."""

from __future__ import annotations

import importlib.util
import pathlib
from types import ModuleType

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """benchmarks/<name>.py, executed as the module `name`."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
