# SPDX-License-Identifier: Apache-2.0
"""Builds torch_topo._C against the installed torch.

Sources are found by folder (csrc/topo, csrc/backend, csrc/ops, csrc/bindings), so a new stage
file needs no edit here. CUDA sources (csrc/**/cuda/*.cu) are compiled when torch has CUDA and
nvcc is found; otherwise the build says so and the CPU parts are built alone.
"""

import glob
import importlib.util
import os
import shutil
import sys

from setuptools import find_packages, setup
from torch.utils import cpp_extension

ROOT = os.path.dirname(os.path.abspath(__file__))


def _load(name):
    """torch_topo/<name>.py alone: importing the package would need the module being built."""
    spec = importlib.util.spec_from_file_location(
        f"torch_topo_{name}", os.path.join(ROOT, "torch_topo", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def _build_switch(var):
    """A TORCH_TOPO_* build switch, on unless set off, read with the package's one boolean
    parser (`torch_topo.config.parse_bool`: 0/1/true/false/yes/no/on/off, any case)."""
    text = os.environ.get(var, "").strip()
    return not text or _load("config").parse_bool(var, text)


def _sources(pattern):
    return sorted(glob.glob(os.path.join("csrc", pattern), recursive=True))


def _cuda_enabled():
    if not _build_switch("TORCH_TOPO_BUILD_CUDA"):
        print("torch-topo: TORCH_TOPO_BUILD_CUDA is off, CUDA parts skipped", file=sys.stderr)
        return False
    import torch

    if torch.version.cuda is None:
        print("torch-topo: torch has no CUDA, CUDA parts skipped", file=sys.stderr)
        return False
    if cpp_extension.CUDA_HOME is None or shutil.which(
        os.path.join(cpp_extension.CUDA_HOME, "bin", "nvcc")
    ) is None:
        print("torch-topo: nvcc not found (set CUDA_HOME), CUDA parts skipped", file=sys.stderr)
        return False
    # No GPU at build time: compile for A100 and H100/H200 unless the user chose.
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "8.0;9.0")
    return True


def _hwloc_enabled():
    """hwloc is optional at build time: without it the live probe reports what /sys gives."""
    if not _build_switch("TORCH_TOPO_WITH_HWLOC"):
        return False
    for inc in ("/usr/include", "/usr/local/include", os.environ.get("HWLOC_HOME", "") + "/include"):
        if os.path.exists(os.path.join(inc, "hwloc.h")):
            return True
    print("torch-topo: hwloc.h not found (apt-get install libhwloc-dev), hwloc probe skipped",
          file=sys.stderr)
    return False


def _extension():
    cuda = _cuda_enabled()
    sources = [s for s in _sources("**/*.cpp") if "/cuda/" not in s]
    define_macros = [("TORCH_TOPO_WITH_CUDA", "1" if cuda else "0")]
    libraries = []
    include_dirs = [os.path.join(ROOT, "csrc")]
    extra_link_args = []
    if os.environ.get("HWLOC_HOME"):
        include_dirs.append(os.path.join(os.environ["HWLOC_HOME"], "include"))
        extra_link_args.append("-L" + os.path.join(os.environ["HWLOC_HOME"], "lib"))
    if _hwloc_enabled():
        define_macros.append(("TORCH_TOPO_WITH_HWLOC", "1"))
        libraries.append("hwloc")
    libraries.append("dl")  # NVML is loaded at run time
    # Debian's libpugixml-dev has no pugixml.cpp for header-only use; link its PIC archive
    # statically so the extension needs no libpugixml at run time.
    extra_link_args.append("-l:libpugixml.a")
    # No -std here: torch picks the standard its headers need (C++20 from 2.10 on); the core
    # itself stays C++17, which CMake enforces.
    cxx_flags = ["-O2", "-Wall", "-Wno-unused-parameter"]
    extra = {"cxx": cxx_flags}
    if cuda:
        sources += [s for s in _sources("**/cuda/*.cu")]
        extra["nvcc"] = ["-O2"]
        cls = cpp_extension.CUDAExtension
        # CUDA_HOME may resolve to /usr/local (nvcc on PATH) whose lib/ lacks libcudart; the
        # toolkit's own lib folders hold it.
        for lib in ("lib64", "lib"):
            for home in (cpp_extension.CUDA_HOME or "", "/usr/local/cuda"):
                candidate = os.path.join(home, lib)
                if os.path.exists(os.path.join(candidate, "libcudart.so")):
                    extra_link_args.append("-L" + candidate)
    else:
        sources += [s for s in _sources("**/cuda/*_stub.cpp")]
        cls = cpp_extension.CppExtension
    return cls(
        name="torch_topo._C",
        sources=sources,
        include_dirs=include_dirs,
        define_macros=define_macros,
        libraries=libraries,
        extra_compile_args=extra,
        extra_link_args=extra_link_args,
    )


setup(
    name="torch-topo",
    version="0.1.0",
    description="Topology-aware torch.distributed backend, planner and sequence-parallel ops",
    packages=find_packages(include=["torch_topo", "torch_topo.*"]),
    ext_modules=[_extension()],
    cmdclass={"build_ext": _load("build_check").checked_build_ext(
        cpp_extension.BuildExtension.with_options(use_ninja=True))},
    python_requires=">=3.10",
    install_requires=["torch>=2.4"],
)
