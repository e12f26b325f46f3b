// SPDX-License-Identifier: Apache-2.0
// The hwloc calls the live probe needs, behind an abstract interface (layer: csrc/topo): the live
// topology is exported as hwloc XML and read by the same reader as hwloc files, so a fake that
// returns a real file's text exercises the whole probe on any machine.
#pragma once

#include <memory>
#include <string>

namespace torch_topo::topo {

class HwlocApi {
 public:
  virtual ~HwlocApi() = default;
  /// True when built with hwloc's headers and libhwloc loaded at run time. Discovery can still
  /// fail: exportXml then throws.
  virtual bool available() const = 0;
  /// Why not ("built without TORCH_TOPO_WITH_HWLOC ...", "libhwloc not loadable ..."), "" when
  /// available.
  virtual std::string unavailableReason() const = 0;
  /// This host's topology with I/O devices (PCI bridges, PCI devices, OS devices) as hwloc XML
  /// (hwloc_topology_export_xmlbuffer). Throws Unavailable naming the hwloc call that failed,
  /// or when !available().
  virtual std::string exportXml() = 0;
};

/// The libhwloc-backed implementation (the library opened with dlopen on first use); with
/// TORCH_TOPO_WITH_HWLOC unset at build time it is never available and says which build
/// option enables it. `xml_path` non-empty makes libhwloc
/// load that `lstopo FILE.xml` export instead of discovering this host (hwloc_topology_set_xml):
/// another machine's topology through the same calls as the live one.
std::unique_ptr<HwlocApi> loadHwloc(const std::string& xml_path = "");

}  // namespace torch_topo::topo
