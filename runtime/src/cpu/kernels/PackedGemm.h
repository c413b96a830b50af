//===- PackedGemm.h - f32 products over packed panels of B ------*- C++ -*-===//
//
// Every f32 and f16 MatMul/Gemm on the CPU (constant or gathered B, forward
// and backward, batched or not, Conv's products too); bf16 x bf16 products
// over pair panels (the second half of this file). B is packed into column
// panels of kPanelCols columns, each panel K rows of kPanelCols contiguous
// floats (zero-padded past N): once for a constant B (a weight no
// instruction writes: see ConstantOperands in zrt/Kernel.h), a panel at a
// time just before its use otherwise. A micro-kernel for the CPU's ISA
// (cpuIsa(): AVX-512, AVX2 or portable C++) streams the panels.
//
// Every element of C is one fixed sequence of operations whatever kernel,
// tile, task, thread count, row count M or rank layout computes it:
//   acc = 0; for k = 0..K-1: acc = acc + A[i][k] * B[k][j]
//   v = alpha == 1 ? acc : acc * alpha;  C = beta == 0 ? v : beta * C + v
// with each "x + y * z" one fused multiply-add on the FMA ISAs (AVX-512 and
// AVX2 give the same bits) and a rounded multiply then add on the portable
// one. So an element depends only on its row of A and its column of B:
// micro-batching, pipeline splits and ZeRO gathers leave its bits alone.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CPU_KERNELS_PACKEDGEMM_H
#define ZRT_CPU_KERNELS_PACKEDGEMM_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace zrt {
namespace cpu {

/// The instruction sets the packed kernels are built for, lowest first.
/// Avx512Bf16 is AVX-512 plus AVX512_BF16's VDPBF16PS, which only the bf16
/// products use (two products per instruction: the pair kernels below).
enum class CpuIsa { Generic = 0, Avx2 = 1, Avx512 = 2, Avx512Bf16 = 3 };

/// "generic", "avx2", "avx512" or "avx512bf16".
const char *cpuIsaName(CpuIsa isa);

/// The highest ISA this CPU runs (AVX-512F + FMA + AVX512_BF16, AVX-512F +
/// FMA, AVX2 + FMA, or generic).
CpuIsa detectedCpuIsa();

/// The ISA the kernels run: the detected one, lowered by the environment
/// variable ZRT_CPU_ISA=avx512bf16|avx512|avx2|generic (never raised above it; a value
/// that is not one of these leaves the detected ISA: see cpuIsaProblem).
/// Read once per process.
CpuIsa cpuIsa();

/// Makes the kernels run `isa`, lowered to detectedCpuIsa(), from now on
/// (ZRT_CPU_ISA in code: for tests and benches that compare ISAs in one
/// process; not while products run). Returns the ISA now in use.
CpuIsa setCpuIsa(CpuIsa isa);

/// Empty when ZRT_CPU_ISA is unset or names an ISA this CPU runs; otherwise
/// what is wrong with it and what to do (zero-run refuses to start).
std::string cpuIsaProblem();

/// Columns of B per packed panel (three AVX-512 vectors, six AVX2 ones).
constexpr int64_t kPanelCols = 48;

/// Panels of a K x N B: ceil(N / kPanelCols).
inline int64_t packedPanels(int64_t n) {
  return (n + kPanelCols - 1) / kPanelCols;
}

/// Floats of the packed form of a K x N B.
inline size_t packedFloats(int64_t k, int64_t n) {
  return size_t(packedPanels(n)) * size_t(kPanelCols) * size_t(k);
}

/// Panel p of a packed K x N B in `dst`: its storage, its first column of B
/// and its width; a last panel narrower than kPanelCols is zeroed first, so
/// its columns past N hold zeros.
struct PackedPanel {
  float *data;
  int64_t j0, cols;
};
inline PackedPanel startPanel(float *dst, int64_t p, int64_t k, int64_t n) {
  PackedPanel panel{dst + p * k * kPanelCols, p * kPanelCols, 0};
  panel.cols = std::min(kPanelCols, n - panel.j0);
  if (panel.cols < kPanelCols)
    std::memset(panel.data, 0, size_t(k * kPanelCols) * sizeof(float));
  return panel;
}

/// Packs panels [p0, p1) of op(B) (K x N; `transB`: B is N x K) with leading
/// dimension `ldb` into `dst` (the whole packed form, 64-byte aligned).
void packB(const float *b, int64_t ldb, bool transB, int64_t k, int64_t n,
           int64_t p0, int64_t p1, float *dst);

/// Rows [0, len) x columns [0, cols) of a panel from `cols` rows of a
/// transposed B: panel[q * kPanelCols + j] = b[j * ldb + q] (8 x 8 blocks
/// in registers where the ISA allows). packB's transposed case, and the
/// 16-bit packing's once a block of B's rows is widened.
void packTransposedRows(const float *b, int64_t ldb, int64_t len, int64_t cols,
                        float *panel);

/// One block of C = alpha * A * B + beta * C: rows [i0, i1) and panels
/// [p0, p1) of C (M x N, leading dimension ldc). Element (i, p) of A is
/// a[i * aRowStride + p * aColStride]; `packed` is packB's output. With
/// beta == 0 C is not read. While panel p runs, panel p + 1 (if any) is
/// prefetched into L2, spread over the row blocks.
void packedGemmBlock(int64_t i0, int64_t i1, int64_t p0, int64_t p1, int64_t n,
                     int64_t k, float alpha, const float *a, int64_t aRowStride,
                     int64_t aColStride, const float *packed, float beta,
                     float *c, int64_t ldc);

/// Whether unpackedGemmBlock may read a K x N B as it lies (not transposed):
/// an FMA ISA, and N a multiple of every vector width (16), so that no
/// vector the kernels load reaches past a row of B.
bool unpackedBSupported(int64_t n);

/// packedGemmBlock for one panel's columns [0, cols) of C read straight from
/// B (K x cols, rows `ldb` floats apart: B + the panel's first column) with
/// no packing: the same operations in the same order, so the same bits.
/// Only where unpackedBSupported(N) for B's whole N.
void unpackedGemmBlock(int64_t i0, int64_t i1, int64_t cols, int64_t k,
                       float alpha, const float *a, int64_t aRowStride,
                       int64_t aColStride, const float *b, int64_t ldb,
                       float beta, float *c, int64_t ldc);

//===----------------------------------------------------------------------===//
// bf16 x bf16 products over pair panels
//===----------------------------------------------------------------------===//
//
// A product whose operands are both bf16 runs over B packed into pair panels
// of kPanelCols 32-bit words per row and ceil(K/2) rows: word (q, j) holds
// B[2q][j] in its low 16 bits and B[2q+1][j] in its high 16 bits (zeros past
// K and N). A's rows are read a pair of elements (one word) at a time. Every
// element of C is one fixed sequence of operations whatever ISA, kernel,
// tile, task, thread count or row count computes it:
//   acc = 0; for q = 0..ceil(K/2)-1:
//     acc = acc + A[i][2q+1] * B[2q+1][j];  acc = acc + A[i][2q] * B[2q][j]
//   v = alpha == 1 ? acc : acc * alpha;  C = beta == 0 ? v : beta * C + v
// with an element past K read as 0, and each "x + y * z" one fused
// multiply-add whose subnormal inputs count as zero and whose result, if
// tiny (under the least normal float after rounding), is a zero of its sign:
// what VDPBF16PS does (its "DAZ in, FTZ out"). AVX512_BF16 runs it two
// products per instruction, twice the f32 rate; the AVX-512F and AVX2
// kernels spell it out with MXCSR's DAZ and FTZ set, the portable one in C++
// (a product of two bf16 values is exact in f32). All give the same bits.
// For the AVX-512F and AVX2 kernels a pair panel is widened as it is packed:
// each row q of words becomes two rows of f32 (rows 2q and 2q + 1: B[2q+1][j]
// then B[2q][j], the order they are used in), so they load B as the f32
// kernels do.

/// Pairs of K: ceil(K / 2).
inline int64_t pairRows(int64_t k) { return (k + 1) / 2; }

/// Whether the ISA's pair panels are widened (AVX-512F, AVX2).
bool pairPanelsWidened(CpuIsa isa);

/// Rows of kPanelCols 32-bit values of one pair panel at cpuIsa():
/// pairRows(k), twice that when widened.
int64_t pairPanelRows(int64_t k);

/// 32-bit values of the pair-packed form of a K x N bf16 B at cpuIsa().
inline size_t pairPackedWords(int64_t k, int64_t n) {
  return size_t(packedPanels(n)) * size_t(kPanelCols) * size_t(pairPanelRows(k));
}

/// Packs panels [p0, p1) of op(B) (bf16 bits, K x N; `transB`: B is N x K)
/// with leading dimension `ldb` into pair panels for cpuIsa() in `dst` (the
/// whole packed form; a panel at dst + p * pairPanelRows(k) * kPanelCols).
void packBf16PairsB(const uint16_t *b, int64_t ldb, bool transB, int64_t k, int64_t n,
                    int64_t p0, int64_t p1, uint32_t *dst);

/// Rows [i0, i1) of a transposed bf16 A (stored K x M, leading dimension
/// `lda`) as words of pairs: dst[q * (i1 - i0) + i] = A[2q][i0 + i] |
/// A[2q + 1][i0 + i] << 16, ceil(K/2) rows (zero past K).
void packBf16PairsTransA(const uint16_t *a, int64_t lda, int64_t k, int64_t i0, int64_t i1,
                         uint32_t *dst);

/// How the pair kernels read A: pair q of row i is the word at
/// a + i * rowStride + q * pairStride (strides in 16-bit elements); `pairs`
/// whole words per row, then, when `halfTail`, one more pair whose low half
/// alone is read (A[i][K - 1] of an odd K read in place).
struct Bf16PairA {
  const uint16_t *a;
  int64_t rowStride, pairStride;
  int64_t pairs;
  bool halfTail;
};

/// One block of C = alpha * A * B + beta * C in f32 (C f32, leading
/// dimension ldc) for rows [i0, i1) and the `cols` columns of one pair panel
/// (`panel`, packBf16PairsB's at the same ISA). With beta == 0 C is not
/// read.
void bf16PairGemmBlock(int64_t i0, int64_t i1, int64_t cols, float alpha, const Bf16PairA &a,
                       const uint32_t *panel, float beta, float *c, int64_t ldc);

} // namespace cpu
} // namespace zrt

#endif // ZRT_CPU_KERNELS_PACKEDGEMM_H
