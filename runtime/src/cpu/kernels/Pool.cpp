//===- Pool.cpp - MaxPool and AveragePool ---------------------------------===//
//
// Pooling over the spatial dims of [N, C, D1..Dk]: each output element is
// its window's maximum or mean, the window's taps visited in row-major
// order, so the result does not depend on how the output elements are split
// across threads (contiguous ranges of them, by shape). MaxPoolGrad (the
// training backward) runs one [N, C] plane per task, in output order. Windows are clipped
// to the input; ceil_mode only shows in the output shape. The checks
// (preparePool, KernelLayouts.h) and the per-element math (math::PoolFn,
// math/WindowMath.h) are shared with the CUDA kernels.
//
//===----------------------------------------------------------------------===//

#include "KernelLayouts.h"

namespace zrt {
namespace cpu {
namespace {

Status readPool(const char *op, const std::vector<TensorRef> &ins,
                const std::vector<TensorRef> &outs, const AttrMap &attrs,
                PoolLayout &l) {
  ZRT_RETURN_IF_ERROR(checkArity(op, ins, outs, 1, 1, 1, 1));
  const TensorRef &x = ins[0], &y = outs[0];
  ZRT_RETURN_IF_ERROR(checkSameDType(op, x, "input X", y, "output"));
  if (x.rank() < 3 || y.rank() != x.rank())
    return kernelError(op, "operand ranks",
                       shapeString(x.shape) + " -> " + shapeString(y.shape),
                       "X [N, C, D1, ...] and Y of the same rank >= 3");
  const size_t k = size_t(x.rank() - 2);
  if (k > size_t(math::kMaxWindowDims))
    return kernelError(op, "spatial dims", std::to_string(k),
                       "at most " + std::to_string(math::kMaxWindowDims));
  std::vector<int64_t> kernel = attrs.getInts("kernel_shape");
  std::vector<int64_t> strides, dilations, pads;
  readWindowAttrs(attrs, k, strides, dilations, pads);
  if (kernel.size() != k || strides.size() != k || dilations.size() != k ||
      pads.size() != 2 * k)
    return kernelError(op, "kernel_shape/strides/dilations/pads entries",
                       std::to_string(kernel.size()) + "/" +
                           std::to_string(strides.size()) + "/" +
                           std::to_string(dilations.size()) + "/" +
                           std::to_string(pads.size()),
                       std::to_string(k) + "/" + std::to_string(k) + "/" +
                           std::to_string(k) + "/" + std::to_string(2 * k));
  for (size_t i = 0; i < k; ++i)
    if (kernel[i] < 1 || strides[i] < 1 || dilations[i] < 1 || pads[i] < 0 ||
        pads[k + i] < 0)
      return kernelError(
          op, "window of spatial dim " + std::to_string(i),
          "kernel " + std::to_string(kernel[i]) + ", stride " +
              std::to_string(strides[i]) + ", dilation " +
              std::to_string(dilations[i]) + ", pads " +
              std::to_string(pads[i]) + "+" + std::to_string(pads[k + i]),
          "positive kernel, stride and dilation, non-negative pads");
  if (y.shape[0] != x.shape[0] || y.shape[1] != x.shape[1])
    return kernelError(op, "output's [N, C]", shapeString(y.shape),
                       "X's " + std::to_string(x.shape[0]) + "x" +
                           std::to_string(x.shape[1]));
  math::Window &g = l.window;
  g = math::Window();
  g.dims = int(k);
  l.planes = x.shape[0] * x.shape[1];
  for (size_t i = 0; i < k; ++i) {
    g.in[i] = x.shape[2 + i];
    g.out[i] = y.shape[2 + i];
    g.kernel[i] = kernel[i];
    g.stride[i] = strides[i];
    g.dilation[i] = dilations[i];
    g.padBegin[i] = pads[i];
    g.padEnd[i] = pads[k + i];
    g.inSize *= x.shape[2 + i];
    g.outSize *= y.shape[2 + i];
    g.kernelSize *= kernel[i];
    // The output may be one longer than floor mode gives (ceil_mode), never
    // more: its last window must start inside the input or the begin padding.
    const int64_t span = x.shape[2 + i] + pads[i] + pads[k + i] -
                         ((kernel[i] - 1) * dilations[i] + 1);
    const int64_t floorOut = span < 0 ? 0 : span / strides[i] + 1;
    if (y.shape[2 + i] != floorOut && y.shape[2 + i] != floorOut + 1)
      return kernelError(op, "output size of spatial dim " + std::to_string(i),
                         std::to_string(y.shape[2 + i]),
                         std::to_string(floorOut) + " (or " +
                             std::to_string(floorOut + 1) + " with ceil_mode)");
  }
  l.includePad = attrs.getInt("count_include_pad", 0) != 0;
  return Status::ok();
}

template <bool Max>
Status poolKernel(const KernelContext &ctx, const std::vector<TensorRef> &ins,
                  const std::vector<TensorRef> &outs, const AttrMap &attrs) {
  PoolLayout l;
  ZRT_RETURN_IF_ERROR(preparePool(Max, ins, outs, attrs, l));
  const TensorRef &x = ins[0], &y = outs[0];
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const math::PoolFn<T, Max> fn{l.window, x.as<T>(), y.as<T>(), l.includePad};
    parallelRange(ctx, l.planes * l.window.outSize,
                  rowGrain(l.window.kernelSize, kElementGrain),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t i = begin; i < end; ++i)
                      fn(i);
                  });
  };
  if (Max ? !dispatchType(NumericTypes{}, x.dtype, run)
          : !dispatchType(FloatTypes{}, x.dtype, run))
    return Status::error("unreachable: dtype checked by preparePool");
  return Status::ok();
}

Status maxPoolGradKernel(const KernelContext &ctx, const std::vector<TensorRef> &ins,
                         const std::vector<TensorRef> &outs, const AttrMap &attrs) {
  PoolLayout l;
  ZRT_RETURN_IF_ERROR(prepareMaxPoolGrad(ins, outs, attrs, l));
  const TensorRef &dy = ins[0], &x = ins[1], &dx = outs[0];
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    // A plane is one task: its windows overlap, so their sums stay in order.
    const math::MaxPoolGradFn<T> fn{l.window, x.as<T>(), dy.as<T>(), dx.as<T>()};
    parallelRange(ctx, l.planes,
                  rowGrain(l.window.outSize * l.window.kernelSize, kElementGrain),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t p = begin; p < end; ++p)
                      fn(p);
                  });
  };
  if (!dispatchType(FloatTypes{}, x.dtype, run))
    return Status::error("unreachable: dtype checked by prepareMaxPoolGrad");
  return Status::ok();
}

} // namespace

Status prepareMaxPoolGrad(const std::vector<TensorRef> &ins,
                          const std::vector<TensorRef> &outs, const AttrMap &attrs,
                          PoolLayout &l) {
  const char *op = "MaxPoolGrad";
  ZRT_RETURN_IF_ERROR(checkArity(op, ins, outs, 2, 2, 1, 1));
  const TensorRef &dy = ins[0], &x = ins[1], &dx = outs[0];
  // The window geometry is MaxPool's from X to dY.
  ZRT_RETURN_IF_ERROR(readPool(op, {x}, {dy}, attrs, l));
  ZRT_RETURN_IF_ERROR(checkSameDType(op, x, "input X", dx, "output dX"));
  if (dx.shape != x.shape)
    return kernelError(op, "output dX's shape", shapeString(dx.shape),
                       "X's " + shapeString(x.shape));
  if (!dispatchType(FloatTypes{}, x.dtype, [](auto) {}))
    return dtypeError(op, "input X", x.dtype, FloatTypes{});
  return Status::ok();
}

Status preparePool(bool max, const std::vector<TensorRef> &ins,
                   const std::vector<TensorRef> &outs, const AttrMap &attrs,
                   PoolLayout &l) {
  const char *op = max ? "MaxPool" : "AveragePool";
  ZRT_RETURN_IF_ERROR(readPool(op, ins, outs, attrs, l));
  const DType dtype = ins[0].dtype;
  if (max && !dispatchType(NumericTypes{}, dtype, [](auto) {}))
    return dtypeError(op, "input X", dtype, NumericTypes{});
  if (!max && !dispatchType(FloatTypes{}, dtype, [](auto) {}))
    return dtypeError(op, "input X", dtype, FloatTypes{});
  return Status::ok();
}

void registerPoolKernels(KernelTable &table) {
  table.add("MaxPool", poolKernel<true>);
  table.add("AveragePool", poolKernel<false>);
  table.add("MaxPoolGrad", maxPoolGradKernel);
}

} // namespace cpu
} // namespace zrt
