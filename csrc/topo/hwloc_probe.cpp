// SPDX-License-Identifier: Apache-2.0
// HwlocApi over libhwloc (layer: csrc/topo), compiled only with TORCH_TOPO_WITH_HWLOC; without it
// the probe falls back to /sys and records why.
#include "topo/hwloc_api.h"

#include "topo/error.h"

#if TORCH_TOPO_WITH_HWLOC
#include <hwloc.h>
#endif

namespace torch_topo::topo {
namespace {

#if TORCH_TOPO_WITH_HWLOC
class LibHwloc : public HwlocApi {
 public:
  LibHwloc() {
    if (hwloc_topology_init(&topo_) != 0) {
      reason_ = "hwloc_topology_init failed";
      return;
    }
    // I/O objects are filtered out by default; keep the PCI tree and the OS devices (NICs).
    hwloc_topology_set_io_types_filter(topo_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(topo_) != 0) {
      reason_ = "hwloc_topology_load failed";
      return;
    }
    loaded_ = true;
  }
  ~LibHwloc() override {
    if (topo_) hwloc_topology_destroy(topo_);
  }
  bool available() const override { return loaded_; }
  std::string unavailableReason() const override { return loaded_ ? "" : reason_; }
  std::string exportXml() override {
    if (!loaded_) throw Unavailable("hwloc: " + reason_);
    char* buffer = nullptr;
    int length = 0;
    if (hwloc_topology_export_xmlbuffer(topo_, &buffer, &length, 0) != 0 || !buffer) {
      throw Unavailable("hwloc: hwloc_topology_export_xmlbuffer failed");
    }
    std::string xml(buffer);
    hwloc_free_xmlbuffer(topo_, buffer);
    return xml;
  }

 private:
  hwloc_topology_t topo_ = nullptr;
  bool loaded_ = false;
  std::string reason_;
};
#else
class NoHwloc : public HwlocApi {
 public:
  bool available() const override { return false; }
  std::string unavailableReason() const override {
    return "built without TORCH_TOPO_WITH_HWLOC (install libhwloc-dev and rebuild)";
  }
  std::string exportXml() override { throw Unavailable("hwloc: " + unavailableReason()); }
};
#endif

}  // namespace

std::unique_ptr<HwlocApi> loadHwloc() {
#if TORCH_TOPO_WITH_HWLOC
  return std::make_unique<LibHwloc>();
#else
  return std::make_unique<NoHwloc>();
#endif
}

}  // namespace torch_topo::topo
