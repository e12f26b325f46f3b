// SPDX-License-Identifier: Apache-2.0
// Reader of `nvidia-smi topo -m` text (layer: csrc/topo): the GPU/NIC path-class matrix, CPU and
// NUMA affinity, the NIC legend; every format generation from the SOC era to GB200.
#pragma once

#include <string>

#include "topo/graph.h"

namespace torch_topo::topo {

/// Parses `nvidia-smi topo -m` output. Accepted: tab or space separated cells, cells glued by
/// lost tabs (`NODENODE`, `GPU0GPU1`), `SOC` (old SYS), `mlx5_N` or `NICn` columns with or
/// without a `NIC Legend:` block, `CPU Affinity`, `NUMA Affinity` and `GPU NUMA ID` columns with
/// empty or N/A cells. Rows may be missing (files cut short): the GPU and NIC columns of the
/// header define the devices; a missing pair falls back to the mirror cell, then to SYS, with a
/// warning naming the missing rows. GPUs keep the file's numbering (Gpu::index = N of `GPUN`).
/// NUMA ids come from `NUMA Affinity` (its first id); without that column they are numbered
/// by distinct CPU affinity in order of appearance, with a warning.
/// Bandwidths and latencies are estimated from the classes (paths.h estimatePathMetrics).
/// A matrix whose legend defines the path classes but not NV# is `nvidia-smi topo -mp` (PCIe
/// paths only): without NV cells, it gets a warning starting with kPcieOnlyMatrixWarning, and
/// its NVLink is unknown (nvlink_inference.h nvlinkOrigin).
/// Throws ParseError (`path:line:col: ...`) on anything else.
HostTopology readNvidiaSmi(const std::string& text, const std::string& path);

/// Start of the warning on a `topo -mp` matrix: NVLink, if any, is not in the file.
extern const char* const kPcieOnlyMatrixWarning;

/// True when `text` looks like `nvidia-smi topo -m` output: a header line with `GPU0`, the
/// first non-blank line or at most three below it (what a paste carries above the table: a
/// prompt, a label, a Markdown fence; readNvidiaSmi skips those with a warning).
bool looksLikeNvidiaSmi(const std::string& text);

}  // namespace torch_topo::topo
