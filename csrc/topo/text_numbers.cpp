// SPDX-License-Identifier: Apache-2.0
// Locale-free number parsing and formatting on std::from_chars / std::to_chars (layer: csrc/topo).
#include "topo/text_numbers.h"

#include <cmath>
#include <limits>
#include <system_error>

namespace torch_topo::topo {
namespace {

bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

bool isHexDigit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

template <typename T>
ParsedNumber<T> wholeText(ParsedNumber<T> r, std::string_view text) {
  if (r && r.length != text.size()) r.error = NumberError::kTrailingText;
  return r;
}

}  // namespace

const char* toString(NumberError error) {
  switch (error) {
    case NumberError::kNone:
      return "";
    case NumberError::kEmpty:
      return "empty";
    case NumberError::kInvalid:
      return "not a number";
    case NumberError::kTrailingText:
      return "text after the number";
    case NumberError::kOutOfRange:
      return "out of range";
  }
  return "";
}

ParsedNumber<long long> parseLeadingInteger(std::string_view text, int base) {
  ParsedNumber<long long> r;
  if (text.empty()) {
    r.error = NumberError::kEmpty;
    return r;
  }
  // The sign is taken here and the digits as unsigned, so that base 0 can see its prefix.
  const bool negative = text[0] == '-';
  size_t pos = negative ? 1 : 0;
  if (base == 0) {
    base = 10;
    if (pos < text.size() && text[pos] == '0') {
      // As strtol: "0x" needs a hex digit after it, else the number is the "0" alone.
      bool hex = pos + 2 < text.size() && (text[pos + 1] == 'x' || text[pos + 1] == 'X') &&
                 isHexDigit(text[pos + 2]);
      base = hex ? 16 : 8;
      pos += hex ? 2 : 0;
    }
  }
  unsigned long long magnitude = 0;
  std::from_chars_result res =
      std::from_chars(text.data() + pos, text.data() + text.size(), magnitude, base);
  if (res.ec == std::errc::invalid_argument) {
    r.error = NumberError::kInvalid;
    return r;
  }
  r.length = static_cast<size_t>(res.ptr - text.data());
  constexpr unsigned long long kMax = std::numeric_limits<long long>::max();
  if (res.ec == std::errc::result_out_of_range || magnitude > kMax + (negative ? 1 : 0)) {
    r.error = NumberError::kOutOfRange;
    return r;
  }
  // -(kMax + 1) is representable; negate in unsigned arithmetic to get there without overflow.
  r.value = negative ? static_cast<long long>(0ULL - magnitude) : static_cast<long long>(magnitude);
  return r;
}

ParsedNumber<long long> parseInteger(std::string_view text, int base) {
  return wholeText(parseLeadingInteger(text, base), text);
}

ParsedNumber<double> parseLeadingDouble(std::string_view text) {
  ParsedNumber<double> r;
  if (text.empty()) {
    r.error = NumberError::kEmpty;
    return r;
  }
  std::from_chars_result res = std::from_chars(text.data(), text.data() + text.size(), r.value);
  if (res.ec == std::errc::invalid_argument || std::isnan(r.value)) {
    r.value = 0.0;
    r.error = NumberError::kInvalid;
    return r;
  }
  r.length = static_cast<size_t>(res.ptr - text.data());
  if (res.ec == std::errc::result_out_of_range || std::isinf(r.value)) {
    r.value = 0.0;
    r.error = NumberError::kOutOfRange;
  }
  return r;
}

ParsedNumber<double> parseDouble(std::string_view text) {
  return wholeText(parseLeadingDouble(text), text);
}

std::vector<std::string> splitList(std::string_view text, char sep) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(sep, start);
    if (end == std::string_view::npos) end = text.size();
    fields.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return fields;
}

std::vector<std::string> splitWords(std::string_view text) {
  std::vector<std::string> words;
  for (size_t i = 0; i < text.size();) {
    while (i < text.size() && isSpace(text[i])) ++i;
    size_t begin = i;
    while (i < text.size() && !isSpace(text[i])) ++i;
    if (i > begin) words.emplace_back(text.substr(begin, i - begin));
  }
  return words;
}

std::string formatDouble(double value) {
  char buf[32];
  std::to_chars_result r =
      std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::general, 6);
  return std::string(buf, r.ptr);
}

std::string formatFixed(double value, int decimals) {
  char buf[352];  // DBL_MAX in fixed notation has 309 digits before the point
  std::to_chars_result r =
      std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::fixed, decimals);
  return r.ec == std::errc() ? std::string(buf, r.ptr) : formatDouble(value);
}

std::string formatHex(unsigned long long value, int min_width) {
  char buf[16];
  std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), value, 16);
  std::string digits(buf, r.ptr);
  if (static_cast<int>(digits.size()) < min_width) digits.insert(0, min_width - digits.size(), '0');
  return digits;
}

}  // namespace torch_topo::topo
