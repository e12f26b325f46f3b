// SPDX-License-Identifier: Apache-2.0
// Chunked matmul -> reduce_scatter and all_gather -> matmul with the collectives overlapped
// (layer: csrc/ops). Device-generic through c10's stream/event interface, so no .cu is needed.
#include "ops/overlap.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace torch_topo::ops {

double nowSeconds() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

namespace {

// The base collectives are the only ones both torch 2.11 (GPU machine) and 2.14 (CI) have;
// 2.14 marks them deprecated in favour of all_gather_single / reduce_scatter_single.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
c10::intrusive_ptr<c10d::Work> issueReduceScatter(c10d::ProcessGroup& group, at::Tensor out,
                                                  at::Tensor in) {
  return group._reduce_scatter_base(out, in);
}
c10::intrusive_ptr<c10d::Work> issueAllGather(c10d::ProcessGroup& group, at::Tensor out,
                                              at::Tensor in) {
  return group._allgather_base(out, in);
}
#pragma GCC diagnostic pop

// Rows of one rank block split into `chunks` near-equal parts (the first ones one row larger),
// so any row count >= chunks works.
std::vector<std::pair<int64_t, int64_t>> splitRows(int64_t rows, int64_t chunks) {
  std::vector<std::pair<int64_t, int64_t>> spans;
  int64_t start = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t len = rows / chunks + (c < rows % chunks ? 1 : 0);
    spans.emplace_back(start, len);
    start += len;
  }
  return spans;
}

void checkInputs(const char* op, const at::Tensor& x, const at::Tensor& weight,
                 const OverlapOptions& options) {
  TORCH_CHECK_VALUE(x.dim() == 2, op, ": x: got ", x.dim(), "-D shape ", x.sizes(),
                    ", expected 2-D [rows, in_features]");
  TORCH_CHECK_VALUE(weight.dim() == 2, op, ": weight: got ", weight.dim(), "-D shape ",
                    weight.sizes(), ", expected 2-D [out_features, in_features]");
  TORCH_CHECK_VALUE(x.size(1) == weight.size(1), op, ": in_features: got x ", x.sizes(),
                    " and weight ", weight.sizes(), ", expected x.size(1) == weight.size(1)");
  TORCH_CHECK_VALUE(x.device() == weight.device(), op, ": devices: got x on ", x.device(),
                    " and weight on ", weight.device(), ", expected one device");
  TORCH_CHECK_VALUE(x.scalar_type() == weight.scalar_type(), op, ": dtypes: got x ",
                    x.scalar_type(), " and weight ", weight.scalar_type(), ", expected one dtype");
  TORCH_CHECK_VALUE(options.chunks >= 1, op, ": chunks: got ", options.chunks, ", expected >= 1");
  TORCH_CHECK_VALUE(options.maxInflight >= 1, op, ": max_inflight: got ", options.maxInflight,
                    ", expected >= 1");
}

// Empty rank blocks still run one (empty) collective, as torch's own collectives do, so the
// op returns the empty result a matmul and a reduce_scatter would, on every rank alike.
void checkChunks(const char* op, int64_t chunks, int64_t rowsPerRank) {
  TORCH_CHECK_VALUE(chunks <= std::max<int64_t>(rowsPerRank, 1), op, ": chunks: got ", chunks,
                    ", expected <= rows per rank ", rowsPerRank,
                    rowsPerRank == 0 ? " (an empty block allows 1)" : "");
}

// The dedicated high-priority communication stream of (group, device). Pool streams are
// shared round-robin by everyone asking the pool, so the first one handed out is kept per key:
// collectives of one group then stay in program order on one stream.
c10::Stream commStreamFor(const c10d::ProcessGroup* group, c10::Device device) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, c10::DeviceIndex>, c10::Stream> streams;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(static_cast<const void*>(group), device.index());
  auto it = streams.find(key);
  if (it == streams.end()) {
    const auto* impl = c10::impl::getDeviceGuardImpl(device.type());
    it = streams.emplace(key, impl->getStreamFromGlobalPool(device, /*isHighPriority=*/true))
             .first;
  }
  return it->second;
}

// Completion times reported by the Works' future callbacks. A future notifies its waiters
// before it runs its callbacks, so `wait()` returning does not mean the stamp is written:
// `collect` waits (bounded) for the callbacks.
class CommClock : public std::enable_shared_from_this<CommClock> {
 public:
  explicit CommClock(int64_t chunks) : ends_(chunks, 0.0) {}

  // Returns false when the Work has no future (Gloo's reduce_scatter does not); the caller
  // then stamps the end when its wait returns, an upper bound.
  bool watch(const c10::intrusive_ptr<c10d::Work>& work, int64_t chunk) {
    c10::intrusive_ptr<c10::ivalue::Future> future;
    try {
      future = work->getFuture();
    } catch (const c10::Error&) {
      return false;
    }
    if (!future) {
      return false;
    }
    ++expected_;
    std::weak_ptr<CommClock> self = weak_from_this();
    future->addCallback([self, chunk](c10::ivalue::Future&) {
      if (auto clock = self.lock()) {
        std::lock_guard<std::mutex> lock(clock->mutex_);
        clock->ends_[chunk] = nowSeconds();
        ++clock->seen_;
        clock->cv_.notify_all();
      }
    });
    return true;
  }

  void stamp(int64_t chunk) {
    std::lock_guard<std::mutex> lock(mutex_);
    ends_[chunk] = nowSeconds();
  }

  std::vector<double> collect() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return seen_ >= expected_; });
    return ends_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<double> ends_;
  int64_t expected_ = 0;
  int64_t seen_ = 0;
};

// One call's pipeline: issues collectives, keeps their buffers referenced, bounds how many are
// in flight and makes the consumer wait for them. CPU: waiting blocks this thread on the Work.
// Other devices: only streams wait (events), the host never does; with one chunk there is
// nothing to overlap, so the collective is issued from the caller's stream as a plain call
// would be (the communication stream's event hops could only add latency).
class ChunkPipeline {
 public:
  ChunkPipeline(c10d::ProcessGroup& group, c10::Device device, const OverlapOptions& options)
      : group_(group), device_(device), options_(options), timing_(options.chunks) {
    if (!device.is_cpu() && options.chunks > 1) {
      const auto* impl = c10::impl::getDeviceGuardImpl(device.type());
      compute_ = impl->getStream(device);
      comm_ = commStreamFor(&group, device);
    }
    if (options.recordTiming) {
      clock_ = std::make_shared<CommClock>(options.chunks);
    }
    for (int64_t c = 0; c < options.chunks; ++c) {
      timing_[c].chunk = c;
    }
    rng_.seed(options.delaySeed * 1000003ULL + static_cast<uint64_t>(group.getRank()));
  }

  int64_t inflight() const { return static_cast<int64_t>(inflight_.size()); }

  // Test hook: a random pause before a chunk's compute or a collective's issue.
  void delay(int64_t maxUs) {
    if (maxUs > 0) {
      std::uniform_int_distribution<int64_t> pick(0, maxUs);
      std::this_thread::sleep_for(std::chrono::microseconds(pick(rng_)));
    }
  }

  void markCompute(int64_t chunk, double start) {
    if (options_.recordTiming) {
      timing_[chunk].computeStartS = start;
      timing_[chunk].computeEndS = nowSeconds();
    }
  }

  // Issues `collective` for `chunk` after the work queued so far on the compute stream; `keep`
  // holds every tensor the collective touches until the consumer has waited.
  void issue(int64_t chunk, std::vector<at::Tensor> keep,
             const std::function<c10::intrusive_ptr<c10d::Work>()>& collective) {
    delay(options_.commDelayMaxUs);
    Entry entry{chunk, nullptr, std::move(keep), std::nullopt, false};
    if (options_.recordTiming) {
      timing_[chunk].commIssueS = nowSeconds();
    }
    if (!comm_) {
      entry.work = collective();
      if (!device_.is_cpu()) {
        entry.work->wait();  // the caller's stream waits for it, as after a plain call
      }
    } else {
      c10::Event ready(device_.type());
      ready.record(*compute_);
      ready.block(*comm_);
      c10::StreamGuard onComm(*comm_);
      entry.work = collective();
      // GPU-side wait (non-blocking for NCCL and "topo"): the comm stream resumes when the
      // collective ends, and the event marks that point for the consumer.
      entry.work->wait();
      entry.done.emplace(device_.type());
      entry.done->record(*comm_);
    }
    entry.watched = clock_ && clock_->watch(entry.work, chunk);
    inflight_.push_back(std::move(entry));
  }

  // Makes the consumer wait for the oldest collective in flight and releases its buffers.
  void finishOldest() {
    Entry& entry = inflight_.front();
    if (device_.is_cpu()) {
      entry.work->wait();
    } else if (entry.done) {
      entry.done->block(*compute_);
    }
    if (clock_ && !entry.watched) {
      clock_->stamp(entry.chunk);
    }
    inflight_.pop_front();
  }

  void finishAll() {
    while (!inflight_.empty()) {
      finishOldest();
    }
  }

  std::vector<ChunkTiming> timing() {
    if (clock_) {
      const auto ends = clock_->collect();
      for (size_t c = 0; c < ends.size(); ++c) {
        timing_[c].commEndS = ends[c];
      }
      return timing_;
    }
    return {};
  }

 private:
  struct Entry {
    int64_t chunk;
    c10::intrusive_ptr<c10d::Work> work;
    std::vector<at::Tensor> keep;
    std::optional<c10::Event> done;
    bool watched;  // its completion time comes from its future's callback
  };

  c10d::ProcessGroup& group_;
  c10::Device device_;
  const OverlapOptions& options_;
  std::optional<c10::Stream> compute_;
  std::optional<c10::Stream> comm_;
  std::deque<Entry> inflight_;
  std::vector<ChunkTiming> timing_;
  std::shared_ptr<CommClock> clock_;
  std::mt19937_64 rng_;
};

}  // namespace

OverlapResult matmulReduceScatter(const at::Tensor& x, const at::Tensor& weight,
                                  const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                                  const OverlapOptions& options) {
  constexpr const char* kOp = "matmul_reduce_scatter";
  checkInputs(kOp, x, weight, options);
  const int64_t ranks = group->getSize();
  const int64_t rows = x.size(0);
  TORCH_CHECK_VALUE(rows % ranks == 0, kOp, ": x rows: got ", rows,
                    ", expected a multiple of the group size ", ranks);
  const int64_t rowsPerRank = rows / ranks;
  checkChunks(kOp, options.chunks, rowsPerRank);
  const auto blocks = x.view({ranks, rowsPerRank, x.size(1)});
  const auto weightT = weight.t();
  auto out = at::empty({rowsPerRank, weight.size(0)}, x.options());

  ChunkPipeline pipeline(*group, x.device(), options);
  int64_t chunk = 0;
  for (const auto& [start, len] : splitRows(rowsPerRank, options.chunks)) {
    pipeline.delay(options.computeDelayMaxUs);
    const double t0 = nowSeconds();
    // Chunk c of every rank block, rank-major: exactly the layout reduce_scatter_dim0 wants.
    auto partial = at::matmul(blocks.narrow(1, start, len), weightT)
                       .reshape({ranks * len, weight.size(0)});
    pipeline.markCompute(chunk, t0);
    if (pipeline.inflight() == options.maxInflight) {
      pipeline.finishOldest();
    }
    auto outChunk = out.narrow(0, start, len);
    pipeline.issue(chunk, {partial, outChunk}, [&] {
      return issueReduceScatter(*group, outChunk, partial);
    });
    ++chunk;
  }
  pipeline.finishAll();
  return {out, at::Tensor(), pipeline.timing()};
}

OverlapResult allGatherMatmul(const at::Tensor& x, const at::Tensor& weight,
                              const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                              const OverlapOptions& options, bool keepGathered) {
  constexpr const char* kOp = "all_gather_matmul";
  checkInputs(kOp, x, weight, options);
  const int64_t ranks = group->getSize();
  const int64_t rowsPerRank = x.size(0);
  checkChunks(kOp, options.chunks, rowsPerRank);
  const auto input = x.contiguous();
  const auto weightT = weight.t();
  const int64_t features = x.size(1);
  const int64_t chunks = options.chunks;
  // One chunk is the unchunked op: one gather, one matmul of the gathered rows, no copies.
  const bool whole = chunks == 1;
  at::Tensor out;
  at::Tensor gathered;
  if (!whole) {
    out = at::empty({ranks, rowsPerRank, weight.size(0)}, x.options());
    if (keepGathered) {
      gathered = at::empty({ranks, rowsPerRank, features}, x.options());
    }
  }

  const auto spans = splitRows(rowsPerRank, options.chunks);
  ChunkPipeline pipeline(*group, x.device(), options);
  std::deque<at::Tensor> buffers;  // gather targets, issued but not yet consumed
  auto issueChunk = [&](int64_t c) {
    const auto [start, len] = spans[c];
    auto buffer = at::empty({ranks * len, features}, x.options());
    auto slice = input.narrow(0, start, len);
    buffers.push_back(buffer);
    pipeline.issue(c, {buffer, slice}, [&] { return issueAllGather(*group, buffer, slice); });
  };
  for (int64_t c = 0; c < std::min(chunks, options.maxInflight); ++c) {
    issueChunk(c);
  }
  for (int64_t c = 0; c < chunks; ++c) {
    pipeline.finishOldest();
    at::Tensor buffer = std::move(buffers.front());
    buffers.pop_front();
    // Refill first so the next gathers travel while this chunk computes.
    if (c + options.maxInflight < chunks) {
      issueChunk(c + options.maxInflight);
    }
    pipeline.delay(options.computeDelayMaxUs);
    const double t0 = nowSeconds();
    const auto [start, len] = spans[c];
    const auto rowsOfChunk = buffer.view({ranks, len, features});
    if (whole) {
      out = at::matmul(rowsOfChunk, weightT);
      if (keepGathered) {
        gathered = rowsOfChunk;
      }
    } else {
      out.narrow(1, start, len).copy_(at::matmul(rowsOfChunk, weightT));
      if (keepGathered) {
        gathered.narrow(1, start, len).copy_(rowsOfChunk);
      }
    }
    pipeline.markCompute(c, t0);
  }
  pipeline.finishAll();
  return {out.view({ranks * rowsPerRank, weight.size(0)}),
          keepGathered ? gathered.view({ranks * rowsPerRank, features}) : at::Tensor(),
          pipeline.timing()};
}

}  // namespace torch_topo::ops
