//===- Selection.cpp - TopK and OneHot ------------------------------------===//
//
// TopK picks the k largest (or smallest) entries of each line along an axis,
// sorted, ties to the lower index (ONNX's rule; NaN counts as larger than
// every number, as in onnxruntime); lines are independent and split over
// threads. OneHot writes the on value at each index and the off value
// elsewhere. The checks (prepareTopK, prepareOneHot: KernelLayouts.h), TopK's
// order and OneHot's elements (math/SelectionMath.h) are shared with the
// CUDA kernels (cuda/SelectionKernels.cu).
//
//===----------------------------------------------------------------------===//

#include "cpu/kernels/CpuKernels.h"
#include "kernels/KernelLayouts.h"
#include "math/SelectionMath.h"

#include <numeric>

namespace zrt {
namespace cpu {
using namespace kernels;
namespace {

Status topKKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                  const std::vector<TensorRef> &out, const AttrMap &attrs) {
  TopKLayout l;
  ZRT_RETURN_IF_ERROR(prepareTopK(in, out, attrs, l));
  const TensorRef &x = in[0], &values = out[0], &indices = out[1];
  const AxisSplit split = l.split;
  const int64_t k = l.k;
  const bool largest = l.largest;
  if (!dispatchType(NumericTypes{}, x.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T *px = x.as<T>();
        T *pv = values.as<T>();
        int64_t *pi = indices.as<int64_t>();
        const int64_t lines = split.outer * split.inner, n = split.axis;
        // a before b: math::topKBefore (a strict total order).
        auto before = [&](const T *line, int64_t stride) {
          return [=](int64_t a, int64_t b) {
            return math::topKBefore(line[a * stride], a, line[b * stride], b,
                                    largest);
          };
        };
        parallelRange(
            ctx, lines, rowGrain(n, kElementGrain),
            [&](int64_t begin, int64_t end) {
              std::vector<int64_t> order(static_cast<size_t>(n));
              for (int64_t l = begin; l < end; ++l) {
                const int64_t o = l / split.inner, i = l % split.inner;
                const T *line = px + o * n * split.inner + i;
                std::iota(order.begin(), order.end(), int64_t(0));
                std::partial_sort(order.begin(), order.begin() + k, order.end(),
                                  before(line, split.inner));
                for (int64_t j = 0; j < k; ++j) {
                  const int64_t at = (o * k + j) * split.inner + i;
                  pv[at] = line[order[size_t(j)] * split.inner];
                  pi[at] = order[size_t(j)];
                }
              }
            });
      }))
    return Status::error("unreachable: dtype checked by prepareTopK");
  return Status::ok();
}

Status oneHotKernel(const KernelContext &ctx, const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &attrs) {
  OneHotLayout l;
  ZRT_RETURN_IF_ERROR(prepareOneHot(in, out, attrs, l));
  const TensorRef &indices = *l.indices, &values = *l.values, &y = out[0];
  const int64_t depth = l.depth, inner = l.inner;
  dispatchType(NumericTypes{}, indices.dtype, [&](auto itag) {
    using I = typename decltype(itag)::type;
    const I *idx = indices.as<I>();
    dispatchBySize(dtypeSize(y.dtype), [&](auto vtag) {
      using U = typename decltype(vtag)::type;
      const U off = values.as<U>()[0], on = values.as<U>()[1];
      U *py = y.as<U>();
      parallelRange(ctx, l.outer * depth, rowGrain(inner, kElementGrain),
                    [&](int64_t begin, int64_t end) {
                      for (int64_t r = begin; r < end; ++r) {
                        const int64_t o = r / depth, d = r % depth;
                        const I *src = idx + o * inner;
                        U *dst = py + r * inner;
                        for (int64_t i = 0; i < inner; ++i)
                          dst[i] =
                              math::oneHotIndex(src[i], depth) == d ? on : off;
                      }
                    });
    });
  });
  return Status::ok();
}

} // namespace

void registerSelectionKernels(KernelTable &table) {
  table.add("TopK", topKKernel);
  table.add("OneHot", oneHotKernel);
}

} // namespace cpu
} // namespace zrt
