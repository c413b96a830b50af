//===- Resize.cpp - Resize (nearest, linear, cubic) -----------------------===//
//
// ONNX Resize as its reference computes it (onnx/reference/ops/op_resize.py):
// per dim, each output coordinate maps to an input coordinate by the
// coordinate transformation, which selects taps (1 for nearest, 2 for
// linear, 4 for cubic, more with antialias) with weights; an output element
// is the sum over the product of its dims' taps, in a fixed order and in
// double. The taps depend on the shapes and attributes only and are computed
// once per call (prepareResize, shared with the CUDA kernel); output
// elements (math/ResizeMath.h, likewise shared) are split over threads in
// contiguous ranges.
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/CpuKernels.h"
#include "kernels/KernelLayouts.h"

namespace zrt {
namespace cpu {
using namespace kernels;
namespace {

Status resizeKernel(const KernelContext &ctx, const std::vector<TensorRef> &ins,
                    const std::vector<TensorRef> &outs, const AttrMap &attrs) {
  ResizeLayout l;
  ZRT_RETURN_IF_ERROR(prepareResize(ins, outs, attrs, l));
  const TensorRef &x = ins[0], &y = outs[0];
  const math::ResizeView view = l.view();
  auto interpolate = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const math::ResizeFn<T> fn{view, x.as<T>(), y.as<T>()};
    parallelRange(ctx, y.numel(), rowGrain(view.combos, kElementGrain),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t i = begin; i < end; ++i)
                      fn(i);
                  });
  };
  if (!dispatchType(NumericTypes{}, x.dtype, interpolate))
    return Status::error("unreachable: dtype checked by prepareResize");
  return Status::ok();
}

} // namespace


void registerResizeKernels(KernelTable &table) {
  table.add("Resize", resizeKernel);
}

} // namespace cpu
} // namespace zrt
