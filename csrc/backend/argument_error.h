// SPDX-License-Identifier: Apache-2.0
// The error of a collective called with bad arguments (layer: csrc/backend). It is a
// c10::ValueError, and Python sees it as torch_topo.TopoArgumentError, a subclass of ValueError
// and RuntimeError: Gloo and NCCL raise RuntimeError for the same calls (a bitwise op on floats,
// bad all-to-all splits, a root out of range), so `except RuntimeError` written against them
// keeps working, and so does `except ValueError`.
#pragma once

#include <cstdint>

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

namespace torch_topo::backend {

class ArgumentError : public c10::ValueError {
 public:
  using c10::ValueError::ValueError;
};

}  // namespace torch_topo::backend

#define TOPO_ARGUMENT_ERROR(...)              \
  throw ::torch_topo::backend::ArgumentError( \
      {__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, ::c10::str(__VA_ARGS__))

#define TOPO_CHECK_ARGUMENT(cond, ...)  \
  do {                                  \
    if (C10_UNLIKELY(!(cond))) {        \
      TOPO_ARGUMENT_ERROR(__VA_ARGS__); \
    }                                   \
  } while (false)
