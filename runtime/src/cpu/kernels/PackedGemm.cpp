//===- PackedGemm.cpp - f32 products over prepacked constant B ------------===//
//
// The packing and the AVX-512 micro-kernel of PackedGemm.h. The kernel keeps
// a block of kRowBlock x kPanelCols of C in 24 zmm accumulators, loads one
// row of the panel (three vectors) per k and broadcasts one element of A per
// row: 24 FMAs for 3 vector loads and kRowBlock broadcasts. Only the functions
// marked ZRT_AVX512 use AVX-512 (the file is built for the baseline ISA, so no
// inline function shared with other files is compiled for AVX-512); they run
// only when packedGemmSupported().
//
//===----------------------------------------------------------------------===//

#include "PackedGemm.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ZRT_HAVE_PACKED_GEMM 1
#include <immintrin.h>
#define ZRT_AVX512 __attribute__((target("avx512f,fma")))
#endif

namespace zrt {
namespace cpu {
namespace {

/// Rows of C per micro-kernel call.
constexpr int kRowBlock = 8;
constexpr int64_t kCacheLine = 64;
/// Prefetches of the next panel issued per k step, at most.
constexpr int64_t kPrefetchPerStep = 2;

#ifdef ZRT_HAVE_PACKED_GEMM
/// C[0..MR) x [0..cols) = alpha * A[0..MR) x panel + beta * C. The next
/// panel's lines [prefetch, prefetch + prefetchLines * 64) go to L2 meanwhile.
template <int MR>
ZRT_AVX512 void microKernel(int64_t k, const float *a, int64_t aRowStride,
                            int64_t aColStride, const float *panel, float *c,
                            int64_t ldc, int64_t cols, float alpha, float beta,
                            const char *prefetch, int64_t prefetchLines) {
  __m512 acc[MR][3];
  const float *rows[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    acc[i][0] = acc[i][1] = acc[i][2] = _mm512_setzero_ps();
    rows[i] = a + i * aRowStride;
  }
  int64_t off = 0;
  for (int64_t p = 0; p < k; ++p, off += aColStride) {
    const float *bp = panel + p * kPanelCols;
    const __m512 b0 = _mm512_load_ps(bp);
    const __m512 b1 = _mm512_load_ps(bp + 16);
    const __m512 b2 = _mm512_load_ps(bp + 32);
    if (kPrefetchPerStep * p < prefetchLines)
      _mm_prefetch(prefetch + kPrefetchPerStep * p * kCacheLine, _MM_HINT_T1);
    if (kPrefetchPerStep * p + 1 < prefetchLines)
      _mm_prefetch(prefetch + (kPrefetchPerStep * p + 1) * kCacheLine,
                   _MM_HINT_T1);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 ai = _mm512_set1_ps(rows[i][off]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
      acc[i][2] = _mm512_fmadd_ps(ai, b2, acc[i][2]);
    }
  }
  __mmask16 masks[3];
  for (int j = 0; j < 3; ++j) {
    const int64_t left = std::clamp<int64_t>(cols - 16 * j, 0, 16);
    masks[j] = __mmask16((1u << left) - 1u);
  }
  const __m512 alphaV = _mm512_set1_ps(alpha), betaV = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    float *ci = c + i * ldc;
    for (int j = 0; j < 3; ++j) {
      if (masks[j] == 0)
        break;
      __m512 v = acc[i][j];
      if (alpha != 1.0f)
        v = _mm512_mul_ps(v, alphaV);
      if (beta != 0.0f)
        v = _mm512_fmadd_ps(betaV, _mm512_maskz_loadu_ps(masks[j], ci + 16 * j),
                            v);
      _mm512_mask_storeu_ps(ci + 16 * j, masks[j], v);
    }
  }
}

using MicroKernelFn = void (*)(int64_t, const float *, int64_t, int64_t,
                               const float *, float *, int64_t, int64_t, float,
                               float, const char *, int64_t);
/// microKernel<r> at index r - 1.
constexpr MicroKernelFn kMicroKernels[kRowBlock] = {
    microKernel<1>, microKernel<2>, microKernel<3>, microKernel<4>,
    microKernel<5>, microKernel<6>, microKernel<7>, microKernel<8>};
#endif

} // namespace

bool packedGemmSupported() {
#ifdef ZRT_HAVE_PACKED_GEMM
  static const bool supported =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  return supported;
#else
  return false;
#endif
}

void packB(const float *b, int64_t ldb, bool transB, int64_t k, int64_t n,
           int64_t p0, int64_t p1, float *dst) {
  for (int64_t p = p0; p < p1; ++p) {
    float *panel = dst + p * k * kPanelCols;
    const int64_t j0 = p * kPanelCols;
    const int64_t cols = std::min(kPanelCols, n - j0);
    if (cols < kPanelCols)
      std::memset(panel, 0, size_t(k * kPanelCols) * sizeof(float));
    if (!transB) {
      for (int64_t q = 0; q < k; ++q)
        std::memcpy(panel + q * kPanelCols, b + q * ldb + j0,
                    size_t(cols) * sizeof(float));
      continue;
    }
    // B is N x K: read each column of the panel (a row of B) contiguously.
    for (int64_t j = 0; j < cols; ++j) {
      const float *src = b + (j0 + j) * ldb;
      for (int64_t q = 0; q < k; ++q)
        panel[q * kPanelCols + j] = src[q];
    }
  }
}

void packedGemmBlock(int64_t i0, int64_t i1, int64_t p0, int64_t p1, int64_t n,
                     int64_t k, float alpha, const float *a, int64_t aRowStride,
                     int64_t aColStride, const float *packed, float beta,
                     float *c, int64_t ldc) {
#ifdef ZRT_HAVE_PACKED_GEMM
  const int64_t panels = packedPanels(n);
  const int64_t panelFloats = k * kPanelCols;
  const int64_t rowBlocks = (i1 - i0 + kRowBlock - 1) / kRowBlock;
  for (int64_t p = p0; p < p1; ++p) {
    const float *panel = packed + p * panelFloats;
    const int64_t cols = std::min(kPanelCols, n - p * kPanelCols);
    // The next panel's lines, an equal share per row block.
    const char *next = p + 1 < panels
                           ? reinterpret_cast<const char *>(panel + panelFloats)
                           : nullptr;
    const int64_t lines =
        next ? panelFloats * int64_t(sizeof(float)) / kCacheLine : 0;
    const int64_t share =
        std::min((lines + rowBlocks - 1) / rowBlocks, kPrefetchPerStep * k);
    int64_t block = 0;
    for (int64_t i = i0; i < i1; i += kRowBlock, ++block) {
      const int64_t rows = std::min<int64_t>(kRowBlock, i1 - i);
      const int64_t first = std::min(lines, block * share);
      const int64_t count = std::min(share, lines - first);
      kMicroKernels[rows - 1](
          k, a + i * aRowStride, aRowStride, aColStride, panel,
          c + i * ldc + p * kPanelCols, ldc, cols, alpha, beta,
          next ? next + first * kCacheLine : nullptr, count);
    }
  }
#endif
}

} // namespace cpu
} // namespace zrt
