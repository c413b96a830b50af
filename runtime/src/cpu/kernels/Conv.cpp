//===- Conv.cpp - Conv and ConvTranspose ----------------------------------===//
//
// N-d convolution over [N, C, D1..Dk] as im2col + GEMM: per image and group,
// the output positions are cut into column tiles (a function of the shapes
// only), each tile's patches are unfolded into a buffer and multiplied by the
// group's weights with one single-threaded OpenBLAS call, so every output
// element comes from one fixed product whatever the thread count. A 1x1
// convolution without stride or padding reads X directly. ConvTranspose is
// the adjoint: one product W^T X per block of output channels, then col2im
// adds each column into the output in a fixed order.
// The checks (prepareConv, KernelLayouts.h) are shared with the CUDA
// kernels (cuda/SpatialKernels.cu), whose im2col and col2im are
// math/WindowMath.h's per-element versions of the loops here.
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/CpuKernels.h"
#include "kernels/KernelLayouts.h"

namespace zrt {
namespace cpu {
using namespace kernels;
namespace {

/// Elements of unfolded patches worth one tile (1 MiB in f32: wide enough
/// that packing the weights is a small part of each product).
constexpr int64_t kTileElements = 1 << 18;
/// Fewest output positions per tile.
constexpr int64_t kMinTileColumns = 128;

/// A run of a tile's columns along the last output dim: the outer output
/// coordinates are fixed, the last one goes from `last` for `length` columns.
struct ColumnRun {
  int64_t column, last, length;
  std::vector<int64_t> outer; ///< input coordinate of tap 0, dims [0, k-1)
};

/// Unfolds the patches of output positions [o0, o0 + cols) of one group's
/// input channels `x` ([channels, D1..Dk]) into `col` ([channels * K, cols]),
/// zero where a tap falls in the padding. Columns are handled in runs along
/// the last dim, whose in-bounds range is computed once per run (a copy when
/// the last stride is 1).
template <typename T>
ZRT_HOT_LOOP void im2col(const ConvGeometry &g, const T *x, int64_t channels,
                         int64_t o0, int64_t cols, T *col) {
  const size_t k = g.in.size();
  const int64_t outLast = g.out[k - 1], inLast = g.in[k - 1];
  const int64_t stride = g.strides[k - 1];
  std::vector<ColumnRun> runs;
  for (int64_t j = 0; j < cols;) {
    ColumnRun run;
    int64_t rest = (o0 + j) / outLast;
    run.column = j;
    run.last = (o0 + j) % outLast;
    run.length = std::min(cols - j, outLast - run.last);
    run.outer.resize(k - 1);
    for (size_t d = k - 1; d-- > 0;) {
      run.outer[d] = (rest % g.out[d]) * g.strides[d] - g.padBegin[d];
      rest /= g.out[d];
    }
    j += run.length;
    runs.push_back(std::move(run));
  }
  std::vector<int64_t> tap(k, 0);
  for (int64_t c = 0; c < channels; ++c) {
    const T *xc = x + c * g.inSize;
    for (int64_t t = 0; t < g.kernelSize; ++t) {
      int64_t rest = t;
      for (size_t d = k; d-- > 0;) {
        tap[d] = (rest % g.kernel[d]) * g.dilations[d];
        rest /= g.kernel[d];
      }
      T *row = col + (c * g.kernelSize + t) * cols;
      for (const ColumnRun &run : runs) {
        T *dst = row + run.column;
        int64_t offset = 0;
        bool inside = true;
        for (size_t d = 0; d + 1 < k; ++d) {
          const int64_t p = run.outer[d] + tap[d];
          inside &= p >= 0 && p < g.in[d];
          offset = offset * g.in[d] + p;
        }
        if (!inside) {
          std::fill(dst, dst + run.length, T(0));
          continue;
        }
        // p(i) = first + i * stride must lie in [0, inLast).
        const int64_t first =
            run.last * stride - g.padBegin[k - 1] + tap[k - 1];
        int64_t lo = first >= 0 ? 0 : (-first + stride - 1) / stride;
        int64_t hi =
            first >= inLast ? 0 : (inLast - first + stride - 1) / stride;
        lo = std::min(lo, run.length);
        hi = std::max(lo, std::min(hi, run.length));
        const T *src = xc + offset * inLast + first;
        std::fill(dst, dst + lo, T(0));
        if (stride == 1)
          std::copy(src + lo, src + hi, dst + lo);
        else
          for (int64_t i = lo; i < hi; ++i)
            dst[i] = src[i * stride];
        std::fill(dst + hi, dst + run.length, T(0));
      }
    }
  }
}

Status convKernel(const KernelContext &ctx, const std::vector<TensorRef> &ins,
                  const std::vector<TensorRef> &outs, const AttrMap &attrs) {
  ConvGeometry g;
  ZRT_RETURN_IF_ERROR(prepareConv("Conv", ins, outs, attrs, false, g));
  const TensorRef &x = ins[0], &w = ins[1], &y = outs[0];
  const bool hasBias = hasOperand(ins, 2);
  if (!dispatchType(FloatTypes{}, x.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const int64_t cg = g.inChannels / g.group, mg = g.outChannels / g.group;
        const int64_t rows = cg * g.kernelSize;
        if (g.batch == 0 || g.outChannels == 0 || g.outSize == 0)
          return;
        if (rows == 0) {
          std::fill(y.as<T>(), y.as<T>() + y.numel(), T(0));
        }
        bool pointwise = g.kernelSize == 1;
        for (size_t d = 0; d < g.in.size(); ++d)
          pointwise &=
              g.strides[d] == 1 && g.padBegin[d] == 0 && g.out[d] == g.in[d];
        // Column tiles: about kTileElements of patches each, and enough tiles
        // for kParallelTasks tasks over all images and groups.
        const int64_t images = g.batch * g.group;
        int64_t cols = std::max(kMinTileColumns,
                                kTileElements / std::max<int64_t>(rows, 1));
        const int64_t wantTiles = (kParallelTasks + images - 1) / images;
        cols =
            std::min(cols, std::max(kMinTileColumns,
                                    (g.outSize + wantTiles - 1) / wantTiles));
        cols = std::min(cols, g.outSize);
        const int64_t tiles = (g.outSize + cols - 1) / cols;
        const T *px = x.as<T>(), *pw = w.as<T>();
        const T *pb = hasBias ? ins[2].as<T>() : nullptr;
        T *py = y.as<T>();
        useSingleThreadedBlas();
        parallelRange(ctx, images * tiles, 1, [&](int64_t begin, int64_t end) {
          std::vector<T> col(pointwise || rows == 0 ? 0 : size_t(rows * cols));
          for (int64_t task = begin; task < end; ++task) {
            const int64_t image = task / tiles, tile = task % tiles;
            const int64_t n = image / g.group, grp = image % g.group;
            const int64_t o0 = tile * cols,
                          width = std::min(cols, g.outSize - o0);
            const T *xg = px + (n * g.inChannels + grp * cg) * g.inSize;
            T *yg = py + (n * g.outChannels + grp * mg) * g.outSize + o0;
            if (rows > 0) {
              const T *patches = xg + o0;
              int64_t ldb = g.inSize;
              if (!pointwise) {
                im2col(g, xg, cg, o0, width, col.data());
                patches = col.data();
                ldb = width;
              }
              gemmOnThisThread<T>(false, false, mg, width, rows,
                                  pw + grp * mg * rows, rows, patches, ldb, yg,
                                  g.outSize);
            }
            if (pb)
              for (int64_t m = 0; m < mg; ++m) {
                const T bias = pb[grp * mg + m];
                T *row = yg + m * g.outSize;
                for (int64_t j = 0; j < width; ++j)
                  row[j] += bias;
              }
          }
        });
      }))
    return dtypeError("Conv", "input X", x.dtype, FloatTypes{});
  return Status::ok();
}

Status convTransposeKernel(const KernelContext &ctx,
                           const std::vector<TensorRef> &ins,
                           const std::vector<TensorRef> &outs,
                           const AttrMap &attrs) {
  ConvGeometry g;
  ZRT_RETURN_IF_ERROR(prepareConv("ConvTranspose", ins, outs, attrs, true, g));
  const TensorRef &x = ins[0], &w = ins[1], &y = outs[0];
  const bool hasBias = hasOperand(ins, 2);
  if (!dispatchType(FloatTypes{}, x.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const int64_t cg = g.inChannels / g.group, mg = g.outChannels / g.group;
        if (g.batch == 0 || g.outChannels == 0)
          return;
        // Blocks of output channels: enough for kParallelTasks tasks.
        const int64_t images = g.batch * g.group;
        const int64_t wantBlocks = (kParallelTasks + images - 1) / images;
        const int64_t block =
            std::max<int64_t>(1, (mg + wantBlocks - 1) / wantBlocks);
        const int64_t blocks = (mg + block - 1) / block;
        const size_t k = g.in.size();
        const T *px = x.as<T>(), *pw = w.as<T>();
        const T *pb = hasBias ? ins[2].as<T>() : nullptr;
        T *py = y.as<T>();
        useSingleThreadedBlas();
        parallelRange(ctx, images * blocks, 1, [&](int64_t begin, int64_t end) {
          std::vector<T> col;
          std::vector<int64_t> tap(k), pos(k);
          for (int64_t task = begin; task < end; ++task) {
            const int64_t image = task / blocks, m0 = (task % blocks) * block;
            const int64_t n = image / g.group, grp = image % g.group;
            const int64_t count = std::min(block, mg - m0);
            const int64_t rows = count * g.kernelSize;
            T *yb = py + (n * g.outChannels + grp * mg + m0) * g.outSize;
            for (int64_t m = 0; m < count; ++m)
              std::fill(yb + m * g.outSize, yb + (m + 1) * g.outSize,
                        pb ? pb[grp * mg + m0 + m] : T(0));
            if (cg == 0 || g.inSize == 0 || rows == 0)
              continue;
            // col [count * K, inSize] = W_g[:, m0.., :]^T X_g
            col.resize(size_t(rows * g.inSize));
            const T *wg = pw + grp * cg * mg * g.kernelSize + m0 * g.kernelSize;
            gemmOnThisThread<T>(true, false, rows, g.inSize, cg, wg,
                                mg * g.kernelSize,
                                px + (n * g.inChannels + grp * cg) * g.inSize,
                                g.inSize, col.data(), g.inSize);
            // col2im: taps in order, input positions in order.
            for (int64_t m = 0; m < count; ++m) {
              T *ym = yb + m * g.outSize;
              for (int64_t t = 0; t < g.kernelSize; ++t) {
                int64_t rest = t;
                for (size_t d = k; d-- > 0;) {
                  tap[d] =
                      (rest % g.kernel[d]) * g.dilations[d] - g.padBegin[d];
                  rest /= g.kernel[d];
                }
                const T *row = col.data() + (m * g.kernelSize + t) * g.inSize;
                for (int64_t i = 0; i < g.inSize; ++i) {
                  int64_t r = i, offset = 0, stride = 1;
                  bool inside = true;
                  for (size_t d = k; d-- > 0;) {
                    const int64_t p = (r % g.in[d]) * g.strides[d] + tap[d];
                    r /= g.in[d];
                    inside &= p >= 0 && p < g.out[d];
                    offset += p * stride;
                    stride *= g.out[d];
                  }
                  if (inside)
                    ym[offset] += row[i];
                }
              }
            }
          }
        });
      }))
    return dtypeError("ConvTranspose", "input X", x.dtype, FloatTypes{});
  return Status::ok();
}

} // namespace


void registerConvKernels(KernelTable &table) {
  table.add("Conv", convKernel);
  table.add("ConvTranspose", convTransposeKernel);
}

} // namespace cpu
} // namespace zrt
