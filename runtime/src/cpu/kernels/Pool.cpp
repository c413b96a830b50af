//===- Pool.cpp - MaxPool and AveragePool ---------------------------------===//
//
// Pooling over the spatial dims of [N, C, D1..Dk]: each output element is
// its window's maximum or mean, the window's taps visited in row-major
// order, so the result does not depend on how the output elements are split
// across threads (contiguous ranges of them, by shape). Windows are clipped
// to the input; ceil_mode only shows in the output shape.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

namespace zrt {
namespace cpu {
namespace {

/// Shapes and attributes of one pool, checked.
struct PoolGeometry {
  std::vector<int64_t> in, kernel, out, strides, dilations, padBegin, padEnd;
  int64_t planes = 0, inSize = 1, outSize = 1, kernelSize = 1;
};

Status readPool(const char *op, const std::vector<TensorRef> &ins,
                const std::vector<TensorRef> &outs, const AttrMap &attrs,
                PoolGeometry &g) {
  ZRT_RETURN_IF_ERROR(checkArity(op, ins, outs, 1, 1, 1, 1));
  const TensorRef &x = ins[0], &y = outs[0];
  ZRT_RETURN_IF_ERROR(checkSameDType(op, x, "input X", y, "output"));
  if (x.rank() < 3 || y.rank() != x.rank())
    return kernelError(op, "operand ranks",
                       shapeString(x.shape) + " -> " + shapeString(y.shape),
                       "X [N, C, D1, ...] and Y of the same rank >= 3");
  const size_t k = size_t(x.rank() - 2);
  g.kernel = attrs.getInts("kernel_shape");
  std::vector<int64_t> pads;
  readWindowAttrs(attrs, k, g.strides, g.dilations, pads);
  if (g.kernel.size() != k || g.strides.size() != k ||
      g.dilations.size() != k || pads.size() != 2 * k)
    return kernelError(op, "kernel_shape/strides/dilations/pads entries",
                       std::to_string(g.kernel.size()) + "/" +
                           std::to_string(g.strides.size()) + "/" +
                           std::to_string(g.dilations.size()) + "/" +
                           std::to_string(pads.size()),
                       std::to_string(k) + "/" + std::to_string(k) + "/" +
                           std::to_string(k) + "/" + std::to_string(2 * k));
  for (size_t i = 0; i < k; ++i)
    if (g.kernel[i] < 1 || g.strides[i] < 1 || g.dilations[i] < 1 ||
        pads[i] < 0 || pads[k + i] < 0)
      return kernelError(
          op, "window of spatial dim " + std::to_string(i),
          "kernel " + std::to_string(g.kernel[i]) + ", stride " +
              std::to_string(g.strides[i]) + ", dilation " +
              std::to_string(g.dilations[i]) + ", pads " +
              std::to_string(pads[i]) + "+" + std::to_string(pads[k + i]),
          "positive kernel, stride and dilation, non-negative pads");
  if (y.shape[0] != x.shape[0] || y.shape[1] != x.shape[1])
    return kernelError(op, "output's [N, C]", shapeString(y.shape),
                       "X's " + std::to_string(x.shape[0]) + "x" +
                           std::to_string(x.shape[1]));
  g.planes = x.shape[0] * x.shape[1];
  for (size_t i = 0; i < k; ++i) {
    g.in.push_back(x.shape[2 + i]);
    g.out.push_back(y.shape[2 + i]);
    g.padBegin.push_back(pads[i]);
    g.padEnd.push_back(pads[k + i]);
    g.inSize *= x.shape[2 + i];
    g.outSize *= y.shape[2 + i];
    g.kernelSize *= g.kernel[i];
    // The output may be one longer than floor mode gives (ceil_mode), never
    // more: its last window must start inside the input or the begin padding.
    const int64_t span = x.shape[2 + i] + pads[i] + pads[k + i] -
                         ((g.kernel[i] - 1) * g.dilations[i] + 1);
    const int64_t floorOut = span < 0 ? 0 : span / g.strides[i] + 1;
    if (y.shape[2 + i] != floorOut && y.shape[2 + i] != floorOut + 1)
      return kernelError(op, "output size of spatial dim " + std::to_string(i),
                         std::to_string(y.shape[2 + i]),
                         std::to_string(floorOut) + " (or " +
                             std::to_string(floorOut + 1) + " with ceil_mode)");
  }
  return Status::ok();
}

/// Calls `fn(offset)` for the input offsets (within one plane) of output
/// position `o`'s window taps inside the input, in row-major tap order, and
/// returns how many taps lie inside [-begin, in + end) (the padded input).
template <typename Fn>
int64_t forEachTap(const PoolGeometry &g, int64_t o,
                   std::vector<int64_t> &start, std::vector<int64_t> &tap,
                   Fn &&fn) {
  const size_t k = g.in.size();
  for (size_t d = k; d-- > 0;) {
    start[d] = (o % g.out[d]) * g.strides[d] - g.padBegin[d];
    o /= g.out[d];
  }
  int64_t padded = 0;
  std::fill(tap.begin(), tap.end(), 0);
  for (int64_t t = 0; t < g.kernelSize; ++t) {
    int64_t offset = 0;
    bool inside = true, insidePadded = true;
    for (size_t d = 0; d < k; ++d) {
      const int64_t p = start[d] + tap[d] * g.dilations[d];
      inside &= p >= 0 && p < g.in[d];
      insidePadded &= p >= -g.padBegin[d] && p < g.in[d] + g.padEnd[d];
      offset = offset * g.in[d] + p;
    }
    padded += insidePadded;
    if (inside)
      fn(offset);
    for (size_t d = k; d-- > 0;) {
      if (++tap[d] < g.kernel[d])
        break;
      tap[d] = 0;
    }
  }
  return padded;
}

template <bool Max>
Status poolKernel(const KernelContext &ctx, const std::vector<TensorRef> &ins,
                  const std::vector<TensorRef> &outs, const AttrMap &attrs) {
  const char *op = Max ? "MaxPool" : "AveragePool";
  PoolGeometry g;
  ZRT_RETURN_IF_ERROR(readPool(op, ins, outs, attrs, g));
  const TensorRef &x = ins[0], &y = outs[0];
  const bool includePad = attrs.getInt("count_include_pad", 0) != 0;
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = x.as<T>();
    T *py = y.as<T>();
    const int64_t total = g.planes * g.outSize;
    parallelRange(
        ctx, total, rowGrain(g.kernelSize, kElementGrain),
        [&](int64_t begin, int64_t end) {
          std::vector<int64_t> start(g.in.size()), tap(g.in.size());
          for (int64_t i = begin; i < end; ++i) {
            const T *plane = px + (i / g.outSize) * g.inSize;
            if constexpr (Max) {
              T best = std::numeric_limits<T>::lowest();
              if constexpr (std::is_floating_point_v<T>)
                best = -std::numeric_limits<T>::infinity();
              forEachTap(g, i % g.outSize, start, tap, [&](int64_t off) {
                const T v = plane[off];
                if (v > best || v != v)
                  best = best != best ? best : v;
              });
              py[i] = best;
            } else {
              T sum = T(0);
              int64_t count = 0;
              const int64_t padded =
                  forEachTap(g, i % g.outSize, start, tap, [&](int64_t off) {
                    sum += plane[off];
                    ++count;
                  });
              const int64_t divisor = includePad ? padded : count;
              py[i] = divisor ? T(sum / T(divisor))
                              : std::numeric_limits<T>::quiet_NaN();
            }
          }
        });
  };
  if (Max ? !dispatchType(NumericTypes{}, x.dtype, run)
          : !dispatchType(FloatTypes{}, x.dtype, run))
    return Max ? dtypeError(op, "input X", x.dtype, NumericTypes{})
               : dtypeError(op, "input X", x.dtype, FloatTypes{});
  return Status::ok();
}

} // namespace

void registerPoolKernels(KernelTable &table) {
  table.add("MaxPool", poolKernel<true>);
  table.add("AveragePool", poolKernel<false>);
}

} // namespace cpu
} // namespace zrt
