// SPDX-License-Identifier: Apache-2.0
// TopoBackend's ReduceOp checks and composition (layer: csrc/backend): what each op takes, with
// an error naming the op and dtype before any exchange, and AVG / PREMUL_SUM built from SUM
// and one local scaling where the inner backend (Gloo) lacks them.
#include "backend/topo_backend.h"

#include <vector>

#include <c10/util/Exception.h>

#include "backend/argument_error.h"

namespace torch_topo::backend {

namespace {

const char* reduceOpName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

}  // namespace

c10d::ReduceOp TopoBackend::prepareReduce(const char* opName, DeviceRoute& route,
                                          const c10d::ReduceOp& op,
                                          const std::vector<at::Tensor>& tensors,
                                          const std::vector<at::Tensor>& outputs,
                                          Epilogue* epilogue) const {
  const auto kind = op.op_;
  for (const auto& t : tensors) {
    const bool integral = c10::isIntegralType(t.scalar_type(), /*includeBool=*/true);
    const bool bitwise = kind == c10d::ReduceOp::BAND || kind == c10d::ReduceOp::BOR ||
                         kind == c10d::ReduceOp::BXOR;
    if (bitwise && !integral) {
      TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", opName, ": ReduceOp.", reduceOpName(kind),
                                   " needs an integer tensor: got ", t.scalar_type()));
    }
    const bool scaled = kind == c10d::ReduceOp::AVG || kind == c10d::ReduceOp::PREMUL_SUM;
    // Integers average as NCCL averages them (sum, then a truncating division), natively on
    // NCCL and composed on Gloo, so a program gives the same numbers on either device.
    const bool integerAvg = kind == c10d::ReduceOp::AVG &&
                            c10::isIntegralType(t.scalar_type(), /*includeBool=*/false);
    if (scaled && !integerAvg && !c10::isFloatingType(t.scalar_type()) &&
        !c10::isComplexType(t.scalar_type())) {
      TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", opName, ": ReduceOp.", reduceOpName(kind),
                                   kind == c10d::ReduceOp::AVG
                                       ? " needs a floating-point, complex or integer tensor: got "
                                       : " needs a floating-point or complex tensor: got ",
                                   t.scalar_type()));
    }
    // Complex numbers have no order: the fold would fail only after the exchange, with
    // ATen's "maximum not implemented for complex tensors".
    if ((kind == c10d::ReduceOp::MIN || kind == c10d::ReduceOp::MAX) &&
        c10::isComplexType(t.scalar_type())) {
      TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", opName, ": ReduceOp.", reduceOpName(kind),
                                   " needs a real tensor: got ", t.scalar_type()));
    }
    if (kind == c10d::ReduceOp::UNUSED) {
      TOPO_ARGUMENT_ERROR(
          c10::str("TopoBackend::", opName, ": ReduceOp.UNUSED is not a reduction"));
    }
  }
  if ((kind != c10d::ReduceOp::AVG && kind != c10d::ReduceOp::PREMUL_SUM) || route.nativeAvg) {
    return op;
  }
  // Compose: SUM on the inner backend, then one local scaling of the result.
  if (kind == c10d::ReduceOp::AVG) {
    const int64_t n = size_;
    *epilogue = [outputs, n] {
      for (auto t : outputs) {
        if (c10::isIntegralType(t.scalar_type(), /*includeBool=*/false)) {
          t.div_(n, "trunc");
        } else {
          t.div_(n);
        }
      }
    };
  } else {
    auto* premul = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
    if (premul == nullptr) {
      TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", opName,
                                   ": ReduceOp.PREMUL_SUM without a factor; build it "
                                   "with torch.distributed._make_nccl_premul_sum"));
    }
    at::Tensor factor = premul->tensor_factor;
    const double scalar = premul->double_factor;
    *epilogue = [outputs, factor, scalar] {
      for (auto t : outputs) {
        if (factor.defined()) {
          t.mul_(factor.to(t.device()));
        } else {
          t.mul_(scalar);
        }
      }
    };
  }
  return c10d::ReduceOp(c10d::ReduceOp::SUM);
}

}  // namespace torch_topo::backend
