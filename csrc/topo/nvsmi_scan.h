// SPDX-License-Identifier: Apache-2.0
// The scanner of `nvidia-smi topo -m` text (layer: csrc/topo), internal to nvsmi_reader.cpp:
// cells are recognised by their vocabulary where they start, not split on whitespace, because
// pasted files lose the tabs between them (`GPU0GPU1`, `NODENODE`); index and id-list cells are
// checked here, with errors at `path:line:col`.
#pragma once

#include <cstddef>
#include <string>

namespace torch_topo::topo::nvsmi {

constexpr int kMaxDeviceIndex = 4095;  // above any real host; keeps ids in int range

struct Token {
  std::string text;
  size_t col = 0;  // byte offset in the line
};

bool isBlank(char c);
bool startsWith(const std::string& s, size_t pos, const char* prefix);
size_t skipBlanks(const std::string& s, size_t pos);
/// Number of decimal digits from `pos` on.
size_t digitsAt(const std::string& s, size_t pos);

/// A printable excerpt of the text at `pos` for error messages.
std::string excerpt(const std::string& s, size_t pos);

/// Length of the device name at `pos`: `GPU<n>`, `NIC<n>`, `mlx<n>_<n>` (these three stop where
/// a glued neighbour begins), else a run of name characters; 0 when none.
size_t matchDeviceName(const std::string& s, size_t pos);

/// Length of the path-class cell at `pos` ("X", "NV12", "NODE", ...); 0 when none.
size_t matchClassCell(const std::string& s, size_t pos);

/// Whether a status word of `nvidia-smi topo -p2p` (OK, CNS, GNS, TNS, NS, DR, U) stands at
/// `pos` alone: those matrices share the GPU header and diagonal X of `topo -m`.
bool isP2pStatusAt(const std::string& s, size_t pos);

/// `digits` (a non-empty run of decimal digits) as a device index.
int parseIndex(const std::string& digits, const std::string& path, int line, size_t col);

/// Validates a cpulist ("0-23,48-71") and returns its first id.
long parseIdList(const std::string& text, const std::string& path, int line, size_t col,
                 const char* what);

/// Removes SGR escapes (ESC [ digits/semicolons m): nvidia-smi underlines its header with
/// ESC[4m ... ESC[0m, and files saved from it keep them; they draw nothing, so columns line up
/// without them as they do on a terminal.
std::string stripSgr(const std::string& s);

}  // namespace torch_topo::topo::nvsmi
