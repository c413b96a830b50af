//===- Loss.cpp - Cross-entropy style losses ------------------------------===//
//
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss over scores shaped
// [N, C] or [N, C, d1, ...] with integer labels [N] / [N, d1, ...]. Both
// share one negative-log-likelihood reduction (nllLoss) that applies the
// optional class weights, ignore_index (only when the attribute is present)
// and the reduction "none" | "sum" | "mean", where mean divides by the sum of
// the weights of the non-ignored targets, as the ONNX reference does.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

namespace zrt {
namespace cpu {
namespace {

/// Scores viewed as [N, C, D] (D = product of the trailing dims).
struct LossShape {
  int64_t n = 0, c = 0, d = 1;
};

Status checkLossOperands(const char *op, const TensorRef &scores,
                         const TensorRef &labels, LossShape &shape) {
  if (scores.rank() < 2)
    return kernelError(op, "scores rank too small", shapeString(scores.shape),
                       "[N, C] or [N, C, d1, ...]");
  shape.n = scores.shape[0];
  shape.c = scores.shape[1];
  shape.d = productOf(scores.shape, 2, scores.shape.size());
  std::vector<int64_t> expected = {shape.n};
  expected.insert(expected.end(), scores.shape.begin() + 2, scores.shape.end());
  ZRT_RETURN_IF_ERROR(checkShape(op, "labels", labels, expected));
  if (labels.dtype != DType::I64 && labels.dtype != DType::I32)
    return dtypeError(op, "labels", labels.dtype, IndexTypes{});
  return Status::ok();
}

/// loss = -logProbAt(n, label, d) * weight[label], reduced per the
/// `reduction` attribute into `loss` (scalar, or [N, d...] for "none").
template <typename T, typename LogProbAt>
Status nllLoss(const char *op, const TensorRef &labels,
               const TensorRef *weights, const AttrMap &attrs,
               const LossShape &shape, const LogProbAt &logProbAt,
               const TensorRef &loss) {
  const std::string reduction = attrs.getString("reduction", "mean");
  const bool none = reduction == "none";
  if (!none && reduction != "sum" && reduction != "mean")
    return kernelError(op, "bad attribute reduction", reduction,
                       "none, sum or mean");
  if (loss.dtype != DTypeOf<T>::value)
    return kernelError(op, "wrong loss dtype", dtypeName(loss.dtype),
                       dtypeName(DTypeOf<T>::value));
  const int64_t count = shape.n * shape.d;
  if (loss.numel() != (none ? count : 1))
    return kernelError(op, "wrong loss size", shapeString(loss.shape),
                       none ? std::to_string(count) + " elements" : "a scalar");
  if (weights) {
    if (weights->dtype != DTypeOf<T>::value)
      return kernelError(op, "wrong weights dtype", dtypeName(weights->dtype),
                         dtypeName(DTypeOf<T>::value));
    ZRT_RETURN_IF_ERROR(checkShape(op, "weights", *weights, {shape.c}));
  }
  const bool hasIgnore = attrs.has("ignore_index");
  const int64_t ignoreIndex = attrs.getInt("ignore_index", 0);
  std::vector<int64_t> label(static_cast<size_t>(count));
  dispatchType(IndexTypes{}, labels.dtype, [&](auto tag) {
    using I = typename decltype(tag)::type;
    std::copy(labels.as<I>(), labels.as<I>() + count, label.begin());
  });
  T *out = loss.as<T>();
  double weightedSum = 0, weightTotal = 0;
  for (int64_t n = 0; n < shape.n; ++n)
    for (int64_t d = 0; d < shape.d; ++d) {
      const int64_t i = n * shape.d + d;
      const int64_t target = label[size_t(i)];
      double value = 0, weight = 0;
      if (!(hasIgnore && target == ignoreIndex)) {
        if (target < 0 || target >= shape.c)
          return kernelError(
              op, "label out of range", std::to_string(target),
              "a class in [0, " + std::to_string(shape.c) + ")" +
                  (hasIgnore ? " or ignore_index " + std::to_string(ignoreIndex)
                             : std::string()));
        weight = weights ? double(weights->as<T>()[target]) : 1.0;
        value = -double(logProbAt(n, target, d)) * weight;
      }
      if (none)
        out[i] = T(value);
      weightedSum += value;
      weightTotal += weight;
    }
  if (reduction == "sum")
    out[0] = T(weightedSum);
  else if (reduction == "mean")
    out[0] = T(weightedSum / weightTotal);
  return Status::ok();
}

/// SoftmaxCrossEntropyLoss(scores, labels[, weights]) -> loss[, log_prob].
Status softmaxCrossEntropyKernel(const KernelContext &ctx,
                                 const std::vector<TensorRef> &in,
                                 const std::vector<TensorRef> &out,
                                 const AttrMap &attrs) {
  const char *op = "SoftmaxCrossEntropyLoss";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 2, 3, 1, 2));
  const TensorRef &scores = in[0];
  LossShape shape;
  ZRT_RETURN_IF_ERROR(checkLossOperands(op, scores, in[1], shape));
  const bool wantLogProb = hasOperand(out, 1);
  if (wantLogProb) {
    ZRT_RETURN_IF_ERROR(
        checkSameDType(op, scores, "scores", out[1], "log_prob"));
    ZRT_RETURN_IF_ERROR(checkShape(op, "log_prob", out[1], scores.shape));
  }
  Status status;
  if (!dispatchType(FloatTypes{}, scores.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T *x = scores.as<T>();
        const int64_t c = shape.c, d = shape.d;
        // logsumexp over the classes for each (n, d).
        std::vector<T> lse(static_cast<size_t>(shape.n * d));
        parallelOuterInner(
            ctx, shape.n, c, d, [&](int64_t n, int64_t db, int64_t de) {
              const T *base = x + n * c * d;
              for (int64_t j = db; j < de; ++j) {
                T max = c > 0 ? base[j] : T(0);
                for (int64_t k = 1; k < c; ++k)
                  max = base[k * d + j] > max ? base[k * d + j] : max;
                T sum = T(0);
                if (d == 1)
                  sum = sumMapped(base, c,
                                  [max](T v) { return expOf(T(v - max)); });
                else
                  for (int64_t k = 0; k < c; ++k)
                    sum += expOf(T(base[k * d + j] - max));
                lse[size_t(n * d + j)] = max + T(std::log(sum));
              }
            });
        if (wantLogProb) {
          T *lp = out[1].as<T>();
          parallelRange(ctx, shape.n * c, rowGrain(d, kElementGrain),
                        [&](int64_t b, int64_t e) {
                          for (int64_t row = b; row < e; ++row) {
                            const T *l = lse.data() + (row / c) * d;
                            for (int64_t j = 0; j < d; ++j)
                              lp[row * d + j] = x[row * d + j] - l[j];
                          }
                        });
        }
        status = nllLoss<T>(
            op, in[1], hasOperand(in, 2) ? &in[2] : nullptr, attrs, shape,
            [&](int64_t n, int64_t k, int64_t j) {
              return T(x[(n * c + k) * d + j] - lse[size_t(n * d + j)]);
            },
            out[0]);
      }))
    return dtypeError(op, "scores", scores.dtype, FloatTypes{});
  return status;
}

/// NegativeLogLikelihoodLoss(log_probs, labels[, weights]) -> loss.
Status nllLossKernel(const KernelContext &, const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out, const AttrMap &attrs) {
  const char *op = "NegativeLogLikelihoodLoss";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 2, 3, 1, 1));
  LossShape shape;
  ZRT_RETURN_IF_ERROR(checkLossOperands(op, in[0], in[1], shape));
  Status status;
  if (!dispatchType(FloatTypes{}, in[0].dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T *x = in[0].as<T>();
        status = nllLoss<T>(
            op, in[1], hasOperand(in, 2) ? &in[2] : nullptr, attrs, shape,
            [&](int64_t n, int64_t k, int64_t j) {
              return x[(n * shape.c + k) * shape.d + j];
            },
            out[0]);
      }))
    return dtypeError(op, "input", in[0].dtype, FloatTypes{});
  return status;
}

} // namespace

void registerLossKernels(KernelTable &table) {
  table.add("SoftmaxCrossEntropyLoss", softmaxCrossEntropyKernel);
  table.add("NegativeLogLikelihoodLoss", nllLossKernel);
}

} // namespace cpu
} // namespace zrt
