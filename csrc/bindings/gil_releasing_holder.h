// SPDX-License-Identifier: Apache-2.0
// The pybind11 holder of objects that own c10d backends (layer: csrc/bindings).
//
// Freeing a backend joins its Gloo threads, and a Gloo thread that drops the last reference to
// a finished work's Python-owned tensor takes the GIL to do so. Python frees objects while it
// holds the GIL, so a plain intrusive_ptr holder deadlocks there (seen: TopoBackend freed after
// destroy_process_group, a Gloo worker blocked in the tensor's decref). torch binds its own
// Backend and Work the same way for the same reason; its holder is not in its public headers.
#pragma once

#include <utility>

#include <c10/util/intrusive_ptr.h>
#include <torch/python.h>

namespace torch_topo::bindings {

template <typename T>
class GilReleasingHolder {
 public:
  GilReleasingHolder() = default;
  GilReleasingHolder(const GilReleasingHolder&) = default;
  GilReleasingHolder(GilReleasingHolder&&) noexcept = default;
  GilReleasingHolder& operator=(const GilReleasingHolder&) = default;
  GilReleasingHolder& operator=(GilReleasingHolder&&) noexcept = default;
  /// pybind11 builds holders from raw pointers of intrusive objects it already owns.
  explicit GilReleasingHolder(T* raw)
      : impl_(c10::intrusive_ptr<T>::unsafe_reclaim_from_nonowning(raw)) {}
  explicit GilReleasingHolder(c10::intrusive_ptr<T> impl) : impl_(std::move(impl)) {}
  ~GilReleasingHolder() {
    if (impl_ && PyGILState_Check()) {
      pybind11::gil_scoped_release release;
      impl_.reset();
    }
  }
  T* get() const noexcept { return impl_.get(); }

 private:
  c10::intrusive_ptr<T> impl_;
};

}  // namespace torch_topo::bindings

PYBIND11_DECLARE_HOLDER_TYPE(T, torch_topo::bindings::GilReleasingHolder<T>, true);
