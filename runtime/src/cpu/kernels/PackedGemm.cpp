//===- PackedGemm.cpp - f32 products over packed panels of B --------------===//
//
// The packing and the three f32 micro-kernels of PackedGemm.h, one per ISA
// (the bf16 pair kernels are at the end of the file):
// - AVX-512: a block of 8 x 48 of C in 24 zmm accumulators; per k one row
//   of the panel (three vectors) is loaded and one element of A broadcast
//   per row: 24 FMAs for 3 vector loads and 8 broadcasts.
// - AVX2: a block of 4 x 24 (half a panel) in 12 ymm accumulators: 12 FMAs
//   for 3 loads and 4 broadcasts.
// Both skip the vectors of a panel that lie wholly past N (N = 64 is a
// panel of 48 and one of 16 columns: four vectors, not six).
// - generic: 4 x 48 in plain C++ (vectorised by the compiler for the
//   baseline ISA), a multiply then an add.
// Each keeps one accumulator per element of C over the whole of K, so the
// element's bits do not depend on the block it falls in (PackedGemm.h).
// This file is compiled with -ffp-contract=off: the compiler adds no FMA the
// kernels do not spell out, so the portable kernel rounds its products on
// every target. Only the functions marked ZRT_AVX512 / ZRT_AVX2 use those
// ISAs (the file is built for the baseline one); they run only when cpuIsa()
// allows.
//
//===----------------------------------------------------------------------===//

#include "PackedGemm.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <optional>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ZRT_HAVE_X86_KERNELS 1
#include <immintrin.h>
#define ZRT_AVX512 __attribute__((target("avx512f,fma")))
#define ZRT_AVX2 __attribute__((target("avx2,fma")))
#define ZRT_AVX512BF16 __attribute__((target("avx512f,avx512bf16,fma")))
#endif

namespace zrt {
namespace cpu {
namespace {

constexpr int64_t kCacheLine = 64;
/// Prefetches of the next panel issued per k step, at most.
constexpr int64_t kPrefetchPerStep = 2;

/// Where a micro-kernel call prefetches: `lines` cache lines from `start`.
struct Prefetch {
  const char *start = nullptr;
  int64_t lines = 0;
};

/// Issues step p's share of `pf` (kPrefetchPerStep lines per k step).
#ifdef ZRT_HAVE_X86_KERNELS
inline void prefetchStep(const Prefetch &pf, int64_t p) {
  if (kPrefetchPerStep * p < pf.lines)
    _mm_prefetch(pf.start + kPrefetchPerStep * p * kCacheLine, _MM_HINT_T1);
  if (kPrefetchPerStep * p + 1 < pf.lines)
    _mm_prefetch(pf.start + (kPrefetchPerStep * p + 1) * kCacheLine,
                 _MM_HINT_T1);
}
#endif

/// The arguments every micro-kernel takes.
struct Block {
  int64_t k;
  const float *a; ///< the block's first row of A
  int64_t aRowStride, aColStride;
  const float *panel; ///< the block's first column of the panel
  int64_t panelStride; ///< floats between its rows (kPanelCols, or B's ldb)
  float *c;           ///< the block's first element of C
  int64_t ldc;
  int64_t cols; ///< columns of C the block writes
  float alpha, beta;
  Prefetch prefetch;
};

using MicroKernelFn = void (*)(const Block &);

//===----------------------------------------------------------------------===//
// AVX-512: 8 x 48
//===----------------------------------------------------------------------===//

#ifdef ZRT_HAVE_X86_KERNELS
/// Writes MR rows of a block's accumulators (three vectors of 16 columns
/// each, `cols` of them kept) to C: v = alpha == 1 ? acc : acc * alpha, then
/// beta * C + v unless beta is 0.
template <int MR>
ZRT_AVX512 inline void avx512Store(const __m512 (&acc)[MR][3], float *c, int64_t ldc,
                                   int64_t cols, float alpha, float beta) {
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
        v = _mm512_fmadd_ps(betaV, _mm512_maskz_loadu_ps(masks[j], ci + 16 * j), v);
      _mm512_mask_storeu_ps(ci + 16 * j, masks[j], v);
    }
  }
}

/// MR rows by NV vectors of 16 columns (NV = 1..3: a panel's last columns
/// past N are not computed).
template <int MR, int NV>
ZRT_AVX512 void avx512Kernel(const Block &blk) {
  __m512 acc[MR][3];
  const float *rows[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    acc[i][0] = acc[i][1] = acc[i][2] = _mm512_setzero_ps();
    rows[i] = blk.a + i * blk.aRowStride;
  }
  int64_t off = 0;
  for (int64_t p = 0; p < blk.k; ++p, off += blk.aColStride) {
    const float *bp = blk.panel + p * blk.panelStride;
    __m512 bv[3];
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j)
      bv[j] = _mm512_loadu_ps(bp + 16 * j);
    prefetchStep(blk.prefetch, p);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 ai = _mm512_set1_ps(rows[i][off]);
#pragma GCC unroll 3
      for (int j = 0; j < NV; ++j)
        acc[i][j] = _mm512_fmadd_ps(ai, bv[j], acc[i][j]);
    }
  }
  avx512Store<MR>(acc, blk.c, blk.ldc, blk.cols, blk.alpha, blk.beta);
}

//===----------------------------------------------------------------------===//
// AVX2: 4 x 24
//===----------------------------------------------------------------------===//

/// Columns of one AVX2 block: half a panel.
constexpr int64_t kAvx2Cols = 24;

/// avx512Store for AVX2's blocks: MR rows of three vectors of 8 columns.
template <int MR>
ZRT_AVX2 inline void avx2Store(const __m256 (&acc)[MR][3], float *c, int64_t ldc,
                               int64_t cols, float alpha, float beta) {
  __m256i masks[3];
  for (int j = 0; j < 3; ++j) {
    const int left = int(std::clamp<int64_t>(cols - 8 * j, 0, 8));
    masks[j] = _mm256_cmpgt_epi32(_mm256_set1_epi32(left),
                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  const __m256 alphaV = _mm256_set1_ps(alpha), betaV = _mm256_set1_ps(beta);
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    float *ci = c + i * ldc;
    for (int j = 0; j < 3; ++j) {
      if (cols <= 8 * j)
        break;
      const bool full = cols >= 8 * (j + 1);
      __m256 v = acc[i][j];
      if (alpha != 1.0f)
        v = _mm256_mul_ps(v, alphaV);
      if (beta != 0.0f) {
        const __m256 old = full ? _mm256_loadu_ps(ci + 8 * j)
                                : _mm256_maskload_ps(ci + 8 * j, masks[j]);
        v = _mm256_fmadd_ps(betaV, old, v);
      }
      if (full)
        _mm256_storeu_ps(ci + 8 * j, v);
      else
        _mm256_maskstore_ps(ci + 8 * j, masks[j], v);
    }
  }
}

/// MR rows by NV vectors of 8 columns (NV = 1..3).
template <int MR, int NV>
ZRT_AVX2 void avx2Kernel(const Block &blk) {
  __m256 acc[MR][3];
  const float *rows[MR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    acc[i][0] = acc[i][1] = acc[i][2] = _mm256_setzero_ps();
    rows[i] = blk.a + i * blk.aRowStride;
  }
  int64_t off = 0;
  for (int64_t p = 0; p < blk.k; ++p, off += blk.aColStride) {
    const float *bp = blk.panel + p * blk.panelStride;
    __m256 bv[3];
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j)
      bv[j] = _mm256_loadu_ps(bp + 8 * j);
    prefetchStep(blk.prefetch, p);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m256 ai = _mm256_set1_ps(rows[i][off]);
#pragma GCC unroll 3
      for (int j = 0; j < NV; ++j)
        acc[i][j] = _mm256_fmadd_ps(ai, bv[j], acc[i][j]);
    }
  }
  avx2Store<MR>(acc, blk.c, blk.ldc, blk.cols, blk.alpha, blk.beta);
}

/// dst[i * ldDst + c] = src[c * ldSrc + i] for an 8 x 8 block: eight rows of
/// a transposed B become eight rows of its panel.
ZRT_AVX2 void transpose8x8(const float *src, int64_t ldSrc, float *dst,
                           int64_t ldDst) {
  __m256 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i)
    r[i] = _mm256_loadu_ps(src + i * ldSrc);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ldDst, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ldDst,
                     _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
  }
}

/// Rows [q0, q1) x columns [0, cols) of a panel from a transposed B (N x K,
/// the panel's column j is B's row j): 8 x 8 blocks in registers, the edges
/// element by element.
ZRT_AVX2 void packTransposedAvx2(const float *b, int64_t ldb, int64_t q0,
                                 int64_t q1, int64_t cols, float *panel) {
  int64_t q = q0;
  for (; q + 8 <= q1; q += 8) {
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8)
      transpose8x8(b + j * ldb + q, ldb, panel + q * kPanelCols + j, kPanelCols);
    for (; j < cols; ++j)
      for (int64_t i = q; i < q + 8; ++i)
        panel[i * kPanelCols + j] = b[j * ldb + i];
  }
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = q; i < q1; ++i)
      panel[i * kPanelCols + j] = b[j * ldb + i];
}
#endif

//===----------------------------------------------------------------------===//
// generic: 4 x 48, a multiply then an add
//===----------------------------------------------------------------------===//

template <int MR> void genericKernel(const Block &blk) {
  alignas(64) float acc[MR][kPanelCols] = {};
  const float *rows[MR];
  for (int i = 0; i < MR; ++i)
    rows[i] = blk.a + i * blk.aRowStride;
  int64_t off = 0;
  for (int64_t p = 0; p < blk.k; ++p, off += blk.aColStride) {
    const float *bp = blk.panel + p * blk.panelStride;
    for (int i = 0; i < MR; ++i) {
      const float ai = rows[i][off];
      for (int64_t j = 0; j < kPanelCols; ++j)
        acc[i][j] = acc[i][j] + ai * bp[j];
    }
  }
  for (int i = 0; i < MR; ++i) {
    float *ci = blk.c + i * blk.ldc;
    for (int64_t j = 0; j < blk.cols; ++j) {
      float v = acc[i][j];
      if (blk.alpha != 1.0f)
        v = v * blk.alpha;
      if (blk.beta != 0.0f)
        v = blk.beta * ci[j] + v;
      ci[j] = v;
    }
  }
}

/// One ISA's kernels: `rowBlock` rows by `colBlock` columns at most, in
/// vectors of `vectorCols`; the kernel for r rows and v vectors at
/// kernels[v - 1][r - 1] (the generic kernel computes every column of a
/// block whatever v).
struct KernelSet {
  int rowBlock;
  int64_t colBlock;
  int64_t vectorCols;
  MicroKernelFn kernels[3][8];
};

const KernelSet &kernelSet(CpuIsa isa) {
#ifdef ZRT_HAVE_X86_KERNELS
#define ZRT_ROWS8(K, V)                                                        \
  {K<1, V>, K<2, V>, K<3, V>, K<4, V>, K<5, V>, K<6, V>, K<7, V>, K<8, V>}
#define ZRT_ROWS4(K, V) {K<1, V>, K<2, V>, K<3, V>, K<4, V>}
  static const KernelSet avx512{8,
                                kPanelCols,
                                16,
                                {ZRT_ROWS8(avx512Kernel, 1),
                                 ZRT_ROWS8(avx512Kernel, 2),
                                 ZRT_ROWS8(avx512Kernel, 3)}};
  static const KernelSet avx2{4,
                              kAvx2Cols,
                              8,
                              {ZRT_ROWS4(avx2Kernel, 1), ZRT_ROWS4(avx2Kernel, 2),
                               ZRT_ROWS4(avx2Kernel, 3)}};
#undef ZRT_ROWS8
#undef ZRT_ROWS4
  if (isa >= CpuIsa::Avx512)
    return avx512;
  if (isa == CpuIsa::Avx2)
    return avx2;
#endif
  static const KernelSet generic{
      4,
      kPanelCols,
      kPanelCols,
      {{genericKernel<1>, genericKernel<2>, genericKernel<3>, genericKernel<4>}}};
  return generic;
}

/// The ISA from ZRT_CPU_ISA and the CPU, and what was wrong with the
/// variable, if anything.
struct IsaChoice {
  CpuIsa isa = CpuIsa::Generic;
  std::string problem;
};

const IsaChoice &isaChoice() {
  static const IsaChoice choice = [] {
    IsaChoice c;
    c.isa = detectedCpuIsa();
    const char *env = std::getenv("ZRT_CPU_ISA");
    if (!env || !*env)
      return c;
    const std::string want = env;
    for (CpuIsa isa : {CpuIsa::Generic, CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Avx512Bf16}) {
      if (want != cpuIsaName(isa))
        continue;
      if (isa > c.isa)
        c.problem = "ZRT_CPU_ISA=" + want + ": this CPU runs at most " +
                    cpuIsaName(c.isa) + " (the variable lowers the ISA, " +
                    "never raises it); unset it or name " + cpuIsaName(c.isa) +
                    " or lower";
      else
        c.isa = isa;
      return c;
    }
    c.problem = "ZRT_CPU_ISA=" + want +
                ": not an instruction set of the CPU kernels; use avx512bf16, "
                "avx512, avx2 or generic (or unset it for the CPU's best)";
    return c;
  }();
  return choice;
}

} // namespace

const char *cpuIsaName(CpuIsa isa) {
  switch (isa) {
  case CpuIsa::Avx512Bf16:
    return "avx512bf16";
  case CpuIsa::Avx512:
    return "avx512";
  case CpuIsa::Avx2:
    return "avx2";
  case CpuIsa::Generic:
    break;
  }
  return "generic";
}

CpuIsa detectedCpuIsa() {
#ifdef ZRT_HAVE_X86_KERNELS
  static const CpuIsa isa = [] {
    if (!__builtin_cpu_supports("fma"))
      return CpuIsa::Generic;
    if (__builtin_cpu_supports("avx512f"))
      return __builtin_cpu_supports("avx512bf16") ? CpuIsa::Avx512Bf16 : CpuIsa::Avx512;
    if (__builtin_cpu_supports("avx2"))
      return CpuIsa::Avx2;
    return CpuIsa::Generic;
  }();
  return isa;
#else
  return CpuIsa::Generic;
#endif
}

namespace {
/// setCpuIsa's choice; -1 while the environment's holds.
std::atomic<int> isaOverride{-1};
} // namespace

CpuIsa cpuIsa() {
  const int set = isaOverride.load(std::memory_order_relaxed);
  return set >= 0 ? CpuIsa(set) : isaChoice().isa;
}

CpuIsa setCpuIsa(CpuIsa isa) {
  const CpuIsa use = std::min(isa, detectedCpuIsa());
  isaOverride.store(int(use), std::memory_order_relaxed);
  return use;
}

std::string cpuIsaProblem() { return isaChoice().problem; }

void packB(const float *b, int64_t ldb, bool transB, int64_t k, int64_t n,
           int64_t p0, int64_t p1, float *dst) {
  for (int64_t p = p0; p < p1; ++p) {
    const auto [panel, j0, cols] = startPanel(dst, p, k, n);
    if (!transB) {
      for (int64_t q = 0; q < k; ++q)
        std::memcpy(panel + q * kPanelCols, b + q * ldb + j0,
                    size_t(cols) * sizeof(float));
      continue;
    }
    // B is N x K: read each column of the panel (a row of B) contiguously,
    // kTransposeRows rows of the panel at a time (they stay in L1).
    constexpr int64_t kTransposeRows = 64;
    for (int64_t q0 = 0; q0 < k; q0 += kTransposeRows)
      packTransposedRows(b + j0 * ldb + q0, ldb, std::min(kTransposeRows, k - q0), cols,
                         panel + q0 * kPanelCols);
  }
}

void packTransposedRows(const float *b, int64_t ldb, int64_t len, int64_t cols,
                        float *panel) {
#ifdef ZRT_HAVE_X86_KERNELS
  if (cpuIsa() >= CpuIsa::Avx2) {
    packTransposedAvx2(b, ldb, 0, len, cols, panel);
    return;
  }
#endif
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t q = 0; q < len; ++q)
      panel[q * kPanelCols + j] = b[j * ldb + q];
}

namespace {

/// Rows [i0, i1) of C's columns [0, cols) from a panel whose rows are
/// `stride` floats apart, `next` (if any) prefetched meanwhile, `lines`
/// cache lines of it spread over the blocks.
void runPanel(const KernelSet &set, int64_t i0, int64_t i1, int64_t cols,
              int64_t k, float alpha, const float *a, int64_t aRowStride,
              int64_t aColStride, const float *panel, int64_t stride, float beta,
              float *c, int64_t ldc, const char *next, int64_t lines) {
  const int64_t rowBlocks = (i1 - i0 + set.rowBlock - 1) / set.rowBlock;
  const int64_t colBlocks = (cols + set.colBlock - 1) / set.colBlock;
  const int64_t blocks = rowBlocks * colBlocks;
  const int64_t share =
      std::min((lines + blocks - 1) / blocks, kPrefetchPerStep * k);
  int64_t block = 0;
  for (int64_t cb = 0; cb < colBlocks; ++cb) {
    const int64_t j0 = cb * set.colBlock;
    for (int64_t i = i0; i < i1; i += set.rowBlock, ++block) {
      const int64_t rows = std::min<int64_t>(set.rowBlock, i1 - i);
      const int64_t first = std::min(lines, block * share);
      Block blk{k,
                a + i * aRowStride,
                aRowStride,
                aColStride,
                panel + j0,
                stride,
                c + i * ldc + j0,
                ldc,
                std::min(set.colBlock, cols - j0),
                alpha,
                beta,
                {next ? next + first * kCacheLine : nullptr,
                 std::min(share, lines - first)}};
      const int64_t vectors = (blk.cols + set.vectorCols - 1) / set.vectorCols;
      set.kernels[vectors - 1][rows - 1](blk);
    }
  }
}

} // namespace

void packedGemmBlock(int64_t i0, int64_t i1, int64_t p0, int64_t p1, int64_t n,
                     int64_t k, float alpha, const float *a, int64_t aRowStride,
                     int64_t aColStride, const float *packed, float beta,
                     float *c, int64_t ldc) {
  const KernelSet &set = kernelSet(cpuIsa());
  const int64_t panels = packedPanels(n);
  const int64_t panelFloats = k * kPanelCols;
  for (int64_t p = p0; p < p1; ++p) {
    const float *panel = packed + p * panelFloats;
    const int64_t cols = std::min(kPanelCols, n - p * kPanelCols);
    // The next panel's lines, an equal share per block.
    const char *next = p + 1 < panels
                           ? reinterpret_cast<const char *>(panel + panelFloats)
                           : nullptr;
    const int64_t lines =
        next ? panelFloats * int64_t(sizeof(float)) / kCacheLine : 0;
    runPanel(set, i0, i1, cols, k, alpha, a, aRowStride, aColStride, panel,
             kPanelCols, beta, c + p * kPanelCols, ldc, next, lines);
  }
}

bool unpackedBSupported(int64_t n) {
  return cpuIsa() != CpuIsa::Generic && n % 16 == 0;
}

void unpackedGemmBlock(int64_t i0, int64_t i1, int64_t cols, int64_t k,
                       float alpha, const float *a, int64_t aRowStride,
                       int64_t aColStride, const float *b, int64_t ldb,
                       float beta, float *c, int64_t ldc) {
  runPanel(kernelSet(cpuIsa()), i0, i1, cols, k, alpha, a, aRowStride,
           aColStride, b, ldb, beta, c, ldc, nullptr, 0);
}

//===----------------------------------------------------------------------===//
// bf16 x bf16 over pair panels (PackedGemm.h): 8 x 48 with VDPBF16PS, the
// same sequence spelled out as two FMAs per pair (AVX-512F 8 x 48, AVX2
// 4 x 24, both under MXCSR's DAZ and FTZ), and a portable 4 x 48
//===----------------------------------------------------------------------===//

namespace {

/// A pair kernel's arguments: Bf16PairA's reading of the block's first row
/// of A, its panel columns and its block of C (f32).
struct PairBlock {
  const uint16_t *a;
  int64_t aRowStride, aPairStride, pairs;
  bool halfTail;
  const uint32_t *panel; ///< the block's first column of the pair panel
  float *c;
  int64_t ldc, cols;
  float alpha, beta;
};

using PairKernelFn = void (*)(const PairBlock &);

/// Pair q of an A row (a word: its even element low, its odd one high);
/// `half`: the odd K's last pair, its low element alone.
inline uint32_t pairWord(const uint16_t *row, int64_t off, bool half) {
  if (half)
    return row[off];
  uint32_t w;
  std::memcpy(&w, row + off, sizeof w);
  return w;
}

#ifdef ZRT_HAVE_X86_KERNELS
/// One pair of MR rows by NV vectors of 16 columns, two products per
/// VDPBF16PS (the high halves' first, then the low ones': PackedGemm.h's
/// order); `Half`: the odd K's last pair, A's low element alone.
template <int MR, int NV, bool Half>
ZRT_AVX512BF16 inline void avx512Bf16PairStep(__m512 (&acc)[MR][3],
                                              const uint16_t *const (&rows)[MR], int64_t off,
                                              const uint32_t *bp) {
  __m512bh bv[3];
#pragma GCC unroll 3
  for (int j = 0; j < NV; ++j)
    bv[j] = (__m512bh)_mm512_loadu_si512(bp + 16 * j);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m512bh ai = (__m512bh)_mm512_set1_epi32(int(pairWord(rows[i], off, Half)));
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j)
      acc[i][j] = _mm512_dpbf16_ps(acc[i][j], ai, bv[j]);
  }
}

template <int MR, int NV>
ZRT_AVX512BF16 void avx512Bf16PairKernel(const PairBlock &blk) {
  __m512 acc[MR][3];
  const uint16_t *rows[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    acc[i][0] = acc[i][1] = acc[i][2] = _mm512_setzero_ps();
    rows[i] = blk.a + i * blk.aRowStride;
  }
  for (int64_t q = 0; q < blk.pairs; ++q)
    avx512Bf16PairStep<MR, NV, false>(acc, rows, q * blk.aPairStride,
                                      blk.panel + q * kPanelCols);
  if (blk.halfTail)
    avx512Bf16PairStep<MR, NV, true>(acc, rows, blk.pairs * blk.aPairStride,
                                     blk.panel + blk.pairs * kPanelCols);
  avx512Store<MR>(acc, blk.c, blk.ldc, blk.cols, blk.alpha, blk.beta);
}

/// avx512Bf16PairKernel's sequence in AVX-512F over a widened pair panel:
/// per pair, every row's FMA with the odd element (A's high half, B's row
/// 2q), then every row's with the even one (A's low half, row 2q + 1). A's
/// word is broadcast from memory for each half (held in registers it would
/// not leave room for the accumulators) and split in registers.
template <int MR, int NV, bool Half>
ZRT_AVX512 inline void avx512PairStep(__m512 (&acc)[MR][3], const uint16_t *const (&rows)[MR],
                                      int64_t off, const float *bp) {
  const __m512i high = _mm512_set1_epi32(int(0xffff0000u));
  __m512 bv[3];
#pragma GCC unroll 3
  for (int j = 0; j < NV; ++j)
    bv[j] = _mm512_loadu_ps(bp + 16 * j);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m512 ai = _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_set1_epi32(int(pairWord(rows[i], off, Half))), high));
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j)
      acc[i][j] = _mm512_fmadd_ps(ai, bv[j], acc[i][j]);
  }
#pragma GCC unroll 3
  for (int j = 0; j < NV; ++j)
    bv[j] = _mm512_loadu_ps(bp + kPanelCols + 16 * j);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m512 ai = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(
        __mmask16(0xffff), _mm512_set1_epi32(int(pairWord(rows[i], off, Half))), 16));
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j)
      acc[i][j] = _mm512_fmadd_ps(ai, bv[j], acc[i][j]);
  }
}

template <int MR, int NV>
ZRT_AVX512 void avx512PairKernel(const PairBlock &blk) {
  __m512 acc[MR][3];
  const uint16_t *rows[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    acc[i][0] = acc[i][1] = acc[i][2] = _mm512_setzero_ps();
    rows[i] = blk.a + i * blk.aRowStride;
  }
  const float *panel = reinterpret_cast<const float *>(blk.panel);
  for (int64_t q = 0; q < blk.pairs; ++q)
    avx512PairStep<MR, NV, false>(acc, rows, q * blk.aPairStride, panel + 2 * q * kPanelCols);
  if (blk.halfTail)
    avx512PairStep<MR, NV, true>(acc, rows, blk.pairs * blk.aPairStride,
                                 panel + 2 * blk.pairs * kPanelCols);
  avx512Store<MR>(acc, blk.c, blk.ldc, blk.cols, blk.alpha, blk.beta);
}

/// avx512PairStep in AVX2: MR rows by NV vectors of 8 columns.
template <int MR, int NV, bool Half>
ZRT_AVX2 inline void avx2PairStep(__m256 (&acc)[MR][3], const uint16_t *const (&rows)[MR],
                                  int64_t off, const float *bp) {
  const __m256i high = _mm256_set1_epi32(int(0xffff0000u));
  __m256 bv[3];
#pragma GCC unroll 3
  for (int j = 0; j < NV; ++j)
    bv[j] = _mm256_loadu_ps(bp + 8 * j);
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    const __m256 ai = _mm256_castsi256_ps(
        _mm256_and_si256(_mm256_set1_epi32(int(pairWord(rows[i], off, Half))), high));
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j)
      acc[i][j] = _mm256_fmadd_ps(ai, bv[j], acc[i][j]);
  }
#pragma GCC unroll 3
  for (int j = 0; j < NV; ++j)
    bv[j] = _mm256_loadu_ps(bp + kPanelCols + 8 * j);
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    const __m256 ai = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_set1_epi32(int(pairWord(rows[i], off, Half))), 16));
#pragma GCC unroll 3
    for (int j = 0; j < NV; ++j)
      acc[i][j] = _mm256_fmadd_ps(ai, bv[j], acc[i][j]);
  }
}

template <int MR, int NV>
ZRT_AVX2 void avx2PairKernel(const PairBlock &blk) {
  __m256 acc[MR][3];
  const uint16_t *rows[MR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    acc[i][0] = acc[i][1] = acc[i][2] = _mm256_setzero_ps();
    rows[i] = blk.a + i * blk.aRowStride;
  }
  const float *panel = reinterpret_cast<const float *>(blk.panel);
  for (int64_t q = 0; q < blk.pairs; ++q)
    avx2PairStep<MR, NV, false>(acc, rows, q * blk.aPairStride, panel + 2 * q * kPanelCols);
  if (blk.halfTail)
    avx2PairStep<MR, NV, true>(acc, rows, blk.pairs * blk.aPairStride,
                               panel + 2 * blk.pairs * kPanelCols);
  avx2Store<MR>(acc, blk.c, blk.ldc, blk.cols, blk.alpha, blk.beta);
}

/// MXCSR with DAZ and FTZ set while alive (the x86 pair kernels' mode: what
/// VDPBF16PS does whatever MXCSR says).
struct DazFtzMode {
  static constexpr unsigned kDazFtz = 0x8040;
  unsigned saved = _mm_getcsr();
  DazFtzMode() { _mm_setcsr(saved | kDazFtz); }
  ~DazFtzMode() { _mm_setcsr(saved); }
};
#endif

// The portable pair kernel: PackedGemm.h's sequence in C++, without MXCSR.

/// A subnormal input read as a zero of its sign (DAZ).
inline float daz(float x) {
  return std::fabs(x) < std::numeric_limits<float>::min() ? std::copysign(0.0f, x) : x;
}

/// A bf16's bits widened, subnormals read as zero.
inline float widenDaz(uint32_t bits16) {
  const uint32_t bits = (bits16 & 0x7f80u) == 0 ? (bits16 & 0x8000u) << 16 : bits16 << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// FTZ for r, the rounding (gradual underflow) of an exact x * y + z:
/// zero of r's sign when that value rounded to 24 bits with an unbounded
/// exponent is under the least normal float (x86's tininess, after
/// rounding). `scaled(f)` is that value times 2^32 with its smaller factor
/// scaled, rounded once (a normal float wherever r is tiny).
template <typename Scaled> inline float flushTiny(float r, const Scaled &scaled) {
  constexpr float kTwo32 = 4294967296.0f;
  if (r == 0.0f || !(std::fabs(r) <= std::numeric_limits<float>::min()))
    return r;
  return std::fabs(scaled(kTwo32)) < std::numeric_limits<float>::min() * kTwo32
             ? std::copysign(0.0f, r)
             : r;
}

/// x * y + z rounded once, FTZ out (inputs already DAZ'd).
inline float fmaFtz(float x, float y, float z) {
  const bool xSmaller = std::fabs(x) <= std::fabs(y);
  return flushTiny(std::fma(x, y, z), [&](float s) {
    return std::fma(xSmaller ? x * s : x, xSmaller ? y : y * s, z * s);
  });
}

/// x * y rounded, FTZ out.
inline float mulFtz(float x, float y) {
  const bool xSmaller = std::fabs(x) <= std::fabs(y);
  return flushTiny(x * y, [&](float s) { return (xSmaller ? x * s : x) * (xSmaller ? y : y * s); });
}

/// fmaFtz for x, y two bf16 values: their product is exact in f32 unless it
/// is out of the normal range, so a rounded add is the fused result there.
inline float bf16FmaFtz(float x, float y, float z) {
  const float p = x * y;
  const float mag = std::fabs(p);
  if (mag >= std::numeric_limits<float>::min() && mag <= std::numeric_limits<float>::max()) {
    const float r = z + p;
    if (r == 0.0f || !(std::fabs(r) <= std::numeric_limits<float>::min()))
      return r;
  }
  return fmaFtz(x, y, z);
}

template <int MR> void genericPairKernel(const PairBlock &blk) {
  float acc[MR][kPanelCols] = {};
  const uint16_t *rows[MR];
  for (int i = 0; i < MR; ++i)
    rows[i] = blk.a + i * blk.aRowStride;
  const int64_t steps = blk.pairs + (blk.halfTail ? 1 : 0);
  for (int64_t q = 0; q < steps; ++q) {
    const bool half = q == blk.pairs;
    const uint32_t *bp = blk.panel + q * kPanelCols;
    for (int i = 0; i < MR; ++i) {
      const uint32_t w = pairWord(rows[i], q * blk.aPairStride, half);
      const float hi = widenDaz(w >> 16), lo = widenDaz(w & 0xffffu);
      for (int64_t j = 0; j < blk.cols; ++j) {
        acc[i][j] = bf16FmaFtz(hi, widenDaz(bp[j] >> 16), acc[i][j]);
        acc[i][j] = bf16FmaFtz(lo, widenDaz(bp[j] & 0xffffu), acc[i][j]);
      }
    }
  }
  const float alpha = daz(blk.alpha), beta = daz(blk.beta);
  for (int i = 0; i < MR; ++i) {
    float *ci = blk.c + i * blk.ldc;
    for (int64_t j = 0; j < blk.cols; ++j) {
      float v = acc[i][j];
      if (blk.alpha != 1.0f)
        v = mulFtz(v, alpha);
      if (blk.beta != 0.0f)
        v = fmaFtz(beta, daz(ci[j]), v);
      ci[j] = v;
    }
  }
}

/// KernelSet for the pair kernels.
struct PairKernelSet {
  int rowBlock;
  int64_t colBlock;
  int64_t vectorCols;
  PairKernelFn kernels[3][8];
};

const PairKernelSet &pairKernelSet(CpuIsa isa) {
#ifdef ZRT_HAVE_X86_KERNELS
#define ZRT_ROWS8(K, V) {K<1, V>, K<2, V>, K<3, V>, K<4, V>, K<5, V>, K<6, V>, K<7, V>, K<8, V>}
#define ZRT_ROWS3(K, V) {K<1, V>, K<2, V>, K<3, V>}
  static const PairKernelSet avx512Bf16{8,
                                        kPanelCols,
                                        16,
                                        {ZRT_ROWS8(avx512Bf16PairKernel, 1),
                                         ZRT_ROWS8(avx512Bf16PairKernel, 2),
                                         ZRT_ROWS8(avx512Bf16PairKernel, 3)}};
  static const PairKernelSet avx512{8,
                                    kPanelCols,
                                    16,
                                    {ZRT_ROWS8(avx512PairKernel, 1),
                                     ZRT_ROWS8(avx512PairKernel, 2),
                                     ZRT_ROWS8(avx512PairKernel, 3)}};
  // Three rows: with a fourth, GCC spills accumulators (16 ymm registers).
  static const PairKernelSet avx2{3,
                                  kAvx2Cols,
                                  8,
                                  {ZRT_ROWS3(avx2PairKernel, 1), ZRT_ROWS3(avx2PairKernel, 2),
                                   ZRT_ROWS3(avx2PairKernel, 3)}};
#undef ZRT_ROWS8
#undef ZRT_ROWS3
  if (isa == CpuIsa::Avx512Bf16)
    return avx512Bf16;
  if (isa == CpuIsa::Avx512)
    return avx512;
  if (isa == CpuIsa::Avx2)
    return avx2;
#endif
  static const PairKernelSet generic{
      4,
      kPanelCols,
      kPanelCols,
      {{genericPairKernel<1>, genericPairKernel<2>, genericPairKernel<3>,
        genericPairKernel<4>}}};
  return generic;
}

/// Pairs of a pair panel packed from a transposed B at a time (in L1).
constexpr int64_t kPairTransposeRows = 64;

} // namespace

bool pairPanelsWidened(CpuIsa isa) { return isa == CpuIsa::Avx512 || isa == CpuIsa::Avx2; }

int64_t pairPanelRows(int64_t k) {
  return pairPanelsWidened(cpuIsa()) ? 2 * pairRows(k) : pairRows(k);
}

namespace {
/// Stores pair word `w` at (q, j) of a pair panel: the word, or (widened)
/// its high half as an f32 at row 2q and its low half at row 2q + 1.
template <bool Widened> inline void putPair(uint32_t *panel, int64_t q, int64_t j, uint32_t w) {
  if constexpr (Widened) {
    panel[2 * q * kPanelCols + j] = w & 0xffff0000u;
    panel[(2 * q + 1) * kPanelCols + j] = w << 16;
  } else {
    panel[q * kPanelCols + j] = w;
  }
}

template <bool Widened>
void packPairs(const uint16_t *b, int64_t ldb, bool transB, int64_t k, int64_t n, int64_t p0,
               int64_t p1, uint32_t *dst) {
  const int64_t kp = pairRows(k);
  const int64_t panelWords = (Widened ? 2 : 1) * kp * kPanelCols;
  for (int64_t p = p0; p < p1; ++p) {
    uint32_t *panel = dst + p * panelWords;
    const int64_t j0 = p * kPanelCols;
    const int64_t cols = std::min(kPanelCols, n - j0);
    if (cols < kPanelCols)
      std::memset(panel, 0, size_t(panelWords) * sizeof(uint32_t));
    if (!transB) {
      for (int64_t q = 0; q < kp; ++q) {
        const uint16_t *even = b + 2 * q * ldb + j0;
        if (2 * q + 1 < k) {
          const uint16_t *odd = even + ldb;
          for (int64_t j = 0; j < cols; ++j)
            putPair<Widened>(panel, q, j, uint32_t(even[j]) | uint32_t(odd[j]) << 16);
        } else {
          for (int64_t j = 0; j < cols; ++j)
            putPair<Widened>(panel, q, j, even[j]);
        }
      }
      continue;
    }
    // B is N x K: column j of the panel is row j0 + j of B, whose pairs lie
    // side by side; kPairTransposeRows pairs of the panel at a time.
    const int64_t whole = k / 2;
    for (int64_t q0 = 0; q0 < kp; q0 += kPairTransposeRows) {
      const int64_t q1 = std::min(kp, q0 + kPairTransposeRows);
      for (int64_t j = 0; j < cols; ++j) {
        const uint16_t *row = b + (j0 + j) * ldb;
        for (int64_t q = q0; q < q1; ++q)
          putPair<Widened>(panel, q, j, pairWord(row, 2 * q, q == whole));
      }
    }
  }
}
} // namespace

void packBf16PairsB(const uint16_t *b, int64_t ldb, bool transB, int64_t k, int64_t n,
                    int64_t p0, int64_t p1, uint32_t *dst) {
  if (pairPanelsWidened(cpuIsa()))
    packPairs<true>(b, ldb, transB, k, n, p0, p1, dst);
  else
    packPairs<false>(b, ldb, transB, k, n, p0, p1, dst);
}

void packBf16PairsTransA(const uint16_t *a, int64_t lda, int64_t k, int64_t i0, int64_t i1,
                         uint32_t *dst) {
  const int64_t rows = i1 - i0;
  for (int64_t q = 0; q < pairRows(k); ++q) {
    const uint16_t *even = a + 2 * q * lda + i0;
    uint32_t *w = dst + q * rows;
    if (2 * q + 1 < k) {
      const uint16_t *odd = even + lda;
      for (int64_t i = 0; i < rows; ++i)
        w[i] = uint32_t(even[i]) | uint32_t(odd[i]) << 16;
    } else {
      for (int64_t i = 0; i < rows; ++i)
        w[i] = even[i];
    }
  }
}

void bf16PairGemmBlock(int64_t i0, int64_t i1, int64_t cols, float alpha, const Bf16PairA &a,
                       const uint32_t *panel, float beta, float *c, int64_t ldc) {
  const CpuIsa isa = cpuIsa();
  const PairKernelSet &set = pairKernelSet(isa);
#ifdef ZRT_HAVE_X86_KERNELS
  std::optional<DazFtzMode> mode;
  if (isa != CpuIsa::Generic)
    mode.emplace();
#endif
  const int64_t colBlocks = (cols + set.colBlock - 1) / set.colBlock;
  for (int64_t cb = 0; cb < colBlocks; ++cb) {
    const int64_t j0 = cb * set.colBlock;
    for (int64_t i = i0; i < i1; i += set.rowBlock) {
      const int64_t rows = std::min<int64_t>(set.rowBlock, i1 - i);
      PairBlock blk{a.a + i * a.rowStride,
                    a.rowStride,
                    a.pairStride,
                    a.pairs,
                    a.halfTail,
                    panel + j0,
                    c + i * ldc + j0,
                    ldc,
                    std::min(set.colBlock, cols - j0),
                    alpha,
                    beta};
      const int64_t vectors = (blk.cols + set.vectorCols - 1) / set.vectorCols;
      set.kernels[vectors - 1][rows - 1](blk);
    }
  }
}

} // namespace cpu
} // namespace zrt
