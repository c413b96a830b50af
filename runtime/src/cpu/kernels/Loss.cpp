//===- Loss.cpp - Cross-entropy style losses ------------------------------===//
//
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss over scores shaped
// [N, C] or [N, C, d1, ...] with integer labels [N] / [N, d1, ...]. Both
// share one negative-log-likelihood reduction (runNll) that applies the
// optional class weights, ignore_index (only when the attribute is present)
// and the reduction "none" | "sum" | "mean", where mean divides by the sum of
// the weights of the non-ignored targets, as the ONNX reference does. The
// host code (checks, labels) is LossKernels.h, shared with the CUDA backend.
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/CpuKernels.h"
#include "CpuLoops.h"
#include "kernels/LossKernels.h"
#include "math/NormMath.h"

namespace zrt {
namespace cpu {
using namespace kernels;
namespace {

using loss::LossShape;
using loss::NllPlan;

/// loss = -logProbAt(n, label, d) * weight[label], reduced per the plan into
/// `loss` (scalar, or [N, d...] for "none"), in target order.
template <typename T, typename LogProbAt>
void runNll(const NllPlan &plan, const LossShape &shape,
            const LogProbAt &logProbAt, const TensorRef &loss) {
  T *out = loss.as<T>();
  const T *weights = plan.weights ? plan.weights->as<T>() : nullptr;
  double weightedSum = 0, weightTotal = 0;
  for (int64_t n = 0; n < shape.n; ++n)
    for (int64_t d = 0; d < shape.d; ++d) {
      const int64_t i = n * shape.d + d;
      const int64_t target = plan.label[size_t(i)];
      const bool ignored = plan.ignored(target);
      const double value = math::nllAccumulate(
          ignored, ignored ? 0.0 : double(logProbAt(n, target, d)),
          ignored ? 0.0 : (weights ? double(weights[target]) : 1.0),
          weightedSum, weightTotal);
      if (plan.reduction == math::LossReduction::None)
        out[i] = T(value);
    }
  if (plan.reduction != math::LossReduction::None)
    out[0] = T(math::nllReduced(plan.reduction, weightedSum, weightTotal));
}

/// The CPU loops of the losses of LossKernels.h.
struct CpuLossLoops : CpuLoops {
  static Status readLabels(const char *op, const TensorRef &labels,
                           std::vector<int64_t> &values) {
    values.resize(size_t(labels.numel()));
    dispatchType(IndexTypes{}, labels.dtype, [&](auto tag) {
      using I = typename decltype(tag)::type;
      std::copy(labels.as<I>(), labels.as<I>() + values.size(), values.begin());
    });
    return Status::ok();
  }

  template <typename T>
  static Status
  softmaxCrossEntropy(const KernelContext &ctx, const LossShape &shape,
                      const TensorRef &scores, const TensorRef *logProb,
                      const NllPlan &plan, const TensorRef &loss) {
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
                              [max](T v) { return math::softmaxExp(v, max); });
            else
              for (int64_t k = 0; k < c; ++k)
                sum += math::softmaxExp(base[k * d + j], max);
            lse[size_t(n * d + j)] = math::logSumExpOf(max, sum);
          }
        });
    if (logProb) {
      T *lp = logProb->as<T>();
      parallelRange(ctx, shape.n * c, rowGrain(d, kElementGrain),
                    [&](int64_t b, int64_t e) {
                      for (int64_t row = b; row < e; ++row) {
                        const T *l = lse.data() + (row / c) * d;
                        for (int64_t j = 0; j < d; ++j)
                          lp[row * d + j] = x[row * d + j] - l[j];
                      }
                    });
    }
    runNll<T>(
        plan, shape,
        [&](int64_t n, int64_t k, int64_t j) {
          return math::logProbOf(x[(n * c + k) * d + j],
                                 lse[size_t(n * d + j)]);
        },
        loss);
    return Status::ok();
  }

  template <typename T>
  static Status nll(const KernelContext &, const LossShape &shape,
                    const TensorRef &logProbs, const NllPlan &plan,
                    const TensorRef &loss) {
    const T *x = logProbs.as<T>();
    runNll<T>(
        plan, shape,
        [&](int64_t n, int64_t k, int64_t j) {
          return x[(n * shape.c + k) * shape.d + j];
        },
        loss);
    return Status::ok();
  }
};

} // namespace

void registerLossKernels(KernelTable &table) {
  loss::addLossKernels<CpuLossLoops>(table);
}

} // namespace cpu
} // namespace zrt
