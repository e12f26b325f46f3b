// SPDX-License-Identifier: Apache-2.0
// Cpulist and hwloc bitmap conversions (layer: csrc/topo).
#include "topo/cpulist.h"

#include <cctype>
#include <vector>

#include "topo/error.h"
#include "topo/text_numbers.h"

namespace torch_topo::topo {
namespace {

// Larger ids are a corrupt file, not a machine: Linux caps NR_CPUS at 8192 on x86-64.
constexpr long kMaxCpuId = 1 << 16;

long parseCpuId(const std::string& token, const std::string& where, const std::string& text) {
  if (token.empty() || token.size() > 6) {
    throw InvalidArgument(where + ": bad cpulist: got '" + text + "', expected e.g. '0-3,8'");
  }
  for (char c : token) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      throw InvalidArgument(where + ": bad cpulist: got '" + text + "', expected e.g. '0-3,8'");
    }
  }
  long id = static_cast<long>(parseInteger(token).value);  // digits only, at most 6
  if (id >= kMaxCpuId) {
    throw InvalidArgument(where + ": cpu id out of range: got " + token + ", expected < " +
                          std::to_string(kMaxCpuId));
  }
  return id;
}

}  // namespace

std::set<int> parseCpulist(const std::string& text, const std::string& where) {
  std::string clean;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) clean += c;
  }
  std::set<int> cpus;
  if (clean.empty()) return cpus;
  for (const std::string& part : splitList(clean, ',')) {
    size_t dash = part.find('-');
    long lo = parseCpuId(part.substr(0, dash), where, text);
    long hi = dash == std::string::npos ? lo : parseCpuId(part.substr(dash + 1), where, text);
    if (hi < lo) {
      throw InvalidArgument(where + ": bad cpulist range: got '" + part + "', expected lo-hi");
    }
    for (long id = lo; id <= hi; ++id) cpus.insert(static_cast<int>(id));
  }
  return cpus;
}

std::string formatCpulist(const std::set<int>& cpus) {
  std::string out;
  for (auto it = cpus.begin(); it != cpus.end();) {
    int lo = *it;
    int hi = lo;
    for (++it; it != cpus.end() && *it == hi + 1; ++it) hi = *it;
    if (!out.empty()) out += ',';
    out += std::to_string(lo);
    if (hi != lo) out += "-" + std::to_string(hi);
  }
  return out;
}

Node makeCpuNode(int numa) {
  Node cpu;
  cpu.kind = NodeKind::Cpu;
  cpu.id = "numa" + std::to_string(numa);
  cpu.numa_node = numa;
  cpu.index = numa;
  return cpu;
}

std::set<int> parseHwlocBitmap(const std::string& text, const std::string& where) {
  std::set<int> cpus;
  if (text.empty()) return cpus;
  if (text.find("...") != std::string::npos) {
    throw InvalidArgument(where + ": infinite hwloc bitmap: got '" + text +
                          "', expected a finite set");
  }
  std::vector<std::string> words = splitList(text, ',');
  if (text.back() == ',') words.push_back("");
  if (words.size() * 32 > static_cast<size_t>(kMaxCpuId)) {
    throw InvalidArgument(where + ": hwloc bitmap too long: got " + std::to_string(words.size()) +
                          " words, expected at most " + std::to_string(kMaxCpuId / 32));
  }
  // Words run from the most significant; word k from the right covers bits 32k..32k+31.
  for (size_t k = 0; k < words.size(); ++k) {
    std::string w = words[words.size() - 1 - k];
    if (w.empty()) continue;
    if (w.size() > 2 && w[0] == '0' && (w[1] == 'x' || w[1] == 'X')) w = w.substr(2);
    if (w.empty() || w.size() > 8) {
      throw InvalidArgument(where + ": bad hwloc bitmap word: got '" + words[words.size() - 1 - k] +
                            "' in '" + text + "', expected 0x followed by up to 8 hex digits");
    }
    for (char c : w) {
      if (!std::isxdigit(static_cast<unsigned char>(c))) {
        throw InvalidArgument(where + ": bad hwloc bitmap: got '" + text +
                              "', expected comma-separated hex words");
      }
    }
    long long bits = parseInteger(w, 16).value;  // hex digits only, at most 8
    for (int b = 0; b < 32; ++b) {
      if (bits & (1ll << b)) cpus.insert(static_cast<int>(k * 32 + b));
    }
  }
  return cpus;
}

}  // namespace torch_topo::topo
