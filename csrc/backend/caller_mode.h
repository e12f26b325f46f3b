// SPDX-License-Identifier: Apache-2.0
// The autograd state of an op's deferred steps (layer: csrc/backend). Copies, folds and
// epilogues run on Gloo's threads, the schedule worker or a waiter, not always on the thread
// that issued the op, and write into the caller's tensors through at:: ops.
#pragma once

#include <optional>

#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>

namespace torch_topo::backend {

/// Taken on the thread that issues an op, inside the op's launch (which enters inference mode
/// where the op holds an inference tensor): whether its steps run in inference mode. That mode
/// is thread-local, and an inference tensor may only be written in place inside it.
struct CallerMode {
  bool inference = c10::InferenceMode::is_enabled();
};

/// A step's state: inference mode where `mode` says so, and grad mode off (a tensor that
/// requires grad, e.g. a parameter broadcast, is written in place as Gloo writes it through raw
/// pointers). Nothing else of the thread's state changes.
class CallerModeGuard {
 public:
  explicit CallerModeGuard(CallerMode mode) {
    if (mode.inference && !c10::InferenceMode::is_enabled()) inference_.emplace();
    noGrad_.emplace();  // after: destroyed first, so the thread's own grad mode comes back
  }

 private:
  std::optional<c10::InferenceMode> inference_;
  std::optional<c10::NoGradGuard> noGrad_;
};

}  // namespace torch_topo::backend
