// SPDX-License-Identifier: Apache-2.0
// NVLink of SXM boards inferred where an NCCL XML leaves it out (layer: csrc/topo).
#include "topo/nvlink_inference.h"

#include "topo/link_tables.h"

namespace torch_topo::topo {

const char* const kNoNvlinkWarning = "NCCL XML without NVLink between its GPUs";

bool inferMissingNvlink(HostTopology& host) {
  const int g = host.gpuCount();
  if (g < 2) return false;
  for (const PathInfo& p : host.gpu_paths)
    if (p.cls == PathClass::NV) return false;
  // Every GPU must name the same SXM part by a device id the board table knows. A GPU named
  // by another id is a PCIe card: no NVLink to expect. No id, or the 0xffff some VMs show:
  // unknown.
  const SxmBoard* board = nullptr;
  bool same = true;
  for (const Node& node : host.graph.nodes) {
    if (node.kind != NodeKind::Gpu) continue;
    const std::string& id = findAttr(node.attrs, "device", "");
    const SxmBoard* b = findSxmBoard(id);
    if (b == nullptr && !id.empty() && id != "0xffff") return false;
    same = same && b != nullptr && (board == nullptr || b == board);
    board = b;
  }
  if (!same || board == nullptr || g != board->board_gpus) {
    host.warnings.push_back(
        std::string(kNoNvlinkWarning) +
        " (NCCL adds it from NVML at run time): GPU pairs keep the file's PCI paths, as the "
        "file names no SXM board of " + std::to_string(g) + " GPUs by device id; if these "
        "are SXM GPUs, use the live probe or NCCL's own dump (NCCL_TOPO_DUMP_FILE)");
    return false;
  }
  // Through NVSwitch: GPU -> switch -> GPU, two NVLink hops at the board's full lane count.
  const double gbps = board->nvlinks * nvlinkLaneGBps(board->sm);
  for (int a = 0; a < g; ++a)
    for (int b = 0; b < g; ++b)
      if (a != b) host.path(a, b) = PathInfo{PathClass::NV, board->nvlinks, gbps, 2 * kNvlinkHopLatencyUs};
  for (Gpu& gpu : host.gpus) {
    if (gpu.sm == 0) gpu.sm = board->sm;
    if (gpu.name.empty()) gpu.name = board->name;
  }
  host.warnings.push_back(std::string(kNoNvlinkWarning) + " (NCCL adds it from NVML at run "
                          "time): NV" + std::to_string(board->nvlinks) + " through NVSwitch "
                          "inferred for every GPU pair from the GPU model (" + board->name +
                          "); the live probe of this host would confirm it");
  return true;
}

}  // namespace torch_topo::topo
