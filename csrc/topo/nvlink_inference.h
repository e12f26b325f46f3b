// SPDX-License-Identifier: Apache-2.0
// NVLink missing from an NCCL XML (layer: csrc/topo, pure C++17). Clouds ship NCCL_TOPO_FILE
// files with the PCI and NIC tree only; NCCL adds the NVLinks from NVML at run time. Read as
// they are, SXM GPUs would look PCIe-connected to every consumer of the paths.
#pragma once

#include <string>

#include "topo/graph.h"

namespace torch_topo::topo {

/// Start of the warning a host carries when its NCCL XML has no NVLink element between its
/// GPUs; `doctor` reports it as `pinned-no-nvlink`.
extern const char* const kNoNvlinkWarning;

/// On a host read from an NCCL XML with two or more GPUs and no NVLink path: where every GPU
/// is an SXM part of a known 8-GPU HGX board (link_tables' SxmBoard, by PCI device id) and the
/// host has that many GPUs, every GPU pair becomes NV<lanes> through NVSwitch (the graph keeps
/// the file's devices) and the GPUs get the board's compute capability; otherwise the paths
/// stay with a warning, unless a GPU names a part outside the table (a PCIe card: nothing is
/// missing). Both warnings start with kNoNvlinkWarning.
/// Returns true when NVLink was inferred.
bool inferMissingNvlink(HostTopology& host);

}  // namespace torch_topo::topo
