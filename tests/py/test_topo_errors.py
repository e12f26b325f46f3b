# SPDX-License-Identifier: Apache-2.0
"""The C++ error types reach Python as the documented exception classes."""

from __future__ import annotations

import errno
import os
import re

import pytest

import torch_topo
from torch_topo import TopoError, TopoMismatchError, TopoParseError, TopoUnavailableError


def test_class_hierarchy():
    assert issubclass(TopoError, RuntimeError)
    assert issubclass(TopoParseError, ValueError) and issubclass(TopoParseError, TopoError)
    assert issubclass(TopoUnavailableError, TopoError)
    assert issubclass(TopoMismatchError, TopoError)
    for cls in (TopoError, TopoParseError, TopoUnavailableError, TopoMismatchError):
        assert cls.__doc__


def test_mapping_of_each_kind():
    c = torch_topo._C
    with pytest.raises(TopoParseError, match=r"^f\.txt:3:7: expected X$") as info:
        c._test_raise_parse_error("f.txt", 3, 7, "expected X")
    assert (info.value.path, info.value.line, info.value.column) == ("f.txt", 3, 7)
    with pytest.raises(TopoUnavailableError, match="install libhwloc"):
        c._test_raise_unavailable("hwloc missing; install libhwloc")
    with pytest.raises(TopoMismatchError, match="disagree"):
        c._test_raise_mismatch("ranks disagree")
    with pytest.raises(TopoError, match="plain") as plain:
        c._test_raise_error("plain")
    assert type(plain.value) is TopoError
    with pytest.raises(ValueError, match="bad arg") as bad:
        c._test_raise_invalid_argument("bad arg")
    assert not isinstance(bad.value, TopoError)


def test_unreadable_file_gives_the_systems_reason(tmp_path):
    # The reason comes from the OS (os.strerror), for a missing file as for a directory.
    with pytest.raises(ValueError, match=re.escape(os.strerror(errno.ENOENT))) as missing:
        torch_topo.load_topology(tmp_path / "missing.xml")
    assert str(missing.value).startswith(f"load_topology: path: cannot open "
                                         f"'{tmp_path / 'missing.xml'}'")
    with pytest.raises(ValueError, match=re.escape(os.strerror(errno.EISDIR))):
        torch_topo.load_topology(tmp_path)
