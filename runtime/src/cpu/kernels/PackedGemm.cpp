//===- PackedGemm.cpp - f32 products over packed panels of B --------------===//
//
// The packing and the three micro-kernels of PackedGemm.h, one per ISA:
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
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ZRT_HAVE_X86_KERNELS 1
#include <immintrin.h>
#define ZRT_AVX512 __attribute__((target("avx512f,fma")))
#define ZRT_AVX2 __attribute__((target("avx2,fma")))
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

/// How a micro-kernel reads an element of A: f32 as it is, or bf16 bits
/// widened (exactly: the bits moved up 16) as it is read, so a 16-bit A
/// gives the products of its f32 widening with no widened copy.
struct F32A {
  using T = float;
  static float load(const float *p) { return *p; }
};
struct Bf16A {
  using T = uint16_t;
  static float load(const uint16_t *p) {
    const uint32_t bits = uint32_t(*p) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
};

/// The arguments every micro-kernel takes.
struct Block {
  int64_t k;
  const void *a; ///< the block's first row of A (the loader's type)
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
/// MR rows by NV vectors of 16 columns (NV = 1..3: a panel's last columns
/// past N are not computed).
template <int MR, int NV, typename L = F32A>
ZRT_AVX512 void avx512Kernel(const Block &blk) {
  __m512 acc[MR][3];
  const typename L::T *rows[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    acc[i][0] = acc[i][1] = acc[i][2] = _mm512_setzero_ps();
    rows[i] = static_cast<const typename L::T *>(blk.a) + i * blk.aRowStride;
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
      const __m512 ai = _mm512_set1_ps(L::load(rows[i] + off));
#pragma GCC unroll 3
      for (int j = 0; j < NV; ++j)
        acc[i][j] = _mm512_fmadd_ps(ai, bv[j], acc[i][j]);
    }
  }
  __mmask16 masks[3];
  for (int j = 0; j < 3; ++j) {
    const int64_t left = std::clamp<int64_t>(blk.cols - 16 * j, 0, 16);
    masks[j] = __mmask16((1u << left) - 1u);
  }
  const __m512 alphaV = _mm512_set1_ps(blk.alpha),
               betaV = _mm512_set1_ps(blk.beta);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    float *ci = blk.c + i * blk.ldc;
    for (int j = 0; j < 3; ++j) {
      if (masks[j] == 0)
        break;
      __m512 v = acc[i][j];
      if (blk.alpha != 1.0f)
        v = _mm512_mul_ps(v, alphaV);
      if (blk.beta != 0.0f)
        v = _mm512_fmadd_ps(betaV, _mm512_maskz_loadu_ps(masks[j], ci + 16 * j),
                            v);
      _mm512_mask_storeu_ps(ci + 16 * j, masks[j], v);
    }
  }
}

//===----------------------------------------------------------------------===//
// AVX2: 4 x 24
//===----------------------------------------------------------------------===//

/// Columns of one AVX2 block: half a panel.
constexpr int64_t kAvx2Cols = 24;

/// MR rows by NV vectors of 8 columns (NV = 1..3).
template <int MR, int NV, typename L = F32A>
ZRT_AVX2 void avx2Kernel(const Block &blk) {
  __m256 acc[MR][3];
  const typename L::T *rows[MR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    acc[i][0] = acc[i][1] = acc[i][2] = _mm256_setzero_ps();
    rows[i] = static_cast<const typename L::T *>(blk.a) + i * blk.aRowStride;
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
      const __m256 ai = _mm256_set1_ps(L::load(rows[i] + off));
#pragma GCC unroll 3
      for (int j = 0; j < NV; ++j)
        acc[i][j] = _mm256_fmadd_ps(ai, bv[j], acc[i][j]);
    }
  }
  __m256i masks[3];
  for (int j = 0; j < 3; ++j) {
    const int left = int(std::clamp<int64_t>(blk.cols - 8 * j, 0, 8));
    masks[j] = _mm256_cmpgt_epi32(_mm256_set1_epi32(left),
                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  const __m256 alphaV = _mm256_set1_ps(blk.alpha),
               betaV = _mm256_set1_ps(blk.beta);
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    float *ci = blk.c + i * blk.ldc;
    for (int j = 0; j < 3; ++j) {
      if (blk.cols <= 8 * j)
        break;
      const bool full = blk.cols >= 8 * (j + 1);
      __m256 v = acc[i][j];
      if (blk.alpha != 1.0f)
        v = _mm256_mul_ps(v, alphaV);
      if (blk.beta != 0.0f) {
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

template <int MR, typename L = F32A> void genericKernel(const Block &blk) {
  alignas(64) float acc[MR][kPanelCols] = {};
  const typename L::T *rows[MR];
  for (int i = 0; i < MR; ++i)
    rows[i] = static_cast<const typename L::T *>(blk.a) + i * blk.aRowStride;
  int64_t off = 0;
  for (int64_t p = 0; p < blk.k; ++p, off += blk.aColStride) {
    const float *bp = blk.panel + p * blk.panelStride;
    for (int i = 0; i < MR; ++i) {
      const float ai = L::load(rows[i] + off);
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

template <typename L = F32A> const KernelSet &kernelSet(CpuIsa isa) {
#ifdef ZRT_HAVE_X86_KERNELS
#define ZRT_ROWS8(K, V)                                                        \
  {K<1, V, L>, K<2, V, L>, K<3, V, L>, K<4, V, L>, K<5, V, L>, K<6, V, L>,      \
   K<7, V, L>, K<8, V, L>}
#define ZRT_ROWS4(K, V) {K<1, V, L>, K<2, V, L>, K<3, V, L>, K<4, V, L>}
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
  if (isa == CpuIsa::Avx512)
    return avx512;
  if (isa == CpuIsa::Avx2)
    return avx2;
#endif
  static const KernelSet generic{
      4,
      kPanelCols,
      kPanelCols,
      {{genericKernel<1, L>, genericKernel<2, L>, genericKernel<3, L>, genericKernel<4, L>}}};
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
    for (CpuIsa isa : {CpuIsa::Generic, CpuIsa::Avx2, CpuIsa::Avx512}) {
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
                ": not an instruction set of the CPU kernels; use avx512, "
                "avx2 or generic (or unset it for the CPU's best)";
    return c;
  }();
  return choice;
}

} // namespace

const char *cpuIsaName(CpuIsa isa) {
  switch (isa) {
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
      return CpuIsa::Avx512;
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
template <typename T>
void runPanel(const KernelSet &set, int64_t i0, int64_t i1, int64_t cols,
              int64_t k, float alpha, const T *a, int64_t aRowStride,
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

/// packedGemmBlock over an A of loader L's type.
template <typename L>
void packedBlock(int64_t i0, int64_t i1, int64_t p0, int64_t p1, int64_t n, int64_t k,
                 float alpha, const typename L::T *a, int64_t aRowStride,
                 int64_t aColStride, const float *packed, float beta, float *c,
                 int64_t ldc) {
  const KernelSet &set = kernelSet<L>(cpuIsa());
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

} // namespace

void packedGemmBlock(int64_t i0, int64_t i1, int64_t p0, int64_t p1, int64_t n,
                     int64_t k, float alpha, const float *a, int64_t aRowStride,
                     int64_t aColStride, const float *packed, float beta,
                     float *c, int64_t ldc) {
  packedBlock<F32A>(i0, i1, p0, p1, n, k, alpha, a, aRowStride, aColStride, packed, beta,
                    c, ldc);
}

void packedGemmBlockBf16A(int64_t i0, int64_t i1, int64_t p0, int64_t p1, int64_t n,
                          int64_t k, float alpha, const uint16_t *a, int64_t aRowStride,
                          int64_t aColStride, const float *packed, float beta, float *c,
                          int64_t ldc) {
  packedBlock<Bf16A>(i0, i1, p0, p1, n, k, alpha, a, aRowStride, aColStride, packed, beta,
                     c, ldc);
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

} // namespace cpu
} // namespace zrt
