// SPDX-License-Identifier: Apache-2.0
// The contract between TopoBackend and its multi-step schedules (layer: csrc/backend). A
// schedule issues inner collectives on the calling thread in program order, so every rank issues
// them in the same order; it calls Work::wait() between dependent steps (a host block on CPU, a
// stream-level wait on CUDA, where the backend makes its internal stream current first).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>

namespace torch_topo::backend {

/// The inner groups of one device type that a hierarchical schedule runs over.
/// Hosts may hold different numbers of ranks (e.g. 3 + 5): `rail` then joins the ranks with
/// the same local index on the hosts that have one, and `leaders` joins local rank 0 of every
/// host; schedules pick the form that fits (`uniform`).
struct Levels {
  c10::intrusive_ptr<c10d::Backend> intra;    // ranks of my host; rank = local_rank
  c10::intrusive_ptr<c10d::Backend> rail;     // my local index across hosts; rank = host index
  c10::intrusive_ptr<c10d::Backend> leaders;  // local rank 0 of each host; null on non-leaders
  int local_rank = 0;
  int local_size = 1;
  int host_index = 0;
  int host_count = 1;
  bool uniform = true;  // every host holds local_size ranks
  /// host_of_rank[r] and local_of_rank[r] for every group rank r.
  std::vector<int> host_of_rank;
  std::vector<int> local_of_rank;
  int64_t chunk_bytes = 4 << 20;  // pipelining grain of the two levels

  bool valid() const { return intra && host_count > 1; }
};

}  // namespace torch_topo::backend
