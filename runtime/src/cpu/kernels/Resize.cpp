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

#include "KernelLayouts.h"

namespace zrt {
namespace cpu {
namespace {

struct ResizeParams {
  std::string mode, ctm, nearest;
  double cubicA = -0.75, extrapolation = 0;
  bool excludeOutside = false, antialias = false;
};

double cubicWeight(double x, double a) {
  x = std::fabs(x);
  if (x <= 1)
    return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2)
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

/// Taps of one dim of `in` -> `out` elements at `scale` (roiBegin/roiEnd only
/// for tf_crop_and_resize).
Status dimTaps(const ResizeParams &p, int64_t in, int64_t out, double scale,
               double roiBegin, double roiEnd, DimTaps &t) {
  const bool identity =
      out == in && std::fabs(scale - 1.0) <= 1e-9 &&
      (p.ctm != "tf_crop_and_resize" ||
       (std::fabs(roiBegin) <= 1e-9 && std::fabs(roiEnd - 1.0) <= 1e-9));
  t.outside.assign(size_t(out), 0);
  if (identity || in == 0) {
    t.width = 1;
    t.index.resize(size_t(out));
    t.weight.assign(size_t(out), 1.0);
    for (int64_t o = 0; o < out; ++o)
      t.index[size_t(o)] = std::min(o, std::max<int64_t>(in - 1, 0));
    return Status::ok();
  }
  const double outWidth = scale * double(in);
  // Taps per output coordinate, and (antialias) the first tap's offset.
  int64_t width = 2, first = 0;
  const double filterScale = std::min(scale, 1.0);
  if (p.mode == "cubic") {
    width = 4;
    first = -1;
    if (p.antialias) {
      first = int64_t(std::floor(-2 / filterScale)) + 1;
      width = 2 - 2 * first;
    }
  } else if (p.mode == "linear" && p.antialias) {
    first = int64_t(std::floor(-1 / filterScale)) + 1;
    width = 2 - 2 * first;
  } else if (p.mode == "nearest") {
    width = 1;
  }
  t.width = width;
  t.index.resize(size_t(out * width));
  t.weight.resize(size_t(out * width));
  std::vector<double> w(static_cast<size_t>(width));
  for (int64_t o = 0; o < out; ++o) {
    const double y = double(o);
    double x;
    if (p.ctm == "align_corners") {
      x = outWidth == 1 ? 0.0 : y * double(in - 1) / (outWidth - 1);
    } else if (p.ctm == "asymmetric") {
      x = y / scale;
    } else if (p.ctm == "tf_crop_and_resize") {
      x = outWidth == 1
              ? (roiEnd - roiBegin) * double(in - 1) / 2
              : y * (roiEnd - roiBegin) * double(in - 1) / (outWidth - 1);
      x += roiBegin * double(in - 1);
      t.outside[size_t(o)] = x < 0 || x > double(in - 1);
    } else if (p.ctm == "pytorch_half_pixel") {
      x = outWidth == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
    } else if (p.ctm == "half_pixel_symmetric") {
      const double adjustment = double(out) / outWidth;
      const double offset = double(in) / 2 * (1 - adjustment);
      x = offset + (y + 0.5) / scale - 0.5;
    } else if (p.ctm == "half_pixel") {
      x = (y + 0.5) / scale - 0.5;
    } else {
      return kernelError(
          "Resize", "coordinate_transformation_mode", "\"" + p.ctm + "\"",
          "half_pixel, half_pixel_symmetric, pytorch_half_pixel, "
          "align_corners, asymmetric or tf_crop_and_resize");
    }
    // The reference prefers the pixel on the left: an integer x has ratio 1
    // against the pixel before it.
    double base = std::floor(x);
    double ratio = x - base;
    if (ratio == 0) {
      base -= 1;
      ratio = 1;
    }
    const int64_t x0 = int64_t(base);
    int64_t start = x0 + first;
    if (p.mode == "nearest") {
      bool right;
      if (ratio == 1)
        right = true;
      else if (p.nearest == "round_prefer_floor")
        right = ratio > 0.5;
      else if (p.nearest == "round_prefer_ceil")
        right = ratio >= 0.5;
      else if (p.nearest == "floor")
        right = false;
      else if (p.nearest == "ceil")
        right = true;
      else
        return kernelError(
            "Resize", "nearest_mode", "\"" + p.nearest + "\"",
            "round_prefer_floor, round_prefer_ceil, floor or ceil");
      start = x0 + (right ? 1 : 0);
      w[0] = 1;
    } else if (p.mode == "linear") {
      if (p.antialias) {
        double sum = 0;
        for (int64_t j = 0; j < width; ++j) {
          w[size_t(j)] = std::clamp(
              1 - std::fabs(double(first + j) - ratio) * filterScale, 0.0, 1.0);
          sum += w[size_t(j)];
        }
        for (double &v : w)
          v /= sum;
      } else {
        w[0] = 1 - ratio;
        w[1] = ratio;
      }
    } else if (p.mode == "cubic") {
      if (p.antialias) {
        double sum = 0;
        for (int64_t j = 0; j < width; ++j) {
          w[size_t(j)] =
              cubicWeight(filterScale * (double(first + j) - ratio), p.cubicA);
          sum += w[size_t(j)];
        }
        for (double &v : w)
          v /= sum;
      } else {
        const double a = p.cubicA, r = ratio, s = 1 - ratio;
        w[0] = ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a;
        w[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
        w[2] = ((a + 2) * s - (a + 3)) * s * s + 1;
        w[3] = ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a;
      }
    } else {
      return kernelError("Resize", "mode", "\"" + p.mode + "\"",
                         "nearest, linear or cubic");
    }
    if (p.excludeOutside && p.mode != "nearest") {
      double sum = 0;
      for (int64_t j = 0; j < width; ++j) {
        if (start + j < 0 || start + j >= in)
          w[size_t(j)] = 0;
        sum += w[size_t(j)];
      }
      if (sum != 0)
        for (double &v : w)
          v /= sum;
    }
    for (int64_t j = 0; j < width; ++j) {
      t.index[size_t(o * width + j)] =
          std::clamp<int64_t>(start + j, 0, in - 1);
      t.weight[size_t(o * width + j)] = w[size_t(j)];
    }
  }
  return Status::ok();
}

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

Status prepareResize(const std::vector<TensorRef> &ins,
                     const std::vector<TensorRef> &outs, const AttrMap &attrs,
                     ResizeLayout &l) {
  ZRT_RETURN_IF_ERROR(checkArity("Resize", ins, outs, 1, 4, 1, 1));
  const TensorRef &x = ins[0], &y = outs[0];
  ZRT_RETURN_IF_ERROR(checkSameDType("Resize", x, "input X", y, "output"));
  const size_t rank = size_t(x.rank());
  if (size_t(y.rank()) != rank)
    return kernelError("Resize", "output rank", std::to_string(y.rank()),
                       std::to_string(rank) + " (X's)");
  ResizeParams p;
  p.mode = attrs.getString("mode", "nearest");
  p.ctm = attrs.getString("coordinate_transformation_mode", "half_pixel");
  p.nearest = attrs.getString("nearest_mode", "round_prefer_floor");
  p.cubicA = attrs.getFloat("cubic_coeff_a", -0.75);
  p.extrapolation = attrs.getFloat("extrapolation_value", 0.0);
  p.excludeOutside = attrs.getInt("exclude_outside", 0) != 0;
  p.antialias = attrs.getInt("antialias", 0) != 0;
  std::vector<double> scales(attrs.has("scales")
                                 ? std::vector<double>()
                                 : std::vector<double>(rank, 0.0));
  if (attrs.has("scales"))
    scales = attrs.entries().at("scales").floats;
  else
    for (size_t d = 0; d < rank; ++d)
      scales[d] = x.shape[d] ? double(y.shape[d]) / double(x.shape[d]) : 1.0;
  if (scales.size() != rank)
    return kernelError("Resize", "scales entries",
                       std::to_string(scales.size()),
                       std::to_string(rank) + " (one per dim)");
  std::vector<double> roi = attrs.has("roi") ? attrs.entries().at("roi").floats
                                             : std::vector<double>();
  if (p.ctm == "tf_crop_and_resize" && roi.size() != 2 * rank)
    return kernelError("Resize", "roi entries", std::to_string(roi.size()),
                       std::to_string(2 * rank) + " for tf_crop_and_resize");
  std::vector<DimTaps> &taps = l.taps;
  taps.assign(rank, DimTaps());
  for (size_t d = 0; d < rank; ++d) {
    if (!(scales[d] > 0))
      return kernelError("Resize", "scale of dim " + std::to_string(d),
                         std::to_string(scales[d]), "a positive number");
    if (x.shape[d] == 0 && y.shape[d] != 0)
      return kernelError("Resize", "dim " + std::to_string(d),
                         "an empty input dim", "an empty output dim");
    ZRT_RETURN_IF_ERROR(dimTaps(p, x.shape[d], y.shape[d], scales[d],
                                roi.empty() ? 0.0 : roi[d],
                                roi.empty() ? 1.0 : roi[rank + d], taps[d]));
  }
  if (p.mode != "nearest" && x.dtype != DType::F32 && x.dtype != DType::F64)
    return dtypeError("Resize", "input X (linear and cubic)", x.dtype,
                      FloatTypes{});
  if (!dispatchType(NumericTypes{}, x.dtype, [](auto) {}))
    return dtypeError("Resize", "input X", x.dtype, NumericTypes{});
  if (rank > size_t(math::kMaxResizeDims))
    return kernelError("Resize", "rank", std::to_string(rank),
                       "at most " + std::to_string(math::kMaxResizeDims));
  const std::vector<int64_t> inStrides = contiguousStrides(x.shape);
  math::ResizeView &v = l.base;
  v = math::ResizeView();
  v.rank = int(rank);
  v.combos = 1;
  for (size_t d = 0; d < rank; ++d) {
    v.outShape[d] = y.shape[d];
    v.inStrides[d] = inStrides[d];
    v.width[d] = taps[d].width;
    v.combos *= taps[d].width;
  }
  v.extrapolation = p.extrapolation;
  return Status::ok();
}

math::ResizeView ResizeLayout::view() const {
  math::ResizeView v = base;
  for (int d = 0; d < v.rank; ++d) {
    v.index[d] = taps[size_t(d)].index.data();
    v.weight[d] = taps[size_t(d)].weight.data();
    v.outside[d] = taps[size_t(d)].outside.data();
  }
  return v;
}

void registerResizeKernels(KernelTable &table) {
  table.add("Resize", resizeKernel);
}

} // namespace cpu
} // namespace zrt
