// SPDX-License-Identifier: Apache-2.0
// UTF-8 validation of topology text (layer: csrc/topo, pure C++17). Names and snippets of a file
// end up in JSON and Python strings, which both refuse invalid UTF-8 far from the file.
#pragma once

#include <cstddef>
#include <string>

namespace torch_topo::topo {

/// Bytes of the well-formed UTF-8 sequence at s[i] (Unicode table 3-7: no overlong forms, no
/// surrogates, nothing past U+10FFFF), or 0 when the bytes there are not one.
inline size_t utf8SequenceLength(const std::string& s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

/// Offset of the first byte of `s` that is not well-formed UTF-8, or std::string::npos.
inline size_t invalidUtf8At(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8SequenceLength(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string::npos;
}

/// `s` with each byte that is not well-formed UTF-8 written as \xNN.
inline std::string escapeInvalidUtf8(const std::string& s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8SequenceLength(s, i);
    if (n == 0) {
      const auto c = static_cast<unsigned char>(s[i++]);
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 0xF]};
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace torch_topo::topo
