// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/xml_document: the positions TinyXML-2 does not report (element columns,
// where a malformed text goes wrong), recovery of texts cut short, and the search helpers.
#include "topo/xml_document.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_data.h"
#include "topo/error.h"

namespace torch_topo::topo {
namespace {

using testing::parseErrorOf;

std::string errorAt(const std::string& text) {
  return parseErrorOf([&] { XmlDocument doc(text, "t.xml", false); });
}

TEST(XmlDocumentTest, ColumnsOfSameNamedElementsOnOneLine) {
  const std::string text = "<a>\n <b x=\"1\"/><b x=\"2\"/>  <bb/><b x=\"3\"/>\n</a>\n";
  XmlDocument doc(text, "t.xml", false);
  std::vector<const XmlElement*> bs;
  forEachXmlDescendant(doc.root(), "b", [&](const XmlElement* el) { bs.push_back(el); });
  ASSERT_EQ(bs.size(), 3u);
  // Column of the name, one past its '<'; "<bb" is not "<b".
  EXPECT_EQ(parseErrorOf([&] { doc.fail(bs[0], "first"); }), "t.xml:2:3: first");
  EXPECT_EQ(parseErrorOf([&] { doc.fail(bs[1], "second"); }), "t.xml:2:13: second");
  EXPECT_EQ(parseErrorOf([&] { doc.fail(bs[2], "third"); }), "t.xml:2:30: third");
  EXPECT_EQ(parseErrorOf([&] { doc.fail(bs[2], "at <", -1); }), "t.xml:2:29: at <");
  EXPECT_EQ(parseErrorOf([&] { doc.fail(nullptr, "no element"); }), "t.xml:1:1: no element");
}

TEST(XmlDocumentTest, MalformedTextsSayWhereAndWhat) {
  EXPECT_EQ(errorAt("<a>\n  <b>\n  </c>\n</a>"),
            "t.xml:3:3: malformed XML: </c> closes <b> (line 2, column 3)");
  // A no-break space (UTF-8 c2 a0) pasted after a name is part of it, as XML says: the message
  // shows its bytes and where the tag opened, not a name that looks like the closing one.
  EXPECT_EQ(errorAt("<system\xc2\xa0version=\"1\">\n  <cpu/>\n</system>\n"),
            "t.xml:3:1: malformed XML: </system> closes <system\\xc2\\xa0version=\"1\"> "
            "(line 1, column 1)");
  EXPECT_EQ(errorAt("<a>\n  <b x=\"1>\"\n"),
            "t.xml:2:3: malformed XML: the text ends inside a tag");
  EXPECT_EQ(errorAt("<a>\n<!-- open"), "t.xml:2:1: malformed XML: the text ends inside a comment");
  EXPECT_EQ(errorAt("<a>\n  <b/>\n"),
            "t.xml:3:1: malformed XML: the text ends before <a> (line 1, column 1) is closed");
  // What only TinyXML-2 sees is reported on its line.
  EXPECT_EQ(errorAt("<a>\n<b x=1/>\n</a>").rfind("t.xml:2:1: malformed XML: XML_ERROR", 0), 0u);
}

TEST(XmlDocumentTest, ASecondRootIsRefusedAtIt) {
  // Two dumps appended to one file: TinyXML-2 keeps both, and readers took the first alone.
  const std::string two =
      "<?xml version=\"1.0\"?>\n<system version=\"1\">\n</system>\n"
      "<system version=\"1\">\n  <cpu/>\n</system>\n";
  EXPECT_EQ(errorAt(two),
            "t.xml:4:1: a second root element <system> after <system>, expected one document per "
            "file (two files appended?)");
  // Also where the second is cut short and recovered.
  EXPECT_EQ(parseErrorOf([&] { XmlDocument doc(two.substr(0, two.size() - 10), "t.xml", true); }),
            "t.xml:4:1: a second root element <system> after <system>, expected one document per "
            "file (two files appended?)");
  XmlDocument one("<!-- c -->\n<system/>\n<!-- after -->\n", "t.xml", false);
  EXPECT_STREQ(one.root()->Name(), "system");
}

TEST(XmlDocumentTest, TextCutShortIsRecoveredOnlyWhenAsked) {
  const std::string cut = "<a>\n  <b x=\"1\">\n    <c/>\n";
  XmlDocument doc(cut, "t.xml", true);
  EXPECT_TRUE(doc.truncated());
  ASSERT_NE(doc.root()->FirstChildElement("b"), nullptr);
  EXPECT_NE(doc.root()->FirstChildElement("b")->FirstChildElement("c"), nullptr);
  EXPECT_FALSE(XmlDocument("<a/>", "t.xml", true).truncated());
  EXPECT_NE(errorAt(cut).find("the text ends before <b>"), std::string::npos);
}

TEST(XmlDocumentTest, QuotedAngleBracketsCommentsAndEntities) {
  const std::string text =
      "<?xml version=\"1.0\"?>\n<!-- <fake> -->\n<a v='x&gt;y' w=\"&lt;\"><![CDATA[<z>]]></a>";
  XmlDocument doc(text, "t.xml", false);
  EXPECT_EQ(xmlAttr(doc.root(), "v"), "x>y");
  EXPECT_EQ(xmlAttr(doc.root(), "w"), "<");
  EXPECT_EQ(xmlAttr(doc.root(), "missing"), "");
  EXPECT_EQ(xmlAttr(nullptr, "v"), "");
}

}  // namespace
}  // namespace torch_topo::topo
