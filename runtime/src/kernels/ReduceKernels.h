//===- ReduceKernels.h - Reduce* kernels, any backend -----------*- C++ -*-===//
//
// The host code of the Reduce* kernels (docs/kernels.md, "Reductions"):
// operand checks, the reduction layout (planReduction, in Reduce.cpp) and the
// dtype dispatch, written once as a template over a Loops policy with
//   template <typename Reducer, typename T>
//   static Status reduce(const KernelContext &, const ReductionLayout &,
//                        const T *in, T *out);
//   argExtremum<T, IsMax>(ctx, AxisSplit, selectLast, x, y)   ArgMax/ArgMin
//   cumSum<T>(ctx, AxisSplit, exclusive, reverse, x, y)       CumSum
// CpuReduceLoops (Reduce.cpp) and cuda::CudaReduceLoops
// (cuda/ReduceKernels.cu) implement it with the reducers of
// math/ReduceMath.h, so both backends check operands identically.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_KERNELS_REDUCEKERNELS_H
#define ZRT_KERNELS_REDUCEKERNELS_H

#include "kernels/KernelSupport.h"
#include "math/ReduceMath.h"

namespace zrt {
namespace kernels {

/// The input as kept/reduced dim groups, ready for the two loop shapes.
struct ReductionLayout {
  // Kept dims (input strides) whose multi-index selects an output row.
  std::vector<int64_t> keptDims, keptStrides;
  // Element offsets of every combination of the non-innermost reduced dims
  // (row-major over reducedDims, whose input strides are reducedStrides).
  std::vector<int64_t> reducedOffsets;
  std::vector<int64_t> reducedDims, reducedStrides;
  int64_t inner = 1;      ///< contiguous innermost run length
  bool innerKept = false; ///< innermost run is kept (vector mode)
  int64_t outerCount = 1; ///< product of keptDims
  int64_t count = 1;      ///< elements reduced into each output
};

/// Collapses `shape` reduced over `axes` (empty = all) into a layout; fails
/// on an axis out of range.
Status planReduction(const char *op, const std::vector<int64_t> &shape,
                     std::vector<int64_t> axes, ReductionLayout &layout);

namespace reduce {

/// A Reduce* kernel: Reducer<T> for T in Types; attrs axes (sorted,
/// non-negative; empty = all), keepdims (shape comes from the output).
template <template <typename> class Reducer, typename Types, typename Loops>
Status reduceKernel(const char *op, const KernelContext &ctx,
                    const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 1, 1, 1, 1));
  ZRT_RETURN_IF_ERROR(checkSameDType(op, in[0], "input", out[0], "output"));
  ReductionLayout layout;
  ZRT_RETURN_IF_ERROR(
      planReduction(op, in[0].shape, attrs.getInts("axes"), layout));
  const int64_t expected =
      layout.outerCount * (layout.innerKept ? layout.inner : 1);
  if (out[0].numel() != expected)
    return kernelError(op, "output size does not match the reduction",
                       shapeString(out[0].shape),
                       std::to_string(expected) + " elements");
  Status status;
  if (!dispatchType(Types{}, in[0].dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        status = Loops::template reduce<Reducer<T>>(ctx, layout, in[0].as<T>(),
                                                    out[0].as<T>());
      }))
    return dtypeError(op, "input", in[0].dtype, Types{});
  return status;
}

//===----------------------------------------------------------------------===//
// ArgMax / ArgMin, CumSum
//===----------------------------------------------------------------------===//

/// attrs axis, keepdims (shape from the output), select_last_index; I64 out.
template <bool IsMax, typename Loops>
Status argExtremumKernel(const char *op, const KernelContext &ctx,
                         const std::vector<TensorRef> &in,
                         const std::vector<TensorRef> &out,
                         const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 1, 1, 1, 1));
  if (out[0].dtype != DType::I64)
    return dtypeError(op, "output", out[0].dtype, TypeList<int64_t>{});
  AxisSplit split;
  ZRT_RETURN_IF_ERROR(
      splitAtAxis(op, in[0].shape, attrs.getInt("axis", 0), split));
  if (out[0].numel() != split.outer * split.inner)
    return kernelError(op, "output size does not match the reduction",
                       shapeString(out[0].shape),
                       std::to_string(split.outer * split.inner) + " elements");
  if (split.axis == 0 && out[0].numel() != 0)
    return kernelError(op, "empty reduction axis", "size 0", "size >= 1");
  const bool last = attrs.getInt("select_last_index", 0) != 0;
  Status status;
  if (!dispatchType(NumericTypes{}, in[0].dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        status = Loops::template argExtremum<T, IsMax>(ctx, split, last, in[0],
                                                       out[0]);
      }))
    return dtypeError(op, "input", in[0].dtype, NumericTypes{});
  return status;
}

template <typename Loops>
Status argMaxKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &attrs) {
  return argExtremumKernel<true, Loops>("ArgMax", ctx, in, out, attrs);
}
template <typename Loops>
Status argMinKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &attrs) {
  return argExtremumKernel<false, Loops>("ArgMin", ctx, in, out, attrs);
}

/// attrs axis (non-negative), exclusive (0), reverse (0).
template <typename Loops>
Status cumSumKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &attrs) {
  ZRT_RETURN_IF_ERROR(checkArity("CumSum", in, out, 1, 2, 1, 1));
  ZRT_RETURN_IF_ERROR(
      checkSameDType("CumSum", in[0], "input", out[0], "output"));
  ZRT_RETURN_IF_ERROR(checkShape("CumSum", "output", out[0], in[0].shape));
  AxisSplit split;
  ZRT_RETURN_IF_ERROR(
      splitAtAxis("CumSum", in[0].shape, attrs.getInt("axis", 0), split));
  const bool exclusive = attrs.getInt("exclusive", 0) != 0;
  const bool reverse = attrs.getInt("reverse", 0) != 0;
  Status status;
  if (!dispatchType(NumericTypes{}, in[0].dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        status = Loops::template cumSum<T>(ctx, split, exclusive, reverse,
                                           in[0], out[0]);
      }))
    return dtypeError("CumSum", "input", in[0].dtype, NumericTypes{});
  return status;
}

/// Registers the Reduce* kernels, ArgMax, ArgMin and CumSum with the loops
/// of one backend.
template <typename Loops> void addReduceKernels(KernelTable &table) {
#define ZRT_REDUCE(NAME, REDUCER, TYPES)                                       \
  table.add(#NAME,                                                             \
            [](const KernelContext &ctx, const std::vector<TensorRef> &in,     \
               const std::vector<TensorRef> &out, const AttrMap &attrs) {      \
              return reduceKernel<math::REDUCER, TYPES, Loops>(#NAME, ctx, in, \
                                                               out, attrs);    \
            });
  ZRT_REDUCE(ReduceSum, SumReducer, NumericTypes)
  ZRT_REDUCE(ReduceMean, MeanReducer, NumericTypes)
  ZRT_REDUCE(ReduceMax, MaxReducer, NumericBoolTypes)
  ZRT_REDUCE(ReduceMin, MinReducer, NumericBoolTypes)
  ZRT_REDUCE(ReduceProd, ProdReducer, NumericTypes)
  ZRT_REDUCE(ReduceSumSquare, SumSquareReducer, NumericTypes)
  ZRT_REDUCE(ReduceL1, L1Reducer, NumericTypes)
  ZRT_REDUCE(ReduceL2, L2Reducer, NumericTypes)
  ZRT_REDUCE(ReduceLogSum, LogSumReducer, FloatTypes)
  ZRT_REDUCE(ReduceLogSumExp, LogSumExpReducer, FloatTypes)
#undef ZRT_REDUCE
  table.add("ArgMax", argMaxKernel<Loops>);
  table.add("ArgMin", argMinKernel<Loops>);
  table.add("CumSum", cumSumKernel<Loops>);
}

} // namespace reduce
} // namespace kernels
} // namespace zrt

#endif // ZRT_KERNELS_REDUCEKERNELS_H
