# SPDX-License-Identifier: Apache-2.0
"""`bench --published`: outputs as users save them beyond the plain stdout. Lines prefixed by
kubectl logs (--prefix, --timestamps), pdsh or clush read as the plain output does, and a prefix
of no known tool is an error naming the header's line. References are the plain outputs of
tests/data."""

from __future__ import annotations

import pytest
from test_cli_published import ALLTOALL_2X8, H100, NET, _error, _published_path

# --- per-line prefixes ---

def _stamp(k: int) -> str:
    # kubelet's RFC 3339 times to the nanosecond, one per line as the lines were written
    return f"2026-12-06T10:{k // 3600 % 60:02d}:{k // 60 % 60:02d}.{k * 7919 % 10 ** 9:09d}Z "


PREFIXES = {
    "kubectl --prefix": lambda k: "[pod/nccl-test-launcher-7x2kq/launcher] ",
    "kubectl --timestamps": _stamp,
    "kubectl --prefix --timestamps": lambda k: "[pod/nccl-launcher/mpi] " + _stamp(k),
    "pdsh": lambda k: "gpu-node-017: ",
    "clush gathered": lambda k: "node[1-2]: ",
    "srun -l": lambda k: " 0: ",
}


@pytest.mark.parametrize("tool", PREFIXES)
def test_prefixed_lines_read_as_the_plain_output(tmp_path, tool):
    """Every line prefixed as the tool prefixes it (kubectl: kubernetes#76471's
    '[pod/NAME/CONTAINER] ', the kubelet's RFC 3339 time after it; pdsh's and clush's 'HOST: ')
    reads as the plain two-host all-to-all: the same settings and rows. A line of another pod
    or host keeps its prefix and is no row, though it would read as one without it."""
    lines = ALLTOALL_2X8.read_text().splitlines()
    other = ("[pod/worker-3/worker] " if tool.startswith("kubectl") else "gpu-node-018: ") + \
        "        1024           128    double    none      -1     9.00    0.11    0.11       0\n"
    row = next(k for k, line in enumerate(lines) if line.lstrip().startswith("8589934592"))
    text = "".join(PREFIXES[tool](k) + line + "\n" + (other if k == row else "")
                   for k, line in enumerate(lines))
    path = tmp_path / "prefixed.txt"
    path.write_text(text)
    plain = _published_path(ALLTOALL_2X8, *NET)
    got = _published_path(path, *NET)
    assert (got["settings"], got["sources"], got["rows"]) == \
        (plain["settings"], plain["sources"], plain["rows"])


def test_unknown_prefix_is_named_with_the_header_line(tmp_path, capsys):
    """A prefix of no known tool (docker compose's 'NAME  | ') was 'table has no rows' with no
    line; now the header's line and the prefix seen."""
    lines = ALLTOALL_2X8.read_text().splitlines()
    path = tmp_path / "compose.txt"
    path.write_text("".join(f"nccl-1  | {line}\n" for line in lines))
    header = next(i for i, ln in enumerate(lines) if "busbw" in ln and "time" in ln) + 1
    err = _error(capsys, "--published", path, "--topology", H100, *NET)
    assert f"compose.txt:{header}: the table's header comes after 'nccl-1  | ', which is no " \
           "line prefix this reader knows" in err
