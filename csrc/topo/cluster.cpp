// SPDX-License-Identifier: Apache-2.0
// Cluster assembly from per-rank records (layer: csrc/topo).
#include "topo/cluster.h"

#include <algorithm>
#include <map>
#include <optional>

#include "topo/error.h"
#include "topo/json.h"
#include "topo/link_tables.h"
#include "topo/topology_json.h"

namespace torch_topo::topo {
namespace {

using nlohmann::json;

std::string shortDump(const json& value) {
  std::string text = value.dump();
  return text.size() > 80 ? text.substr(0, 77) + "..." : text;
}

// First place where two host documents differ, as "<json pointer>: <a> vs <b>".
std::optional<std::string> firstDifference(const json& a, const json& b, const std::string& at) {
  if (a.type() != b.type()) return at + ": " + shortDump(a) + " vs " + shortDump(b);
  if (a.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (!b.contains(it.key())) return at + "/" + it.key() + ": present vs absent";
      if (auto d = firstDifference(it.value(), b.at(it.key()), at + "/" + it.key())) return d;
    }
    for (auto it = b.begin(); it != b.end(); ++it) {
      if (!a.contains(it.key())) return at + "/" + it.key() + ": absent vs present";
    }
    return std::nullopt;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) {
      return at + ": " + std::to_string(a.size()) + " entries vs " + std::to_string(b.size());
    }
    for (size_t i = 0; i < a.size(); ++i) {
      if (auto d = firstDifference(a[i], b[i], at + "/" + std::to_string(i))) return d;
    }
    return std::nullopt;
  }
  if (a != b) return at + ": " + shortDump(a) + " vs " + shortDump(b);
  return std::nullopt;
}

json parseDoc(const std::string& text, int rank) {
  return parseJson(text, "rank " + std::to_string(rank) + " host record");
}

}  // namespace

ClusterTopology assembleCluster(std::vector<RankRecord> records, const ClusterOptions& options) {
  std::vector<std::string> docs;
  docs.reserve(records.size());
  for (RankRecord& record : records) {
    record.host_doc = static_cast<int>(docs.size());
    docs.push_back(std::move(record.host_json));
  }
  return assembleCluster(std::move(records), docs, options);
}

ClusterTopology assembleCluster(std::vector<RankRecord> records,
                                const std::vector<std::string>& host_docs,
                                const ClusterOptions& options) {
  TOPO_CHECK(!records.empty(), "assembleCluster: got 0 records, expected one per rank");
  std::sort(records.begin(), records.end(),
            [](const RankRecord& a, const RankRecord& b) { return a.rank < b.rank; });
  for (size_t i = 0; i < records.size(); ++i) {
    TOPO_CHECK(records[i].rank == static_cast<int>(i), "assembleCluster: ranks must be 0..",
               records.size() - 1, " once each: got rank ", records[i].rank, " at position ", i);
    TOPO_CHECK(!records[i].hostname.empty(), "assembleCluster: rank ", i,
               " has an empty hostname, expected the host it runs on");
    TOPO_CHECK(records[i].host_doc >= 0 &&
                   records[i].host_doc < static_cast<int>(host_docs.size()),
               "assembleCluster: rank ", i, " refers to host document ", records[i].host_doc,
               ", expected 0..", host_docs.size() - 1);
  }
  ClusterTopology cluster;
  std::map<std::string, int> host_index;
  std::vector<int> first_rank;  // per host: the rank whose graph is the host's
  std::map<int, HostTopology> parsed;  // by document: identical hosts are parsed once
  std::vector<std::vector<int>> gpu_owner;  // per host and GPU: the rank that claimed it, or -1
  for (const RankRecord& record : records) {
    auto found = host_index.find(record.hostname);
    int host;
    if (found == host_index.end()) {
      host = static_cast<int>(cluster.hosts.size());
      host_index[record.hostname] = host;
      auto it = parsed.find(record.host_doc);
      if (it == parsed.end()) {
        it = parsed.emplace(record.host_doc,
                            hostFromJson(host_docs[record.host_doc],
                                         "rank " + std::to_string(record.rank) + " host record"))
                 .first;
      }
      HostTopology topo = it->second;
      topo.hostname = record.hostname;
      gpu_owner.emplace_back(topo.gpuCount(), -1);
      cluster.hosts.push_back(std::move(topo));
      first_rank.push_back(record.rank);
    } else {
      host = found->second;
      const RankRecord& first = records[first_rank[host]];
      const std::string& mine = host_docs[record.host_doc];
      const std::string& theirs = host_docs[first.host_doc];
      // Equal text is an equal graph; only differing text needs the field-by-field look.
      if (record.host_doc != first.host_doc && mine != theirs) {
        if (auto diff = firstDifference(parseDoc(theirs, first.rank), parseDoc(mine, record.rank),
                                        "")) {
          throw Mismatch("cluster: ranks " + std::to_string(first.rank) + " and " +
                         std::to_string(record.rank) + " on host '" + record.hostname +
                         "' disagree on the host topology: at " + *diff +
                         "; every rank of a host must probe or pin the same topology "
                         "(check TORCH_TOPO_FILE / NCCL_TOPO_FILE on each rank)");
        }
      }
    }
    const HostTopology& topo = cluster.hosts[host];
    TOPO_CHECK(record.local_device >= -1 && record.local_device < topo.gpuCount(),
               "cluster: rank ", record.rank, " on host '", record.hostname, "': local device ",
               record.local_device, " out of range, expected -1 (CPU) or 0..",
               topo.gpuCount() - 1, " (the host has ", topo.gpuCount(), " GPUs)");
    if (record.local_device >= 0) {
      int& owner = gpu_owner[host][record.local_device];
      TOPO_CHECK(owner < 0, "cluster: ranks ", owner, " and ", record.rank, " on host '",
                 record.hostname, "' both claim GPU ", record.local_device,
                 ", expected one rank per GPU");
      owner = record.rank;
    }
    cluster.ranks.push_back({host, record.local_device, record.local_rank});
  }
  if (cluster.hosts.size() > 1) {
    double bandwidth = options.inter_host_bandwidth_gbps;
    if (bandwidth <= 0) {
      // A collective between hosts runs at the pace of the slowest host's best NIC.
      for (const HostTopology& host : cluster.hosts) {
        double best = 0;
        for (const Nic& nic : host.nics) best = std::max(best, nic.speed_gbps);
        if (best > 0) bandwidth = bandwidth > 0 ? std::min(bandwidth, nicGBps(best)) : nicGBps(best);
      }
    }
    cluster.inter_host_bandwidth_gbps = std::max(bandwidth, 0.0);
    cluster.inter_host_latency_us =
        options.inter_host_latency_us > 0 ? options.inter_host_latency_us : kNetHopLatencyUs;
  }
  return cluster;
}

}  // namespace torch_topo::topo
