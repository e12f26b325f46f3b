# SPDX-License-Identifier: Apache-2.0
"""The source distribution (`python setup.py sdist`; what `python -m build` makes and a package
index serves) carries what a build and a test run from it need: setup.py finds the C++ sources
by folder, but setuptools packed neither the headers they include (`pip install` of the archive
failed at the first #include) nor the C++ core's CMake build nor the tests; MANIFEST.in names
them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _files(folder: str) -> set[str]:
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / folder).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".so")}


@pytest.mark.timeout(300)
def test_sdist_carries_every_source_header_and_test(tmp_path):
    # From a copy without build outputs: setuptools also packs whatever an earlier sdist's
    # torch_topo.egg-info/SOURCES.txt lists, which would hide a file MANIFEST.in leaves out.
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(
        ".git", "build", "out", ".gpu-deps", "*.egg-info", "__pycache__", "*.so"))
    subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path)], cwd=tree,
                   check=True, capture_output=True, timeout=240)
    (archive,) = tmp_path.glob("torch_topo-*.tar.gz")
    with tarfile.open(archive) as tar:
        packed = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    python = {f for f in _files("torch_topo") if f.endswith(".py")}
    wanted = (_files("csrc") | _files("tests") | _files("examples") | python
              | {"setup.py", "pyproject.toml", "README.md", "CMakeLists.txt"})
    assert any(f.endswith(".h") for f in wanted)
    assert sorted(wanted - packed) == []
    assert not any(f.endswith((".so", ".pyc")) for f in packed)
