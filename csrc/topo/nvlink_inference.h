// SPDX-License-Identifier: Apache-2.0
// NVLink missing from an NCCL XML (layer: csrc/topo, pure C++17). Clouds ship NCCL_TOPO_FILE
// files with the PCI and NIC tree only; NCCL adds the NVLinks from NVML at run time. Read as
// they are, SXM GPUs look PCIe-connected to every consumer of the paths. The loader keeps the
// file as written; completeNvlink is the separate step for a file pinned for a run.
#pragma once

#include <string>

#include "topo/graph.h"

namespace torch_topo::topo {

/// Where a host's GPU-to-GPU NVLink paths come from.
enum class NvlinkOrigin {
  None,      // no NVLink, and none expected (PCIe cards, one GPU, not an NCCL XML)
  File,      // the source itself
  LiveProbe, // merged from the live probe of the same host (completeNvlink)
  Inferred,  // assumed from the GPU model's SXM board (completeNvlink)
  Unknown,   // an NCCL XML without NVLink whose GPUs no table names, or an nvidia-smi
             // `topo -mp` matrix (PCIe paths only): may lack it
};

/// "none", "file", "live-probe", "inferred", "unknown".
const char* toString(NvlinkOrigin origin);

/// Start of the warning completeNvlink leaves on a host whose NCCL XML has no NVLink element
/// between its GPUs; `doctor` reports it as `pinned-no-nvlink`.
extern const char* const kNoNvlinkWarning;

/// Same machine: equal non-empty hostnames, or the same set of GPU PCI bus ids (case and an
/// omitted "0000:" domain aside).
bool describesSameHost(const HostTopology& file, const HostTopology& live);

/// Fills the GPU-to-GPU paths of an NCCL XML host (two or more GPUs, no NVLink path) and returns
/// where its NVLink now comes from. With `live` (may be null) describing the same host: each
/// GPU pair NVLinked there takes the live path (GPUs matched by bus id, else by position when
/// only the hostname matched; the graph, PCI and NIC paths stay the file's), and where the live
/// probe has no NVLink either, nothing changes (None, no warning: NCCL would see none). Else
/// (no such probe, or none of its NVLinked GPUs found in the file), when every GPU is the same
/// SXM part of link_tables' SxmBoard and the host has the board's GPU count: NV<lanes> through
/// NVSwitch for every pair. Else, unless a GPU names a
/// part outside the table (a PCIe card: nothing is missing), NVLink is unknown. Every outcome
/// but "nothing missing" leaves one warning starting with kNoNvlinkWarning naming the file and
/// what was assumed. Calling it again changes nothing.
NvlinkOrigin completeNvlink(HostTopology& host, const HostTopology* live);

/// The origin completeNvlink gave `host` (read from its warning, which JSON keeps), else Unknown
/// for a `topo -mp` matrix (nvsmi_reader.h kPcieOnlyMatrixWarning), else File when some GPU pair
/// is NV, else None.
NvlinkOrigin nvlinkOrigin(const HostTopology& host);

}  // namespace torch_topo::topo
