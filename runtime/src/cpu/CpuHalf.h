//===- CpuHalf.h - f16 and bf16 operands on the CPU backend -----*- C++ -*-===//
#ifndef ZRT_CPU_CPUHALF_H
#define ZRT_CPU_CPUHALF_H

#include "zrt/Kernel.h"

namespace zrt {
namespace cpu {

/// Replaces every kernel of `table` that computes in f32 with a trampoline
/// that runs it on f16/bf16 operands too: widened to f32 copies, results
/// rounded back (HalfWidening.cpp).
void widenHalfKernels(KernelTable &table);

} // namespace cpu
} // namespace zrt

#endif // ZRT_CPU_CPUHALF_H
