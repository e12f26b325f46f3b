// SPDX-License-Identifier: Apache-2.0
// Typed errors of the topology core (layer: csrc/topo, pure C++17). Bindings map each type to a
// Python exception class, so callers can tell a bad file from a missing library.
#pragma once

#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "topo/text_numbers.h"
#include "topo/utf8.h"

namespace torch_topo::topo {

/// Base of every error the core throws. Message shape:
/// `<where>: <what>: got <value>, expected <rule>[; <fix>]`.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Malformed input text. The message starts `path:line:col:` like a compiler diagnostic.
class ParseError : public Error {
 public:
  ParseError(const std::string& path, int line, int column, const std::string& what)
      : Error(format(path, line, column, what)), path_(path), line_(line), column_(column) {}
  const std::string& path() const { return path_; }
  int line() const { return line_; }
  int column() const { return column_; }

 private:
  static std::string format(const std::string& path, int line, int column,
                            const std::string& what) {
    // Messages quote the input (a name, a parser's snippet); Python decodes them as UTF-8.
    return escapeInvalidUtf8(path + ":" + std::to_string(line) + ":" + std::to_string(column) +
                             ": " + what);
  }
  std::string path_;
  int line_;
  int column_;
};

/// 1-based (line, column) of byte `offset` of `text`, as ParseError reports it.
inline std::pair<int, int> lineColumn(const std::string& text, size_t offset) {
  int line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

/// A caller passed a value outside the documented range.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// An optional system library (NVML, hwloc) is missing; the message names the fix.
class Unavailable : public Error {
 public:
  using Error::Error;
};

/// Ranks or sources disagree about something that must be identical.
class Mismatch : public Error {
 public:
  using Error::Error;
};

namespace detail {
/// `file` from its last "csrc/" on: __FILE__ holds the path the build used, which for an
/// out-of-tree or cached build is a relative path through the build folder.
inline const char* sourceRelative(const char* file) {
  const char* from = file;
  for (const char* hit = std::strstr(file, "csrc/"); hit != nullptr;
       hit = std::strstr(hit + 1, "csrc/")) {
    from = hit;
  }
  return from;
}

template <typename... Args>
std::string concat(const char* file, int line, const Args&... args) {
  // Plain string building: streams would take the process's locale (digit grouping, or broken
  // facets when two libstdc++ copies are loaded).
  std::string out;
  (appendText(&out, args), ...);
  out += " [";
  out += sourceRelative(file);
  out += ":";
  out += std::to_string(line);
  out += "]";
  return out;
}
}  // namespace detail

}  // namespace torch_topo::topo

/// Throws `ExcType` with the message (arguments written as appendText does) and the source
/// location when `cond` is false.
#define TOPO_CHECK_T(ExcType, cond, ...)                                                  \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      throw ExcType(::torch_topo::topo::detail::concat(__FILE__, __LINE__, __VA_ARGS__)); \
    }                                                                                     \
  } while (0)

#define TOPO_CHECK(cond, ...) TOPO_CHECK_T(::torch_topo::topo::InvalidArgument, cond, __VA_ARGS__)
