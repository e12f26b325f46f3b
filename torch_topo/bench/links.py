# SPDX-License-Identifier: Apache-2.0
"""Measured link bandwidths held against what the topology promises (layer: Python package).

Every expectation comes from the topology and the cost model (csrc/topo/link_tables through the
bindings), never from a table here: a GPU's host/device copies against its PCIe link
(`PlannerCluster.gpu_pcie_links`: generation x width), a GPU pair's peer copy against the path
bandwidth (`Topology.bandwidth`: NVLink lanes x the generation's lane rate, or the PCIe/SMP
bottleneck), and a multi-host collective's bus bandwidth against the cost model's estimate over
the hosts' NICs and TORCH_TOPO_INTER_HOST_GBPS where set (`PlannerCluster.estimate`). A figure
under `min_fraction` of its expectation is a `doctor`-style finding; so is a PCIe link of unknown
width (the expectation then assumes x16).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from torch_topo.doctor import Finding

__all__ = ["DEFAULT_MIN_FRACTION", "LinkCheck", "check_host_copy", "check_peer_copy",
           "check_inter_host", "link_findings"]

DEFAULT_MIN_FRACTION = 0.7
"""Healthy links measure 0.9-1.15x the table rates (pinned copies on PCIe Gen3-5, copy-engine
NVLink transfers); a link trained at half its width or with half its NVLinks measures about 0.5x."""

_KIND_TEXT = {"h2d": "host-to-device copy", "d2h": "device-to-host copy",
              "p2p": "peer-to-peer copy", "inter_host": "inter-host bus bandwidth"}


@dataclass(frozen=True, slots=True)
class LinkCheck:
    """One measured figure and its expectation."""

    kind: Literal["h2d", "d2h", "p2p", "inter_host"]
    subject: str
    """What was measured: "host0 GPU1", "host0 GPU0-GPU3", "2 hosts"."""
    measured_gbps: float
    """GB/s per direction (inter_host: nccl-tests bus bandwidth)."""
    expected_gbps: float | None
    """From the topology or cost model; None when the topology does not say."""
    basis: str
    """Where the expectation comes from, in words."""
    link: str = ""
    """Link class: "PCIe", "PCIe-unknown-width", "NV", "PIX", ..., "NET"."""

    @property
    def fraction(self) -> float | None:
        return self.measured_gbps / self.expected_gbps if self.expected_gbps else None

    def to_dict(self) -> dict:
        return {**asdict(self), "fraction": self.fraction}


def check_host_copy(planner, host: int, gpu: int, kind: Literal["h2d", "d2h"],
                    measured_gbps: float) -> LinkCheck:
    """A host/device copy of GPU `gpu` (CUDA index) of host `host` of a `_C.PlannerCluster`."""
    links = [(lanes, gbps) for g, lanes, gbps in planner.gpu_pcie_links(host) if g == gpu]
    subject = f"host{host} GPU{gpu}"
    if not links:
        return LinkCheck(kind, subject, measured_gbps, None,
                         "no PCIe link in the topology (no physical graph: nvidia-smi text?)")
    lanes, gbps = links[0]
    if lanes <= 0:
        # link_tables rates an unknown width as x16 (NCCL's default for empty sysfs fields).
        return LinkCheck(kind, subject, measured_gbps, gbps,
                         f"PCIe link of unknown width, rated as x16 at {gbps / 16:.3g} GB/s per lane",
                         "PCIe-unknown-width")
    return LinkCheck(kind, subject, measured_gbps, gbps,
                     f"PCIe x{lanes} link at {gbps / lanes:.3g} GB/s per lane", "PCIe")


def check_peer_copy(topology, a: int, b: int, measured_gbps: float, host: int = 0) -> LinkCheck:
    """A peer copy between GPUs at positions `a` and `b` of a `Topology`, host `host` of the run
    (slower direction)."""
    cell = topology.cell(a, b)
    gbps = topology.bandwidth(a, b)
    what = f"{topology.nvlinks(a, b)} NVLinks" if cell.startswith("NV") else f"{cell} PCIe path"
    return LinkCheck("p2p", f"host{host} {topology.gpu_label(a)}-{topology.gpu_label(b)}",
                     measured_gbps, gbps if gbps > 0 else None,
                     f"{cell}: {what} (path bandwidth)", cell)


def check_inter_host(planner, hosts, op: str, nbytes: int, measured_busbw_gbps: float,
                     pinned_gbps: float = 0.0) -> LinkCheck:
    """A collective over every rank of a multi-host `_C.PlannerCluster` against the cost model.

    Args:
        hosts: the `Topology` of each host, for the NIC speeds the expectation rests on.
        op: the collective measured; nbytes: its size (nccl-tests meaning).
        pinned_gbps: TORCH_TOPO_INTER_HOST_GBPS as the planner was built with it (0: not set):
            the model caps each host at it, so it rates hosts whose NICs have no speed.
    """
    nics = []
    for i, host in enumerate(hosts):
        speeds = [n.speed_gbps for n in host.nics if n.speed_gbps]
        nics.append(f"host{i} {len(speeds)} x {max(speeds):g} Gbit/s" if speeds
                    else f"host{i} NIC speed unknown")
    subject, listed = f"{op} over {len(hosts)} hosts", ", ".join(nics)
    if pinned_gbps:
        # NICs of known speed still bound the model below the pin, so both are named.
        network = f"TORCH_TOPO_INTER_HOST_GBPS={pinned_gbps:g} GB/s per host and NICs: {listed}"
    elif any("unknown" in text for text in nics):
        return LinkCheck("inter_host", subject, measured_busbw_gbps, None,
                         f"NIC speeds unknown, TORCH_TOPO_INTER_HOST_GBPS not set: {listed}",
                         "NET")
    else:
        network = f"NICs: {listed}"
    estimate = planner.estimate(op, nbytes, [list(range(planner.world_size))])
    return LinkCheck("inter_host", subject, measured_busbw_gbps, estimate["bus_bandwidth_gbps"],
                     f"cost model at {nbytes} B ({estimate['algorithm']}) over {network}", "NET")


def _fix(check: LinkCheck) -> str:
    if check.kind in ("h2d", "d2h"):
        return ("compare LnkSta with LnkCap in `lspci -vv` (or `nvidia-smi -q -d PCIE`) for a link "
                "trained below its width or generation; reseat the GPU or its riser, check the "
                "BIOS PCIe settings, and keep the process on the GPU's NUMA node "
                "(TORCH_TOPO_BIND_NUMA=1)")
    if check.kind == "p2p" and check.link.startswith("NV"):
        return ("check `nvidia-smi nvlink --status` for links down or at reduced rate and "
                "`nvidia-smi topo -m`; on NVSwitch systems check the fabric manager; in a VM, "
                "check that NVLink is passed through")
    if check.kind == "p2p":
        return ("check peer access (`nvidia-smi topo -p2p r`) and ACS/IOMMU settings, which "
                "send peer traffic through the root complex")
    return ("check each NIC's link (`ibstat`, `ethtool`) and that NCCL uses RDMA "
            "(NCCL_DEBUG=INFO shows NET/IB, not NET/Socket); in a VM, pin the provider's "
            "topology file (NCCL_TOPO_FILE) so NCCL sees the NICs' PCIe placement")


def link_findings(checks: list[LinkCheck], min_fraction: float = DEFAULT_MIN_FRACTION
                  ) -> list[Finding]:
    """`doctor` findings: each figure under `min_fraction` of its expectation (warning), each GPU
    whose PCIe width is unknown (warning, once per GPU), each figure without expectation (info)."""
    if not 0 < min_fraction <= 1:
        raise ValueError(f"min_fraction: got {min_fraction}, expected 0 < min_fraction <= 1")
    findings = []
    unknown_width = set()
    for c in checks:
        what = f"{c.subject}: {_KIND_TEXT[c.kind]}"
        if c.link == "PCIe-unknown-width" and c.subject not in unknown_width:
            unknown_width.add(c.subject)
            findings.append(Finding(
                "pcie-width-unknown", "warning",
                f"{c.subject}: the topology gives no PCIe link width (e.g. link_width=\"0\" in a "
                f"VM's NCCL dump); its copies were held against an assumed x16 "
                f"({c.expected_gbps:.1f} GB/s)",
                "pin a topology file with the real width (TORCH_TOPO_FILE or NCCL_TOPO_FILE, "
                "e.g. dumped on a bare-metal host of this type), or have the hypervisor expose "
                "the PCIe link capabilities"))
        if c.expected_gbps is None:
            findings.append(Finding(
                "link-unrated", "info", f"{what}: measured {c.measured_gbps:.2f} GB/s, no "
                f"expectation ({c.basis})", "give a topology file with the physical graph "
                "(NCCL XML or hwloc XML) and NIC speeds (--topology)"))
        elif c.fraction < min_fraction:
            findings.append(Finding(
                f"{c.kind.replace('_', '-')}-slow", "warning",
                f"{what}: got {c.measured_gbps:.2f} GB/s, expected >= "
                f"{min_fraction * c.expected_gbps:.2f} GB/s ({min_fraction:.0%} of "
                f"{c.expected_gbps:.2f} GB/s: {c.basis}); measured {c.fraction:.1%}",
                _fix(c)))
    return findings
