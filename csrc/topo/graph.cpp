// SPDX-License-Identifier: Apache-2.0
// Names and small helpers of the topology model (layer: csrc/topo).
#include "graph.h"

#include <cctype>
#include <string_view>

#include "topo/text_numbers.h"

namespace torch_topo::topo {

const char* toString(NodeKind kind) {
  switch (kind) {
    case NodeKind::Host: return "host";
    case NodeKind::Cpu: return "cpu";
    case NodeKind::PciSwitch: return "pci";
    case NodeKind::Gpu: return "gpu";
    case NodeKind::Nic: return "nic";
    case NodeKind::NvSwitch: return "nvswitch";
  }
  return "?";
}

const char* toString(LinkKind kind) {
  switch (kind) {
    case LinkKind::NvLink: return "nvlink";
    case LinkKind::C2C: return "c2c";
    case LinkKind::Pci: return "pci";
    case LinkKind::Smp: return "smp";
    case LinkKind::Net: return "net";
  }
  return "?";
}

const char* toString(PathClass cls) {
  static const char* const kNames[] = {"X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS", "NET"};
  return kNames[static_cast<int>(cls)];
}

bool parsePathClass(const std::string& text, PathClass* cls, int* nvlinks) {
  *nvlinks = 0;
  if (text.size() > 2 && text.compare(0, 2, "NV") == 0) {
    for (size_t i = 2; i < text.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(text[i]))) return false;
    }
    if (text.size() > 5) return false;  // keeps the number small enough to parse
    *cls = PathClass::NV;
    *nvlinks = static_cast<int>(parseInteger(std::string_view(text).substr(2)).value);
    return *nvlinks > 0 && *nvlinks <= kMaxNvlinkLanes;
  }
  static const struct {
    const char* name;
    PathClass cls;
  } kClasses[] = {{"X", PathClass::X},       {"NV", PathClass::NV},     {"PIX", PathClass::PIX},
                  {"PXB", PathClass::PXB},   {"PHB", PathClass::PHB},   {"NODE", PathClass::NODE},
                  {"SYS", PathClass::SYS},   {"SOC", PathClass::SYS},   {"NET", PathClass::NET}};
  for (const auto& entry : kClasses) {
    if (text == entry.name) {
      *cls = entry.cls;
      return true;
    }
  }
  return false;
}

const std::string& findAttr(const std::vector<std::pair<std::string, std::string>>& attrs,
                            const std::string& key, const std::string& fallback) {
  for (const auto& kv : attrs) {
    if (kv.first == key) return kv.second;
  }
  return fallback;
}

int Graph::addNode(Node node) {
  nodes.push_back(std::move(node));
  return static_cast<int>(nodes.size()) - 1;
}

int Graph::addLink(Link link) {
  links.push_back(link);
  return static_cast<int>(links.size()) - 1;
}

int Graph::findNode(NodeKind kind, const std::string& id) const {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].kind == kind && nodes[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

std::vector<int> Graph::nodesOfKind(NodeKind kind) const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].kind == kind) out.push_back(static_cast<int>(i));
  }
  return out;
}

}  // namespace torch_topo::topo
