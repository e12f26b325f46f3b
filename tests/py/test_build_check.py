# SPDX-License-Identifier: Apache-2.0
"""The build refuses a module with a private libstdc++, and picks a compiler that shares torch's."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys

import pytest

from torch_topo import _C, build_check

GXX = shutil.which("g++")
pytestmark = pytest.mark.skipif(GXX is None, reason="needs g++ to link test modules")

SOURCE = '#include <sstream>\nstd::string f(long x) { std::ostringstream o; o << x; return o.str(); }\n'


def _link(tmp_path, name, *flags):
    src = tmp_path / "m.cpp"
    src.write_text(SOURCE)
    out = tmp_path / name
    subprocess.run([GXX, "-shared", "-fPIC", *flags, str(src), "-o", str(out)], check=True)
    return str(out)


def _private_runtime_wrapper(tmp_path):
    """A compiler wrapper that links libstdc++ statically, as the GPU image's /opt/gcc/bin/g++ did."""
    wrapper = tmp_path / "gxx-private"
    wrapper.write_text(f'#!/bin/sh\nexec {GXX} -static-libstdc++ "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return str(wrapper)


def test_shared_runtime_module_passes(tmp_path):
    path = _link(tmp_path, "shared.so")
    assert build_check.SHARED_RUNTIME in build_check.needed_libraries(path)
    build_check.check_shared_runtime(path, GXX)


def test_static_runtime_module_is_refused_with_cxx_and_fix(tmp_path, monkeypatch):
    path = _link(tmp_path, "static.so", "-static-libstdc++")
    needed = build_check.needed_libraries(path)
    assert build_check.SHARED_RUNTIME not in needed and "libc.so.6" in needed
    monkeypatch.setenv("CXX", "/opt/gcc/bin/g++")
    with pytest.raises(build_check.RuntimeLinkError) as err:
        build_check.check_shared_runtime(path)
    message = str(err.value)
    assert "CXX=/opt/gcc/bin/g++" in message
    assert "libc.so.6" in message  # what was found
    assert "CXX=/usr/bin/g++" in message  # the fix


def test_loaded_runtime_is_torchs():
    # torch (imported through torch_topo) maps the shared libstdc++ this process uses.
    assert _C is not None
    runtime = build_check.loaded_runtime()
    assert runtime is not None and os.path.basename(runtime).startswith("libstdc++.so.6")


def test_built_extension_shares_the_runtime():
    build_check.check_shared_runtime(_C.__file__)


def test_pick_compiler_skips_a_private_runtime_wrapper(tmp_path):
    wrapper = _private_runtime_wrapper(tmp_path)
    assert not build_check.compiler_shares_runtime(wrapper)
    assert build_check.compiler_shares_runtime(GXX)
    assert build_check.pick_compiler([wrapper, GXX]) == GXX
    assert build_check.pick_compiler([wrapper, str(tmp_path / "missing")]) is None


def test_pick_compiler_command_line(tmp_path):
    wrapper = _private_runtime_wrapper(tmp_path)
    script = build_check.__file__
    ok = subprocess.run([sys.executable, script, "--pick-compiler", wrapper, GXX],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.strip() == GXX
    none = subprocess.run([sys.executable, script, "--pick-compiler", wrapper],
                          capture_output=True, text=True)
    assert none.returncode == 1 and "libstdc++.so.6" in none.stderr
    usage = subprocess.run([sys.executable, script], capture_output=True, text=True)
    assert usage.returncode == 2


def test_setup_build_ext_removes_a_private_runtime_module(tmp_path, monkeypatch):
    """setup.py's build_ext wrapper, on a plain C++ extension built with the private wrapper."""
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    (tmp_path / "m.cpp").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    wrapper = _private_runtime_wrapper(tmp_path)
    monkeypatch.setenv("CXX", wrapper)
    monkeypatch.setenv("LDSHARED", f"{wrapper} -shared")
    dist = Distribution({"name": "m", "ext_modules": [Extension("m", ["m.cpp"], language="c++")]})
    cmd = build_check.checked_build_ext(build_ext)(dist)
    cmd.inplace = True
    cmd.ensure_finalized()
    with pytest.raises(SystemExit, match="does not link the shared C\\+\\+ runtime") as err:
        cmd.run()
    assert wrapper in str(err.value)
    assert not list(tmp_path.glob("m*.so"))


def _run_paths(path):
    out = subprocess.run(["readelf", "-d", "--wide", path], capture_output=True, text=True,
                         check=True).stdout
    found = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library r\w+: \[([^\]]*)\]", out)
    return found.group(1).split(":") if found else []


@pytest.mark.parametrize("through_wheel,inplace,keeps_build_path", [
    (True, False, False),  # pip install . / pip wheel: the module runs where it is installed
    (True, True, True),    # pip install -e . (editable builds in place, also through a wheel)
    (False, False, True),  # setup.py build, run from the build folder (scripts/test_torch.sh)
])
def test_wheel_module_has_no_run_path_into_the_build_environment(
        tmp_path, monkeypatch, through_wheel, inplace, keeps_build_path):
    """setup.py's build_ext on a plain C++ extension given setup.py's two run paths."""
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    (tmp_path / "m.cpp").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    beside = "$ORIGIN/../cmeel.prefix/lib"
    build_env = str(tmp_path / "venv" / "cmeel.prefix" / "lib")
    ext = Extension("m", ["m.cpp"], language="c++",
                    extra_link_args=["-Wl,-rpath," + beside, "-Wl,-rpath," + build_env])
    dist = Distribution({"name": "m", "ext_modules": [ext]})
    if through_wheel:
        dist.get_command_obj("bdist_wheel")
    cmd = build_check.checked_build_ext(build_ext)(dist)
    cmd.inplace = inplace
    cmd.ensure_finalized()
    cmd.run()
    expected = [beside, build_env] if keeps_build_path else [beside]
    assert _run_paths(cmd.get_ext_fullpath("m")) == expected
