# SPDX-License-Identifier: Apache-2.0
"""`Topology`: the Python view of one host's interconnect (GPUs, NICs, NUMA, paths).

Built by `load_topology(path)` from any file the core reads (nvidia-smi text, NCCL topology
XML, hwloc XML, torch-topo JSON) or by `torch_topo.probe()` on the live host. GPU positions
0..gpu_count-1 follow the source's order (CUDA PCI-bus order, or nvidia-smi numbering).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from torch_topo import _C
from torch_topo.validation import is_int_in

__all__ = ["Topology", "GpuInfo", "NicInfo", "load_topology", "PATH_CLASSES", "NO_NVLINK_WARNING"]

PATH_CLASSES = ("X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS", "NET")
"""Path classes from fastest to slowest, the vocabulary of `nvidia-smi topo -m`."""

NO_NVLINK_WARNING = _C.NO_NVLINK_WARNING
"""Start of the warning `load_topology(..., nvlink="complete")` leaves on an NCCL XML without
NVLink: what was found, where NVLink was taken from or what was assumed."""

PCIE_ONLY_MATRIX_WARNING = _C.PCIE_ONLY_MATRIX_WARNING
"""Start of the reader's warning on an nvidia-smi `topo -mp` matrix: PCIe paths only, so its
NVLink is unknown."""


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """One GPU: `index` is its CUDA index (or nvidia-smi number); None where unknown."""

    index: int
    bus_id: str | None
    numa_node: int | None
    name: str | None
    sm: int | None
    cpu_affinity: str | None


@dataclass(frozen=True, slots=True)
class NicInfo:
    """One NIC; `speed_gbps` is the line rate in Gbit/s, None where unknown; `latency_us` the
    latency NCCL's net plugin reports for it (NCCL XML `<net latency>`), None where none."""

    name: str
    bus_id: str | None
    numa_node: int | None
    speed_gbps: float | None
    latency_us: float | None


def _known(value, missing):
    return None if value == missing else value


def _check_indices(where: str, count: int, what: str, **indices: object) -> None:
    """A float, string or None index reached pybind11 ("incompatible function arguments") or
    a list's TypeError, and True read as index 1. A whole number out of range is left to the
    IndexError the lookup raises, as for a list."""
    for name, value in indices.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"Topology.{where}: {name}: got {value!r}, expected the int index "
                             f"of one of the {count} {what}s")


class Topology:
    """One host's topology. Wraps a `torch_topo._C.HostTopology` (see `.native`)."""

    __slots__ = ("_host",)

    def __init__(self, host: _C.HostTopology):
        if not isinstance(host, _C.HostTopology):
            raise TypeError(f"Topology: got {type(host).__name__}, expected _C.HostTopology")
        self._host = host

    @property
    def native(self) -> _C.HostTopology:
        """The underlying C++ object, for the planner and backend layers."""
        return self._host

    @property
    def gpu_count(self) -> int:
        return self._host.gpu_count

    @property
    def source(self) -> str:
        """The file path, or "probe:<what>" for a live probe."""
        return self._host.source

    @property
    def format(self) -> str:
        """Format of the source ("nvidia-smi", "nccl-xml", ...), empty for live probes."""
        return self._host.format

    @property
    def hostname(self) -> str:
        return self._host.hostname

    @property
    def gpus(self) -> list[GpuInfo]:
        return [
            GpuInfo(
                index=g.index,
                bus_id=g.bus_id or None,
                numa_node=_known(g.numa_node, -1),
                name=g.name or None,
                sm=_known(g.sm, 0),
                cpu_affinity=g.cpu_affinity or None,
            )
            for g in self._host.gpus
        ]

    @property
    def nics(self) -> list[NicInfo]:
        return [
            NicInfo(
                name=n.name,
                bus_id=n.bus_id or None,
                numa_node=_known(n.numa_node, -1),
                speed_gbps=_known(n.speed_gbps, 0.0),
                latency_us=_known(n.latency_us, 0.0),
            )
            for n in self._host.nics
        ]

    @property
    def numa_nodes(self) -> dict[int, str]:
        """NUMA id -> cpulist ("" when the source gives no CPU list)."""
        return {n.id: n.cpus for n in self._host.numa_nodes}

    @property
    def nvlink_origin(self) -> str:
        """Where the GPU-to-GPU NVLink paths come from: "file" (the source), "live-probe" or
        "inferred" (filled in by `load_topology(..., nvlink="complete")`), "unknown" (an NCCL
        XML without NVLink whose GPU model no table names, or a PCIe-only `nvidia-smi topo -mp`
        matrix), "none" (no NVLink expected)."""
        return _C.nvlink_origin(self._host)

    @property
    def nvlink_warning(self) -> str:
        """The warning NVLink completion left on an NCCL XML without NVLink (what was found and
        assumed), or the reader's on a `topo -mp` matrix; "" when there is none."""
        return next((w for w in self.warnings
                     if w.startswith((NO_NVLINK_WARNING, PCIE_ONLY_MATRIX_WARNING))), "")

    def nvlink_left_out(self) -> tuple[str, str] | None:
        """For an NCCL XML read as written with no NVLink between its GPUs: what completing it
        without this host's live probe would find ("inferred" from the GPU model, "unknown"
        where the file names none) and the warning that says so. Clouds leave NVLink out of
        their files (NCCL adds it from NVML at run time). None for other files, PCIe cards and
        fewer than two GPUs."""
        if self.format != "nccl-xml" or self.nvlink_origin != "none":
            return None
        completed = Topology.from_json(self.to_json())
        origin = _C.complete_nvlink(completed.native, None)
        return (origin, completed.nvlink_warning) if origin in ("inferred", "unknown") else None

    def nvlink_note(self) -> str:
        """One line on where the NVLink paths come from, for `show` and `plan`: the origin, and
        for a completed NCCL XML the warning that says what was found and assumed."""
        origin = self.nvlink_origin
        said = self.nvlink_warning
        if said:
            return f"NVLink: {origin} ({said})"
        if origin == "none" and (left_out := self.nvlink_left_out()):
            return (f"NVLink: none in the file, {'probably' if left_out[0] == 'inferred' else 'possibly'}"
                    " left out as clouds do; --nvlink complete reads the file as NCCL will at run"
                    " time")
        return f"NVLink: {origin}" + {"file": " (as the source gives it)",
                                      "none": " (none between the GPUs)"}.get(origin, "")

    @property
    def warnings(self) -> list[str]:
        """Non-fatal findings of the reader (missing rows, assumed link rates) or, for a live
        probe, of its sources (one line per failed or absent source)."""
        return list(self._host.warnings)

    def _path(self, where: str, i: int, j: int):
        _check_indices(where, self.gpu_count, "GPU", i=i, j=j)
        return self._host.path(i, j)

    def path(self, i: int, j: int) -> str:
        """Path class between GPUs at positions i and j: "X", "NV", "PIX", ... "SYS"."""
        return self._path("path", i, j).cls

    def nvlinks(self, i: int, j: int) -> int:
        """Bonded NVLink lanes between two GPUs (direct or through NVSwitch), 0 when none."""
        return self._path("nvlinks", i, j).nvlinks

    def bandwidth(self, i: int, j: int) -> float:
        """Bottleneck bandwidth in GB/s per direction between two GPUs."""
        return self._path("bandwidth", i, j).bandwidth_gbps

    def latency(self, i: int, j: int) -> float:
        """Latency estimate in microseconds between two GPUs."""
        return self._path("latency", i, j).latency_us

    def _gpu(self, where: str, i: int):
        _check_indices(where, self.gpu_count, "GPU", i=i)
        if not 0 <= i < self.gpu_count:
            raise IndexError(f"GPU index {i} out of range [0, {self.gpu_count})")
        return self._host.gpus[i]

    def numa_node(self, i: int) -> int | None:
        """NUMA node nearest GPU i, None when the source does not say."""
        return _known(self._gpu("numa_node", i).numa_node, -1)

    def nic_path(self, i: int, k: int) -> str:
        """Path class from GPU i to NIC k."""
        _check_indices("nic_path", self.gpu_count, "GPU", i=i)
        _check_indices("nic_path", len(self._host.nics), "NIC", k=k)
        return self._host.nic_path(i, k).cls

    def gpu_label(self, i: int) -> str:
        """Name of GPU i as nvidia-smi prints it ("GPU3")."""
        return f"GPU{self._gpu('gpu_label', i).index}"

    def cell(self, i: int, j: int) -> str:
        """Matrix cell as nvidia-smi prints it: "X", "NV12", "PIX", ..."""
        p = self._path("cell", i, j)
        return f"NV{p.nvlinks}" if p.cls == "NV" else p.cls

    def to_nccl_xml(self) -> str:
        """NCCL topology XML (NCCL_TOPO_FILE) of this host; needs a physical graph."""
        return _C.to_nccl_xml(self._host)

    def to_json(self, indent: int | None = None) -> str:
        """torch-topo JSON ("schema": "torch-topo/1"); exact round trip through from_json.
        `indent`: spaces per level, None for one line."""
        if indent is not None and not is_int_in(indent, 0):  # -3 read as None, 2.0 pybind11's
            raise ValueError(f"Topology.to_json: indent: got {indent!r}, expected None or an "
                             "int >= 0")
        return _C.host_to_json(self._host, -1 if indent is None else indent)

    @classmethod
    def from_json(cls, text: str, path: str = "<string>") -> Topology:
        """Parses torch-topo host JSON; raises TopoParseError naming the bad field."""
        for name, value in (("text", text), ("path", path)):
            if not isinstance(value, str):  # None reached pybind11's "incompatible arguments"
                raise ValueError(f"Topology.from_json: {name}: got {type(value).__name__}, "
                                 "expected a str")
        return cls(_C.host_from_json(text, path))

    def __repr__(self) -> str:
        return f"Topology(gpu_count={self.gpu_count}, nics={len(self._host.nics)}, source={self.source!r})"


def load_topology(path: str | os.PathLike, *, nvlink: str = "file",
                  live: Topology | None = None) -> Topology:
    """Reads a topology file of any accepted format, recognised by content.

    Args:
        path: the file.
        nvlink: "file" reads it as written; "complete" fills the NVLink an NCCL XML leaves
            out (clouds ship the PCI and NIC tree; NCCL adds NVLink from NVML at run time):
            from `live` when it describes the same host (hostname or GPU bus ids), else from
            the GPU model's SXM board, else a warning that NVLink is unknown (`nvlink_origin`
            and `warnings` say which).
        live: the live probe of this host, for "complete".

    Raises:
        TopoParseError: malformed or unknown content; the message starts `path:line:col:`.
        ValueError: the file cannot be read.
    """
    if nvlink not in ("file", "complete"):
        raise ValueError(f"load_topology: nvlink: got {nvlink!r}, expected 'file' or 'complete'")
    if live is not None and not isinstance(live, Topology):
        raise ValueError(f"load_topology: live: got {type(live).__name__}, expected a Topology "
                         "(torch_topo.probe()) or None")
    if not isinstance(path, (str, os.PathLike)):  # os.fspath's TypeError named no argument
        raise ValueError(f"load_topology: path: got {type(path).__name__}, expected a file path")
    return read_topology(path, "load_topology: path", nvlink=nvlink, live=live)


@contextlib.contextmanager
def file_named(name: str):
    """A file the core refuses to read inside the block is a ValueError starting `name: ` (the
    caller's function and argument, or a CLI option such as `--topology`): the core, read by
    several callers, names only the file. Malformed content stays a TopoParseError starting
    `path:line:col:`, which names the file already."""
    try:
        yield
    except _C.TopoParseError:
        raise
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None


def read_topology(path: str | os.PathLike, name: str, *, nvlink: str = "file",
                  live: Topology | None = None) -> Topology:
    """`load_topology` for a caller that names `path` its own way (`file_named`)."""
    with file_named(name):
        host = _C.load_topology_file(os.fspath(path))
    if nvlink == "complete":
        _C.complete_nvlink(host, None if live is None else live.native)
    return Topology(host)
