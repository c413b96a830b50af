//===- LossKernels.h - Cross-entropy losses, any backend --------*- C++ -*-===//
//
// The host code of SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss
// (docs/kernels.md, "Losses"): operand and attribute checks and the label
// checks (labels are read to the host and range-checked there in target
// order, so a bad label is the same error on both backends), written once
// as templates over a Loops policy with
//   readLabels(op, labels, values)        I64 / I32 operand -> host int64s
//   softmaxCrossEntropy<T>(ctx, LossShape, scores, logProb (or null),
//                          NllPlan, loss)
//   nll<T>(ctx, LossShape, logProbs, NllPlan, loss)
// CpuLossLoops (Loss.cpp) and cuda::CudaLossLoops (cuda/LossKernels.cu)
// implement them with math/LossMath.h and math/NormMath.h.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_KERNELS_LOSSKERNELS_H
#define ZRT_KERNELS_LOSSKERNELS_H

#include "kernels/KernelSupport.h"
#include "math/LossMath.h"

namespace zrt {
namespace kernels {
namespace loss {

/// Scores viewed as [N, C, D] (D = product of the trailing dims).
struct LossShape {
  int64_t n = 0, c = 0, d = 1;
};

inline Status checkLossOperands(const char *op, const TensorRef &scores,
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

/// The checked targets of one negative-log-likelihood reduction.
struct NllPlan {
  math::LossReduction reduction = math::LossReduction::Mean;
  int64_t count = 0; ///< N * D targets
  bool hasIgnore = false;
  int64_t ignoreIndex = 0;
  std::vector<int64_t> label; ///< on the host, every one checked
  const TensorRef *weights = nullptr;

  bool ignored(int64_t target) const {
    return hasIgnore && target == ignoreIndex;
  }
};

/// Checks the loss output, the weights and the labels of an NLL reduction
/// (the `reduction` attribute; loss = scalar, or [N, d...] for "none").
template <typename T, typename Loops>
Status prepareNll(const char *op, const TensorRef &labels,
                  const TensorRef *weights, const AttrMap &attrs,
                  const LossShape &shape, const TensorRef &loss,
                  NllPlan &plan) {
  const std::string reduction = attrs.getString("reduction", "mean");
  const bool none = reduction == "none";
  if (!none && reduction != "sum" && reduction != "mean")
    return kernelError(op, "bad attribute reduction", reduction,
                       "none, sum or mean");
  plan.reduction = none                 ? math::LossReduction::None
                   : reduction == "sum" ? math::LossReduction::Sum
                                        : math::LossReduction::Mean;
  if (loss.dtype != DTypeOf<T>::value)
    return kernelError(op, "wrong loss dtype", dtypeName(loss.dtype),
                       dtypeName(DTypeOf<T>::value));
  plan.count = shape.n * shape.d;
  if (loss.numel() != (none ? plan.count : 1))
    return kernelError(op, "wrong loss size", shapeString(loss.shape),
                       none ? std::to_string(plan.count) + " elements"
                            : "a scalar");
  if (weights) {
    if (weights->dtype != DTypeOf<T>::value)
      return kernelError(op, "wrong weights dtype", dtypeName(weights->dtype),
                         dtypeName(DTypeOf<T>::value));
    ZRT_RETURN_IF_ERROR(checkShape(op, "weights", *weights, {shape.c}));
  }
  plan.weights = weights;
  plan.hasIgnore = attrs.has("ignore_index");
  plan.ignoreIndex = attrs.getInt("ignore_index", 0);
  ZRT_RETURN_IF_ERROR(Loops::readLabels(op, labels, plan.label));
  for (int64_t target : plan.label)
    if (!plan.ignored(target) && (target < 0 || target >= shape.c))
      return kernelError(
          op, "label out of range", std::to_string(target),
          "a class in [0, " + std::to_string(shape.c) + ")" +
              (plan.hasIgnore
                   ? " or ignore_index " + std::to_string(plan.ignoreIndex)
                   : std::string()));
  return Status::ok();
}

/// SoftmaxCrossEntropyLoss(scores, labels[, weights]) -> loss[, log_prob].
template <typename Loops>
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
        NllPlan plan;
        status = prepareNll<T, Loops>(op, in[1],
                                      hasOperand(in, 2) ? &in[2] : nullptr,
                                      attrs, shape, out[0], plan);
        if (status.isOk())
          status = Loops::template softmaxCrossEntropy<T>(
              ctx, shape, scores, wantLogProb ? &out[1] : nullptr, plan,
              out[0]);
      }))
    return dtypeError(op, "scores", scores.dtype, FloatTypes{});
  return status;
}

/// NegativeLogLikelihoodLoss(log_probs, labels[, weights]) -> loss.
template <typename Loops>
Status nllLossKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out, const AttrMap &attrs) {
  const char *op = "NegativeLogLikelihoodLoss";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 2, 3, 1, 1));
  LossShape shape;
  ZRT_RETURN_IF_ERROR(checkLossOperands(op, in[0], in[1], shape));
  Status status;
  if (!dispatchType(FloatTypes{}, in[0].dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        NllPlan plan;
        status = prepareNll<T, Loops>(op, in[1],
                                      hasOperand(in, 2) ? &in[2] : nullptr,
                                      attrs, shape, out[0], plan);
        if (status.isOk())
          status = Loops::template nll<T>(ctx, shape, in[0], plan, out[0]);
      }))
    return dtypeError(op, "input", in[0].dtype, FloatTypes{});
  return status;
}

/// Registers the losses with the loops of one backend.
template <typename Loops> void addLossKernels(KernelTable &table) {
  table.add("SoftmaxCrossEntropyLoss", softmaxCrossEntropyKernel<Loops>);
  table.add("NegativeLogLikelihoodLoss", nllLossKernel<Loops>);
}

} // namespace loss
} // namespace kernels
} // namespace zrt

#endif // ZRT_KERNELS_LOSSKERNELS_H
