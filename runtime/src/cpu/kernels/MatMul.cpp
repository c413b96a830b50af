//===- MatMul.cpp - MatMul and Gemm ---------------------------------------===//
//
// numpy-style MatMul (1-D operands promoted and their dims dropped, batch dims
// broadcast) and ONNX Gemm. Every f32 product (and Conv's, through
// gemmOnThisThread) runs PackedGemm's kernel for the CPU's ISA over packed
// panels of B (PackedGemm.h): an element of C depends only on its row of A
// and its column of B, never on M, the tile, the thread split, the rank
// layout or micro-batching. A B the program never writes (a weight of an
// inference program: KernelContext::constants) is packed once, at its first
// use, and kept by the executor. The parallelism is ours, on the
// KernelContext's threads (tasks of a panel by a chunk of rows).
// f64 goes through OpenBLAS (cblas_dgemm) running single-threaded, cut into
// tiles by the shapes alone (chooseGrid), so OpenBLAS's own spinning worker
// threads never compete with the runtime's; integer types use a plain
// row-accumulating loop, tiled the same way.
// Batched MatMul folds A's batch into M when B has no batch.
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/CpuKernels.h"
#include "kernels/KernelLayouts.h"
#include "PackedGemm.h"

#include <cblas.h>

#include <memory>
#include <vector>

namespace zrt {
namespace cpu {
using namespace kernels;
namespace {

// The tile grid of runProducts: f64 and integer products only (every f32
// or 16-bit product takes runPackedProducts or runBf16PairProducts, whose
// tasks are panels x 256-row chunks).

/// Products smaller than this (M*N*K) are not split across threads, and no
/// tile of a split product is smaller.
constexpr double kMinParallelGemm = 64.0 * 64.0 * 64.0;
/// Smallest tile of C: rows, columns.
constexpr int64_t kMinTileRows = 16;
constexpr int64_t kMinTileCols = 64;
/// Tile edges fall on multiples of these, so that only the last tile of a
/// row or column has OpenBLAS's edge blocks (its sgemm register blocks, 16 x 4
/// on AVX-512 and smaller elsewhere, divide them).
constexpr int64_t kTileRowAlign = 16;
constexpr int64_t kTileColAlign = 16;
/// The cost of packing one operand element, in multiply-adds of the product's
/// own time: each tile is one OpenBLAS call, which packs its rows of A and
/// its columns of B, so a column of tiles packs all of A (M x K) once more and
/// a row of tiles all of B (K x N). Measured (OpenBLAS 0.3.21, SkylakeX
/// kernels, one thread): a call costs ~30 us more than its multiply-adds at
/// M = 128, K = 768, i.e. ~24 multiply-adds per element of A.
constexpr double kPackCostMacs = 24;
/// OpenBLAS runs a product of at most this many multiply-adds (M*N*K) on its
/// "small matrix" kernels, which pack nothing: just under the threshold they
/// are ~25% faster than the packed path just over it (0.3.21, SkylakeX: 12
/// products 128x64x128 in 175 us whole, 138 us in halves). A product up to
/// kSmallSplitMax times over it is cut into row tiles under it.
constexpr double kSmallGemmMacs = 100.0 * 100.0 * 100.0;
constexpr int64_t kSmallSplitMax = 4;
/// Tile counts tried, fewest first: each divides evenly over 2 threads, and
/// 6, 12 and 24 over 3 (12 and 24 over 4 and 6 as well).
constexpr int64_t kTileCounts[] = {2, 4, 6, 12, 24};
/// Most tasks (products x tiles) a call is split into.
constexpr int64_t kGemmTasks = 24;
/// Extra packing (a fraction of the product's time) more tiles may add.
constexpr double kSplitBudget = 0.04;
/// ... when the tasks would otherwise be one (or an odd number), so that two
/// threads could not share them evenly: worth more, since then the split is
/// what makes the second thread useful.
constexpr double kEvenSplitBudget = 0.25;

/// C = alpha * op(A) * op(B) + beta * C, row-major, C is M x N. With beta == 0
/// C is not read.
template <typename T>
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          double alpha, const T *a, int64_t lda, const T *b, int64_t ldb,
          double beta, T *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (k == 0) { // BLAS would not touch C when alpha*AB vanishes; be explicit
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          c[i * ldc + j] = beta == 0 ? T(0) : T(beta) * c[i * ldc + j];
      return;
    }
    const CBLAS_TRANSPOSE ta = transA ? CblasTrans : CblasNoTrans;
    const CBLAS_TRANSPOSE tb = transB ? CblasTrans : CblasNoTrans;
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), float(alpha),
                  a, int(lda), b, int(ldb), float(beta), c, int(ldc));
    else
      cblas_dgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), alpha, a,
                  int(lda), b, int(ldb), beta, c, int(ldc));
  } else {
    std::vector<T> row(static_cast<size_t>(n));
    for (int64_t i = 0; i < m; ++i) {
      std::fill(row.begin(), row.end(), T(0));
      for (int64_t p = 0; p < k; ++p) {
        const T av = transA ? a[p * lda + i] : a[i * lda + p];
        if (av == T(0))
          continue;
        if (transB)
          for (int64_t j = 0; j < n; ++j)
            row[size_t(j)] += av * b[j * ldb + p];
        else
          for (int64_t j = 0; j < n; ++j)
            row[size_t(j)] += av * b[p * ldb + j];
      }
      T *ci = c + i * ldc;
      for (int64_t j = 0; j < n; ++j) {
        const double v = alpha * double(row[size_t(j)]) +
                         (beta == 0 ? 0.0 : beta * double(ci[j]));
        ci[j] = fromDouble<T>(v);
      }
    }
  }
}

/// One row-major product with its operands' leading dimensions.
template <typename T> struct GemmProblem {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  double alpha = 1, beta = 0;
  const T *a = nullptr;
  int64_t lda = 0;
  const T *b = nullptr;
  int64_t ldb = 0;
  T *c = nullptr;
  int64_t ldc = 0;
  /// When set (beta != 0), C's initial value: element (i, j) is
  /// cInit[i * cInitRowStride + j * cInitColStride] (a stride is 0 along a
  /// broadcast dim). Each tile writes its own part of C just before its
  /// product, while it stays in cache: no separate pass over C.
  const T *cInit = nullptr;
  int64_t cInitRowStride = 0, cInitColStride = 0;

  /// Writes C's initial value (cInit) into rows [i0, i1) and columns
  /// [j0, j1) of C, if it has one and is not C itself.
  void initTile(int64_t i0, int64_t i1, int64_t j0, int64_t j1) const {
    if (cInit && !(cInit == c && cInitRowStride == ldc && cInitColStride == 1))
      for (int64_t i = i0; i < i1; ++i) {
        const T *src = cInit + i * cInitRowStride;
        T *dst = c + i * ldc;
        if (cInitColStride == 0)
          std::fill(dst + j0, dst + j1, src[0]);
        else
          std::copy(src + j0, src + j1, dst + j0);
      }
  }

  /// The product restricted to rows [i0, i1) and columns [j0, j1) of C.
  void runTile(int64_t i0, int64_t i1, int64_t j0, int64_t j1) const {
    T *cTile = c + i0 * ldc + j0;
    initTile(i0, i1, j0, j1);
    const T *aTile = transA ? a + i0 : a + i0 * lda;
    const T *bTile = transB ? b + j0 * ldb : b + j0;
    gemm<T>(transA, transB, i1 - i0, j1 - j0, k, alpha, aTile, lda, bTile, ldb,
            beta, cTile, ldc);
  }
};

/// C cut into rows x cols tiles.
struct TileGrid {
  int64_t rows = 1, cols = 1;
  int64_t count() const { return rows * cols; }
};

/// Edge `i` of `parts` tiles over [0, total): on a multiple of `align`
/// (save the end), as even as that allows.
int64_t tileEdge(int64_t total, int64_t parts, int64_t i, int64_t align) {
  const int64_t units = (total + align - 1) / align;
  return std::min(total, units * i / parts * align);
}

/// The packing a grid adds to one product's, as a fraction of its
/// multiply-adds: every column of tiles but one packs A again, every row of
/// tiles but one B.
double splitOverhead(int64_t m, int64_t n, const TileGrid &g) {
  return kPackCostMacs *
         (double(g.cols - 1) / double(n) + double(g.rows - 1) / double(m));
}

/// The grid of `tiles` tiles (none smaller than kMinTileRows x kMinTileCols)
/// that adds the least packing; rows == 0 when there is none.
TileGrid bestGrid(int64_t m, int64_t n, int64_t tiles) {
  TileGrid best{0, 0};
  for (int64_t rows = 1; rows <= tiles; ++rows) {
    if (tiles % rows != 0)
      continue;
    const TileGrid g{rows, tiles / rows};
    if (m / g.rows < kMinTileRows || n / g.cols < kMinTileCols)
      continue;
    if (best.rows == 0 || splitOverhead(m, n, g) < splitOverhead(m, n, best))
      best = g;
  }
  return best;
}

/// How to cut each of `count` m x n x k products: into 2 or 4 row tiles when
/// that brings a product just over kSmallGemmMacs under it; otherwise the
/// most tiles (from kTileCounts, at most kGemmTasks tasks in all, each tile
/// worth at least kMinParallelGemm) whose extra packing stays within
/// kSplitBudget, or kEvenSplitBudget while the tasks are too few or too odd
/// to share evenly over two threads. A function of the shapes only: never of
/// the thread count, so C's bits are the same at any --threads.
TileGrid chooseGrid(int64_t count, int64_t m, int64_t n, int64_t k) {
  const double macs = double(m) * double(n) * double(k);
  TileGrid grid;
  if (macs > kSmallGemmMacs && macs <= kSmallSplitMax * kSmallGemmMacs)
    for (int64_t rows = 2; rows <= kSmallSplitMax; rows *= 2)
      if (macs / double(rows) <= kSmallGemmMacs && m / rows >= kMinTileRows)
        return TileGrid{rows, 1};
  for (int64_t tiles : kTileCounts) {
    if (count * tiles > kGemmTasks || macs / double(tiles) < kMinParallelGemm)
      break;
    const TileGrid g = bestGrid(m, n, tiles);
    if (g.rows == 0)
      continue;
    const double budget =
        (count * grid.count()) % 2 == 1 ? kEvenSplitBudget : kSplitBudget;
    if (splitOverhead(m, n, g) > budget)
      break;
    grid = g;
  }
  return grid;
}

/// Runs `count` independent products (`problemAt(i)` gives the i-th) of the
/// same shape on the context's threads: whole products per task, or each
/// product cut into the tiles of chooseGrid, each tile one single-threaded
/// BLAS call (see chooseGrid: C's bits are the same at any --threads).
template <typename T, typename ProblemAt>
void runProducts(const KernelContext &ctx, int64_t count,
                 const ProblemAt &problemAt) {
  useSingleThreadedBlas();
  if (count <= 0)
    return;
  const GemmProblem<T> first = problemAt(0);
  const TileGrid grid = chooseGrid(count, first.m, first.n, first.k);
  const int64_t tiles = grid.count();
  if (tiles == 1) {
    const double macs = double(first.m) * double(first.n) * double(first.k);
    parallelRange(
        ctx, count,
        std::max<int64_t>(1, int64_t(kMinParallelGemm / std::max(macs, 1.0))),
        [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            const GemmProblem<T> p = problemAt(i);
            p.runTile(0, p.m, 0, p.n);
          }
        });
    return;
  }
  parallelRange(ctx, count * tiles, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const GemmProblem<T> p = problemAt(t / tiles);
      const int64_t tile = t % tiles;
      const int64_t ri = tile / grid.cols, ci = tile % grid.cols;
      p.runTile(tileEdge(p.m, grid.rows, ri, kTileRowAlign),
                tileEdge(p.m, grid.rows, ri + 1, kTileRowAlign),
                tileEdge(p.n, grid.cols, ci, kTileColAlign),
                tileEdge(p.n, grid.cols, ci + 1, kTileColAlign));
    }
  });
}

/// Rows of C per task of a packed product (a multiple of every micro-kernel's
/// rows): A's rows a task reads stay in L2 while it streams one panel of B.
constexpr int64_t kPackedTaskRows = 256;

/// Largest B (bytes) read unpacked (runPackedProducts).
constexpr double kUnpackedBMaxBytes = 256.0 * 1024.0;

/// `count` elements of `buf` (a buffer of the calling thread), grown if
/// need be, from a 64-byte boundary.
template <typename T> T *alignedScratch(std::vector<T> &buf, size_t count) {
  constexpr size_t kAlign = 64;
  const size_t spare = kAlign / sizeof(T);
  if (buf.size() < count + spare)
    buf.resize(count + spare);
  void *start = buf.data();
  size_t space = buf.size() * sizeof(T);
  return static_cast<T *>(std::align(kAlign, count * sizeof(T), start, space));
}

/// A thread's buffer for one packed panel of a K-row B, 64-byte aligned.
float *panelScratch(int64_t k) {
  thread_local std::vector<float> scratch;
  return alignedScratch(scratch, packedFloats(k, kPanelCols));
}

/// Rows of a task of a 16-bit product: at most kPackedTaskRows, fewer (a
/// multiple of 8, every micro-kernel's row block) when a K this long would
/// make the task's widened rows of A more than kHalfTaskABytes.
constexpr double kHalfTaskABytes = 2.0 * 1024.0 * 1024.0;
/// Largest 16-bit A (all of a call's products, as f32) widened whole.
constexpr double kHalfWholeABytes = 16.0 * 1024.0 * 1024.0;
int64_t halfTaskRows(int64_t k) {
  const int64_t rows = int64_t(kHalfTaskABytes / (4.0 * double(std::max<int64_t>(k, 1))));
  return std::clamp<int64_t>(rows / 8 * 8, 8, kPackedTaskRows);
}

/// A thread's f32 buffer `slot` (0: A's rows, 1: C's tile, 2: B's rows
/// while packing) of at least `floats`, 64-byte aligned.
thread_local std::vector<float> halfScratchBuffers[3];
float *halfScratch(int slot, size_t floats) {
  return alignedScratch(halfScratchBuffers[slot], floats);
}

/// A 16-bit product's f32 tile of C (`rows` x `cols` from row i0, column
/// j0; rows kPanelCols apart) set to C's widened initial value, if any.
/// Returns the beta the tile's products then take (0 without one).
float widenCTile(DType dt, const GemmProblem<uint16_t> &p, int64_t i0, int64_t rows, int64_t j0,
                 int64_t cols, float *cTile) {
  if (!p.cInit)
    return 0.0f;
  for (int64_t i = 0; i < rows; ++i) {
    const uint16_t *src = p.cInit + (i0 + i) * p.cInitRowStride;
    float *dst = cTile + i * kPanelCols;
    if (p.cInitColStride == 0) {
      float v;
      widenHalfRow(dt, src, &v, 1);
      std::fill(dst, dst + cols, v);
    } else {
      widenHalfRow(dt, src + j0, dst, cols);
    }
  }
  return float(p.beta);
}

/// packB for a B stored as f16/bf16 bits (`dt`): each element widened (exactly)
/// as it is packed, so the packed panel holds the f32 values the f32 path
/// would pack from a widened copy of B.
void packHalfB(DType dt, const uint16_t *b, int64_t ldb, bool transB, int64_t k,
               int64_t n, int64_t p0, int64_t p1, float *dst) {
  for (int64_t p = p0; p < p1; ++p) {
    const auto [panel, j0, cols] = startPanel(dst, p, k, n);
    if (!transB) {
      for (int64_t q = 0; q < k; ++q)
        widenHalfRow(dt, b + q * ldb + j0, panel + q * kPanelCols, cols);
      continue;
    }
    // B is N x K: the panel's columns are rows of B, widened 64 elements at
    // a time into a block of this thread, then transposed into place.
    constexpr int64_t kStep = 64;
    float *rows = halfScratch(2, size_t(kPanelCols * kStep));
    for (int64_t q0 = 0; q0 < k; q0 += kStep) {
      const int64_t len = std::min(kStep, k - q0);
      for (int64_t j = 0; j < cols; ++j)
        widenHalfRow(dt, b + (j0 + j) * ldb + q0, rows + j * kStep, len);
      packTransposedRows(rows, kStep, len, cols, panel + q0 * kPanelCols);
    }
  }
}

/// packB for f32 operands (S = float), packHalfB for 16-bit ones (S =
/// uint16_t, their bits; `dt` says which).
template <typename S>
void packAnyB(DType dt, const S *b, int64_t ldb, bool transB, int64_t k, int64_t n,
              int64_t p0, int64_t p1, float *dst) {
  if constexpr (std::is_same_v<S, uint16_t>)
    packHalfB(dt, b, ldb, transB, k, n, p0, p1, dst);
  else
    packB(b, ldb, transB, k, n, p0, p1, dst);
}

/// B of the product `first` packed whole, once, and kept by the executor,
/// when it is a constant of the program (`constantB`) and the only product
/// (count 1); else null.
template <typename S>
const float *constantPackedB(const KernelContext &ctx, int64_t count,
                             const GemmProblem<S> &first, const TensorRef *constantB,
                             DType dt) {
  if (!(count == 1 && constantB && ctx.constants &&
        ctx.constants->isConstant(*constantB)))
    return nullptr;
  const int64_t n = first.n, k = first.k;
  const int64_t panels = packedPanels(n);
  const std::string layout =
      "gemm-b" + std::to_string(kPanelCols) + " k=" + std::to_string(k) +
      " n=" + std::to_string(n) + " ldb=" + std::to_string(first.ldb) +
      " t=" + std::to_string(int(first.transB)) + " " + dtypeName(dt);
  return static_cast<const float *>(ctx.constants->prepared(
      *constantB, layout, packedFloats(k, n) * sizeof(float),
      [&](void *dst) {
        parallelRange(ctx, panels, 1, [&](int64_t p0, int64_t p1) {
          packAnyB(dt, first.b, first.ldb, first.transB, k, n, p0, p1,
                   static_cast<float *>(dst));
        });
      }));
}

/// Every product's 16-bit B (k x n, not transposed) widened whole, on the
/// context's threads, into a buffer of the calling thread: [count][k][n].
template <typename ProblemAt>
float *widenWholeB(const KernelContext &ctx, int64_t count, const ProblemAt &problemAt,
                   int64_t k, int64_t n, DType dt) {
  thread_local std::vector<float> whole;
  const size_t floats = size_t(count * k * n);
  if (whole.size() < floats)
    whole.resize(floats);
  float *wideB = whole.data();
  parallelRange(ctx, count * k, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)),
                [&](int64_t b, int64_t e) {
                  for (int64_t t = b; t < e; ++t) {
                    const GemmProblem<uint16_t> p = problemAt(t / k);
                    widenHalfRow(dt, p.b + (t % k) * p.ldb, wideB + t * n, n);
                  }
                });
  return wideB;
}

/// Every product's 16-bit A (m x k, as `first`'s) widened whole, on the
/// context's threads, into a buffer of the calling thread: product i's A as
/// [m][k] (or [k][m] when transposed).
template <typename ProblemAt>
float *widenWholeA(const KernelContext &ctx, int64_t count, const ProblemAt &problemAt,
                   const GemmProblem<uint16_t> &first, DType dt) {
  const int64_t m = first.m, k = first.k;
  thread_local std::vector<float> whole;
  const size_t floats = size_t(count * m * k);
  if (whole.size() < floats)
    whole.resize(floats);
  float *wideA = whole.data();
  // Product i's A as [m][k] (or [k][m] when transposed).
  const int64_t lines = first.transA ? k : m;
  const int64_t len = first.transA ? m : k;
  parallelRange(ctx, count * lines,
                std::max<int64_t>(1, 16384 / std::max<int64_t>(len, 1)),
                [&](int64_t b, int64_t e) {
                  for (int64_t t = b; t < e; ++t) {
                    const GemmProblem<uint16_t> p = problemAt(t / lines);
                    widenHalfRow(dt, p.a + (t % lines) * p.lda, wideA + t * len, len);
                  }
                });
  return wideA;
}

/// How runPackedProducts cuts its `count` products of one shape (m x n x k)
/// into tasks, and the operands every task shares.
struct PackedRun {
  int64_t m = 0, n = 0, k = 0;
  int64_t panels = 0;
  /// B packed whole (a constant of the program), or null.
  const float *packed = nullptr;
  /// B read as it lies (f32), or from wideB (16-bit).
  bool unpacked = false;
  /// 16-bit operands widened whole (every product's), or null.
  const float *wideB = nullptr, *wideA = nullptr;
  int64_t taskRows = 0, rowChunks = 0, perProduct = 0;
  DType dt = DType::F32;
};

/// One task's tile of C: rows [i0, i1) and columns [j0, j0 + cols) (panel
/// `panel`, row chunk `chunk`) of product `product`.
struct PackedTile {
  int64_t product, panel, chunk;
  int64_t i0, i1, j0, cols;
};

/// A task's tile of a 16-bit product `p`, over B's panel `panelOf` (or the
/// widened B): its rows of A widened into `aRows` (unless already there,
/// `widenedTask`, or A is widened whole), the tile computed in f32 into
/// `cTile` from C's widened initial value, then rounded into C.
void runHalfTile(const PackedRun &run, const GemmProblem<uint16_t> &p,
                 const PackedTile &t, const float *panelOf, float *aRows,
                 int64_t &widenedTask, float *cTile) {
  const int64_t k = run.k, m = run.m, n = run.n;
  const DType dt = run.dt;
  const int64_t rows = t.i1 - t.i0;
  // The task's rows of A, widened: [rows][k], or [k][rows] when
  // A is transposed (or those of the whole widened A).
  const float *aTask = aRows;
  int64_t aRowStride = p.transA ? 1 : k, aColStride = p.transA ? rows : 1;
  if (run.wideA) {
    const float *base = run.wideA + t.product * m * k;
    aTask = p.transA ? base + t.i0 : base + t.i0 * k;
    aColStride = p.transA ? m : 1;
  } else if (t.product * run.rowChunks + t.chunk != widenedTask) {
    if (p.transA)
      for (int64_t q = 0; q < k; ++q)
        widenHalfRow(dt, p.a + q * p.lda + t.i0, aRows + q * rows, rows);
    else
      for (int64_t i = 0; i < rows; ++i)
        widenHalfRow(dt, p.a + (t.i0 + i) * p.lda, aRows + i * k, k);
    widenedTask = t.product * run.rowChunks + t.chunk;
  }
  const float beta = widenCTile(dt, p, t.i0, rows, t.j0, t.cols, cTile);
  if (run.wideB)
    unpackedGemmBlock(0, rows, t.cols, k, float(p.alpha), aTask, aRowStride,
                      aColStride, run.wideB + t.product * k * n + t.j0, n, beta, cTile,
                      kPanelCols);
  else
    packedGemmBlock(0, rows, 0, 1, t.cols, k, float(p.alpha), aTask,
                    aRowStride, aColStride, panelOf, beta, cTile,
                    kPanelCols);
  for (int64_t i = 0; i < rows; ++i)
    narrowHalfRow(dt, cTile + i * kPanelCols, p.c + (t.i0 + i) * p.ldc + t.j0,
                  t.cols);
}

/// A task's tile of an f32 product `p`, into C (from C's initial value, if
/// any): over B packed whole, B as it lies, or B's panel `panelOf`.
void runF32Tile(const PackedRun &run, const GemmProblem<float> &p, const PackedTile &t,
                const float *panelOf) {
  const int64_t k = run.k, n = run.n;
  const int64_t i0 = t.i0, i1 = t.i1, j0 = t.j0, cols = t.cols;
  const float *b = p.b;
  const int64_t aRowStride = p.transA ? 1 : p.lda;
  const int64_t aColStride = p.transA ? p.lda : 1;
  const float beta = p.cInit ? float(p.beta) : 0.0f;
  p.initTile(i0, i1, j0, j0 + cols);
  if (run.packed) {
    packedGemmBlock(i0, i1, t.panel, t.panel + 1, n, k, float(p.alpha),
                    p.a, aRowStride, aColStride, run.packed, beta, p.c,
                    p.ldc);
    return;
  }
  if (run.unpacked) {
    unpackedGemmBlock(i0, i1, cols, k, float(p.alpha), p.a, aRowStride,
                      aColStride, b + j0, p.ldb, beta, p.c + j0, p.ldc);
    return;
  }
  packedGemmBlock(i0, i1, 0, 1, cols, k, float(p.alpha), p.a,
                  aRowStride, aColStride, panelOf, beta, p.c + j0,
                  p.ldc);
}

/// Runs tasks [begin, end) of `run` on this thread. Task t: product t /
/// perProduct; in it, panel r / rowChunks, rows chunk r % rowChunks
/// (consecutive tasks share a panel while it is in cache). Unless B is
/// packed whole or read unpacked, a task packs its panel of B into a buffer
/// of this thread, unless the previous task left it there.
template <typename S, typename ProblemAt>
void runPackedTasks(const PackedRun &run, const ProblemAt &problemAt, int64_t begin,
                    int64_t end) {
  constexpr bool kHalf = std::is_same_v<S, uint16_t>;
  const int64_t m = run.m, n = run.n, k = run.k;
  const int64_t taskRows = run.taskRows;
  float *panelData = run.packed || run.unpacked ? nullptr : panelScratch(k);
  int64_t packedTask = -1; // product * panels + panel in panelData
  int64_t widenedTask = -1; // product * rowChunks + chunk in aRows
  float *aRows =
      kHalf && !run.wideA ? halfScratch(0, size_t(taskRows * k)) : nullptr;
  float *cTile = kHalf ? halfScratch(1, size_t(taskRows * kPanelCols)) : nullptr;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t product = t / run.perProduct, r = t % run.perProduct;
    const int64_t panel = r / run.rowChunks, chunk = r % run.rowChunks;
    const GemmProblem<S> p = problemAt(product);
    const int64_t i0 = chunk * taskRows;
    const int64_t i1 = std::min(m, i0 + taskRows);
    const int64_t j0 = panel * kPanelCols;
    const int64_t cols = std::min(n, j0 + kPanelCols) - j0;
    const S *b = p.b;
    if (!run.packed && !run.unpacked && product * run.panels + panel != packedTask) {
      // Columns [j0, j0 + cols) of op(B) as a K x cols matrix.
      packAnyB(run.dt, b + (p.transB ? j0 * p.ldb : j0), p.ldb, p.transB, k, cols,
               0, 1, panelData);
      packedTask = product * run.panels + panel;
    }
    const float *panelOf = run.packed ? run.packed + panel * k * kPanelCols : panelData;
    const PackedTile tile{product, panel, chunk, i0, i1, j0, cols};
    if constexpr (kHalf)
      runHalfTile(run, p, tile, panelOf, aRows, widenedTask, cTile);
    else
      runF32Tile(run, p, tile, panelOf);
  }
}

/// Runs `count` products of one shape (`problemAt(i)` gives the i-th) over
/// B's packed panels (see PackedGemm.h), on the context's threads: f32
/// operands (S = float), or f16 ones (S = uint16_t, their bits; `dt` says
/// which; bf16 products take runBf16PairProducts). When `constantB` is a constant of the program (count 1), B
/// is packed once and kept; any other B is packed a panel at a time by the
/// task that uses it, into a buffer of its thread, just before its rows run:
/// the same packed bytes as the whole packed form's panel, so the same bits,
/// with no B-sized copy and the panel still in cache. Every f32 and f16
/// product takes this path, so a weight gathered by ZeRO-3 rounds as the
/// same weight held whole, and a micro-batch's rows as the whole batch's.
/// Each element of C is computed the same way in any task, so the work split
/// (a function of the shapes) never changes its bits.
///
/// f16 operands compute in f32: B is widened as it is packed, each task
/// widens its rows of A into a buffer of its thread, and computes its tile of
/// C in f32 (from C's widened initial value, if any) before rounding it into
/// C once. So an element of an f16 product is the f32 product of the
/// widened operands, rounded to 16 bits (to nearest even): the bits of the
/// f32 kernel run on widened copies, without the copies.
template <typename S, typename ProblemAt>
void runPackedProducts(const KernelContext &ctx, int64_t count,
                       const ProblemAt &problemAt, const TensorRef *constantB,
                       DType dt = DType::F32) {
  constexpr bool kHalf = std::is_same_v<S, uint16_t>;
  if (count <= 0)
    return;
  const GemmProblem<S> first = problemAt(0);
  const int64_t m = first.m, n = first.n, k = first.k;
  if (m == 0 || n == 0)
    return;
  PackedRun run;
  run.m = m;
  run.n = n;
  run.k = k;
  run.dt = dt;
  run.panels = packedPanels(n);
  run.packed = constantPackedB(ctx, count, first, constantB, dt);
  // A small f32 B that is not transposed (an attention product's K^T or V)
  // is read as it lies: it stays in cache, and packing would cost as much as
  // the product. The same operations, so the same bits.
  // A 16-bit one of the same size is widened whole first (every product's,
  // as A below), then read the same way.
  const bool smallB = !run.packed && !first.transB &&
                      double(k) * double(n) * sizeof(float) <= kUnpackedBMaxBytes &&
                      unpackedBSupported(n);
  run.unpacked =
      smallB && (!kHalf || double(count) * double(k) * double(n) * 4.0 <= kHalfWholeABytes);
  if constexpr (kHalf) {
    if (run.unpacked)
      run.wideB = widenWholeB(ctx, count, problemAt, k, n, dt);
    // 16-bit A: widened whole once (every product's, on the context's
    // threads, into a buffer of the calling thread) when that is at most
    // kHalfWholeABytes; else each task widens its own rows (a long K).
    if (double(count) * double(m) * double(k) * 4.0 <= kHalfWholeABytes)
      run.wideA = widenWholeA(ctx, count, problemAt, first, dt);
  }
  // An f16 A too large to widen whole is widened a task's rows at a time.
  run.taskRows = kHalf && !run.wideA ? halfTaskRows(k) : kPackedTaskRows;
  run.rowChunks = (m + run.taskRows - 1) / run.taskRows;
  run.perProduct = run.panels * run.rowChunks;
  const double taskMacs =
      double(std::min(m, run.taskRows)) * double(kPanelCols) * double(k);
  parallelRange(
      ctx, count * run.perProduct,
      std::max<int64_t>(1, int64_t(kMinParallelGemm / std::max(taskMacs, 1.0))),
      [&](int64_t begin, int64_t end) {
        runPackedTasks<S>(run, problemAt, begin, end);
      });
}

/// A thread's buffer `slot` (0: a pair panel of B, 1: a task's pairs of a
/// transposed A) of at least `words` 32-bit words, 64-byte aligned.
uint32_t *pairScratch(int slot, size_t words) {
  thread_local std::vector<uint32_t> buffers[2];
  return alignedScratch(buffers[slot], words);
}

/// runPackedProducts for bf16 operands: B packed into pair panels
/// (PackedGemm.h's bf16 x bf16 products, two products per instruction where
/// the CPU has AVX512_BF16), once for a constant B, else a panel at a time by
/// the task that uses it. A is read as it lies, a pair of elements at a time,
/// or, transposed, a task's rows packed into pairs first. Each task computes
/// its tile of C in f32 (from C's widened initial value, if any) and rounds
/// it into C once. An element's bits depend only on its row of A, its column
/// of B, K and alpha/beta: the same at any thread count, task split or ISA.
template <typename ProblemAt>
void runBf16PairProducts(const KernelContext &ctx, int64_t count, const ProblemAt &problemAt,
                         const TensorRef *constantB) {
  const GemmProblem<uint16_t> first = problemAt(0);
  const int64_t m = first.m, n = first.n, k = first.k;
  if (m == 0 || n == 0)
    return;
  const int64_t panels = packedPanels(n);
  const int64_t panelWords = pairPanelRows(k) * kPanelCols;
  const uint32_t *packed = nullptr;
  if (count == 1 && constantB && ctx.constants && ctx.constants->isConstant(*constantB)) {
    const std::string layout = "gemm-b" + std::to_string(kPanelCols) +
                               "-bf16-pairs k=" + std::to_string(k) + " n=" + std::to_string(n) +
                               " ldb=" + std::to_string(first.ldb) +
                               " t=" + std::to_string(int(first.transB)) + " " +
                               cpuIsaName(cpuIsa());
    packed = static_cast<const uint32_t *>(ctx.constants->prepared(
        *constantB, layout, pairPackedWords(k, n) * sizeof(uint32_t), [&](void *dst) {
          parallelRange(ctx, panels, 1, [&](int64_t p0, int64_t p1) {
            packBf16PairsB(first.b, first.ldb, first.transB, k, n, p0, p1,
                           static_cast<uint32_t *>(dst));
          });
        }));
  }
  const int64_t taskRows = kPackedTaskRows;
  const int64_t rowChunks = (m + taskRows - 1) / taskRows;
  const int64_t perProduct = panels * rowChunks;
  const double taskMacs = double(std::min(m, taskRows)) * double(kPanelCols) * double(k);
  // Task t: product t / perProduct; in it, panel r / rowChunks, rows chunk
  // r % rowChunks (consecutive tasks share a panel while it is in cache).
  parallelRange(
      ctx, count * perProduct,
      std::max<int64_t>(1, int64_t(kMinParallelGemm / std::max(taskMacs, 1.0))),
      [&](int64_t begin, int64_t end) {
        uint32_t *panelData = packed ? nullptr : pairScratch(0, size_t(panelWords));
        uint32_t *aPairs =
            first.transA ? pairScratch(1, size_t(pairRows(k) * taskRows)) : nullptr;
        float *cTile = halfScratch(1, size_t(taskRows * kPanelCols));
        int64_t packedTask = -1, pairedTask = -1;
        for (int64_t t = begin; t < end; ++t) {
          const int64_t product = t / perProduct, r = t % perProduct;
          const int64_t panel = r / rowChunks, chunk = r % rowChunks;
          const GemmProblem<uint16_t> p = problemAt(product);
          const int64_t i0 = chunk * taskRows, i1 = std::min(m, i0 + taskRows);
          const int64_t rows = i1 - i0;
          const int64_t j0 = panel * kPanelCols;
          const int64_t cols = std::min(n, j0 + kPanelCols) - j0;
          if (!packed && product * panels + panel != packedTask) {
            packBf16PairsB(p.b + (p.transB ? j0 * p.ldb : j0), p.ldb, p.transB, k, cols, 0, 1,
                           panelData);
            packedTask = product * panels + panel;
          }
          const uint32_t *panelOf = packed ? packed + panel * panelWords : panelData;
          Bf16PairA a{p.a + i0 * p.lda, p.lda, 2, k / 2, k % 2 == 1};
          if (p.transA) {
            if (product * rowChunks + chunk != pairedTask) {
              packBf16PairsTransA(p.a, p.lda, k, i0, i1, aPairs);
              pairedTask = product * rowChunks + chunk;
            }
            a = Bf16PairA{reinterpret_cast<const uint16_t *>(aPairs), 2, 2 * rows, pairRows(k),
                          false};
          }
          const float beta = widenCTile(DType::BF16, p, i0, rows, j0, cols, cTile);
          bf16PairGemmBlock(0, rows, cols, float(p.alpha), a, panelOf, beta, cTile,
                            kPanelCols);
          for (int64_t i = 0; i < rows; ++i)
            narrowHalfRow(DType::BF16, cTile + i * kPanelCols, p.c + (i0 + i) * p.ldc + j0,
                          cols);
        }
      });
}

/// Runs `count` products of one shape: f32 over packed panels
/// (runPackedProducts), other types through runProducts. A K of 0 leaves
/// beta * C (gemm<T>).
template <typename T, typename ProblemAt>
void runAnyProducts(const KernelContext &ctx, int64_t count,
                    const ProblemAt &problemAt, const TensorRef *constantB) {
  if constexpr (std::is_same_v<T, float>) {
    if (count > 0 && problemAt(0).k > 0) {
      runPackedProducts<float>(ctx, count, problemAt, constantB);
      return;
    }
  }
  runProducts<T>(ctx, count, problemAt);
}


/// Storage of an element type in a product: half types as their bits.
template <typename T> struct ProductStorage { using type = T; };
template <> struct ProductStorage<Float16> { using type = uint16_t; };
template <> struct ProductStorage<BFloat16> { using type = uint16_t; };

/// runAnyProducts for any of ProductTypes (`dt` its dtype), the problems'
/// operands of type ProductStorage<T>.
template <typename T, typename ProblemAt>
void runTypedProducts(const KernelContext &ctx, DType dt, int64_t count,
                      const ProblemAt &problemAt, const TensorRef *constantB) {
  using S = typename ProductStorage<T>::type;
  if constexpr (std::is_same_v<S, uint16_t>) {
    if (count <= 0)
      return;
    const GemmProblem<S> first = problemAt(0);
    if (first.k > 0) {
      if (dt == DType::BF16)
        runBf16PairProducts(ctx, count, problemAt, constantB);
      else
        runPackedProducts<S>(ctx, count, problemAt, constantB, dt);
      return;
    }
    // K of 0: Y = beta * C (0 without C), each element rounded once.
    for (int64_t i = 0; i < count; ++i) {
      const GemmProblem<S> p = problemAt(i);
      for (int64_t r = 0; r < p.m; ++r)
        for (int64_t c = 0; c < p.n; ++c) {
          float v = 0.0f;
          if (p.cInit) {
            widenHalfRow(dt, p.cInit + r * p.cInitRowStride + c * p.cInitColStride,
                         &v, 1);
            v *= float(p.beta);
          }
          narrowHalfRow(dt, &v, p.c + r * p.ldc + c, 1);
        }
    }
  } else {
    runAnyProducts<T>(ctx, count, problemAt, constantB);
  }
}

Status matMulKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &) {
  MatMulLayout l;
  ZRT_RETURN_IF_ERROR(prepareMatMul(in, out, l, /*halfTypes=*/true));
  const TensorRef &a = in[0], &b = in[1], &y = out[0];
  const int64_t m = l.m, n = l.n, k = l.k;
  const BroadcastPlan &plan = l.plan;
  const std::vector<int64_t> &aBatch = l.aBatch, &bBatch = l.bBatch;
  if (!dispatchType(ProductTypes{}, a.dtype, [&](auto tag) {
        using S = typename ProductStorage<typename decltype(tag)::type>::type;
        const S *pa = a.as<S>(), *pb = b.as<S>();
        S *py = y.as<S>();
        if (plan.numel == 0 || m == 0 || n == 0)
          return;
        const int64_t bBatchNumel = productOf(bBatch, 0, bBatch.size());
        const int64_t aBatchNumel = productOf(aBatch, 0, aBatch.size());
        if (bBatchNumel == 1 && aBatchNumel == plan.numel) {
          // B is one matrix: fold A's batch into M, one product.
          const GemmProblem<S> p{
              false, false, plan.numel * m, n, k, 1.0, 0.0, pa, k, pb, n,
              py,    n};
          runTypedProducts<typename decltype(tag)::type>(
              ctx, a.dtype, 1, [&](int64_t) { return p; }, &b);
          return;
        }
        // Offsets (in matrices) of A and B for each batch index.
        std::vector<int64_t> aOffset(static_cast<size_t>(plan.numel)),
            bOffset(static_cast<size_t>(plan.numel));
        forEachBroadcastRow(plan, 0, plan.numel,
                            [&](int64_t o, const int64_t *off, int64_t len) {
                              for (int64_t i = 0; i < len; ++i) {
                                aOffset[size_t(o + i)] =
                                    off[0] + i * plan.innerStride(0);
                                bOffset[size_t(o + i)] =
                                    off[1] + i * plan.innerStride(1);
                              }
                            });
        runTypedProducts<typename decltype(tag)::type>(
            ctx, a.dtype, plan.numel,
            [&](int64_t i) {
              return GemmProblem<S>{false, false,
                                    m,     n,
                                    k,     1.0,
                                    0.0,   pa + aOffset[size_t(i)] * m * k,
                                    k,     pb + bOffset[size_t(i)] * k * n,
                                    n,     py + i * m * n,
                                    n};
            },
            nullptr);
      }))
    return Status::error("unreachable: dtype checked by prepareMatMul");
  return Status::ok();
}

/// Gemm: Y = alpha * op(A) * op(B) + beta * C, C unidirectionally broadcast.
Status gemmKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out, const AttrMap &attrs) {
  GemmLayout l;
  ZRT_RETURN_IF_ERROR(prepareGemm(in, out, attrs, l, /*halfTypes=*/true));
  const TensorRef &a = in[0], &b = in[1], &y = out[0];
  // C broadcast to [M, N] as row and column strides (0 along a broadcast
  // dim; prepareGemm checked the broadcast); each tile copies its part into
  // Y before its product.
  int64_t cRowStride = 0, cColStride = 0;
  if (l.hasC) {
    const TensorRef &c = in[2];
    const int64_t cRows = c.rank() >= 2 ? c.shape[size_t(c.rank() - 2)] : 1;
    const int64_t cCols = c.rank() >= 1 ? c.shape.back() : 1;
    cRowStride = cRows == 1 ? 0 : cCols;
    cColStride = cCols == 1 ? 0 : 1;
  }
  if (!dispatchType(ProductTypes{}, a.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using S = typename ProductStorage<T>::type;
        GemmProblem<S> p{l.transA,   l.transB,  l.m,        l.n,
                         l.k,        l.alpha,   l.beta,     a.as<S>(),
                         a.shape[1], b.as<S>(), b.shape[1], y.as<S>(),
                         l.n};
        if (l.hasC) {
          p.cInit = in[2].as<S>();
          p.cInitRowStride = cRowStride;
          p.cInitColStride = cColStride;
        }
        runTypedProducts<T>(ctx, a.dtype, 1, [&](int64_t) { return p; }, &b);
      }))
    return Status::error("unreachable: dtype checked by prepareGemm");
  return Status::ok();
}

} // namespace

void useSingleThreadedBlas() {
  // Checked per call: someone else in the process may have raised OpenBLAS's
  // thread count since.
#ifdef OPENBLAS_VERSION
  if (openblas_get_num_threads() != 1)
    openblas_set_num_threads(1);
#endif
}

template <typename T>
void gemmOnThisThread(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                      const T *a, int64_t lda, const T *b, int64_t ldb, T *c,
                      int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    if (m > 0 && n > 0 && k > 0) {
      // The packed kernel of every other f32 product, one panel at a time.
      float *panel = panelScratch(k);
      for (int64_t j0 = 0; j0 < n; j0 += kPanelCols) {
        const int64_t cols = std::min(n - j0, kPanelCols);
        packB(b + (transB ? j0 * ldb : j0), ldb, transB, k, cols, 0, 1, panel);
        packedGemmBlock(0, m, 0, 1, cols, k, 1.0f, a, transA ? 1 : lda,
                        transA ? lda : 1, panel, 0.0f, c + j0, ldc);
      }
      return;
    }
  }
  gemm<T>(transA, transB, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}
template void gemmOnThisThread<float>(bool, bool, int64_t, int64_t, int64_t,
                                      const float *, int64_t, const float *,
                                      int64_t, float *, int64_t);
template void gemmOnThisThread<double>(bool, bool, int64_t, int64_t, int64_t,
                                       const double *, int64_t, const double *,
                                       int64_t, double *, int64_t);

void registerMatMulKernels(KernelTable &table) {
  table.add("MatMul", matMulKernel);
  table.add("Gemm", gemmKernel);
}

} // namespace cpu
} // namespace zrt
