// SPDX-License-Identifier: Apache-2.0
// Topology file loader (layer: csrc/topo): content sniffing and dispatch to the readers.
#include "topo/loader.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <nlohmann/json.hpp>

#include "topo/error.h"
#include "topo/hwloc_reader.h"
#include "topo/nccl_xml.h"
#include "topo/nvsmi_reader.h"
#include "topo/topology_json.h"
#include "topo/utf8.h"

namespace torch_topo::topo {
namespace {

constexpr size_t kMaxFileBytes = 64u << 20;  // far above any real topology dump

/// The verb of a CLI report ("show" for "schema": "torch-topo-show/1"), else "": reports share
/// the "torch-topo" prefix with topology files, so saying which one it is saves a guess.
std::string reportVerb(const std::string& text) {
  auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return "";
  auto schema = doc.find("schema");
  if (schema == doc.end() || !schema->is_string()) return "";
  const std::string name = schema->get<std::string>();
  const std::string prefix = "torch-topo-";
  const size_t slash = name.find('/');
  if (name.rfind(prefix, 0) != 0 || slash == std::string::npos) return "";
  return name.substr(prefix.size(), slash - prefix.size());
}

/// Name of the first element of an XML text, skipping the declaration, comments and DOCTYPE.
std::string xmlRootName(const std::string& text, size_t pos) {
  while (pos < text.size()) {
    pos = text.find('<', pos);
    if (pos == std::string::npos) return "";
    if (text.compare(pos, 4, "<!--") == 0) {
      pos = text.find("-->", pos);
      if (pos == std::string::npos) return "";
      continue;
    }
    if (text.compare(pos, 2, "<?") == 0 || text.compare(pos, 2, "<!") == 0) {
      pos = text.find('>', pos);
      if (pos == std::string::npos) return "";
      continue;
    }
    size_t end = pos + 1;
    while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) ||
                                 text[end] == '_' || text[end] == ':' || text[end] == '-')) {
      ++end;
    }
    return text.substr(pos + 1, end - pos - 1);
  }
  return "";
}

size_t firstNonSpace(const std::string& text) {
  size_t pos = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  return pos;
}

// Messages name the file, not this function: load_topology, the planner and the CLI verbs all
// read through here; a Python caller adds its own name or option (load_topology: path).
std::string readFile(const std::string& path) {
  // C stdio, not fstreams: the core keeps clear of iostream locales (see text_numbers.h).
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(path.c_str(), "rb"), &std::fclose);
  TOPO_CHECK(in != nullptr, "cannot open '", path,
             "', expected a readable topology file (", std::strerror(errno), ")");
  std::string text;
  char buf[1 << 14];
  // The limit is checked while reading: an endless source (/dev/zero, a device, a pipe fed
  // forever) would otherwise grow the buffer until the allocator fails.
  for (size_t n; text.size() <= kMaxFileBytes &&
                 (n = std::fread(buf, 1, sizeof(buf), in.get())) > 0;) {
    text.append(buf, n);
  }
  TOPO_CHECK(text.size() <= kMaxFileBytes, "'", path, "' has more than ",
             kMaxFileBytes, " bytes, expected at most ", kMaxFileBytes);
  // fopen accepts a directory on Linux and fread then fails (EISDIR); without this check the
  // empty text read so far was reported as an unknown topology format at 1:1.
  const int err = errno;
  TOPO_CHECK(!std::ferror(in.get()), "cannot read '", path, "': ",
             std::strerror(err), ", expected a readable topology file");
  return text;
}

}  // namespace

const char* toString(TopologyFormat format) {
  switch (format) {
    case TopologyFormat::NvidiaSmi:
      return "nvidia-smi";
    case TopologyFormat::NcclXml:
      return "nccl-xml";
    case TopologyFormat::NcclGraphXml:
      return "nccl-graph-xml";
    case TopologyFormat::HwlocXml:
      return "hwloc-xml";
    case TopologyFormat::TopoJson:
      return "torch-topo-json";
    case TopologyFormat::Unknown:
      break;
  }
  return "unknown";
}

TopologyFormat sniffTopologyFormat(const std::string& text) {
  size_t pos = firstNonSpace(text);
  if (pos >= text.size()) return TopologyFormat::Unknown;
  if (text[pos] == '{') {
    return topologyJsonKind(text).empty() ? TopologyFormat::Unknown : TopologyFormat::TopoJson;
  }
  if (text[pos] == '<') {
    std::string root = xmlRootName(text, pos);
    if (root == "system") return TopologyFormat::NcclXml;
    if (root == "graphs") return TopologyFormat::NcclGraphXml;
    if (root == "topology") return TopologyFormat::HwlocXml;
    return TopologyFormat::Unknown;
  }
  return looksLikeNvidiaSmi(text) ? TopologyFormat::NvidiaSmi : TopologyFormat::Unknown;
}

HostTopology loadTopologyText(const std::string& text, const std::string& path) {
  // Names and attributes of the file reach JSON and Python strings, which refuse bytes that are
  // not UTF-8 far from the file; refuse them here, where the line is known.
  if (const size_t bad = invalidUtf8At(text); bad != std::string::npos) {
    const auto [line, col] = lineColumn(text, bad);
    // Windows PowerShell 5.1's `>` writes UTF-16 with a byte order mark.
    const bool utf16 =
        bad == 0 && text.size() >= 2 &&
        ((text[0] == '\xff' && text[1] == '\xfe') || (text[0] == '\xfe' && text[1] == '\xff'));
    // ParseError writes the byte as \xNN.
    throw ParseError(path, line, col,
                     "byte " + text.substr(bad, 1) + " is not UTF-8, expected UTF-8 text" +
                         (utf16 ? std::string("; the file is UTF-16 (its byte order mark): save "
                                              "it as UTF-8, e.g. iconv -f UTF-16 -t UTF-8")
                                : std::string()));
  }
  const TopologyFormat format = sniffTopologyFormat(text);
  // No format has one; TinyXML-2 read it as the text's end and blamed a later line. A file of
  // no known format is named as such first (a binary file holds NULs too).
  if (const size_t nul = text.find('\0');
      nul != std::string::npos && format != TopologyFormat::Unknown) {
    const auto [line, col] = lineColumn(text, nul);
    throw ParseError(path, line, col, "byte \\x00 (NUL), expected text");
  }
  switch (format) {
    case TopologyFormat::NvidiaSmi:
      return readNvidiaSmi(text, path);
    case TopologyFormat::NcclXml:
    case TopologyFormat::NcclGraphXml:
      return readNcclXml(text, path);  // refuses <graphs>
    case TopologyFormat::TopoJson:
      if (topologyJsonKind(text) == "cluster") {
        throw ParseError(path, 1, 1,
                         "this is a torch-topo cluster file (\"kind\": \"cluster\"), expected "
                         "one host; plan, doctor and torch_topo.plan read cluster files");
      }
      return hostFromJson(text, path);
    case TopologyFormat::HwlocXml:
      return readHwlocXml(text, path);
    case TopologyFormat::Unknown:
      break;
  }
  if (const std::string verb = reportVerb(text); !verb.empty()) {
    throw ParseError(path, 1, 1,
                     "this is the report of `python -m torch_topo " + verb +
                         " --json` (\"schema\": \"torch-topo-" + verb +
                         "/...\"), not a topology; expected torch-topo JSON (\"schema\": "
                         "\"torch-topo/1\"): write one with `python -m torch_topo probe -o FILE` "
                         "(this host) or `python -m torch_topo convert FILE --to json`");
  }
  // Sniffing parses quietly; a document that opens like JSON but did not sniff as torch-topo JSON
  // goes to the reader, which names the line and column of a syntax error or the missing field.
  if (const size_t pos = firstNonSpace(text); pos < text.size() && text[pos] == '{')
    return hostFromJson(text, path);
  throw ParseError(path, 1, 1,
                   "unknown topology format: expected `nvidia-smi topo -m` text (first line with "
                   "GPU0), NCCL topology XML (<system>), hwloc XML (<topology>) or torch-topo "
                   "JSON (\"schema\": \"torch-topo/1\")");
}

namespace {

// An empty format marks a live probe (doctor checks a file's hosts, not the probe's), so a
// hand-written JSON that records no source or format is named after its file.
HostTopology fileHost(const std::string& text, const std::string& path) {
  HostTopology h = loadTopologyText(text, path);
  if (h.format.empty()) {
    h.format = toString(TopologyFormat::TopoJson);
    if (h.source.empty()) h.source = path;
  }
  return h;
}

}  // namespace

HostTopology loadTopologyFile(const std::string& path) { return fileHost(readFile(path), path); }

ClusterTopology loadClusterFile(const std::string& path) {
  std::string text = readFile(path);
  if (topologyJsonKind(text) == "cluster") return clusterFromJson(text, path);
  ClusterTopology cluster;
  cluster.hosts.push_back(fileHost(text, path));
  return cluster;
}

}  // namespace torch_topo::topo
