//===- Normalization.cpp - Softmax and layer/RMS normalisation ------------===//
//
// Softmax and LogSoftmax along one axis (opset-13 semantics), with a fast
// path for the innermost axis (contiguous rows) and a column-blocked path for
// middle axes; LayerNormalization and RMSNormalization over the trailing dims
// [axis, rank), one row per leading index, rows in parallel;
// inference-mode BatchNormalization, one affine map per channel.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

namespace zrt {
namespace cpu {
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
    const T sum = sumMapped(in, n, [max](T x) { return expOf(T(x - max)); });
    const T shift = max + T(std::log(sum));
    mapElements(in, out, n, [shift](T x) { return T(x - shift); });
  } else {
    mapElements(in, out, n, [max](T x) { return expOf(T(x - max)); });
    const T scale = T(1) / sumMapped(out, n, [](T x) { return x; });
    mapElements(out, out, n, [scale](T x) { return T(x * scale); });
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
      const T e = expOf(T(row[i] - max[size_t(i)]));
      sum[size_t(i)] += e;
      if (!Log)
        outRow[i] = e;
    }
  }
  for (int64_t i = 0; i < width; ++i)
    sum[size_t(i)] = Log ? T(max[size_t(i)] + std::log(sum[size_t(i)]))
                         : T(1) / sum[size_t(i)];
  for (int64_t a = 0; a < axisLen; ++a) {
    const T *row = in + a * inner + ib;
    T *outRow = out + a * inner + ib;
    for (int64_t i = 0; i < width; ++i)
      outRow[i] =
          Log ? T(row[i] - sum[size_t(i)]) : T(outRow[i] * sum[size_t(i)]);
  }
}

/// attr axis (non-negative; default the last axis).
template <bool Log>
Status softmaxKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out, const AttrMap &attrs) {
  const char *op = Log ? "LogSoftmax" : "Softmax";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 1, 1, 1, 1));
  ZRT_RETURN_IF_ERROR(checkSameDType(op, in[0], "input", out[0], "output"));
  ZRT_RETURN_IF_ERROR(checkShape(op, "output", out[0], in[0].shape));
  AxisSplit split;
  const int64_t axis =
      attrs.getInt("axis", std::max<int64_t>(in[0].rank() - 1, 0));
  ZRT_RETURN_IF_ERROR(splitAtAxis(op, in[0].shape, axis, split));
  if (!dispatchType(FloatTypes{}, in[0].dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T *src = in[0].as<T>();
        T *dst = out[0].as<T>();
        if (split.inner == 1) {
          parallelRange(
              ctx, split.outer, rowGrain(split.axis, kTranscendentalGrain),
              [&](int64_t b, int64_t e) {
                for (int64_t r = b; r < e; ++r)
                  softmaxRow<T, Log>(src + r * split.axis, dst + r * split.axis,
                                     split.axis);
              });
          return;
        }
        parallelOuterInner(ctx, split.outer, split.axis, split.inner,
                           [&](int64_t o, int64_t ib, int64_t ie) {
                             const int64_t base = o * split.axis * split.inner;
                             softmaxColumns<T, Log>(src + base, dst + base,
                                                    split.axis, split.inner, ib,
                                                    ie);
                           });
      }))
    return dtypeError(op, "input", in[0].dtype, FloatTypes{});
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// LayerNormalization, RMSNormalization
//===----------------------------------------------------------------------===//

/// An affine parameter (scale or bias) as one value per normalised element:
/// `data` points at the tensor itself when it already has that layout, or at
/// `storage`, holding it broadcast over the normalised dims.
template <typename T> struct RowParameter {
  const T *data = nullptr;
  std::vector<T> storage;
};

template <typename T>
Status prepareRowParameter(const KernelContext &ctx, const char *op,
                           const char *name, const TensorRef &param,
                           const std::vector<int64_t> &normShape,
                           RowParameter<T> &result) {
  if (param.dtype != DTypeOf<T>::value)
    return kernelError(op, std::string("dtype of ") + name + " differs from X",
                       dtypeName(param.dtype), dtypeName(DTypeOf<T>::value));
  // Leading 1s aside, does the parameter already have the normalised shape?
  std::vector<int64_t> trimmed = param.shape;
  while (trimmed.size() > normShape.size() && trimmed.front() == 1)
    trimmed.erase(trimmed.begin());
  std::vector<int64_t> normTrimmed = normShape;
  while (normTrimmed.size() > trimmed.size() && normTrimmed.front() == 1)
    normTrimmed.erase(normTrimmed.begin());
  if (trimmed == normTrimmed) {
    result.data = param.as<T>();
    return Status::ok();
  }
  const int64_t cols = productOf(normShape, 0, normShape.size());
  result.storage.resize(size_t(cols));
  TensorRef full{result.storage.data(), param.dtype, normShape};
  Status status = broadcastCopy(ctx, op, param, full);
  if (!status.isOk())
    return kernelError(op,
                       std::string(name) + " does not broadcast over the "
                                           "normalised dims",
                       shapeString(param.shape), shapeString(normShape));
  result.data = result.storage.data();
  return Status::ok();
}

/// Writes one statistic (Mean or InvStdDev) in the output's float dtype.
inline void storeStatistic(const TensorRef &t, int64_t index, double value) {
  if (t.dtype == DType::F32)
    t.as<float>()[index] = float(value);
  else if (t.dtype == DType::F64)
    t.as<double>()[index] = value;
}

Status checkStatistic(const char *op, const char *name, const TensorRef &t,
                      int64_t rows) {
  if (t.dtype != DType::F32 && t.dtype != DType::F64)
    return dtypeError(op, name, t.dtype, FloatTypes{});
  if (t.numel() != rows)
    return kernelError(op, std::string("wrong size of ") + name,
                       shapeString(t.shape),
                       std::to_string(rows) + " elements");
  return Status::ok();
}

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
  if (RMS) {
    mean = T(0);
    invStd = T(1) / std::sqrt(squares / T(cols) + epsilon);
  } else {
    const T meanShifted = sum / T(cols);
    const T variance =
        std::max(T(0), squares / T(cols) - meanShifted * meanShifted);
    mean = shift + meanShifted;
    invStd = T(1) / std::sqrt(variance + epsilon);
  }
  const T m = mean, s = invStd;
  if (!b) {
    zipElements(x, w, y, cols,
                [m, s](T v, T scale) { return (v - m) * s * scale; });
  } else if (x == y) {
    for (int64_t c = 0; c < cols; ++c)
      y[c] = (y[c] - m) * s * w[c] + b[c];
  } else {
    const T *__restrict xs = x;
    T *__restrict ys = y;
    for (int64_t c = 0; c < cols; ++c)
      ys[c] = (xs[c] - m) * s * w[c] + b[c];
  }
}

/// LayerNormalization (RMS = false) or RMSNormalization (RMS = true).
/// Inputs X, Scale[, B]; attrs axis, epsilon; outputs Y[, Mean, InvStdDev].
template <bool RMS>
Status
normalizationKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &attrs) {
  const char *op = RMS ? "RMSNormalization" : "LayerNormalization";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 2, RMS ? 2 : 3, 1, RMS ? 1 : 3));
  const TensorRef &x = in[0], &y = out[0];
  ZRT_RETURN_IF_ERROR(checkSameDType(op, x, "X", y, "Y"));
  ZRT_RETURN_IF_ERROR(checkShape(op, "Y", y, x.shape));
  const int64_t axis = attrs.getInt("axis", std::max<int64_t>(x.rank() - 1, 0));
  const double epsilon = attrs.getFloat("epsilon", 1e-5);
  if (axis < 0 || axis > x.rank())
    return kernelError(op, "axis out of range", std::to_string(axis),
                       "0 <= axis <= " + std::to_string(x.rank()));
  const int64_t rows = productOf(x.shape, 0, size_t(axis));
  const int64_t cols = productOf(x.shape, size_t(axis), x.shape.size());
  const std::vector<int64_t> normShape(x.shape.begin() + axis, x.shape.end());
  const bool hasBias = !RMS && hasOperand(in, 2);
  const bool hasMean = !RMS && hasOperand(out, 1);
  const bool hasInvStd = !RMS && hasOperand(out, 2);
  if (hasMean)
    ZRT_RETURN_IF_ERROR(checkStatistic(op, "Mean", out[1], rows));
  if (hasInvStd)
    ZRT_RETURN_IF_ERROR(checkStatistic(op, "InvStdDev", out[2], rows));
  Status status;
  if (!dispatchType(FloatTypes{}, x.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        RowParameter<T> scale, bias;
        status = prepareRowParameter(ctx, op, "Scale", in[1], normShape, scale);
        if (status.isOk() && hasBias)
          status = prepareRowParameter(ctx, op, "B", in[2], normShape, bias);
        if (!status.isOk())
          return;
        const T *src = x.as<T>();
        T *dst = y.as<T>();
        const T *w = scale.data, *b = bias.data;
        parallelRange(ctx, rows, rowGrain(3 * cols, kElementGrain),
                      [&](int64_t begin, int64_t end) {
                        for (int64_t r = begin; r < end; ++r) {
                          T mean, invStd;
                          normalizeRow<T, RMS>(src + r * cols, dst + r * cols,
                                               cols, w, b, T(epsilon), mean,
                                               invStd);
                          if (hasMean)
                            storeStatistic(out[1], r, double(mean));
                          if (hasInvStd)
                            storeStatistic(out[2], r, double(invStd));
                        }
                      });
      }))
    return dtypeError(op, "X", x.dtype, FloatTypes{});
  return status;
}

//===----------------------------------------------------------------------===//
// BatchNormalization (inference)
//===----------------------------------------------------------------------===//

/// Y = (X - mean) / sqrt(var + epsilon) * scale + B per channel of
/// [N, C, ...], as X * a + b with a and b computed once per channel in
/// double.
Status batchNormKernel(const KernelContext &ctx,
                       const std::vector<TensorRef> &in,
                       const std::vector<TensorRef> &out,
                       const AttrMap &attrs) {
  const char *op = "BatchNormalization";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 5, 5, 1, 1));
  const TensorRef &x = in[0], &y = out[0];
  ZRT_RETURN_IF_ERROR(checkSameDType(op, x, "input X", y, "output"));
  if (x.rank() < 2)
    return kernelError(op, "rank of X", shapeString(x.shape),
                       "[N, C, ...] (rank >= 2)");
  ZRT_RETURN_IF_ERROR(checkShape(op, "output", y, x.shape));
  const int64_t channels = x.shape[1];
  static const char *const names[] = {"scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; ++i) {
    ZRT_RETURN_IF_ERROR(
        checkShape(op, names[i - 1], in[size_t(i)], {channels}));
    ZRT_RETURN_IF_ERROR(
        checkSameDType(op, x, "input X", in[size_t(i)], names[i - 1]));
  }
  const double epsilon = attrs.getFloat("epsilon", 1e-5);
  const int64_t inner = productOf(x.shape, 2, x.shape.size());
  if (!dispatchType(FloatTypes{}, x.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        std::vector<T> a(static_cast<size_t>(channels)), b(a.size());
        for (int64_t c = 0; c < channels; ++c) {
          const double s = double(in[1].as<T>()[c]) /
                           std::sqrt(double(in[4].as<T>()[c]) + epsilon);
          a[size_t(c)] = T(s);
          b[size_t(c)] =
              T(double(in[2].as<T>()[c]) - double(in[3].as<T>()[c]) * s);
        }
        const T *px = x.as<T>();
        T *py = y.as<T>();
        parallelRange(
            ctx, x.shape[0] * channels, rowGrain(inner, kElementGrain),
            [&](int64_t begin, int64_t end) {
              for (int64_t p = begin; p < end; ++p) {
                const T scale = a[size_t(p % channels)];
                const T shift = b[size_t(p % channels)];
                mapElements(px + p * inner, py + p * inner, inner,
                            [=](T v) { return T(v * scale + shift); });
              }
            });
      }))
    return dtypeError(op, "input X", x.dtype, FloatTypes{});
  return Status::ok();
}

} // namespace

void registerNormalizationKernels(KernelTable &table) {
  table.add("BatchNormalization", batchNormKernel);
  table.add("Softmax", softmaxKernel<false>);
  table.add("LogSoftmax", softmaxKernel<true>);
  table.add("LayerNormalization", normalizationKernel<false>);
  table.add("RMSNormalization", normalizationKernel<true>);
}

} // namespace cpu
} // namespace zrt
