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

#include "cpu/kernels/CpuKernels.h"
#include "kernels/KernelLayouts.h"

namespace zrt {
namespace cpu {
using namespace kernels;
namespace {


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

void registerPoolKernels(KernelTable &table) {
  table.add("MaxPool", poolKernel<true>);
  table.add("AveragePool", poolKernel<false>);
  table.add("MaxPoolGrad", maxPoolGradKernel);
}

} // namespace cpu
} // namespace zrt
