//===- NormalizationKernels.h - Softmax and norms, any backend --*- C++ -*-===//
//
// The host code of Softmax / LogSoftmax and LayerNormalization /
// RMSNormalization (docs/kernels.md, "Normalisation and softmax"): operand
// checks, attributes, the broadcasting of Scale and B over the normalised
// dims, written once as templates over a Loops policy with
//   softmax<T, Log>(ctx, AxisSplit, src, dst)
//   allocateRow<T>(count, RowParameter<T> &)   scratch for a broadcast Scale/B
//   broadcastCopy(ctx, op, in, out)
//   normalize<T, RMS>(ctx, rows, cols, src, dst, scale, bias, epsilon,
//                     Statistic mean, Statistic invStdDev)
// CpuNormLoops (Normalization.cpp) and cuda::CudaNormLoops
// (cuda/NormalizationKernels.cu) implement them with math/NormMath.h.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_KERNELS_NORMALIZATIONKERNELS_H
#define ZRT_KERNELS_NORMALIZATIONKERNELS_H

#include "kernels/KernelSupport.h"
#include "math/NormMath.h"

#include <memory>

namespace zrt {
namespace kernels {
namespace norm {

/// An affine parameter (scale or bias) as one value per normalised element:
/// `data` points at the tensor itself when it already has that layout, or at
/// `storage` (backend memory), holding it broadcast over the normalised dims.
template <typename T> struct RowParameter {
  const T *data = nullptr;
  std::shared_ptr<void> storage;
};

/// An optional statistic output (Mean, InvStdDev): null data when absent.
struct Statistic {
  void *data = nullptr;
  bool isF64 = false;
};

/// attr axis (non-negative; default the last axis).
template <bool Log, typename Loops>
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
  Status status;
  if (!dispatchType(FloatTypes{}, in[0].dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        status = Loops::template softmax<T, Log>(ctx, split, in[0].as<T>(),
                                                 out[0].as<T>());
      }))
    return dtypeError(op, "input", in[0].dtype, FloatTypes{});
  return status;
}

template <typename T, typename Loops>
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
  ZRT_RETURN_IF_ERROR(Loops::template allocateRow<T>(cols, result));
  TensorRef full{const_cast<T *>(result.data), param.dtype, normShape};
  Status status = Loops::broadcastCopy(ctx, op, param, full);
  if (!status.isOk())
    return kernelError(op,
                       std::string(name) + " does not broadcast over the "
                                           "normalised dims",
                       shapeString(param.shape), shapeString(normShape));
  return Status::ok();
}

inline Status checkStatistic(const char *op, const char *name,
                             const TensorRef &t, int64_t rows) {
  if (t.dtype != DType::F32 && t.dtype != DType::F64)
    return dtypeError(op, name, t.dtype, FloatTypes{});
  if (t.numel() != rows)
    return kernelError(op, std::string("wrong size of ") + name,
                       shapeString(t.shape),
                       std::to_string(rows) + " elements");
  return Status::ok();
}

/// LayerNormalization (RMS = false) or RMSNormalization (RMS = true).
/// Inputs X, Scale[, B]; attrs axis, epsilon; outputs Y[, Mean, InvStdDev].
template <bool RMS, typename Loops>
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
  Statistic mean, invStdDev;
  if (!RMS && hasOperand(out, 1)) {
    ZRT_RETURN_IF_ERROR(checkStatistic(op, "Mean", out[1], rows));
    mean = {out[1].data, out[1].dtype == DType::F64};
  }
  if (!RMS && hasOperand(out, 2)) {
    ZRT_RETURN_IF_ERROR(checkStatistic(op, "InvStdDev", out[2], rows));
    invStdDev = {out[2].data, out[2].dtype == DType::F64};
  }
  Status status;
  if (!dispatchType(FloatTypes{}, x.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        RowParameter<T> scale, bias;
        status = prepareRowParameter<T, Loops>(ctx, op, "Scale", in[1],
                                               normShape, scale);
        if (status.isOk() && hasBias)
          status = prepareRowParameter<T, Loops>(ctx, op, "B", in[2], normShape,
                                                 bias);
        if (!status.isOk())
          return;
        status = Loops::template normalize<T, RMS>(
            ctx, rows, cols, x.as<T>(), y.as<T>(), scale.data, bias.data,
            T(epsilon), mean, invStdDev);
      }))
    return dtypeError(op, "X", x.dtype, FloatTypes{});
  return status;
}

/// Registers Softmax, LogSoftmax and the normalisations with the loops of
/// one backend.
template <typename Loops> void addNormalizationKernels(KernelTable &table) {
  table.add("Softmax", softmaxKernel<false, Loops>);
  table.add("LogSoftmax", softmaxKernel<true, Loops>);
  table.add("LayerNormalization", normalizationKernel<false, Loops>);
  table.add("RMSNormalization", normalizationKernel<true, Loops>);
}

} // namespace norm
} // namespace kernels
} // namespace zrt

#endif // ZRT_KERNELS_NORMALIZATIONKERNELS_H
