// SPDX-License-Identifier: Apache-2.0
// torch-topo JSON for hosts and clusters (layer: csrc/topo): the exchange format ranks publish
// through the c10d store and the emulator writes cluster files in. Versioned by "schema".
#pragma once

#include <string>

#include "topo/graph.h"

namespace torch_topo::topo {

/// Value of the "schema" key this build writes and accepts.
constexpr const char* kTopologyJsonSchema = "torch-topo/1";

/// Serialises every field of `host` (graph with source attributes, paths, warnings) as an
/// object {"schema": "torch-topo/1", "kind": "host", ...}; `indent` < 0 gives one line.
/// Numbers round-trip exactly: hostFromJson(hostToJson(h)) == h field by field.
std::string hostToJson(const HostTopology& host, int indent = -1);

/// Parses a "kind": "host" document. Hand-written files may leave fields out: missing
/// `gpu_paths` are computed from `graph` when it has nodes, else every pair is SYS; a path
/// cell may be a class string ("NV12", "PIX") whose bandwidth is then estimated.
/// Throws ParseError naming `path`, the line and column for syntax errors, and the field
/// (e.g. `gpus[2].sm`) for values of the wrong type or range.
HostTopology hostFromJson(const std::string& text, const std::string& path);

/// {"schema": ..., "kind": "cluster", "hosts": [host objects], "ranks": [...],
///  "inter_host_bandwidth_gbps": ..., "inter_host_latency_us": ...}.
std::string clusterToJson(const ClusterTopology& cluster, int indent = -1);
ClusterTopology clusterFromJson(const std::string& text, const std::string& path);

/// "host", "cluster", or "" when `text` is not a torch-topo JSON document.
std::string topologyJsonKind(const std::string& text);

}  // namespace torch_topo::topo
