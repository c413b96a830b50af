//===- Unary.cpp - Elementwise one-input kernels --------------------------===//
//
// Math and activation functions (Neg ... Gelu), predicates (IsNaN, IsInf, Not),
// Clip, Cast, Identity and Dropout come from kernels/ElementwiseKernels.h
// (host code shared with the CUDA backend; per-element functors in
// math/ElementwiseMath.h), run by CpuLoops: contiguous chunks of the flat
// tensor mapped in parallel.
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/CpuKernels.h"
#include "CpuLoops.h"
#include "kernels/ElementwiseKernels.h"

namespace zrt {
namespace cpu {
using namespace kernels;

void registerUnaryKernels(KernelTable &table) {
  elementwise::addUnaryKernels<CpuLoops>(table);
}

} // namespace cpu
} // namespace zrt
