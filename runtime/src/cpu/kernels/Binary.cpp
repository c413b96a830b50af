//===- Binary.cpp - Broadcasting binary, comparison and logical kernels ---===//
//
// Every kernel here is one functor (math/ElementwiseMath.h) run by a single
// broadcasting driver (kernels/ElementwiseKernels.h, shared with the
// CUDA backend), which plans the broadcast and, with CpuLoops, walks the
// collapsed plan row by row and picks a contiguous, scalar-left or
// scalar-right inner loop per row. Covers the arithmetic ops (Add Sub Mul Div
// Pow Mod PRelu, variadic Max Min Sum Mean), comparisons producing Bool, the
// logical ops on Bool, and the three-way broadcasting Where.
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/CpuKernels.h"
#include "CpuLoops.h"
#include "kernels/ElementwiseKernels.h"

namespace zrt {
namespace cpu {
using namespace kernels;

void registerBinaryKernels(KernelTable &table) {
  elementwise::addBinaryKernels<CpuLoops>(table);
}

} // namespace cpu
} // namespace zrt
