// SPDX-License-Identifier: Apache-2.0
// NCCL topology XML (the NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE format) read and write (layer:
// csrc/topo): <system><cpu><pci><gpu><nvlink/></gpu></pci><nic><net/></nic></cpu></system>.
#pragma once

#include <string>

#include "topo/graph.h"

namespace torch_topo::topo {

/// Parses an NCCL topology XML into a host graph and its GPU/NIC summary.
/// - GPUs: `<gpu>` elements; where a file has none (cloud templates leave them to NCCL's run-
///   time probe), PCI devices of class 0x0302xx/0x0300xx whose vendor is NVIDIA or unstated.
///   Order: the `dev` attribute when every GPU has one, else ascending PCI bus id.
/// - NVLinks: `<nvlink target count tclass>`; a target of class 0x068000 (or one the file does
///   not list as a GPU) is an NVSwitch, placeholder ids included (VMs write one target with
///   18 links); a GPU's link to itself is dropped with a warning.
/// - PCIe: `link_speed` as "16 GT/s", "32.0 GT/s PCIe", "32 GT/s PCIe/s" or empty (Gen3, as
///   NCCL assumes), `link_width` 0 or empty = x16.
/// - NICs: one per `<net>`; PCI devices of class 0x02xxxx without `<net>` count as NICs named
///   by their bus id. CPUs are joined pairwise by SMP links rated by vendor and model.
/// - A file cut short (missing closing tags at the end) is kept as far as it goes, with a
///   warning. An NCCL graph file (root <graphs>, NCCL_GRAPH_FILE) is refused with ParseError.
/// Throws ParseError (`path:line:col: ...`) on malformed XML or attributes.
HostTopology readNcclXml(const std::string& text, const std::string& path);

/// Writes `host` as NCCL topology XML in the form NCCL dumps (attributes NCCL reads, source
/// attributes kept where the reader saw them). Requires a physical graph with PCI bus ids:
/// throws InvalidArgument for path-only sources such as nvidia-smi text.
std::string writeNcclXml(const HostTopology& host);

}  // namespace torch_topo::topo
