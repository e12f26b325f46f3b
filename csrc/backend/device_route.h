// SPDX-License-Identifier: Apache-2.0
// DeviceRoute: what TopoBackend keeps per device type (inner backend, schedule levels, internal
// streams), and the device-generic stream scope of docs/design.md §4 (layer: csrc/backend).
#pragma once

#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/core/ScalarType.h>
#include <c10/core/Stream.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "backend/schedule_worker.h"
#include "backend/schedules/schedule.h"
#include "topo/size_ranges.h"

namespace torch_topo::backend {

/// Everything TopoBackend keeps for one device type. Built from the table of inner backends
/// handed in by the creator; the device type decides the execution mode, never an #ifdef.
struct DeviceRoute {
  DeviceRoute(c10::DeviceType type, c10::intrusive_ptr<c10d::Backend> inner);

  c10::DeviceType type;
  c10::intrusive_ptr<c10d::Backend> inner;
  /// Stream devices (CUDA, ...) run every op on an internal stream; CPU runs on the caller.
  bool streamed;
  /// The inner backend implements AVG and PREMUL_SUM itself (NCCL); else they are composed.
  bool nativeAvg;
  /// The inner backend's coalesced ops take tensors of several dtypes in one call.
  bool mixedDtypeCoalescing;
  /// The inner backend is Gloo, whose collectives take only the dtypes of `glooTakesDtype`.
  bool glooDtypesOnly;
  Levels levels;
  /// Per c10d op name, the payloads (input bytes) that take the hierarchical schedule.
  std::map<std::string, std::vector<topo::SizeRange>> hierarchicalSizes;
  /// Largest flat all-reduce of a two-rank group across hosts that runs as one exchange
  /// (gloo_exchanges.h: oneStepAllReduce) rather than as the inner backend's own.
  int64_t oneStepAllReduceMaxBytes = std::numeric_limits<int64_t>::max();
  /// The group has levels and some op sizes at which it runs hierarchically.
  bool mayRunHierarchical() const;

  /// The inner backend and the level backends (the latter made by the creator for this route
  /// alone, so shutdown, abort and timeouts reach them only through here).
  std::vector<c10::intrusive_ptr<c10d::Backend>> backends() const;
  /// The internal stream of one device (created once, from the device's stream pool).
  c10::Stream internalStream(c10::Device device);
  /// Makes the current stream of each device that has an internal stream wait for what was
  /// queued on that internal stream so far (events, no host block).
  void orderCurrentAfterInternal();
  /// The thread that runs this route's schedules on the host (created on first use, by the
  /// one thread that issues the group's ops).
  ScheduleWorker& scheduleWorker();
  /// Blocks until every schedule queued so far has run (nothing to do without a worker).
  void drainSchedules();
  /// Runs the queued schedules and ends the worker (TopoBackend::shutdown).
  void stopSchedules();

 private:
  std::mutex streamsMutex_;
  std::unordered_map<c10::DeviceIndex, c10::Stream> streams_;
  // Last member: destroyed first, so queued schedules still find the route's backends alive.
  std::unique_ptr<ScheduleWorker> worker_;
};

/// Whether Gloo's typed collectives take `dtype` (torch's ProcessGroupGloo GENERATE_ALL_TYPES;
/// it refuses the others, int16, the unsigned and float8 types, with "Invalid scalar type").
/// Complex tensors count: torch and the exchanges hand Gloo their real views.
bool glooTakesDtype(c10::ScalarType dtype);

/// The first dtype among `tensors` that the route's inner collectives refuse, if any.
std::optional<c10::ScalarType> refusedDtype(const DeviceRoute& route,
                                            const std::vector<at::Tensor>& tensors);

/// ValueError unless every tensor of `list` has the shape of `like`, on a route whose inner
/// backend is Gloo (its list all-gather and reduce-scatter take equal shapes only). Checked up
/// front because topo's one-step exchange and hierarchical schedules move elements by count: a
/// list of equal counts but other shapes went through them (or failed inside at::stack) where
/// Gloo refuses it, so the outcome depended on the flat/hierarchical choice. `op` and
/// `listName` / `likeName` name the call's tensors in the message.
void checkListShapes(const char* op, const DeviceRoute& route, const char* listName,
                     const std::vector<at::Tensor>& list, const char* likeName,
                     const at::Tensor& like);

/// Makes the route's internal stream current for the life of the scope, after making it wait
/// on the caller's stream (an event, no host block); `end()` records the op's end event on it.
/// Device-generic (c10::impl::VirtualGuardImpl, c10::Event), so it compiles without CUDA.
class StreamScope {
 public:
  StreamScope(DeviceRoute& route, c10::Device device);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

  /// Records and returns the end event on the internal stream.
  c10::Event end();
  c10::Device device() const { return device_; }

 private:
  c10::Device device_;
  std::optional<c10::Stream> previous_;
};

}  // namespace torch_topo::backend
