# SPDX-License-Identifier: Apache-2.0
"""torch_topo.build_info: the torch a module was built against is recorded, and `import
torch_topo` under another torch fails with one message naming both and the rebuild command."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

import torch_topo
from torch_topo import build_info

PACKAGE = os.path.dirname(os.path.abspath(torch_topo.__file__))
BUILT = {"torch": "2.10.0+cu120", "cuda": "12.0", "cxx11_abi": True, "source": "/nowhere"}


def test_record_is_the_running_torch(tmp_path):
    path = build_info.write_record(str(tmp_path), "/src")
    record = json.loads(open(path).read())
    assert record == {"torch": torch.__version__, "cuda": torch.version.cuda,
                      "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI), "source": "/src"}
    build_info.check(str(tmp_path))  # the same torch passes


def test_the_built_package_carries_a_matching_record():
    with open(os.path.join(PACKAGE, build_info.RECORD_NAME)) as f:
        record = json.load(f)
    assert build_info.mismatch(record, build_info.describe_torch()) is None


@pytest.mark.parametrize("field,value", [("torch", "2.15.0+cu132"), ("cuda", "12.8"),
                                         ("cxx11_abi", False)])
def test_each_difference_is_a_mismatch(field, value):
    running = {**BUILT, field: value}
    message = build_info.mismatch(BUILT, running)
    assert message is not None
    assert "built against torch 2.10.0+cu120 (CUDA 12.0, C++11 ABI)" in message
    assert f"runs torch {running['torch']}" in message
    assert "pip install --no-build-isolation --no-deps --force-reinstall" in message
    assert build_info.mismatch(BUILT, dict(BUILT)) is None


def test_rebuild_command_names_the_source_when_it_exists(tmp_path):
    assert build_info.rebuild_command(str(tmp_path)).endswith(str(tmp_path))
    assert "<torch-topo source" in build_info.rebuild_command("/no/such/dir")


def test_unreadable_record_is_an_import_error(tmp_path):
    (tmp_path / build_info.RECORD_NAME).write_text("{not json")
    with pytest.raises(build_info.BuildMismatchError, match="cannot read .*rebuild"):
        build_info.check(str(tmp_path))


def test_undefined_symbol_is_explained_other_load_errors_pass():
    err = ImportError("/x/_C.so: undefined symbol: _ZN3c104impl")
    with pytest.raises(build_info.BuildMismatchError, match="built against another torch"):
        build_info.explain_load_failure(err)
    assert build_info.explain_load_failure(ImportError("No module named 'torch_topo._C'")) is None


def test_import_under_another_torch_fails_with_one_message(tmp_path):
    # A copy of the package whose record names another torch, imported by a fresh interpreter.
    copy = tmp_path / "torch_topo"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for module in glob.glob(os.path.join(PACKAGE, "_C*.so")):
        os.symlink(module, copy / os.path.basename(module))
    (copy / build_info.RECORD_NAME).write_text(json.dumps(BUILT))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", "import torch_topo"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("torch_topo.build_info.BuildMismatchError: torch-topo: ")
    assert "torch 2.10.0+cu120" in last and f"runs torch {torch.__version__}" in last
    assert "pip install --no-build-isolation" in last
