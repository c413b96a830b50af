//===- Unary.cpp - Elementwise one-input kernels --------------------------===//
//
// Math and activation functions (Neg ... Gelu), predicates (IsNaN, IsInf, Not),
// Clip, Cast, Identity and Dropout come from cpu/kernels/ElementwiseKernels.h
// (host code shared with the CUDA backend; per-element functors in
// math/ElementwiseMath.h), run by CpuLoops: contiguous chunks of the flat
// tensor mapped in parallel.
//
//===----------------------------------------------------------------------===//

#include "CpuLoops.h"
#include "ElementwiseKernels.h"

namespace zrt {
namespace cpu {

void registerUnaryKernels(KernelTable &table) {
  elementwise::addUnaryKernels<CpuLoops>(table);
}

} // namespace cpu
} // namespace zrt
