# SPDX-License-Identifier: Apache-2.0
"""Build-time guard: the extension must share torch's C++ runtime.

A compiler that links its own copy of libstdc++ (``-static-libstdc++``, or a wrapper such as the
GPU image's ``/opt/gcc/bin/g++``) yields a module that loads fine next to torch, which already
holds the system's shared libstdc++, but then runs with two C++ runtimes in one process: their
iostream locale facets clash and the first formatted number can crash (seen on an H200 machine,
issue 16). The dynamic section of the linked module tells the two apart: a module that shares the
runtime lists ``libstdc++.so.6`` as NEEDED. This file imports only the standard library, so
``setup.py`` can load it before the package is built.

The same ``build_ext`` keeps a wheel's module free of run paths into the build environment:
installed elsewhere, it would otherwise load libraries from whatever lies at those paths there.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile

SHARED_RUNTIME = "libstdc++.so.6"

_NEEDED = re.compile(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]")


class RuntimeLinkError(RuntimeError):
    """The built module does not link the shared C++ runtime that torch loads."""


def needed_libraries(path: str) -> list[str]:
    """The NEEDED entries of an ELF shared object's dynamic section, in order."""
    readelf = shutil.which("readelf")
    if readelf is None:
        raise RuntimeLinkError(
            f"build_check: readelf not found on PATH; it comes with binutils, which linked {path}")
    out = subprocess.run([readelf, "-d", "--wide", path], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeLinkError(f"build_check: readelf -d {path} failed: {out.stderr.strip()}")
    return _NEEDED.findall(out.stdout)


def loaded_runtime() -> str | None:
    """Path of the libstdc++ this process has mapped (torch's, once torch is imported)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rsplit(None, 1)[-1]
                if os.path.basename(path).startswith("libstdc++.so"):
                    return path
    except OSError:
        pass
    return None


def check_shared_runtime(module_path: str, compiler: str | None = None) -> None:
    """Raise RuntimeLinkError naming CXX and the fix unless `module_path` needs libstdc++.so.6."""
    needed = needed_libraries(module_path)
    if SHARED_RUNTIME in needed:
        return
    cxx = compiler or os.environ.get("CXX") or "c++ (CXX unset)"
    torch_runtime = loaded_runtime() or "the system's libstdc++.so.6"
    raise RuntimeLinkError(
        f"torch-topo: {module_path} does not link the shared C++ runtime: NEEDED lists "
        f"{', '.join(needed) or 'nothing'}, expected {SHARED_RUNTIME}. The compiler "
        f"CXX={cxx} links a private libstdc++ (a -static-libstdc++ build or a wrapper that adds "
        f"it), while torch loads {torch_runtime}; two C++ runtimes in one process break "
        "iostream locales and crash. Rebuild with a compiler that links the shared runtime, "
        "e.g. CXX=/usr/bin/g++ (`python torch_topo/build_check.py --pick-compiler` names one).")


def compiler_shares_runtime(compiler: str) -> bool:
    """Whether `compiler` links a tiny C++ shared object against the shared libstdc++."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "probe.cpp")
        lib = os.path.join(tmp, "probe.so")
        with open(src, "w") as f:
            f.write("#include <string>\nstd::string torch_topo_probe(int x) "
                    "{ return std::to_string(x); }\n")
        built = subprocess.run([compiler, "-shared", "-fPIC", src, "-o", lib],
                               capture_output=True, text=True)
        return built.returncode == 0 and SHARED_RUNTIME in needed_libraries(lib)


def pick_compiler(candidates: list[str]) -> str | None:
    """The first candidate (a name on PATH or a path) that links the shared runtime."""
    for name in candidates:
        path = shutil.which(name)
        if path and compiler_shares_runtime(path):
            return path
    return None


def wheel_link_args(args: list[str]) -> list[str]:
    """`args` less the run paths to absolute folders. setup.py adds one where it found a pip
    library, for modules that stay in the source tree; a wheel's module keeps only the run
    paths relative to itself ($ORIGIN: the pip libraries beside its installed package)."""
    return [arg for arg in args if not arg.startswith("-Wl,-rpath,/")]


def checked_build_ext(base: type) -> type:
    """`base` (a setuptools build_ext, e.g. torch's BuildExtension) refusing a private runtime,
    and linking a module built for a wheel without absolute run paths."""

    class CheckedBuildExt(base):
        def run(self):
            # `pip install .` and `pip wheel` build through bdist_wheel, not in place (an
            # editable install is in place): the module will not run where it is built.
            if not self.inplace and "bdist_wheel" in self.distribution.command_obj:
                for ext in self.extensions:
                    ext.extra_link_args = wheel_link_args(ext.extra_link_args)
            super().run()

        def build_extension(self, ext):
            super().build_extension(ext)
            path = self.get_ext_fullpath(ext.name)
            cxx = (getattr(self.compiler, "compiler_cxx", None) or [None])[0]
            try:
                check_shared_runtime(path, cxx)
            except RuntimeLinkError as err:
                os.remove(path)  # never leave an importable module that crashes on first use
                raise SystemExit(str(err)) from None

    return CheckedBuildExt


def main(argv: list[str]) -> int:
    """`--pick-compiler [CANDIDATE...]`: print the first compiler that shares the runtime."""
    if not argv or argv[0] != "--pick-compiler":
        print("usage: python torch_topo/build_check.py --pick-compiler [CXX...]", file=sys.stderr)
        return 2
    candidates = argv[1:] or [c for c in (os.environ.get("CXX"), "/usr/bin/g++", "g++", "c++")
                              if c]
    chosen = pick_compiler(candidates)
    if chosen is None:
        print(f"build_check: none of {', '.join(candidates)} links {SHARED_RUNTIME}",
              file=sys.stderr)
        return 1
    print(chosen)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
