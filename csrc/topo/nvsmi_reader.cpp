// SPDX-License-Identifier: Apache-2.0
// Reader of `nvidia-smi topo -m` text (layer: csrc/topo). A small scanner (nvsmi_scan.h) instead
// of splitting on whitespace: pasted files lose tabs (`GPU0GPU1`, `NODENODE`) and affinity cells
// can be empty, so cells are matched by their vocabulary and affinity cells placed by header
// position.
#include "topo/nvsmi_reader.h"

#include <algorithm>
#include <map>
#include <set>

#include "topo/error.h"
#include "topo/nvsmi_scan.h"
#include "topo/paths.h"

namespace torch_topo::topo {
namespace {

using namespace nvsmi;

const char* const kAffinityColumns[] = {"CPU Affinity", "NUMA Affinity", "GPU NUMA ID"};

/// Lines a paste may carry above the header: the shell prompt, a label such as "NVIDIA
/// Topology:", a Markdown fence. About a quarter of the tables posted in public issues come so.
constexpr size_t kMaxPreambleLines = 3;

/// The lines of `body`, until `max` non-blank ones: \n, \r\n and a lone \r (files saved by old
/// Mac editors) each end a line, as in Python's universal newlines; a CR-only file was one line,
/// refused at its first \r.
std::vector<std::string> splitLines(const std::string& body, size_t max) {
  std::vector<std::string> lines;
  size_t start = 0, filled = 0;
  while (start < body.size() && filled < max) {
    const size_t end = std::min(body.find_first_of("\r\n", start), body.size());
    lines.push_back(body.substr(start, end - start));
    if (skipBlanks(lines.back(), 0) < lines.back().size()) ++filled;
    start = end + (body.compare(end, 2, "\r\n") == 0 ? 2 : 1);
  }
  return lines;
}

/// The header's index in `lines`: the first line naming GPU0 among the first non-blank ones,
/// at most kMaxPreambleLines below the first; npos when none does.
size_t headerLine(const std::vector<std::string>& lines) {
  size_t seen = 0;
  for (size_t i = 0; i < lines.size() && seen <= kMaxPreambleLines; ++i) {
    if (skipBlanks(lines[i], 0) == lines[i].size()) continue;
    if (lines[i].find("GPU0") != std::string::npos) return i;
    ++seen;
  }
  return std::string::npos;
}

struct Cell {
  bool known = false;
  PathClass cls = PathClass::SYS;
  int lanes = 0;
};

struct Column {
  std::string name;
  size_t col = 0;
  bool gpu = false;
  int index = -1;  // N of GPU<N> / NIC<N>
};

class NvsmiParser {
 public:
  NvsmiParser(const std::string& text, const std::string& path) : path_(path) {
    std::string body = startsWith(text, 0, "\xEF\xBB\xBF") ? text.substr(3) : text;
    ends_mid_line_ = !body.empty() && body.back() != '\n' && body.back() != '\r';
    lines_ = splitLines(body, std::string::npos);
    for (std::string& line : lines_) line = stripSgr(line);
  }

  HostTopology parse() {
    size_t i = 0;
    while (i < lines_.size() && skipBlanks(lines_[i], 0) == lines_[i].size()) ++i;
    if (i == lines_.size()) {
      throw ParseError(path_, 1, 1, "empty file: expected `nvidia-smi topo -m` output");
    }
    // Without a header below, the first line is refused as one.
    const size_t header = headerLine(lines_);
    if (header != std::string::npos && header != i) {
      warnings_.push_back(path_ + ":" + std::to_string(i + 1) +
                          ": skipped the line(s) above the header at line " +
                          std::to_string(header + 1) +
                          " (pasted with the table: a prompt, a label or a Markdown fence)");
      i = header;
    }
    parseHeader(i);
    for (++i; i < lines_.size(); ++i) {
      const std::string& s = lines_[i];
      size_t pos = skipBlanks(s, 0);
      if (pos == s.size()) continue;
      // A closing Markdown fence ends a table pasted without its legend.
      if (startsWith(s, pos, "Legend") || startsWith(s, pos, "NIC Legend") ||
          startsWith(s, pos, "```")) {
        break;
      }
      parseRow(i);
    }
    for (; i < lines_.size(); ++i) parseLegendLine(i);
    return build();
  }

 private:
  [[noreturn]] void fail(size_t line_idx, size_t col, const std::string& what) const {
    throw ParseError(path_, static_cast<int>(line_idx) + 1, static_cast<int>(col) + 1, what);
  }

  void parseHeader(size_t li) {
    header_line_ = li;
    const std::string& s = lines_[li];
    size_t pos = skipBlanks(s, 0);
    while (pos < s.size()) {
      const char* affinity = nullptr;
      for (const char* name : kAffinityColumns) {
        if (startsWith(s, pos, name)) affinity = name;
      }
      if (affinity != nullptr) {
        affinity_.push_back({affinity, pos});
        pos = skipBlanks(s, pos + std::char_traits<char>::length(affinity));
        continue;
      }
      size_t n = matchDeviceName(s, pos);
      if (n == 0) {
        fail(li, pos,
             "header: got " + excerpt(s, pos) +
                 ", expected a device column (GPU0, NIC0, mlx5_0) or CPU Affinity / "
                 "NUMA Affinity / GPU NUMA ID");
      }
      if (!affinity_.empty()) {
        // Devices come first: what follows an affinity column is another one, misspelt or
        // cut short ("NUMA" for "NUMA Affinity").
        fail(li, pos,
             "header: got " + excerpt(s, pos) +
                 " after the affinity columns, expected CPU Affinity, NUMA Affinity or GPU "
                 "NUMA ID (device columns come before them)");
      }
      Column c{s.substr(pos, n), pos, false, -1};
      if (startsWith(c.name, 0, "GPU") && digitsAt(c.name, 3) == n - 3) {
        c.gpu = true;
        c.index = parseIndex(c.name.substr(3), path_, static_cast<int>(li) + 1, pos);
      }
      for (const Column& other : columns_) {
        if (other.name == c.name) fail(li, pos, "header: column " + c.name + " appears twice");
      }
      columns_.push_back(c);
      pos = skipBlanks(s, pos + n);
    }
    bool any_gpu =
        std::any_of(columns_.begin(), columns_.end(), [](const Column& c) { return c.gpu; });
    if (!any_gpu) {
      fail(li, skipBlanks(s, 0),
           "header: got " + excerpt(s, skipBlanks(s, 0)) +
               ", expected the `nvidia-smi topo -m` header with columns GPU0 GPU1 ...");
    }
    cells_.assign(columns_.size() * columns_.size(), Cell{});
    row_seen_.assign(columns_.size(), false);
    cpu_affinity_.assign(columns_.size(), "");
    numa_.assign(columns_.size(), -1);
    gpu_numa_id_.assign(columns_.size(), -1);
  }

  int columnOf(const std::string& name) const {
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (columns_[c].name == name) return static_cast<int>(c);
    }
    return -1;
  }

  void parseRow(size_t li) {
    const std::string& s = lines_[li];
    size_t pos = skipBlanks(s, 0);
    size_t n = matchDeviceName(s, pos);
    int row = n > 0 ? columnOf(s.substr(pos, n)) : -1;
    if (row < 0) {
      fail(li, pos,
           "got " + excerpt(s, pos) + ", expected a row starting with a device of the header (" +
               columns_.front().name + " .. " + columns_.back().name + ")");
    }
    if (row_seen_[row]) fail(li, pos, "row " + columns_[row].name + " appears twice");
    row_seen_[row] = true;
    pos += n;
    const size_t nd = columns_.size();
    size_t last_cell = pos;
    for (size_t c = 0; c < nd; ++c) {
      pos = skipBlanks(s, pos);
      last_cell = pos;
      size_t len = matchClassCell(s, pos);
      Cell cell;
      if (len == 0 || !parsePathClass(s.substr(pos, len), &cell.cls, &cell.lanes)) {
        if (pos >= s.size()) {
          fail(li, pos,
               "row " + columns_[row].name + " has " + std::to_string(c) +
                   " path cells, expected " + std::to_string(nd) + " (one per device column)");
        }
        fail(li, pos,
             "row " + columns_[row].name + ", column " + columns_[c].name + ": got " +
                 excerpt(s, pos) +
                 ", expected a path class (X, NV1 to NV64, PIX, PXB, PHB, NODE, SYS, SOC)" +
                 (isP2pStatusAt(s, pos) ? std::string("; this is `nvidia-smi topo -p2p` output "
                                                      "(peer-access status, not paths): save "
                                                      "`nvidia-smi topo -m` instead")
                                        : std::string()));
      }
      if ((cell.cls == PathClass::X) != (static_cast<size_t>(row) == c)) {
        fail(li, pos,
             "row " + columns_[row].name + ", column " + columns_[c].name + ": got " +
                 excerpt(s, pos) + ", expected X exactly on the diagonal");
      }
      cell.known = true;
      cells_[row * nd + c] = cell;
      pos += len;
    }
    parseAffinity(li, pos, row, last_cell);
  }

  /// `last_cell`: where the row's last path cell starts, to quote it when text is glued to it.
  void parseAffinity(size_t li, size_t pos, int row, size_t last_cell) {
    const std::string& s = lines_[li];
    std::vector<Token> fields;
    size_t content_end = s.size();
    while (content_end > pos && isBlank(s[content_end - 1])) --content_end;
    // Tabs only in trailing whitespace (a space-aligned paste whose lines end in a tab) do not
    // make the row tab-separated.
    if (s.find('\t', pos) < content_end) {
      // Tab layout: positional fields; nvidia-smi pads wide columns with an extra tab, so
      // surplus empty fields are padding.
      size_t start = s.find('\t', pos);
      if (skipBlanks(s, pos) < start)
        fail(li, last_cell,
             "row " + columns_[row].name + ", column " + columns_.back().name + ": got " +
                 excerpt(s, last_cell) +
                 ", expected a path class (X, NV1 to NV64, PIX, PXB, PHB, " +
                 "NODE, SYS, SOC) followed by a tab; " + excerpt(s, skipBlanks(s, pos)) +
                 " is glued to it");
      while (start != std::string::npos) {
        size_t end = s.find('\t', start + 1);
        std::string f =
            s.substr(start + 1, end == std::string::npos ? std::string::npos : end - start - 1);
        size_t b = skipBlanks(f, 0), e = f.size();
        while (e > b && isBlank(f[e - 1])) --e;
        fields.push_back({f.substr(b, e - b), start + 1 + b});
        start = end;
      }
      while (fields.size() > affinity_.size()) {
        auto empty = std::find_if(fields.rbegin(), fields.rend(),
                                  [](const Token& t) { return t.text.empty(); });
        if (empty == fields.rend()) break;
        fields.erase(std::next(empty).base());
      }
      if (fields.size() > affinity_.size())
        fail(li, fields[affinity_.size()].col,
             "got " + excerpt(s, fields[affinity_.size()].col) + ", expected no more cells (" +
                 std::to_string(affinity_.size()) + " affinity columns in the header)");
    } else {
      for (pos = skipBlanks(s, pos); pos < s.size(); pos = skipBlanks(s, pos)) {
        size_t end = pos;
        while (end < s.size() && !isBlank(s[end])) ++end;
        fields.push_back({s.substr(pos, end - pos), pos});
        pos = end;
      }
      if (fields.size() > affinity_.size())
        fail(li, fields[affinity_.size()].col,
             "got " + excerpt(s, fields[affinity_.size()].col) + ", expected no more cells (" +
                 std::to_string(affinity_.size()) + " affinity columns in the header)");
      if (fields.size() < affinity_.size() && !fields.empty()) fields = placeByHeader(li, fields);
    }
    if (columns_[row].gpu) warnCutCell(li, row, fields);
    if (!columns_[row].gpu) {
      for (const Token& f : fields) {
        if (!f.text.empty())
          fail(li, f.col,
               "NIC row " + columns_[row].name + ": got " + excerpt(s, f.col) +
                   ", expected no affinity cells");
      }
      return;
    }
    for (size_t a = 0; a < fields.size(); ++a) {
      const std::string& v = fields[a].text;
      if (v.empty() || v == "N/A") continue;
      const std::string name = affinity_[a].text;
      if (name == "CPU Affinity") {
        parseIdList(v, path_, static_cast<int>(li) + 1, fields[a].col, "CPU Affinity");
        cpu_affinity_[row] = v;
      } else if (name == "NUMA Affinity") {
        numa_[row] = static_cast<int>(
            parseIdList(v, path_, static_cast<int>(li) + 1, fields[a].col, "NUMA Affinity"));
        if (numa_[row] > kMaxDeviceIndex)
          fail(li, fields[a].col,
               "NUMA Affinity: got " + v + ", expected ids up to " +
                   std::to_string(kMaxDeviceIndex));
      } else {
        if (digitsAt(v, 0) != v.size())
          fail(li, fields[a].col, "GPU NUMA ID: got '" + v + "', expected an integer or N/A");
        gpu_numa_id_[row] = parseIndex(v, path_, static_cast<int>(li) + 1, fields[a].col);
      }
    }
  }

  /// Space layout with empty cells: each value goes to the affinity column whose header starts
  /// nearest to it, the later one at equal distance. nvidia-smi writes tabs: headers stand
  /// 16 columns apart, values at 8-column stops, so a value whose earlier cell is empty (no
  /// CPU Affinity: `\t\t0\t\tN/A`) falls halfway between its own header and the one before.
  std::vector<Token> placeByHeader(size_t li, const std::vector<Token>& values) const {
    std::vector<Token> placed(affinity_.size());
    std::vector<bool> used(affinity_.size(), false);
    for (const Token& v : values) {
      size_t best = 0;
      for (size_t a = 1; a < affinity_.size(); ++a) {
        auto dist = [&](size_t k) {
          return affinity_[k].col > v.col ? affinity_[k].col - v.col : v.col - affinity_[k].col;
        };
        if (dist(a) <= dist(best)) best = a;
      }
      if (used[best])
        fail(li, v.col,
             "got " + excerpt(lines_[li], v.col) +
                 ", expected one value per affinity column (two fall under " +
                 affinity_[best].text + ")");
      used[best] = true;
      placed[best] = v;
    }
    return placed;
  }

  void parseLegendLine(size_t li) {
    const std::string& s = lines_[li];
    size_t pos = skipBlanks(s, 0);
    // Class definitions ("  PIX  = Connection ..."); `topo -mp` prints all but NV#.
    const bool nvlink = startsWith(s, pos, "NV#");
    const size_t word = nvlink ? 3 : matchClassCell(s, pos);
    if (word > 0 && s.compare(skipBlanks(s, pos + word), 1, "=") == 0) {
      legend_classes_ = true;
      legend_nvlink_ = legend_nvlink_ || nvlink;
      return;
    }
    if (!startsWith(s, pos, "NIC")) return;
    size_t n = matchDeviceName(s, pos);
    size_t colon = skipBlanks(s, pos + n);
    if (n == 0 || colon >= s.size() || s[colon] != ':') return;
    size_t b = skipBlanks(s, colon + 1), e = s.size();
    while (e > b && isBlank(s[e - 1])) --e;
    if (e == b) return;
    if (endsCut(li)) {
      warnMaybeCut(li, "NIC Legend line " + s.substr(pos, n), "'" + s.substr(b, e - b) + "'");
    }
    // A second line for one column, or one name for two NICs, leaves no way to tell which the
    // file meant (NCCL's XML reader refuses a name twice too).
    const std::string column = s.substr(pos, n), name = s.substr(b, e - b);
    if (legend_.count(column)) fail(li, pos, "NIC Legend: " + column + " appears twice");
    for (const auto& [other, entry] : legend_) {
      if (entry.name == name)
        fail(li, b, "NIC Legend: " + column + " and " + other + " are both named '" + name + "'");
    }
    legend_[column] = {name, li};
  }

  HostTopology build() {
    HostTopology host;
    host.warnings = warnings_;
    host.source = path_;
    host.format = "nvidia-smi";
    std::vector<size_t> gpu_cols, nic_cols;
    std::set<int> indices;
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (!columns_[c].gpu) {
        nic_cols.push_back(c);
        continue;
      }
      if (!indices.insert(columns_[c].index).second) {
        fail(header_line_, columns_[c].col,
             "header: GPU index " + std::to_string(columns_[c].index) + " appears twice");
      }
      gpu_cols.push_back(c);
    }
    for (size_t c : gpu_cols) {
      Gpu gpu;
      gpu.index = columns_[c].index;
      gpu.numa_node = numa_[c];
      gpu.cpu_affinity = cpu_affinity_[c];
      gpu.memory_numa_node = gpu_numa_id_[c];
      host.gpus.push_back(gpu);
    }
    for (size_t c : nic_cols) {
      Nic nic;
      auto it = legend_.find(columns_[c].name);
      nic.name = it == legend_.end() ? columns_[c].name : it->second.name;
      // Some NICs named and this one not: a legend cut short or edited, and a NIC whose name
      // (mlx5_3) rails and NCCL_IB_HCA need.
      if (it == legend_.end() && !legend_.empty())
        host.warnings.push_back(path_ + ": " + columns_[c].name +
                                " has no line in the NIC Legend; named " + columns_[c].name);
      host.nics.push_back(nic);
    }
    for (const auto& [column, entry] : legend_) {
      const bool listed = std::any_of(nic_cols.begin(), nic_cols.end(),
                                      [&](size_t c) { return columns_[c].name == column; });
      if (!listed)
        host.warnings.push_back(path_ + ":" + std::to_string(entry.line + 1) +
                                ": NIC Legend names " + column +
                                ", which the matrix has no column for; ignored");
    }
    assignNuma(&host, gpu_cols);

    int unknown = 0;
    const size_t nd = columns_.size();
    // Prefer the row of the lower column (the GPU row for GPU-NIC pairs); the mirror cell
    // stands in for rows a cut-short file lost.
    auto resolve = [&](size_t a, size_t b) {
      size_t lo = std::min(a, b), hi = std::max(a, b);
      const Cell& primary = cells_[lo * nd + hi];
      const Cell& mirror = cells_[hi * nd + lo];
      if (a < b && primary.known && mirror.known &&
          (primary.cls != mirror.cls || primary.lanes != mirror.lanes)) {
        host.warnings.push_back("cells " + columns_[lo].name + "/" + columns_[hi].name + " and " +
                                columns_[hi].name + "/" + columns_[lo].name +
                                " disagree; kept row " + columns_[lo].name + "'s");
      }
      const Cell& use = primary.known ? primary : mirror;
      PathInfo p;
      if (use.known) {
        p.cls = use.cls;
        p.nvlinks = use.lanes;
      } else {
        if (a < b) ++unknown;
        p.cls = a == b ? PathClass::X : PathClass::SYS;
      }
      return p;
    };
    for (size_t i : gpu_cols) {
      for (size_t j : gpu_cols) host.gpu_paths.push_back(resolve(i, j));
    }
    for (size_t i : gpu_cols) {
      for (size_t k : nic_cols) host.gpu_nic_paths.push_back(resolve(i, k));
    }
    std::string missing;
    for (size_t c = 0; c < nd; ++c) {
      if (!row_seen_[c]) missing += (missing.empty() ? "" : ", ") + columns_[c].name;
    }
    if (!missing.empty()) {
      host.warnings.push_back("rows missing (file cut short?): " + missing + "; " +
                              std::to_string(unknown) +
                              " device pairs given by neither row nor column, assumed SYS");
    }
    const bool any_nvlink = std::any_of(host.gpu_paths.begin(), host.gpu_paths.end(),
                                        [](const PathInfo& p) { return p.cls == PathClass::NV; });
    if (legend_classes_ && !legend_nvlink_ && !any_nvlink && gpu_cols.size() > 1) {
      host.warnings.push_back(std::string(kPcieOnlyMatrixWarning) + " (" + path_ +
                              "): its legend has no NV# line, as `nvidia-smi topo -mp` prints; "
                              "NVLink between the GPUs, if any, is not shown, so GPU pairs keep "
                              "their PCIe paths; save `nvidia-smi topo -m` for NVLink");
    }
    estimatePathMetrics(&host);
    return host;
  }

  /// Two GPUs given one CPU Affinity with SYS between them (the link between sockets, as the
  /// file itself says) show a cpuset or cgroup limit (a Slurm job's), not their sockets: NUMA
  /// nodes numbered by it would put both sockets' GPUs on one node. The warning that says so,
  /// or "" where no such pair exists. `host.gpus[i]` is the GPU of column `gpu_cols[i]`.
  std::string cpusetAcrossSockets(const HostTopology& host,
                                  const std::vector<size_t>& gpu_cols) const {
    const size_t nd = columns_.size();
    for (size_t a = 0; a < gpu_cols.size(); ++a) {
      for (size_t b = a + 1; b < gpu_cols.size(); ++b) {
        const Gpu& ga = host.gpus[a];
        const Cell& cell = cells_[gpu_cols[a] * nd + gpu_cols[b]];
        const Cell& known = cell.known ? cell : cells_[gpu_cols[b] * nd + gpu_cols[a]];
        if (ga.numa_node >= 0 && ga.numa_node == host.gpus[b].numa_node && known.known &&
            known.cls == PathClass::SYS) {
          return columns_[gpu_cols[a]].name + " and " + columns_[gpu_cols[b]].name +
                 " share CPU Affinity " + ga.cpu_affinity +
                 " across SYS (the link between sockets): a cpuset or cgroup limit, not their "
                 "sockets'; NUMA nodes unknown";
        }
      }
    }
    return "";
  }

  void assignNuma(HostTopology* host, const std::vector<size_t>& gpu_cols) {
    bool has_numa_column = std::any_of(affinity_.begin(), affinity_.end(),
                                       [](const Token& t) { return t.text == "NUMA Affinity"; });
    if (!has_numa_column) {
      // Older formats give CPU Affinity only: GPUs sharing a CPU set share a NUMA domain.
      std::vector<std::string> sets;
      for (Gpu& gpu : host->gpus) {
        if (gpu.cpu_affinity.empty()) continue;
        auto it = std::find(sets.begin(), sets.end(), gpu.cpu_affinity);
        if (it == sets.end()) it = sets.insert(sets.end(), gpu.cpu_affinity);
        gpu.numa_node = static_cast<int>(it - sets.begin());
      }
      const std::string cpuset = cpusetAcrossSockets(*host, gpu_cols);
      if (!cpuset.empty()) {
        host->warnings.push_back(cpuset);
        for (Gpu& gpu : host->gpus) gpu.numa_node = -1;
      } else if (!sets.empty()) {
        host->warnings.push_back("no NUMA Affinity column: NUMA nodes numbered 0.." +
                                 std::to_string(sets.size() - 1) + " by distinct CPU Affinity");
      }
    }
    std::map<int, std::string> nodes;
    for (const Gpu& gpu : host->gpus) {
      if (gpu.numa_node >= 0 && !nodes.count(gpu.numa_node))
        nodes[gpu.numa_node] = gpu.cpu_affinity;
    }
    for (const auto& [id, cpus] : nodes) host->numa_nodes.push_back({id, cpus});
  }

  /// nvidia-smi ends its output with a newline: text that ends mid-line right after a value
  /// may be a file cut short there, the value the start of a longer one ('5' of '56-111', 'ml'
  /// of 'mlx5_2'). More often it is a whole output pasted without its last newline, so the
  /// value is kept and a warning says it may be cut.
  bool endsCut(size_t li) const {
    const std::string& s = lines_[li];
    return ends_mid_line_ && li + 1 == lines_.size() && !s.empty() && !isBlank(s.back());
  }

  /// A warning for a GPU row's last value that may be cut short (`endsCut`).
  void warnCutCell(size_t li, int row, const std::vector<Token>& fields) {
    const std::string& s = lines_[li];
    if (!endsCut(li)) return;
    auto last = std::find_if(fields.rbegin(), fields.rend(),
                             [](const Token& t) { return !t.text.empty(); });
    if (last == fields.rend() || last->col + last->text.size() != s.size()) return;
    warnMaybeCut(li, "row " + columns_[row].name, "its last cell '" + last->text + "'");
  }

  void warnMaybeCut(size_t li, const std::string& what, const std::string& value) {
    warnings_.push_back(path_ + ":" + std::to_string(li + 1) + ": " + what +
                        " ends the file without a newline (cut short?): " + value +
                        " is read as written but may be incomplete");
  }

  std::string path_;
  std::vector<std::string> lines_;
  bool ends_mid_line_ = false;     // the text does not end with a line break (\n, \r\n or \r)
  std::vector<std::string> warnings_;  // found while parsing rows, reported by build()
  size_t header_line_ = 0;
  std::vector<Column> columns_;
  std::vector<Token> affinity_;
  std::vector<Cell> cells_;  // columns x columns, row-major by row device
  std::vector<bool> row_seen_;
  std::vector<std::string> cpu_affinity_;
  std::vector<int> numa_;
  std::vector<int> gpu_numa_id_;
  struct LegendEntry {
    std::string name;
    size_t line;
  };
  std::map<std::string, LegendEntry> legend_;  // NIC column -> its name in the NIC Legend
  bool legend_classes_ = false;  // the legend defines path classes
  bool legend_nvlink_ = false;   // ... NV# among them
};

}  // namespace

const char* const kPcieOnlyMatrixWarning = "PCIe-only nvidia-smi matrix";

HostTopology readNvidiaSmi(const std::string& text, const std::string& path) {
  return NvsmiParser(text, path).parse();
}

bool looksLikeNvidiaSmi(const std::string& text) {
  return headerLine(splitLines(text, kMaxPreambleLines + 1)) != std::string::npos;
}

}  // namespace torch_topo::topo
