// SPDX-License-Identifier: Apache-2.0
// XML parsing for the topology readers (layer: csrc/topo) over TinyXML-2, which pip installs as
// cmeel-tinyxml2 and Debian as libtinyxml2-dev. It owns what the library does not give: columns
// in diagnostics, recovery of files cut short, and a few search helpers.
#pragma once

#include <tinyxml2.h>

#include <functional>
#include <string>

namespace torch_topo::topo {

using XmlElement = tinyxml2::XMLElement;

/// A parsed XML text. Errors are ParseError "path:line:col: ..." pointing at the element.
class XmlDocument {
 public:
  /// Parses `text`. With `recover_truncated`, a text that is well formed up to its end but
  /// leaves elements open (a dump cut short) is read as if their closing tags followed, and
  /// `truncated()` says so; otherwise such a text is malformed. A second top-level element is
  /// refused. Throws ParseError.
  XmlDocument(const std::string& text, const std::string& path, bool recover_truncated);

  /// The top-level element, nullptr for a text without one.
  const XmlElement* root() const { return doc_.RootElement(); }
  bool truncated() const { return truncated_; }

  /// Throws ParseError at `element`'s name (its column is one past the '<'), or at line 1
  /// column 1 for nullptr. `name_offset` moves the column, e.g. -1 to point at the '<'.
  [[noreturn]] void fail(const XmlElement* element, const std::string& what,
                         int name_offset = 0) const;

 private:
  void checkOneRoot() const;
  int nameColumn(const XmlElement* element) const;

  std::string text_;  // kept for columns; a copy, so the document outlives its arguments
  std::string path_;
  tinyxml2::XMLDocument doc_;
  bool truncated_ = false;
};

/// The attribute's value, "" when absent.
std::string xmlAttr(const XmlElement* element, const char* name);

/// Calls `visit` on every element below `element` named `name`, in document order.
void forEachXmlDescendant(const XmlElement* element, const char* name,
                          const std::function<void(const XmlElement*)>& visit);

}  // namespace torch_topo::topo
