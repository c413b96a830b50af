//===- Normalization.cpp - Softmax and layer/RMS normalisation ------------===//
//
// Softmax and LogSoftmax along one axis (opset-13 semantics), with a fast
// path for the innermost axis (contiguous rows) and a column-blocked path for
// middle axes; LayerNormalization and RMSNormalization over the trailing dims
// [axis, rank), one row per leading index, rows in parallel;
// inference-mode BatchNormalization, one affine map per channel.
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/CpuKernels.h"
#include "CpuLoops.h"
#include "kernels/KernelLayouts.h"
#include "kernels/NormalizationKernels.h"
#include "math/SelectionMath.h"

#include <memory>

namespace zrt {
namespace cpu {
using namespace kernels;
namespace {

//===----------------------------------------------------------------------===//
// Softmax, LogSoftmax
//===----------------------------------------------------------------------===//

/// One contiguous row of length n (in may equal out).
template <typename T, bool Log>
ZRT_HOT_LOOP void softmaxRow(const T *in, T *out, int64_t n) {
  if (n <= 0)
    return;
  const T max = maxOf(in, n);
  if (Log) {
    const T sum =
        sumMapped(in, n, [max](T x) { return math::softmaxExp(x, max); });
    const T shift = math::logSoftmaxShift(max, sum);
    mapElements(in, out, n,
                [shift](T x) { return math::logSoftmaxValue(x, shift); });
  } else {
    mapElements(in, out, n, [max](T x) { return math::softmaxExp(x, max); });
    const T scale =
        math::softmaxScale(sumMapped(out, n, [](T x) { return x; }));
    mapElements(out, out, n,
                [scale](T x) { return math::softmaxValue(x, scale); });
  }
}

/// Columns [ib, ie) of one [axis, inner] slab, softmax along the axis.
template <typename T, bool Log>
ZRT_HOT_LOOP void softmaxColumns(const T *in, T *out, int64_t axisLen,
                                 int64_t inner, int64_t ib, int64_t ie) {
  const int64_t width = ie - ib;
  std::vector<T> max(in + ib, in + ie);
  std::vector<T> sum(static_cast<size_t>(width), T(0));
  for (int64_t a = 1; a < axisLen; ++a) {
    const T *row = in + a * inner + ib;
    for (int64_t i = 0; i < width; ++i)
      max[size_t(i)] = row[i] > max[size_t(i)] ? row[i] : max[size_t(i)];
  }
  for (int64_t a = 0; a < axisLen; ++a) {
    const T *row = in + a * inner + ib;
    T *outRow = out + a * inner + ib;
    for (int64_t i = 0; i < width; ++i) {
      const T e = math::softmaxExp(row[i], max[size_t(i)]);
      sum[size_t(i)] += e;
      if (!Log)
        outRow[i] = e;
    }
  }
  for (int64_t i = 0; i < width; ++i)
    sum[size_t(i)] = Log ? math::logSoftmaxShift(max[size_t(i)], sum[size_t(i)])
                         : math::softmaxScale(sum[size_t(i)]);
  for (int64_t a = 0; a < axisLen; ++a) {
    const T *row = in + a * inner + ib;
    T *outRow = out + a * inner + ib;
    for (int64_t i = 0; i < width; ++i)
      outRow[i] = Log ? math::logSoftmaxValue(row[i], sum[size_t(i)])
                      : math::softmaxValue(outRow[i], sum[size_t(i)]);
  }
}

//===----------------------------------------------------------------------===//
// LayerNormalization, RMSNormalization
//===----------------------------------------------------------------------===//

/// One row of LayerNormalization (RMS = false) or RMSNormalization: y =
/// (x - mean) * invStd * w (+ b when b is not null); y may be x.
template <typename T, bool RMS>
ZRT_HOT_LOOP void normalizeRow(const T *x, T *y, int64_t cols, const T *w,
                               const T *b, T epsilon, T &mean, T &invStd) {
  // One pass over the row: sums of d and d^2 for d = x - shift, with the
  // first element as the shift so that a large common offset does not
  // cancel catastrophically in E[d^2] - E[d]^2.
  const T shift = RMS || cols == 0 ? T(0) : x[0];
  T sum, squares;
  shiftedMoments(x, cols, shift, sum, squares);
  math::normStatistics<T, RMS>(sum, squares, cols, shift, epsilon, mean,
                               invStd);
  const T m = mean, s = invStd;
  if (!b) {
    zipElements(x, w, y, cols, [m, s](T v, T scale) {
      return math::normValue(v, m, s, scale);
    });
  } else if (x == y) {
    for (int64_t c = 0; c < cols; ++c)
      y[c] = math::normValueBias(y[c], m, s, w[c], b[c]);
  } else {
    const T *__restrict xs = x;
    T *__restrict ys = y;
    for (int64_t c = 0; c < cols; ++c)
      ys[c] = math::normValueBias(xs[c], m, s, w[c], b[c]);
  }
}

/// The CPU loops of Softmax and the normalisations (norm::softmaxKernel,
/// norm::normalizationKernel).
struct CpuNormLoops : CpuLoops {
  template <typename T, bool Log>
  static Status softmax(const KernelContext &ctx, const AxisSplit &split,
                        const T *src, T *dst) {
    if (split.inner == 1) {
      parallelRange(ctx, split.outer,
                    rowGrain(split.axis, kTranscendentalGrain),
                    [&](int64_t b, int64_t e) {
                      for (int64_t r = b; r < e; ++r)
                        softmaxRow<T, Log>(src + r * split.axis,
                                           dst + r * split.axis, split.axis);
                    });
      return Status::ok();
    }
    parallelOuterInner(ctx, split.outer, split.axis, split.inner,
                       [&](int64_t o, int64_t ib, int64_t ie) {
                         const int64_t base = o * split.axis * split.inner;
                         softmaxColumns<T, Log>(src + base, dst + base,
                                                split.axis, split.inner, ib,
                                                ie);
                       });
    return Status::ok();
  }

  /// Allocates host storage for a broadcast Scale or B.
  template <typename T>
  static Status allocateRow(int64_t count, norm::RowParameter<T> &result) {
    auto storage = std::make_shared<std::vector<T>>(size_t(count));
    result.data = storage->data();
    result.storage = storage;
    return Status::ok();
  }

  template <typename T, bool RMS>
  static Status normalize(const KernelContext &ctx, int64_t rows, int64_t cols,
                          const T *src, T *dst, const T *w, const T *b,
                          T epsilon, norm::Statistic mean,
                          norm::Statistic invStdDev) {
    parallelRange(ctx, rows, rowGrain(3 * cols, kElementGrain),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t r = begin; r < end; ++r) {
                      T m, invStd;
                      normalizeRow<T, RMS>(src + r * cols, dst + r * cols, cols,
                                           w, b, epsilon, m, invStd);
                      if (mean.data)
                        math::storeStatistic(mean.data, mean.isF64, r,
                                             double(m));
                      if (invStdDev.data)
                        math::storeStatistic(invStdDev.data, invStdDev.isF64, r,
                                             double(invStd));
                    }
                  });
    return Status::ok();
  }
};

//===----------------------------------------------------------------------===//
// BatchNormalization (inference)
//===----------------------------------------------------------------------===//

/// Y = (X - mean) / sqrt(var + epsilon) * scale + B per channel of
/// [N, C, ...], as X * a + b with a and b computed once per channel in
/// double (math/SelectionMath.h, shared with the CUDA kernel).
Status batchNormKernel(const KernelContext &ctx,
                       const std::vector<TensorRef> &in,
                       const std::vector<TensorRef> &out,
                       const AttrMap &attrs) {
  BatchNormLayout l;
  ZRT_RETURN_IF_ERROR(prepareBatchNorm(in, out, attrs, l));
  const TensorRef &x = in[0], &y = out[0];
  const int64_t channels = l.channels, inner = l.inner;
  if (!dispatchType(FloatTypes{}, x.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        std::vector<T> a(static_cast<size_t>(channels)), b(a.size());
        for (int64_t c = 0; c < channels; ++c)
          math::batchNormCoefficients(in[1].as<T>()[c], in[2].as<T>()[c],
                                      in[3].as<T>()[c], in[4].as<T>()[c],
                                      l.epsilon, a[size_t(c)], b[size_t(c)]);
        const T *px = x.as<T>();
        T *py = y.as<T>();
        parallelRange(
            ctx, x.shape[0] * channels, rowGrain(inner, kElementGrain),
            [&](int64_t begin, int64_t end) {
              for (int64_t p = begin; p < end; ++p) {
                const T scale = a[size_t(p % channels)];
                const T shift = b[size_t(p % channels)];
                mapElements(px + p * inner, py + p * inner, inner, [=](T v) {
                  return math::batchNormValue(v, scale, shift);
                });
              }
            });
      }))
    return Status::error("unreachable: dtype checked by prepareBatchNorm");
  return Status::ok();
}

} // namespace

void registerNormalizationKernels(KernelTable &table) {
  norm::addNormalizationKernels<CpuNormLoops>(table);
  table.add("BatchNormalization", batchNormKernel);
}

} // namespace cpu
} // namespace zrt
