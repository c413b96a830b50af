//===- PackedGemm.h - f32 products over packed panels of B ------*- C++ -*-===//
//
// Every f32 MatMul/Gemm on the CPU (constant or gathered B, forward and
// backward, batched or not, Conv's products too). B is packed into column
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
enum class CpuIsa { Generic = 0, Avx2 = 1, Avx512 = 2 };

/// "generic", "avx2" or "avx512".
const char *cpuIsaName(CpuIsa isa);

/// The highest ISA this CPU runs (AVX-512F + FMA, AVX2 + FMA, or generic).
CpuIsa detectedCpuIsa();

/// The ISA the kernels run: the detected one, lowered by the environment
/// variable ZRT_CPU_ISA=avx512|avx2|generic (never raised above it; a value
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

/// packedGemmBlock with A stored as bf16 bits (`a` in elements of 16 bits):
/// each element is widened (exactly) as the micro-kernel reads it, so C gets
/// the bits packedGemmBlock gives on the widened A, with no widened copy.
void packedGemmBlockBf16A(int64_t i0, int64_t i1, int64_t p0, int64_t p1, int64_t n,
                          int64_t k, float alpha, const uint16_t *a, int64_t aRowStride,
                          int64_t aColStride, const float *packed, float beta, float *c,
                          int64_t ldc);

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

} // namespace cpu
} // namespace zrt

#endif // ZRT_CPU_KERNELS_PACKEDGEMM_H
