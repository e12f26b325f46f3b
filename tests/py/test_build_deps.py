# SPDX-License-Identifier: Apache-2.0
"""torch_topo.build_deps: the build takes each library from the system when it is there, else
from the pip package that ships it, and names both ways to get it when neither has it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from torch_topo import build_deps


def _prefix(root, header, library=None):
    (root / "include" / header).parent.mkdir(parents=True, exist_ok=True)
    (root / "include" / header).write_text("")
    if library:
        (root / "lib").mkdir(exist_ok=True)
        (root / "lib" / f"lib{library}.so.11").write_text("")
    return root


@pytest.fixture
def places(tmp_path, monkeypatch):
    """An empty 'system' and a site-packages folder on sys.path."""
    system = tmp_path / "usr"
    site = tmp_path / "site-packages"
    system.mkdir()
    site.mkdir()
    monkeypatch.setattr(build_deps, "SYSTEM_PREFIXES", (str(system),))
    monkeypatch.setattr(build_deps, "_site_dirs", lambda: [str(site)])
    return system, site


def test_pip_package_is_used_when_the_system_has_none(places):
    _, site = places
    cmeel = _prefix(site / "cmeel.prefix", "tinyxml2.h", "tinyxml2")
    _prefix(site / "nlohmann_json", "nlohmann/json.hpp")
    found = build_deps.find(build_deps.TINYXML2)
    assert found == build_deps.Found(str(cmeel / "include"), str(cmeel / "lib"))
    assert build_deps.find(build_deps.NLOHMANN_JSON).include_dir == str(
        site / "nlohmann_json" / "include")
    assert build_deps.pip_prefixes() == [str(cmeel), str(site / "nlohmann_json")]


def test_system_library_wins_and_adds_no_flags(places):
    system, site = places
    _prefix(site / "cmeel.prefix", "tinyxml2.h", "tinyxml2")
    _prefix(system, "tinyxml2.h", "tinyxml2")
    assert build_deps.find(build_deps.TINYXML2) == build_deps.Found(None, None)


def test_headers_without_the_library_do_not_count(places):
    _, site = places
    _prefix(site / "cmeel.prefix", "tinyxml2.h")
    assert build_deps.find(build_deps.TINYXML2) is None
    assert build_deps.find(build_deps.HWLOC) is None


def test_missing_names_pip_and_apt():
    message = build_deps.missing(build_deps.TINYXML2)
    assert message.startswith("torch-topo: TinyXML-2 not found (tinyxml2.h in none of ")
    assert "`pip install cmeel-tinyxml2`" in message and "libtinyxml2-dev" in message


def test_cmake_prefix_path_command_line():
    proc = subprocess.run([sys.executable, build_deps.__file__, "--cmake-prefix-path"],
                          capture_output=True, text=True)
    assert proc.returncode == 0
    assert proc.stdout.strip() == ";".join(build_deps.pip_prefixes())
    bad = subprocess.run([sys.executable, build_deps.__file__], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage:" in bad.stderr


def _nlohmann(root, major, minor, where="nlohmann/detail/abi_macros.hpp"):
    _prefix(root, "nlohmann/json.hpp")
    (root / "include" / where).parent.mkdir(parents=True, exist_ok=True)
    with open(root / "include" / where, "a") as f:
        f.write(f"#define NLOHMANN_JSON_VERSION_MAJOR {major}   // NOLINT\n"
                f"#define NLOHMANN_JSON_VERSION_MINOR {minor}  // NOLINT\n")
    return root


@pytest.mark.parametrize("where", ["nlohmann/detail/abi_macros.hpp", "nlohmann/json.hpp"])
def test_a_system_nlohmann_older_than_3_12_is_passed_over_for_pips(places, where):
    # Ubuntu 24.04's nlohmann-json3-dev is 3.11.3 (macros in detail/abi_macros.hpp; 3.10 keeps
    # them in json.hpp): it has no value positions, so pip's 3.12 is taken instead.
    system, site = places
    _nlohmann(system, 3, 11, where)
    pip = _nlohmann(site / "nlohmann_json", 3, 12)
    assert build_deps.header_version(build_deps.NLOHMANN_JSON, str(system / "include")) == (3, 11)
    assert build_deps.find(build_deps.NLOHMANN_JSON) == build_deps.Found(str(pip / "include"), None)


def test_only_old_nlohmann_copies_fail_naming_them(places):
    system, site = places
    _nlohmann(system, 3, 11)
    assert build_deps.find(build_deps.NLOHMANN_JSON) is None
    message = build_deps.missing(build_deps.NLOHMANN_JSON)
    assert message.startswith("torch-topo: nlohmann-json 3.12 or newer not found")
    assert f"too old: 3.11 in {system}" in message
    assert "pip install 'nlohmann-json>=3.12'" in message


def test_system_nlohmann_of_3_12_wins_and_adds_no_flags(places):
    system, site = places
    _nlohmann(system, 3, 12)
    _nlohmann(site / "nlohmann_json", 3, 12)
    assert build_deps.find(build_deps.NLOHMANN_JSON) == build_deps.Found(None, None)


def test_include_dir_command_line():
    proc = subprocess.run([sys.executable, build_deps.__file__, "--include-dir", "nlohmann-json"],
                          capture_output=True, text=True, check=True)
    found = build_deps.find(build_deps.NLOHMANN_JSON)
    assert proc.stdout.strip() == (found.include_dir or "")
