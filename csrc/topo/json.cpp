// SPDX-License-Identifier: Apache-2.0
// Positions of parsed JSON values (layer: csrc/topo).
#include "topo/json.h"

#include "topo/error.h"

namespace torch_topo::topo {

nlohmann::json parseJson(const std::string& text, const std::string& path) {
  // what(): "[json.exception.<kind>.N] <message>"; the message follows the first space.
  auto malformed = [&](size_t at, const std::string& what) {
    const auto [line, col] = lineColumn(text, at);
    return ParseError(path, line, col, "malformed JSON: " + what.substr(what.find(' ') + 1));
  };
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw malformed(e.byte > 0 ? e.byte - 1 : 0, e.what());  // e.byte counts from 1
  } catch (const nlohmann::json::out_of_range& e) {
    // A number past a double's range (1e400, 400 digits) comes with its text but no position
    // ("number overflow parsing '1e400'"): the first place that text occurs stands for it.
    const std::string what = e.what();
    const size_t open = what.find('\''), close = what.rfind('\'');
    const size_t at = open != std::string::npos && close > open
                          ? text.find(what.substr(open + 1, close - open - 1))
                          : std::string::npos;
    throw malformed(at == std::string::npos ? 0 : at, what);
  }
}

std::pair<int, int> jsonLineColumn(const std::string& text, const nlohmann::json& value) {
  size_t start = value.start_pos();
  const size_t end = value.end_pos();
  if (value.is_string() && end != std::string::npos && end >= 2 && end <= text.size()) {
    // nlohmann 3.12.0 derives a string's start from its decoded length, which an escape
    // ("\u00e9", "\n") makes shorter than the text. From the closing quote back, the opening
    // one is the first quote not escaped, i.e. after an even run of backslashes.
    for (size_t i = end - 1; i-- > 0;) {
      if (text[i] != '"') continue;
      size_t slashes = 0;
      while (slashes < i && text[i - 1 - slashes] == '\\') ++slashes;
      if (slashes % 2 == 0) {
        start = i;
        break;
      }
    }
  }
  if (start == std::string::npos) return {1, 1};
  return lineColumn(text, start);
}

}  // namespace torch_topo::topo
