// SPDX-License-Identifier: Apache-2.0
// Mutation fuzzing of the topology readers (layer: csrc/topo). A fixed-seed mt19937 keeps every
// run identical, so a failure found in CI reproduces locally from the seed alone.
#include "topo/fuzz.h"

#include <cctype>
#include <cmath>
#include <random>

#include "topo/error.h"
#include "topo/loader.h"
#include "topo/topology_json.h"

namespace torch_topo::topo {
namespace {

const char* const kHugeNumbers[] = {
    "99999999999999999999", "-1",  "4294967296", "1e308", "-2147483649",
    "0x7fffffffffffffff",   "NaN", "0"};

struct Mutator {
  std::mt19937_64 rng;

  size_t pick(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng);
  }

  /// Byte ranges of whitespace-separated cells.
  static std::vector<std::pair<size_t, size_t>> cells(const std::string& s) {
    std::vector<std::pair<size_t, size_t>> out;
    for (size_t i = 0; i < s.size();) {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      size_t b = i;
      while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      if (i > b) out.emplace_back(b, i);
    }
    return out;
  }

  std::string mutate(std::string s, std::string* what) {
    auto c = cells(s);
    switch (pick(8)) {
      case 0: {
        size_t at = pick(s.size() + 1);
        *what = "truncate at " + std::to_string(at);
        return s.substr(0, at);
      }
      case 1: {
        if (c.size() < 2) break;
        auto a = c[pick(c.size())], b = c[pick(c.size())];
        if (a.first > b.first) std::swap(a, b);
        if (a.second > b.first) break;
        *what = "swap cells at " + std::to_string(a.first) + " and " + std::to_string(b.first);
        return s.substr(0, a.first) + s.substr(b.first, b.second - b.first) +
               s.substr(a.second, b.first - a.second) + s.substr(a.first, a.second - a.first) +
               s.substr(b.second);
      }
      case 2: {
        if (c.size() < 2) break;
        size_t k = pick(c.size() - 1);
        *what = "glue cells at " + std::to_string(c[k].second);
        return s.substr(0, c[k].second) + s.substr(c[k + 1].first);
      }
      case 3: {
        size_t n = 1 + pick(8);
        *what = "insert " + std::to_string(n) + " garbage bytes";
        for (size_t i = 0; i < n; ++i)
          s.insert(s.begin() + pick(s.size() + 1), static_cast<char>(pick(256)));
        return s;
      }
      case 4: {
        std::vector<size_t> digits;
        for (size_t i = 0; i < s.size(); ++i) {
          if (std::isdigit(static_cast<unsigned char>(s[i])) &&
              (i == 0 || !std::isdigit(static_cast<unsigned char>(s[i - 1]))))
            digits.push_back(i);
        }
        if (digits.empty()) break;
        size_t b = digits[pick(digits.size())], e = b;
        while (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) ++e;
        const char* huge = kHugeNumbers[pick(sizeof(kHugeNumbers) / sizeof(kHugeNumbers[0]))];
        *what = "number at " + std::to_string(b) + " -> " + huge;
        return s.substr(0, b) + huge + s.substr(e);
      }
      case 5: {
        size_t at = pick(s.size() + 1);
        size_t nl = s.find('\n', at);
        size_t start = s.rfind('\n', at == 0 ? 0 : at - 1);
        start = start == std::string::npos ? 0 : start + 1;
        std::string line =
            s.substr(start, nl == std::string::npos ? std::string::npos : nl - start + 1);
        bool dup = pick(2) == 0;
        *what = std::string(dup ? "duplicate" : "delete") + " line at " + std::to_string(start);
        return dup ? s.insert(start, line) : s.erase(start, line.size());
      }
      case 6: {
        if (s.empty()) break;
        size_t at = pick(s.size());
        s[at] = static_cast<char>(pick(256));
        *what = "replace byte at " + std::to_string(at);
        return s;
      }
      default: {
        if (c.empty()) break;
        auto cell = c[pick(c.size())];
        *what = "delete cell at " + std::to_string(cell.first);
        return s.erase(cell.first, cell.second - cell.first);
      }
    }
    *what = "truncate to half";
    return s.substr(0, s.size() / 2);
  }
};

std::string checkShape(const HostTopology& h) {
  size_t g = h.gpus.size(), n = h.nics.size();
  if (h.gpu_paths.size() != g * g) return "gpu_paths is not gpus x gpus";
  if (!h.gpu_nic_paths.empty() && h.gpu_nic_paths.size() != g * n)
    return "gpu_nic_paths is not gpus x nics";
  for (const PathInfo& p : h.gpu_paths) {
    if (!std::isfinite(p.bandwidth_gbps) || p.bandwidth_gbps < 0 || !std::isfinite(p.latency_us) ||
        p.latency_us < 0)
      return "bandwidth or latency not finite and >= 0";
    if (p.nvlinks < 0) return "negative NVLink count";
  }
  for (size_t i = 0; i < g; ++i) {
    if (h.path(static_cast<int>(i), static_cast<int>(i)).cls != PathClass::X)
      return "diagonal path is not X";
  }
  return "";
}

}  // namespace

FuzzReport fuzzTopologyTexts(const std::vector<std::string>& corpus, uint64_t seed, int count) {
  FuzzReport report;
  if (corpus.empty()) return report;
  Mutator m{std::mt19937_64(seed)};
  auto fail = [&](const std::string& what) {
    ++report.failure_count;
    if (report.failures.size() < 10) report.failures.push_back(what);
  };
  for (int i = 0; i < count; ++i) {
    std::string what;
    const std::string& base = corpus[m.pick(corpus.size())];
    std::string text = m.mutate(base, &what);
    // Every few inputs stack a second mutation so errors past the first one get exercised.
    if (m.pick(4) == 0) {
      std::string second;
      text = m.mutate(text, &second);
      what += ", " + second;
    }
    ++report.inputs;
    try {
      HostTopology host = loadTopologyText(text, "fuzz");
      // What parses must serialise: torch-topo JSON refuses names that are not UTF-8.
      hostToJson(host);
      std::string bad = checkShape(host);
      if (bad.empty()) {
        ++report.parsed;
      } else {
        fail("input " + std::to_string(i) + " (" + what + "): parsed but " + bad);
      }
    } catch (const ParseError&) {
      ++report.rejected;
    } catch (const std::exception& e) {
      fail("input " + std::to_string(i) + " (" + what + "): " + e.what());
    }
  }
  return report;
}

}  // namespace torch_topo::topo
