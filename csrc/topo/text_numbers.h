// SPDX-License-Identifier: Apache-2.0
// Numbers in and out of text without iostreams or locales (layer: csrc/topo). Every reader parses
// through these, and error messages are built with them: a process holding two libstdc++ copies
// (a module linked with a private one under torch's shared one) has broken iostream locale
// facets, and the C++ global locale may group digits or use ',' as decimal point.
#pragma once

#include <charconv>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace torch_topo::topo {

/// Why a text is not the number asked for.
enum class NumberError {
  kNone,
  kEmpty,
  kInvalid,       // no digits where the number starts (also nan)
  kTrailingText,  // a number followed by other characters
  kOutOfRange,    // does not fit the type (also inf)
};

/// "empty", "not a number", "text after the number", "out of range"; "" for kNone.
const char* toString(NumberError error);

template <typename T>
struct ParsedNumber {
  T value{};
  NumberError error = NumberError::kNone;
  size_t length = 0;  // characters the number takes from the start of the text
  explicit operator bool() const { return error == NumberError::kNone; }
};

/// The whole of `text` as an integer: an optional '-', then digits of `base` (10 or 16, no
/// prefix), or for base 0 a C literal like strtol's base 0 (0x... hex, 0... octal, else
/// decimal). No whitespace, no '+'.
ParsedNumber<long long> parseInteger(std::string_view text, int base = 10);

/// The whole of `text` as a finite double ("1.5", "-2e3", "16"); '.' is the decimal point
/// whatever the locale. No whitespace, no '+', no hex floats, no nan or inf.
ParsedNumber<double> parseDouble(std::string_view text);

/// The integer or double at the start of `text`; what follows it is left (`length` says where
/// the number ends). kTrailingText never occurs.
ParsedNumber<long long> parseLeadingInteger(std::string_view text, int base = 10);
ParsedNumber<double> parseLeadingDouble(std::string_view text);

/// Fields of a `sep`-separated list as std::getline yields them: "" gives none, and a separator
/// at the end closes the last field instead of opening an empty one ("a,b," -> a, b).
std::vector<std::string> splitList(std::string_view text, char sep);

/// Runs of non-space characters; spaces are the "C" locale's (space, \t, \n, \v, \f, \r).
std::vector<std::string> splitWords(std::string_view text);

/// `value` as printf's "%.6g" writes it in the "C" locale, which is also what an ostream with
/// default flags writes: 0.5, 1e+06, 15.7538.
std::string formatDouble(double value);

/// `value` with `decimals` digits after the '.', as printf's "%.*f" writes it in the "C" locale.
std::string formatFixed(double value, int decimals);

/// Lower-case hex without prefix, left-padded with zeros to at least `min_width` digits.
std::string formatHex(unsigned long long value, int min_width = 0);

/// Appends `value` in the "C" locale's format: text as it is, a char as itself, integers in
/// decimal, floating-point values as formatDouble.
template <typename T>
void appendText(std::string* out, const T& value) {
  if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    out->append(std::string_view(value));
  } else if constexpr (std::is_same_v<T, char>) {
    out->push_back(value);
  } else if constexpr (std::is_floating_point_v<T>) {
    out->append(formatDouble(static_cast<double>(value)));
  } else {
    static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>,
                  "appendText takes text, char, integers and floating-point values");
    char buf[24];
    std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), value);
    out->append(buf, r.ptr);
  }
}

}  // namespace torch_topo::topo
