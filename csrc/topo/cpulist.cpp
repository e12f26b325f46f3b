// SPDX-License-Identifier: Apache-2.0
// Cpulist and hwloc bitmap conversions (layer: csrc/topo).
#include "topo/cpulist.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "topo/error.h"
#include "topo/text_numbers.h"

namespace torch_topo::topo {
namespace {

// At most 7 digits: any id above kMaxCpuId is refused without overflowing a long.
bool readCpuId(std::string_view token, long* id) {
  if (token.empty() || token.size() > 7) return false;
  for (char c : token) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  *id = static_cast<long>(parseInteger(token).value);
  return true;
}

}  // namespace

CpulistScan scanCpulist(std::string_view text) {
  std::string clean;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) clean += c;
  }
  CpulistScan scan;
  if (clean.empty()) return scan;
  size_t start = 0;
  for (int item = 1;; ++item) {
    const size_t comma = clean.find(',', start);
    const std::string_view part =
        std::string_view(clean).substr(start, comma == std::string::npos ? comma : comma - start);
    const size_t dash = part.find('-');
    long lo = 0, hi = 0;
    if (part.empty()) {
      scan.problem = "item " + std::to_string(item) + " is empty";
    } else if (!readCpuId(part.substr(0, dash), &lo) ||
               (dash != std::string_view::npos && !readCpuId(part.substr(dash + 1), &hi))) {
      scan.problem = "item '" + std::string(part) + "' is not an id or lo-hi";
    } else if (dash == std::string_view::npos) {
      hi = lo;
    }
    if (scan.problem.empty() && std::max(lo, hi) > kMaxCpuId) {
      scan.problem = "id " + std::to_string(std::max(lo, hi)) + " is above " +
                     std::to_string(kMaxCpuId);
    } else if (scan.problem.empty() && hi < lo) {
      scan.problem = "range '" + std::string(part) + "' runs backwards";
    }
    if (!scan.problem.empty()) {
      scan.ranges.clear();
      return scan;
    }
    scan.ranges.emplace_back(lo, hi);
    if (comma == std::string::npos) return scan;
    start = comma + 1;
  }
}

std::set<int> parseCpulist(const std::string& text, const std::string& where) {
  const CpulistScan scan = scanCpulist(text);
  if (!scan.problem.empty()) {
    throw InvalidArgument(where + ": bad cpulist '" + text + "': " + scan.problem +
                          " (expected e.g. '0-3,8')");
  }
  std::set<int> cpus;
  for (auto [lo, hi] : scan.ranges) {
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
