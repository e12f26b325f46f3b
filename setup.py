# SPDX-License-Identifier: Apache-2.0
"""Builds torch_topo._C against the torch of the running environment.

`pip install --no-build-isolation .` (the torch already installed must be the one built
against, so no isolated build environment). TinyXML-2 and nlohmann-json come from the system or
from their pip packages (torch_topo/build_deps.py); hwloc headers are optional.

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


DEPS = _load("build_deps")


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


def _hwloc():
    """hwloc is optional: its headers are enough, the library is opened at run time. Without
    them the live probe reports what /sys gives."""
    if not _build_switch("TORCH_TOPO_WITH_HWLOC"):
        return None
    home = os.environ.get("HWLOC_HOME")
    found = DEPS.find(DEPS.HWLOC, (home,) if home else ())
    if found is None:
        print(f"torch-topo: hwloc.h not found (pip install {DEPS.HWLOC.pip}, or apt-get install "
              f"{DEPS.HWLOC.apt}), hwloc probe skipped", file=sys.stderr)
        return None
    return found


def _required(dep):
    found = DEPS.find(dep)
    if found is None:
        raise SystemExit(DEPS.missing(dep))
    return found


def _extension():
    cuda = _cuda_enabled()
    sources = [s for s in _sources("**/*.cpp") if "/cuda/" not in s]
    # Parsed JSON values keep their byte range (csrc/topo/json.h); it changes basic_json's
    # layout, so every source gets it, as CMakeLists.txt gives it to every target.
    define_macros = [("TORCH_TOPO_WITH_CUDA", "1" if cuda else "0"),
                     ("JSON_DIAGNOSTIC_POSITIONS", "1")]
    include_dirs = [os.path.join(ROOT, "csrc")]
    libraries = ["tinyxml2", "dl"]  # NVML and hwloc are opened at run time
    extra_link_args = []
    for dep in (DEPS.TINYXML2, DEPS.NLOHMANN_JSON):
        found = _required(dep)
        if found.include_dir:
            include_dirs.append(found.include_dir)
        if found.library_dir:
            extra_link_args.append("-L" + found.library_dir)
            # From pip: the installed module finds it beside the package in site-packages, an
            # in-place build where it was found (a wheel's build drops that absolute path).
            for run_path in (os.path.join("$ORIGIN", DEPS.CMEEL_LIB_FROM_PACKAGE),
                             os.path.abspath(found.library_dir)):
                extra_link_args.append("-Wl,-rpath," + run_path)
    hwloc = _hwloc()
    if hwloc:
        define_macros.append(("TORCH_TOPO_WITH_HWLOC", "1"))
        if hwloc.include_dir:
            include_dirs.append(hwloc.include_dir)
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


class BuildExt(_load("build_check").checked_build_ext(
        cpp_extension.BuildExtension.with_options(use_ninja=True))):
    """Also records the torch built against beside the module (checked at import)."""

    def run(self):
        super().run()
        folder = os.path.join(ROOT if self.inplace else self.build_lib, "torch_topo")
        _load("build_info").write_record(folder, ROOT)


# Metadata is in pyproject.toml; what needs code stays here.
setup(
    packages=find_packages(include=["torch_topo", "torch_topo.*"]),
    package_data={"torch_topo": ["_build_info.json"]},
    ext_modules=[_extension()],
    cmdclass={"build_ext": BuildExt},
)
