// SPDX-License-Identifier: Apache-2.0
// The cluster stage (layer: csrc/topo): per-rank records exchanged through the c10d store become
// one ClusterTopology that every rank builds identically.
#pragma once

#include <string>
#include <vector>

#include "topo/graph.h"

namespace torch_topo::topo {

/// What one rank publishes about itself.
struct RankRecord {
  int rank = -1;
  /// Host the rank runs on (gethostname, or the host a test makes it play).
  std::string hostname;
  int local_rank = -1;
  /// GPU index on its host, -1 for a CPU-only rank.
  int local_device = -1;
  /// Its host topology as torch-topo JSON (topology_json.h hostToJson).
  std::string host_json;
  /// Index into the `host_docs` of the overload that takes them, in place of `host_json`:
  /// ranks of identical hosts then share one document, parsed once.
  int host_doc = -1;
};

struct ClusterOptions {
  /// Measured or pinned network bandwidth between hosts per direction (GB/s); 0 derives it from
  /// the NIC speeds in the host graphs.
  double inter_host_bandwidth_gbps = 0.0;
  /// Measured or pinned latency between hosts (us); 0 takes NCCL's NET hop latency.
  double inter_host_latency_us = 0.0;
};

/// Groups `records` (one per rank 0..n-1, in any order) by hostname into a cluster:
///   - hosts in order of their lowest rank; each host's topology is the JSON its lowest rank
///     published, with `hostname` set from the records;
///   - every rank of a host must have published the same host graph: otherwise Mismatch
///     naming both ranks, the host and the first differing field with both values;
///   - placements per rank (host index, local GPU, local rank); a local device outside the
///     host's GPUs, or two ranks of a host on one GPU, is InvalidArgument;
///   - inter-host bandwidth: `options` when set, else the minimum over hosts of each host's
///     fastest NIC (nicGBps of its line rate); hosts with no known NIC speed are left out, and
///     0 means no host knew one (measure or pin it). Single-host clusters keep 0 and latency 0.
/// The result depends only on the set of records, so all ranks build the same cluster.
ClusterTopology assembleCluster(std::vector<RankRecord> records, const ClusterOptions& options = {});

/// The same, with each rank's host graph given by reference: `host_docs[record.host_doc]`
/// (the exchange publishes each distinct host document once, under its digest). Each document
/// is parsed at most once; ranks of one host that refer to the same document are equal without
/// a comparison. A `host_doc` outside `host_docs` is InvalidArgument.
ClusterTopology assembleCluster(std::vector<RankRecord> records,
                                const std::vector<std::string>& host_docs,
                                const ClusterOptions& options = {});

}  // namespace torch_topo::topo
