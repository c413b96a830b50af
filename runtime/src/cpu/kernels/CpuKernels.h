//===- CpuKernels.h - The CPU kernel families' entry points -----*- C++ -*-===//
//
// Internal to runtime/src/cpu. Each kernel family (one .cpp in cpu/kernels)
// adds its kernels to a KernelTable (Registry.cpp calls them all), and the
// CPU-only fast paths other CPU files call. The operand checks and layouts
// the families share with the CUDA backend are in runtime/src/kernels.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CPU_KERNELS_CPUKERNELS_H
#define ZRT_CPU_KERNELS_CPUKERNELS_H

#include "zrt/Kernel.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zrt {
namespace cpu {

//===----------------------------------------------------------------------===//
// Matrix products on the calling thread (MatMul.cpp)
//===----------------------------------------------------------------------===//

/// Makes OpenBLAS run every call on the calling thread: kernels parallelise
/// over tiles of their own, chosen from the shapes.
void useSingleThreadedBlas();

/// C = op(A) op(B), row-major, C is m x n (not read); f32 and f64 through
/// OpenBLAS. Call useSingleThreadedBlas() first.
template <typename T>
void gemmOnThisThread(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                      const T *a, int64_t lda, const T *b, int64_t ldb, T *c,
                      int64_t ldc);

void registerBinaryKernels(KernelTable &table);
void registerUnaryKernels(KernelTable &table);
void registerMatMulKernels(KernelTable &table);
void registerReduceKernels(KernelTable &table);
void registerNormalizationKernels(KernelTable &table);
void registerShapeKernels(KernelTable &table);
void registerIndexingKernels(KernelTable &table);
void registerLossKernels(KernelTable &table);
void registerOptimizerKernels(KernelTable &table);
void registerQuantizeKernels(KernelTable &table);
void registerConvKernels(KernelTable &table);
void registerPoolKernels(KernelTable &table);
void registerResizeKernels(KernelTable &table);
void registerSelectionKernels(KernelTable &table);
void registerFusedKernels(KernelTable &table);

/// ReduceSum, ReduceMean or ReduceSumSquare (`op`) on an f16/bf16 input whose
/// innermost dims are kept (a bias gradient: rows added up): the vector-mode
/// loop of the f32 kernel on rows widened a tile at a time, the result
/// rounded once, so the bits of the f32 kernel on the widened input with no
/// widened copy. Returns false, doing nothing, for any other op, dtype or
/// layout (the caller widens the operands); else true, with the kernel's
/// status in `status`.
bool reduceHalfKeptRows(const std::string &op, const KernelContext &ctx,
                        const std::vector<TensorRef> &in,
                        const std::vector<TensorRef> &out, const AttrMap &attrs,
                        Status &status);

} // namespace cpu
} // namespace zrt

#endif // ZRT_CPU_KERNELS_CPUKERNELS_H
