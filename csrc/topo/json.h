// SPDX-License-Identifier: Apache-2.0
// nlohmann-json as the JSON readers use it (layer: csrc/topo): parsed values keep their byte
// range, so an error about a field points at the field's line and column in the file.
#pragma once

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

// Older headers keep no positions; the build search (torch_topo/build_deps.py) passes them over.
static_assert(NLOHMANN_JSON_VERSION_MAJOR > 3 ||
                  (NLOHMANN_JSON_VERSION_MAJOR == 3 && NLOHMANN_JSON_VERSION_MINOR >= 12),
              "torch-topo needs nlohmann-json >= 3.12 (value positions for field errors): "
              "pip install -U 'nlohmann-json>=3.12' (the build passes older copies over)");
// Defined for every source by CMakeLists.txt and setup.py rather than here: a file that
// includes json.hpp without this header must see the same basic_json.
static_assert(JSON_DIAGNOSTIC_POSITIONS,
              "build with JSON_DIAGNOSTIC_POSITIONS=1 (CMakeLists.txt and setup.py define it)");

namespace torch_topo::topo {

/// `text` parsed; a syntax error is a ParseError at its line and column of `path`.
nlohmann::json parseJson(const std::string& text, const std::string& path);

/// 1-based (line, column) of the first byte of `value`, a value parseJson read from `text`,
/// counted as lineColumn counts; (1, 1) for a value built in code.
std::pair<int, int> jsonLineColumn(const std::string& text, const nlohmann::json& value);

}  // namespace torch_topo::topo
