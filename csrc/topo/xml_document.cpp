// SPDX-License-Identifier: Apache-2.0
// XmlDocument over TinyXML-2 (layer: csrc/topo). TinyXML-2 reports lines but no columns and
// drops the whole tree on any error, so a light scan of the tags locates what it cannot: the
// text ending inside a tag, an end tag that closes the wrong element, elements left open.
#include "topo/xml_document.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "topo/error.h"

namespace torch_topo::topo {
namespace {

constexpr size_t kNoProblem = std::string::npos;

struct TagScan {
  std::vector<std::pair<std::string, size_t>> open;  // element names still open, with offsets
  size_t problem_at = kNoProblem;                    // offset of the '<' at fault
  std::string problem;
};

/// A tag name as the message shows it: bytes outside printable ASCII as \xNN, so a no-break
/// space pasted into `<system version="1">` shows where the name really ends.
std::string shownName(const std::string& name) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : name) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

std::string openedAt(const std::string& t, size_t at) {
  auto [line, col] = lineColumn(t, at);
  return " (line " + std::to_string(line) + ", column " + std::to_string(col) + ")";
}

bool endsName(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '/' || c == '>';
}

/// Tags in text order. Comments, CDATA, declarations and processing instructions are skipped
/// whole; a '>' inside a quoted attribute value does not end its tag.
TagScan scanTags(const std::string& t) {
  TagScan scan;
  auto skipTo = [&](size_t from, const char* end, size_t at, const char* inside) {
    size_t found = t.find(end, from);
    if (found == std::string::npos) {
      scan.problem_at = at;
      scan.problem = std::string("the text ends inside ") + inside;
      return found;
    }
    return found + std::strlen(end);
  };
  for (size_t i = t.find('<'); i != std::string::npos; i = t.find('<', i)) {
    if (t.compare(i, 4, "<!--") == 0) {
      i = skipTo(i + 4, "-->", i, "a comment");
    } else if (t.compare(i, 9, "<![CDATA[") == 0) {
      i = skipTo(i + 9, "]]>", i, "a CDATA section");
    } else if (i + 1 < t.size() && (t[i + 1] == '?' || t[i + 1] == '!')) {
      i = skipTo(i + 2, ">", i, "a declaration");
    } else {
      size_t j = i + 1;
      for (char quote = 0; j < t.size() && (quote || t[j] != '>'); ++j) {
        if (quote == 0 && (t[j] == '"' || t[j] == '\'')) {
          quote = t[j];
        } else if (t[j] == quote) {
          quote = 0;
        }
      }
      if (j >= t.size()) {
        scan.problem_at = i;
        scan.problem = "the text ends inside a tag";
        return scan;
      }
      bool closing = t[i + 1] == '/';
      size_t name_end = i + 1 + closing;
      while (name_end < j && !endsName(t[name_end])) ++name_end;
      std::string name = t.substr(i + 1 + closing, name_end - i - 1 - closing);
      if (closing) {
        if (scan.open.empty() || scan.open.back().first != name) {
          scan.problem_at = i;
          scan.problem = "</" + shownName(name) + "> closes " +
                         (scan.open.empty() ? "nothing"
                                            : "<" + shownName(scan.open.back().first) + ">" +
                                                  openedAt(t, scan.open.back().second));
          return scan;
        }
        scan.open.pop_back();
      } else if (t[j - 1] != '/') {
        scan.open.emplace_back(name, i);
      }
      i = j + 1;
    }
    if (i == std::string::npos) return scan;
  }
  return scan;
}

/// The elements of the tree under `node`, in document order.
void collectElements(const tinyxml2::XMLNode* node, std::vector<const XmlElement*>* out) {
  for (const XmlElement* el = node->FirstChildElement(); el; el = el->NextSiblingElement()) {
    out->push_back(el);
    collectElements(el, out);
  }
}

}  // namespace

XmlDocument::XmlDocument(const std::string& text, const std::string& path, bool recover_truncated)
    : text_(text), path_(path), doc_(true, tinyxml2::PRESERVE_WHITESPACE) {
  if (doc_.Parse(text_.data(), text_.size()) == tinyxml2::XML_SUCCESS) {
    checkOneRoot();
    return;
  }
  const int error_line = doc_.ErrorLineNum();
  const std::string error_name = doc_.ErrorName();
  TagScan scan = scanTags(text_);
  if (scan.problem_at != kNoProblem) {
    auto [line, col] = lineColumn(text_, scan.problem_at);
    throw ParseError(path_, line, col, "malformed XML: " + scan.problem);
  }
  if (!scan.open.empty()) {
    if (recover_truncated) {
      std::string closed = text_;
      for (auto it = scan.open.rbegin(); it != scan.open.rend(); ++it) {
        closed += "</" + it->first + ">";
      }
      if (doc_.Parse(closed.data(), closed.size()) == tinyxml2::XML_SUCCESS) {
        truncated_ = true;
        checkOneRoot();
        return;
      }
    }
    auto [line, col] = lineColumn(text_, text_.size());
    throw ParseError(path_, line, col,
                     "malformed XML: the text ends before <" + shownName(scan.open.back().first) +
                         ">" + openedAt(text_, scan.open.back().second) + " is closed");
  }
  // What the scan cannot see (bad attribute syntax, stray characters): TinyXML-2 knows the line
  // only, so the column is the line's first.
  throw ParseError(path_, error_line > 0 ? error_line : 1, 1,
                   "malformed XML: " + error_name + " on this line");
}

void XmlDocument::checkOneRoot() const {
  // TinyXML-2 takes elements after the root as more roots: two dumps appended to one file read
  // as the first alone.
  const XmlElement* root = doc_.RootElement();
  const XmlElement* second = root != nullptr ? root->NextSiblingElement() : nullptr;
  if (second == nullptr) return;
  fail(second,
       "a second root element <" + shownName(second->Name()) + "> after <" +
           shownName(root->Name()) + ">, expected one document per file (two files appended?)",
       -1);
}

int XmlDocument::nameColumn(const XmlElement* element) const {
  // TinyXML-2 keeps the line of each element: its column is that of the k-th "<name" on the
  // line, where k counts the elements of the same name that open earlier on that line.
  const int line = element->GetLineNum();
  const std::string name = element->Name();
  std::vector<const XmlElement*> all;
  collectElements(&doc_, &all);
  int k = 0;
  for (const XmlElement* el : all) {
    if (el == element) break;
    if (el->GetLineNum() == line && name == el->Name()) ++k;
  }
  size_t start = 0;
  for (int l = 1; l < line && start != std::string::npos; ++l) {
    start = text_.find('\n', start);
    if (start != std::string::npos) ++start;
  }
  if (start == std::string::npos) return 1;
  const size_t end = std::min(text_.find('\n', start), text_.size());
  const std::string open = "<" + name;
  for (size_t at = text_.find(open, start); at != std::string::npos && at < end;
       at = text_.find(open, at + 1)) {
    size_t after = at + open.size();
    if (after < text_.size() && !endsName(text_[after])) continue;
    if (k-- == 0) return static_cast<int>(at - start) + 2;
  }
  return 1;
}

void XmlDocument::fail(const XmlElement* element, const std::string& what, int name_offset) const {
  if (element == nullptr) throw ParseError(path_, 1, 1, what);
  int col = nameColumn(element) + name_offset;
  throw ParseError(path_, element->GetLineNum(), col > 0 ? col : 1, what);
}

std::string xmlAttr(const XmlElement* element, const char* name) {
  const char* value = element ? element->Attribute(name) : nullptr;
  return value ? value : "";
}

void forEachXmlDescendant(const XmlElement* element, const char* name,
                          const std::function<void(const XmlElement*)>& visit) {
  for (const XmlElement* el = element->FirstChildElement(); el; el = el->NextSiblingElement()) {
    if (std::strcmp(el->Name(), name) == 0) visit(el);
    forEachXmlDescendant(el, name, visit);
  }
}

}  // namespace torch_topo::topo
