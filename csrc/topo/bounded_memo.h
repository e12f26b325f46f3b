// SPDX-License-Identifier: Apache-2.0
// A thread-safe memo of a pure function's results that forgets everything once it holds
// `capacity` entries (layer: csrc/topo, header only). The cost model prices the same groups
// at every size of a scan, while placement's search prices many groups once each: the bound
// keeps the second from growing without limit.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <utility>

namespace torch_topo::topo {

template <typename Key, typename Value>
class BoundedMemo {
 public:
  explicit BoundedMemo(size_t capacity) : capacity_(capacity) {}

  /// The value kept for `key`, else `compute()`'s, kept. `compute` runs unlocked: two threads
  /// may both compute one key, and keep the same value.
  template <typename Compute>
  Value get(const Key& key, Compute&& compute) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = kept_.find(key);
      if (it != kept_.end()) return it->second;
    }
    Value value = std::forward<Compute>(compute)();
    std::lock_guard<std::mutex> lock(mutex_);
    if (kept_.size() >= capacity_) kept_.clear();
    kept_.emplace(key, value);
    return value;
  }

 private:
  const size_t capacity_;
  std::mutex mutex_;
  std::map<Key, Value> kept_;
};

}  // namespace torch_topo::topo
