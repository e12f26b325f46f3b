// SPDX-License-Identifier: Apache-2.0
// sysfs readers of the live probe (layer: csrc/topo): NUMA nodes, physical NICs, EFA devices, the
// DMI product name, PCI NUMA nodes.
// Plain POSIX reads and text_numbers parsing: no iostream, no locale (issue 16).
#include "topo/sysfs_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "topo/cpulist.h"
#include "topo/error.h"
#include "topo/text_numbers.h"

namespace torch_topo::topo {
namespace {

// A one-line sysfs attribute without its trailing newline; false when absent or unreadable
// (read() fails with EINVAL on /sys/class/net/X/speed while the link is down).
bool readAttribute(const std::string& path, std::string* out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[4096];
  ssize_t n = read(fd, buffer, sizeof(buffer));
  close(fd);
  if (n < 0) return false;
  out->assign(buffer, static_cast<size_t>(n));
  while (!out->empty() && (out->back() == '\n' || out->back() == ' ')) out->pop_back();
  return true;
}

bool listDir(const std::string& path, std::vector<std::string>* names) {
  DIR* dir = opendir(path.c_str());
  if (!dir) return false;
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") names->push_back(name);
  }
  closedir(dir);
  std::sort(names->begin(), names->end());
  return true;
}

// The PCI function that a `device` link resolves to or lies under, and that function's sysfs
// directory. virtio-net links end one level below it (.../0000:00:03.0/virtio2); on an H200
// Firecracker VM taking the last path component alone gave eth0 no bus id, so the live probe
// could not join it to hwloc's PCI tree and reported GPU -> NIC as SYS instead of PHB.
bool pciFunctionOf(const std::string& device_link, std::string* bus_id, std::string* dir) {
  char resolved[PATH_MAX];
  if (!realpath(device_link.c_str(), resolved)) return false;
  std::string path = resolved;
  bool found = false;
  for (size_t start = 1; start <= path.size();) {
    size_t stop = std::min(path.find('/', start), path.size());
    std::string component = path.substr(start, stop - start);
    if (isPciBusId(component)) {
      *bus_id = component;
      *dir = path.substr(0, stop);
      found = true;
    }
    start = stop + 1;
  }
  return found;
}

int readNumaNodeFile(const std::string& path) {
  std::string text;
  if (!readAttribute(path, &text)) return -1;
  ParsedNumber<long long> node = parseInteger(text);
  return node && node.value >= 0 && node.value < 4096 ? static_cast<int>(node.value) : -1;
}

}  // namespace

bool isPciBusId(const std::string& text, size_t max_domain_digits) {
  static const char kAfterDomain[] = ":hh:hh.f";  // h: hex digit, f: function 0-7
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  const size_t colon = text.find(':');
  if (colon == std::string::npos || colon < 4 || colon > max_domain_digits ||
      text.size() != colon + sizeof(kAfterDomain) - 1 ||
      !std::all_of(text.begin(), text.begin() + colon, hex)) {
    return false;
  }
  for (size_t i = 0; i < sizeof(kAfterDomain) - 1; ++i) {
    char c = text[colon + i], want = kAfterDomain[i];
    bool ok = want == 'h' ? hex(c) : want == 'f' ? (c >= '0' && c <= '7') : c == want;
    if (!ok) return false;
  }
  return true;
}

std::vector<NumaNode> readSysfsNumaNodes(const std::string& root) {
  std::vector<NumaNode> nodes;
  std::string node_dir = root + "/devices/system/node";
  std::vector<std::string> names;
  listDir(node_dir, &names);
  for (const std::string& name : names) {
    ParsedNumber<long long> id = parseInteger(name.size() > 4 ? name.substr(4) : "");
    if (name.compare(0, 4, "node") != 0 || !id || id.value < 0 || id.value >= 4096) continue;
    std::string where = node_dir + "/" + name + "/cpulist";
    std::string cpus;
    TOPO_CHECK_T(Unavailable, readAttribute(where, &cpus), where, ": unreadable");
    nodes.push_back({static_cast<int>(id.value), formatCpulist(parseCpulist(cpus, where))});
  }
  if (nodes.empty()) {
    // Kernels without NUMA support have no node directory: all online CPUs form node 0.
    std::string where = root + "/devices/system/cpu/online";
    std::string cpus;
    TOPO_CHECK_T(Unavailable, readAttribute(where, &cpus), node_dir, "/node*/cpulist and ",
                 where, ": unreadable, expected the NUMA nodes or the online CPUs");
    nodes.push_back({0, formatCpulist(parseCpulist(cpus, where))});
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  return nodes;
}

std::vector<Nic> readSysfsNics(const std::string& root) {
  std::map<std::string, Nic> by_bus;  // bus id order, one entry per PCI function
  // The NIC of the PCI function behind a class entry, null for a virtual device.
  auto nicOf = [&](const std::string& entry) -> Nic* {
    std::string bus_id, dir;
    if (!pciFunctionOf(entry + "/device", &bus_id, &dir)) return nullptr;
    Nic& nic = by_bus[bus_id];
    nic.bus_id = bus_id;
    nic.numa_node = readNumaNodeFile(dir + "/numa_node");
    return &nic;
  };
  std::string net = root + "/class/net";
  std::vector<std::string> interfaces;
  TOPO_CHECK_T(Unavailable, listDir(net, &interfaces), net,
               ": cannot be listed, expected the network interfaces (is sysfs mounted?)");
  for (const std::string& name : interfaces) {
    Nic* nic = nicOf(net + "/" + name);
    if (!nic || !nic->name.empty()) continue;  // virtual, or a function's second interface
    nic->name = name;
    std::string text;
    if (!readAttribute(net + "/" + name + "/speed", &text)) continue;
    ParsedNumber<long long> mbit = parseInteger(text);
    if (mbit && mbit.value > 0 && mbit.value < 10000000) {
      nic->speed_gbps = static_cast<double>(mbit.value) / 1000.0;
    }
  }
  std::string ib = root + "/class/infiniband";
  std::vector<std::string> hcas;
  listDir(ib, &hcas);  // absent without RDMA devices
  for (const std::string& name : hcas) {
    Nic* nic = nicOf(ib + "/" + name);
    if (!nic) continue;  // rxe, siw
    // The RDMA device names the NIC, as hwloc's reader and NCCL_IB_HCA do; its netdev (IPoIB,
    // RoCE) is the same port.
    nic->name = name;
    std::string text;
    if (!readAttribute(ib + "/" + name + "/ports/1/rate", &text)) continue;
    ParsedNumber<double> gbit = parseLeadingDouble(text);  // "200 Gb/sec (4X HDR)"
    if (gbit && gbit.value > 0 && gbit.value < 1e5) nic->speed_gbps = gbit.value;
  }
  std::vector<Nic> nics;
  for (auto& entry : by_bus) nics.push_back(std::move(entry.second));
  return nics;
}

bool isSysfsEfaDevice(const std::string& root, const std::string& name) {
  constexpr long long kAmazonVendor = 0x1d0f;
  std::string device = root + "/class/infiniband/" + name + "/device";
  std::string vendor;
  if (readAttribute(device + "/vendor", &vendor)) {
    ParsedNumber<long long> id = parseInteger(vendor, 0);  // "0x1d0f"
    if (id && id.value == kAmazonVendor) return true;
  }
  char driver[PATH_MAX];
  if (!realpath((device + "/driver").c_str(), driver)) return false;
  const char* slash = strrchr(driver, '/');
  return strcmp(slash ? slash + 1 : driver, "efa") == 0;
}

std::string readSysfsProductName(const std::string& root) {
  std::string text;
  if (!readAttribute(root + "/devices/virtual/dmi/id/product_name", &text)) return "";
  return text.substr(0, text.find('\n'));
}

int readSysfsPciNumaNode(const std::string& root, const std::string& bus_id) {
  return readNumaNodeFile(root + "/bus/pci/devices/" + bus_id + "/numa_node");
}

}  // namespace torch_topo::topo
