// SPDX-License-Identifier: Apache-2.0
// Shared helpers of the C++ core tests: read files of tests/data by directory.
#pragma once

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "topo/error.h"

namespace torch_topo::topo::testing {

inline std::string dataPath(const std::string& rel) {
  return std::string(TORCH_TOPO_TEST_DATA) + "/" + rel;
}

inline std::string readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

/// The message of the ParseError `read()` throws, or "no error": what the readers' tests
/// compare.
template <typename Read>
std::string parseErrorOf(Read read) {
  try {
    read();
  } catch (const ParseError& e) {
    return e.what();
  }
  return "no error";
}

/// Sorted paths of the regular files in tests/data/<dir>.
inline std::vector<std::string> dataFiles(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dataPath(dir).c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') out.push_back(dataPath(dir) + "/" + e->d_name);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// "line:col" of byte `offset` of `text`, 1-based, one column per byte: where a ParseError
/// about the text there must point, counted apart from the code under test.
inline std::string textPosition(const std::string& text, size_t offset) {
  const std::string before = text.substr(0, offset);
  const size_t newline = before.rfind('\n');
  const size_t col = newline == std::string::npos ? offset + 1 : offset - newline;
  return std::to_string(std::count(before.begin(), before.end(), '\n') + 1) + ":" +
         std::to_string(col);
}

}  // namespace torch_topo::topo::testing
