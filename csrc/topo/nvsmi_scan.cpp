// SPDX-License-Identifier: Apache-2.0
// The scanner of `nvidia-smi topo -m` text (layer: csrc/topo; used by nvsmi_reader.cpp).
#include "topo/nvsmi_scan.h"

#include <cctype>

#include "topo/cpulist.h"
#include "topo/error.h"
#include "topo/text_numbers.h"

namespace torch_topo::topo::nvsmi {
namespace {

const char* const kClassWords[] = {"NODE", "PIX", "PXB", "PHB", "SYS", "SOC"};

bool isDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool isAlpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

}  // namespace

bool isBlank(char c) { return c == ' ' || c == '\t'; }

bool startsWith(const std::string& s, size_t pos, const char* prefix) {
  return s.compare(pos, std::char_traits<char>::length(prefix), prefix) == 0;
}

size_t skipBlanks(const std::string& s, size_t pos) {
  while (pos < s.size() && isBlank(s[pos])) ++pos;
  return pos;
}

size_t digitsAt(const std::string& s, size_t pos) {
  size_t n = 0;
  while (pos + n < s.size() && isDigit(s[pos + n])) ++n;
  return n;
}

std::string excerpt(const std::string& s, size_t pos) {
  std::string out;
  for (size_t i = pos; i < s.size() && !isBlank(s[i]) && out.size() < 16; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  return out.empty() ? "end of line" : "'" + out + "'";
}

size_t matchDeviceName(const std::string& s, size_t pos) {
  for (const char* prefix : {"GPU", "NIC"}) {
    if (startsWith(s, pos, prefix)) {
      size_t d = digitsAt(s, pos + 3);
      if (d > 0) return 3 + d;
    }
  }
  if (startsWith(s, pos, "mlx")) {
    size_t d1 = digitsAt(s, pos + 3);
    if (d1 > 0 && pos + 3 + d1 < s.size() && s[pos + 3 + d1] == '_') {
      size_t d2 = digitsAt(s, pos + 4 + d1);
      if (d2 > 0) return 4 + d1 + d2;
    }
  }
  if (pos >= s.size() || !isAlpha(s[pos])) return 0;
  size_t n = 0;
  while (pos + n < s.size()) {
    char c = s[pos + n];
    if (!(isAlpha(c) || isDigit(c) || c == '_' || c == '-' || c == '.')) break;
    ++n;
  }
  return n;
}

size_t matchClassCell(const std::string& s, size_t pos) {
  for (const char* word : kClassWords) {
    if (startsWith(s, pos, word)) return std::char_traits<char>::length(word);
  }
  if (startsWith(s, pos, "NV")) {
    size_t d = digitsAt(s, pos + 2);
    return d > 0 ? 2 + d : 0;  // a bare "NV" names no lane count
  }
  if (startsWith(s, pos, "X")) return 1;
  return 0;
}

bool isP2pStatusAt(const std::string& s, size_t pos) {
  size_t end = pos;
  while (end < s.size() && isAlpha(s[end])) ++end;
  if (end < s.size() && !isBlank(s[end])) return false;
  const std::string word = s.substr(pos, end - pos);
  for (const char* status : {"OK", "CNS", "GNS", "TNS", "NS", "DR", "U"}) {
    if (word == status) return true;
  }
  return false;
}

int parseIndex(const std::string& digits, const std::string& path, int line, size_t col) {
  ParsedNumber<long long> index = parseInteger(digits);
  if (digits.size() > 4 || !index || index.value > kMaxDeviceIndex) {
    throw ParseError(
        path, line, static_cast<int>(col) + 1,
        "device index " + digits + " out of range (max " + std::to_string(kMaxDeviceIndex) + ")");
  }
  return static_cast<int>(index.value);
}

long parseIdList(const std::string& text, const std::string& path, int line, size_t col,
                 const char* what) {
  const CpulistScan scan = scanCpulist(text);
  if (!scan.problem.empty() || scan.ranges.empty()) {
    throw ParseError(path, line, static_cast<int>(col) + 1,
                     std::string(what) + ": got '" + text + "' (" +
                         (scan.problem.empty() ? "empty" : scan.problem) +
                         "), expected a list such as 0-23,48-71 or N/A");
  }
  return scan.ranges.front().first;
}

std::string stripSgr(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b' && i + 1 < s.size() && s[i + 1] == '[') {
      size_t j = i + 2;
      while (j < s.size() && (isDigit(s[j]) || s[j] == ';')) ++j;
      if (j < s.size() && s[j] == 'm') {
        i = j;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

}  // namespace torch_topo::topo::nvsmi
