// SPDX-License-Identifier: Apache-2.0
// NVLink of an NCCL XML completed from the live probe or the GPU model (layer: csrc/topo).
#include "topo/nvlink_inference.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <vector>

#include "topo/link_tables.h"
#include "topo/nvsmi_reader.h"

namespace torch_topo::topo {
namespace {

// What follows kNoNvlinkWarning tells the origins apart, so that a host read back from JSON
// still says where its NVLink came from.
const char* const kFromLive = "NVLink taken from the live probe";
const char* const kFromModel = "assumed from the GPU model";
const char* const kUnknown = "NVLink unknown";

bool hasNvlink(const HostTopology& host) {
  return std::any_of(host.gpu_paths.begin(), host.gpu_paths.end(),
                     [](const PathInfo& p) { return p.cls == PathClass::NV; });
}

const std::string* ourWarning(const HostTopology& host) {
  for (const std::string& w : host.warnings)
    if (w.rfind(kNoNvlinkWarning, 0) == 0) return &w;
  return nullptr;
}

/// "0000:8d:00.0" for "8D:00.0" or "0000:8d:00.0"; "" stays "".
std::string busKey(std::string id) {
  std::transform(id.begin(), id.end(), id.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!id.empty() && std::count(id.begin(), id.end(), ':') == 1) id = "0000:" + id;
  return id;
}

/// Position in `live` of each GPU of `file` (-1 where none): by bus id, else by position when
/// the counts agree and the file has no bus ids to match.
std::vector<int> matchGpus(const HostTopology& file, const HostTopology& live) {
  std::vector<int> to(file.gpus.size(), -1);
  bool any = false;
  for (size_t a = 0; a < file.gpus.size(); ++a) {
    const std::string key = busKey(file.gpus[a].bus_id);
    for (size_t b = 0; b < live.gpus.size() && !key.empty(); ++b) {
      if (busKey(live.gpus[b].bus_id) == key) {
        to[a] = static_cast<int>(b);
        any = true;
      }
    }
  }
  if (!any && file.gpus.size() == live.gpus.size()) {
    for (size_t a = 0; a < to.size(); ++a) to[a] = static_cast<int>(a);
  }
  return to;
}

std::string prefix(const HostTopology& host) {
  return std::string(kNoNvlinkWarning) + " (" + host.source + "; NCCL adds NVLink from NVML at "
         "run time): ";
}

int mergeLive(HostTopology& host, const HostTopology& live) {
  const std::vector<int> to = matchGpus(host, live);
  const int g = host.gpuCount();
  int pairs = 0;
  for (int a = 0; a < g; ++a) {
    for (int b = 0; b < g; ++b) {
      if (a == b || to[a] < 0 || to[b] < 0) continue;
      const PathInfo& p = live.path(to[a], to[b]);
      if (p.cls != PathClass::NV) continue;
      host.path(a, b) = p;
      pairs += a < b;
    }
    if (to[a] >= 0) {
      const Gpu& seen = live.gpus[to[a]];
      if (host.gpus[a].sm == 0) host.gpus[a].sm = seen.sm;
      if (host.gpus[a].name.empty()) host.gpus[a].name = seen.name;
    }
  }
  if (pairs > 0) {
    host.warnings.push_back(prefix(host) + kFromLive + " of this host (" + live.source +
                            ") for " + std::to_string(pairs) + " GPU pairs; the file's PCI "
                            "and NIC tree kept");
  }
  return pairs;
}

/// The board every GPU names, nullptr when they do not all name the same one. `pcie` is set
/// when some GPU names a device id outside the table (0xffff, which some VMs show, aside).
const SxmBoard* commonBoard(const HostTopology& host, bool* pcie) {
  const SxmBoard* board = nullptr;
  bool same = true;
  *pcie = false;
  for (const Node& node : host.graph.nodes) {
    if (node.kind != NodeKind::Gpu) continue;
    const std::string& id = findAttr(node.attrs, "device", "");
    const SxmBoard* b = findSxmBoard(id);
    if (b == nullptr && !id.empty() && id != "0xffff") *pcie = true;
    same = same && b != nullptr && (board == nullptr || b == board);
    board = b;
  }
  return same ? board : nullptr;
}

std::string hexId(unsigned device) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%04x", device);
  return text;
}

}  // namespace

const char* const kNoNvlinkWarning = "NCCL XML without NVLink between its GPUs";

const char* toString(NvlinkOrigin origin) {
  switch (origin) {
    case NvlinkOrigin::File:
      return "file";
    case NvlinkOrigin::LiveProbe:
      return "live-probe";
    case NvlinkOrigin::Inferred:
      return "inferred";
    case NvlinkOrigin::Unknown:
      return "unknown";
    case NvlinkOrigin::None:
      break;
  }
  return "none";
}

bool describesSameHost(const HostTopology& file, const HostTopology& live) {
  if (!file.hostname.empty() && file.hostname == live.hostname) return true;
  if (file.gpus.empty() || file.gpus.size() != live.gpus.size()) return false;
  std::vector<std::string> a, b;
  for (const Gpu& gpu : file.gpus) a.push_back(busKey(gpu.bus_id));
  for (const Gpu& gpu : live.gpus) b.push_back(busKey(gpu.bus_id));
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b && !a.front().empty();
}

NvlinkOrigin completeNvlink(HostTopology& host, const HostTopology* live) {
  if (ourWarning(host) != nullptr) return nvlinkOrigin(host);
  const int g = host.gpuCount();
  if (host.format != "nccl-xml" || g < 2 || hasNvlink(host)) return nvlinkOrigin(host);
  if (live != nullptr && describesSameHost(host, *live)) {
    // NVML's word on its own host, as NCCL takes it: without NVLink there, there is none.
    if (!hasNvlink(*live)) return NvlinkOrigin::None;
    if (mergeLive(host, *live) > 0) return NvlinkOrigin::LiveProbe;
  }
  bool pcie = false;
  const SxmBoard* board = commonBoard(host, &pcie);
  if (pcie) return NvlinkOrigin::None;
  if (board == nullptr || g != board->board_gpus) {
    host.warnings.push_back(prefix(host) + kUnknown + ": the file names no SXM board of " +
                            std::to_string(g) + " GPUs by PCI device id, so GPU pairs keep its "
                            "PCI paths; if these are SXM GPUs, plan on this host's live probe "
                            "or pin a file with NVLink (NCCL_TOPO_DUMP_FILE)");
    return NvlinkOrigin::Unknown;
  }
  // Through NVSwitch: GPU -> switch -> GPU, two NVLink hops at the board's full lane count.
  const double gbps = board->nvlinks * nvlinkLaneGBps(board->sm);
  const PathInfo via_switch{PathClass::NV, board->nvlinks, gbps, 2 * kNvlinkHopLatencyUs};
  for (int a = 0; a < g; ++a) {
    for (int b = 0; b < g; ++b) {
      if (a != b) host.path(a, b) = via_switch;
    }
  }
  for (Gpu& gpu : host.gpus) {
    if (gpu.sm == 0) gpu.sm = board->sm;
    if (gpu.name.empty()) gpu.name = board->name;
  }
  host.warnings.push_back(prefix(host) + "NV" + std::to_string(board->nvlinks) +
                          " through NVSwitch for every GPU pair " + kFromModel + " (" +
                          board->name + ", PCI device " + hexId(board->device) + ", " +
                          std::to_string(board->board_gpus) +
                          "-GPU board); the live probe of this host would confirm it");
  return NvlinkOrigin::Inferred;
}

NvlinkOrigin nvlinkOrigin(const HostTopology& host) {
  if (const std::string* w = ourWarning(host)) {
    if (w->find(kFromLive) != std::string::npos) return NvlinkOrigin::LiveProbe;
    if (w->find(kFromModel) != std::string::npos) return NvlinkOrigin::Inferred;
    return NvlinkOrigin::Unknown;
  }
  for (const std::string& w : host.warnings)
    if (w.rfind(kPcieOnlyMatrixWarning, 0) == 0) return NvlinkOrigin::Unknown;
  return hasNvlink(host) ? NvlinkOrigin::File : NvlinkOrigin::None;
}

}  // namespace torch_topo::topo
