//===- PackedGemm.h - f32 products over prepacked constant B ----*- C++ -*-===//
//
// The CPU MatMul/Gemm path for a constant B (a weight no instruction writes:
// see ConstantOperands in zrt/Kernel.h). B is packed once into column panels
// of kPanelCols columns, each panel K rows of kPanelCols contiguous floats
// (zero-padded past N), and every later product streams the panels with an
// AVX-512 micro-kernel instead of re-packing B in each OpenBLAS call. Every
// element of C is one fixed sequence of FMAs over k = 0..K-1 whichever task
// computes it, so C's bits do not depend on the thread count or on how the
// work is cut.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CPU_KERNELS_PACKEDGEMM_H
#define ZRT_CPU_KERNELS_PACKEDGEMM_H

#include <cstddef>
#include <cstdint>

namespace zrt {
namespace cpu {

/// Columns of B per packed panel (three AVX-512 vectors).
constexpr int64_t kPanelCols = 48;

/// Whether this CPU runs the packed path (AVX-512F and FMA).
bool packedGemmSupported();

/// Panels of a K x N B: ceil(N / kPanelCols).
inline int64_t packedPanels(int64_t n) {
  return (n + kPanelCols - 1) / kPanelCols;
}

/// Floats of the packed form of a K x N B.
inline size_t packedFloats(int64_t k, int64_t n) {
  return size_t(packedPanels(n)) * size_t(kPanelCols) * size_t(k);
}

/// Packs panels [p0, p1) of op(B) (K x N; `transB`: B is N x K) with leading
/// dimension `ldb` into `dst` (the whole packed form).
void packB(const float *b, int64_t ldb, bool transB, int64_t k, int64_t n,
           int64_t p0, int64_t p1, float *dst);

/// One block of C = alpha * A * B + beta * C: rows [i0, i1) and panels
/// [p0, p1) of C (M x N, leading dimension ldc). Element (i, p) of A is
/// a[i * aRowStride + p * aColStride]; `packed` is packB's output. With
/// beta == 0 C is not read. While panel p runs, panel p + 1 (if any) is
/// prefetched into L2, spread over the row blocks.
void packedGemmBlock(int64_t i0, int64_t i1, int64_t p0, int64_t p1, int64_t n,
                     int64_t k, float alpha, const float *a, int64_t aRowStride,
                     int64_t aColStride, const float *packed, float beta,
                     float *c, int64_t ldc);

} // namespace cpu
} // namespace zrt

#endif // ZRT_CPU_KERNELS_PACKEDGEMM_H
