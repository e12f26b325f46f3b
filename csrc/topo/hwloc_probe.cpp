// SPDX-License-Identifier: Apache-2.0
// HwlocApi over libhwloc (layer: csrc/topo), compiled only with TORCH_TOPO_WITH_HWLOC; without it
// the probe falls back to /sys and records why.
#include "topo/hwloc_api.h"

#include <cerrno>
#include <cstring>

#include "topo/error.h"

#if TORCH_TOPO_WITH_HWLOC
#include <hwloc.h>
#endif

namespace torch_topo::topo {
namespace {

#if TORCH_TOPO_WITH_HWLOC
// Discovery runs in the constructor; a failure is kept and thrown by exportXml, so the probe
// reports it as an hwloc failure rather than as hwloc being absent.
class LibHwloc : public HwlocApi {
 public:
  explicit LibHwloc(const std::string& xml_path) {
    if (hwloc_topology_init(&topo_) != 0) {
      topo_ = nullptr;
      failure_ = call("hwloc_topology_init", errno);
      return;
    }
    if (!xml_path.empty() && hwloc_topology_set_xml(topo_, xml_path.c_str()) != 0) {
      int err = errno;
      failure_ = call("hwloc_topology_set_xml(" + xml_path + ")", err);
      return;
    }
    // I/O objects are filtered out by default; keep the PCI tree and the OS devices (NICs).
    hwloc_topology_set_io_types_filter(topo_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(topo_) != 0) failure_ = call("hwloc_topology_load", errno);
  }
  ~LibHwloc() override {
    if (topo_) hwloc_topology_destroy(topo_);
  }
  bool available() const override { return true; }
  std::string unavailableReason() const override { return ""; }
  std::string exportXml() override {
    if (!failure_.empty()) throw Unavailable(failure_);
    char* buffer = nullptr;
    int length = 0;
    if (hwloc_topology_export_xmlbuffer(topo_, &buffer, &length, 0) != 0 || !buffer) {
      throw Unavailable(call("hwloc_topology_export_xmlbuffer", errno));
    }
    std::string xml(buffer);
    hwloc_free_xmlbuffer(topo_, buffer);
    return xml;
  }

 private:
  // `err` is errno read by the caller right after the failing call.
  static std::string call(const std::string& what, int err) {
    return "hwloc: " + what + " failed: " + std::strerror(err);
  }
  hwloc_topology_t topo_ = nullptr;
  std::string failure_;
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

std::unique_ptr<HwlocApi> loadHwloc(const std::string& xml_path) {
#if TORCH_TOPO_WITH_HWLOC
  return std::make_unique<LibHwloc>(xml_path);
#else
  (void)xml_path;
  return std::make_unique<NoHwloc>();
#endif
}

}  // namespace torch_topo::topo
