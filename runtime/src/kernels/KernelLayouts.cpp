//===- KernelLayouts.cpp - The operand checks and layouts of the spatial ops ---===//
//
// The prepare* functions KernelLayouts.h declares: each op's operand checks
// and the layout both backends' kernels run from (the CPU kernels in
// cpu/kernels, the CUDA kernels in cuda/).
//
//===----------------------------------------------------------------------===//

#include "kernels/KernelLayouts.h"
#include "math/FusedMath.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace zrt {
namespace kernels {
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

/// The input coordinate output element `o` of a dim of `in` -> `out`
/// elements at `scale` maps to, by p.ctm (roiBegin/roiEnd only for
/// tf_crop_and_resize).
Status sourceCoordinate(const ResizeParams &p, int64_t o, int64_t in, int64_t out,
                        double scale, double roiBegin, double roiEnd, double &x) {
  const double y = double(o);
  const double outWidth = scale * double(in);
  if (p.ctm == "align_corners") {
    x = outWidth == 1 ? 0.0 : y * double(in - 1) / (outWidth - 1);
  } else if (p.ctm == "asymmetric") {
    x = y / scale;
  } else if (p.ctm == "tf_crop_and_resize") {
    x = outWidth == 1
            ? (roiEnd - roiBegin) * double(in - 1) / 2
            : y * (roiEnd - roiBegin) * double(in - 1) / (outWidth - 1);
    x += roiBegin * double(in - 1);
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
  return Status::ok();
}

/// The weights `w` of the taps from `start` (set here for nearest) of an
/// output whose coordinate is pixel x0 plus `ratio` in (0, 1], by p.mode;
/// `first` is the first tap's offset and `filterScale` the antialias scale.
Status tapWeights(const ResizeParams &p, double ratio, int64_t x0, int64_t first,
                  double filterScale, int64_t &start, std::vector<double> &w) {
  const int64_t width = int64_t(w.size());
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
  return Status::ok();
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
    double x = 0;
    ZRT_RETURN_IF_ERROR(sourceCoordinate(p, o, in, out, scale, roiBegin, roiEnd, x));
    if (p.ctm == "tf_crop_and_resize")
      t.outside[size_t(o)] = x < 0 || x > double(in - 1);
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
    ZRT_RETURN_IF_ERROR(tapWeights(p, ratio, x0, first, filterScale, start, w));
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

} // namespace

math::Window ConvGeometry::window() const {
  math::Window w;
  w.dims = int(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    w.in[d] = in[d];
    w.out[d] = out[d];
    w.kernel[d] = kernel[d];
    w.stride[d] = strides[d];
    w.dilation[d] = dilations[d];
    w.padBegin[d] = padBegin[d];
  }
  w.inSize = inSize;
  w.outSize = outSize;
  w.kernelSize = kernelSize;
  return w;
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

Status prepareConv(const char *op, const std::vector<TensorRef> &ins,
                   const std::vector<TensorRef> &outs, const AttrMap &attrs,
                   bool transposed, ConvGeometry &g) {
  ZRT_RETURN_IF_ERROR(checkArity(op, ins, outs, 2, 3, 1, 1));
  const TensorRef &x = ins[0], &w = ins[1], &y = outs[0];
  ZRT_RETURN_IF_ERROR(checkSameDType(op, x, "input X", w, "input W"));
  ZRT_RETURN_IF_ERROR(checkSameDType(op, x, "input X", y, "output"));
  if (x.rank() < 3 || w.rank() != x.rank() || y.rank() != x.rank())
    return kernelError(op, "operand ranks",
                       shapeString(x.shape) + ", " + shapeString(w.shape) +
                           " -> " + shapeString(y.shape),
                       "X [N, C, D1, ...], W and Y of the same rank >= 3");
  const size_t k = size_t(x.rank() - 2);
  if (k > size_t(math::kMaxWindowDims))
    return kernelError(op, "spatial dims", std::to_string(k),
                       "at most " + std::to_string(math::kMaxWindowDims));
  g.batch = x.shape[0];
  g.inChannels = x.shape[1];
  g.group = attrs.getInt("group", 1);
  std::vector<int64_t> pads;
  readWindowAttrs(attrs, k, g.strides, g.dilations, pads);
  if (g.strides.size() != k || g.dilations.size() != k || pads.size() != 2 * k)
    return kernelError(op, "strides/dilations/pads entries",
                       std::to_string(g.strides.size()) + "/" +
                           std::to_string(g.dilations.size()) + "/" +
                           std::to_string(pads.size()),
                       std::to_string(k) + "/" + std::to_string(k) + "/" +
                           std::to_string(2 * k));
  for (size_t i = 0; i < k; ++i)
    if (g.strides[i] < 1 || g.dilations[i] < 1)
      return kernelError(
          op, "stride or dilation of spatial dim " + std::to_string(i),
          std::to_string(g.strides[i]) + ", " + std::to_string(g.dilations[i]),
          "positive values");
  if (g.group < 1 || g.inChannels % g.group)
    return kernelError(op, "group", std::to_string(g.group),
                       "a positive divisor of the " +
                           std::to_string(g.inChannels) + " input channels");
  g.outChannels = transposed ? w.shape[1] * g.group : w.shape[0];
  const int64_t wChannels = transposed ? w.shape[0] : w.shape[1] * g.group;
  if (wChannels != g.inChannels || (!transposed && g.outChannels % g.group))
    return kernelError(op, "W's shape", shapeString(w.shape),
                       transposed
                           ? "[C, M/group, K1, ...] with C = X's channels"
                           : "[M, C/group, K1, ...] with M divisible by group");
  std::vector<int64_t> expected{g.batch, g.outChannels};
  for (size_t i = 0; i < k; ++i) {
    const int64_t in = x.shape[2 + i], kern = w.shape[2 + i];
    const int64_t extent = (kern - 1) * g.dilations[i] + 1;
    const int64_t begin = pads[i], end = pads[k + i];
    if (!transposed && (begin < 0 || end < 0))
      return kernelError(op, "pads",
                         std::to_string(begin) + ", " + std::to_string(end),
                         "non-negative values");
    int64_t o = transposed ? g.strides[i] * (in - 1) + extent - begin - end
                           : (in + begin + end - extent) / g.strides[i] + 1;
    if (!transposed && in + begin + end < extent)
      o = 0;
    expected.push_back(o);
    g.in.push_back(in);
    g.kernel.push_back(kern);
    g.padBegin.push_back(begin);
    g.inSize *= in;
    g.kernelSize *= kern;
  }
  ZRT_RETURN_IF_ERROR(checkShape(op, "output", y, expected));
  g.out.assign(expected.begin() + 2, expected.end());
  g.outSize = productOf(expected, 2, expected.size());
  if (hasOperand(ins, 2)) {
    ZRT_RETURN_IF_ERROR(checkSameDType(op, x, "input X", ins[2], "input B"));
    ZRT_RETURN_IF_ERROR(checkShape(op, "input B", ins[2], {g.outChannels}));
  }
  if (!dispatchType(FloatTypes{}, x.dtype, [](auto) {}))
    return dtypeError(op, "input X", x.dtype, FloatTypes{});
  return Status::ok();
}

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

Status prepareBatchNorm(const std::vector<TensorRef> &in,
                        const std::vector<TensorRef> &out, const AttrMap &attrs,
                        BatchNormLayout &l) {
  const char *op = "BatchNormalization";
  ZRT_RETURN_IF_ERROR(checkArity(op, in, out, 5, 5, 1, 1));
  const TensorRef &x = in[0], &y = out[0];
  ZRT_RETURN_IF_ERROR(checkSameDType(op, x, "input X", y, "output"));
  if (x.rank() < 2)
    return kernelError(op, "rank of X", shapeString(x.shape),
                       "[N, C, ...] (rank >= 2)");
  ZRT_RETURN_IF_ERROR(checkShape(op, "output", y, x.shape));
  l.channels = x.shape[1];
  static const char *const names[] = {"scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; ++i) {
    ZRT_RETURN_IF_ERROR(
        checkShape(op, names[i - 1], in[size_t(i)], {l.channels}));
    ZRT_RETURN_IF_ERROR(
        checkSameDType(op, x, "input X", in[size_t(i)], names[i - 1]));
  }
  l.epsilon = attrs.getFloat("epsilon", 1e-5);
  l.inner = productOf(x.shape, 2, x.shape.size());
  if (!dispatchType(FloatTypes{}, x.dtype, [](auto) {}))
    return dtypeError(op, "input X", x.dtype, FloatTypes{});
  return Status::ok();
}

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

Status prepareTopK(const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out, const AttrMap &attrs,
                   TopKLayout &l) {
  ZRT_RETURN_IF_ERROR(checkArity("TopK", in, out, 1, 2, 2, 2));
  const TensorRef &x = in[0], &values = out[0], &indices = out[1];
  ZRT_RETURN_IF_ERROR(
      checkSameDType("TopK", x, "input X", values, "output Values"));
  if (indices.dtype != DType::I64)
    return kernelError("TopK", "dtype of output Indices",
                       dtypeName(indices.dtype), "i64");
  const int64_t axis = attrs.getInt("axis", x.rank() - 1);
  ZRT_RETURN_IF_ERROR(splitAtAxis("TopK", x.shape, axis, l.split));
  l.k = attrs.getInt("k", -1);
  if (l.k < 0 || l.k > l.split.axis)
    return kernelError("TopK", "k", std::to_string(l.k),
                       "0 <= k <= " + std::to_string(l.split.axis) +
                           " (the axis' size)");
  std::vector<int64_t> expected = x.shape;
  if (x.rank() > 0)
    expected[size_t(axis)] = l.k;
  ZRT_RETURN_IF_ERROR(checkShape("TopK", "output Values", values, expected));
  ZRT_RETURN_IF_ERROR(checkShape("TopK", "output Indices", indices, expected));
  l.largest = attrs.getInt("largest", 1) != 0;
  if (!dispatchType(NumericTypes{}, x.dtype, [](auto) {}))
    return dtypeError("TopK", "input X", x.dtype, NumericTypes{});
  return Status::ok();
}

Status prepareOneHot(const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out, const AttrMap &attrs,
                     OneHotLayout &l) {
  ZRT_RETURN_IF_ERROR(checkArity("OneHot", in, out, 2, 3, 1, 1));
  // (indices, values) as the compiler emits them; (indices, depth, values)
  // as ONNX lists them.
  const TensorRef &indices = in[0], &values = in.size() == 3 ? in[2] : in[1];
  const TensorRef &y = out[0];
  ZRT_RETURN_IF_ERROR(
      checkSameDType("OneHot", values, "input values", y, "output"));
  if (values.numel() != 2)
    return kernelError("OneHot", "values' element count",
                       std::to_string(values.numel()), "2 (off, on)");
  const int64_t depth = attrs.getInt("depth", -1);
  const int64_t axis = attrs.getInt("axis", indices.rank());
  if (axis < 0 || axis > indices.rank())
    return kernelError("OneHot", "axis", std::to_string(axis),
                       "0 <= axis <= " + std::to_string(indices.rank()));
  std::vector<int64_t> expected = indices.shape;
  expected.insert(expected.begin() + axis, depth);
  if (depth < 1)
    return kernelError("OneHot", "depth", std::to_string(depth),
                       "a positive size");
  ZRT_RETURN_IF_ERROR(checkShape("OneHot", "output", y, expected));
  if (!dispatchType(NumericTypes{}, indices.dtype, [](auto) {}))
    return dtypeError("OneHot", "input indices", indices.dtype, NumericTypes{});
  l.indices = &indices;
  l.values = &values;
  l.depth = depth;
  l.outer = productOf(indices.shape, 0, size_t(axis));
  l.inner = productOf(indices.shape, size_t(axis), indices.shape.size());
  return Status::ok();
}

Status prepareFused(const std::vector<TensorRef> &in,
                    const std::vector<TensorRef> &out, const AttrMap &attrs,
                    FusedProgram &p, bool halfOperands) {
  const char *name = "FusedElementwise";
  ZRT_RETURN_IF_ERROR(checkArity(name, in, out, 0, size_t(-1), 1, 1));
  const TensorRef &y = out[0];
  auto typeOk = [&](DType t) {
    return t == DType::F32 || (halfOperands && isHalf(t));
  };
  for (size_t i = 0; i < in.size(); ++i)
    if (!typeOk(in[i].dtype))
      return halfOperands ? dtypeError(name, "input " + std::to_string(i), in[i].dtype,
                                       TypeList<float, Float16, BFloat16>{})
                          : dtypeError(name, "input " + std::to_string(i), in[i].dtype,
                                       TypeList<float>{});
  if (!typeOk(y.dtype))
    return halfOperands
               ? dtypeError(name, "output", y.dtype, TypeList<float, Float16, BFloat16>{})
               : dtypeError(name, "output", y.dtype, TypeList<float>{});

  const std::vector<int64_t> code = attrs.getInts("ops");
  const std::vector<double> constants =
      attrs.has("constants") ? attrs.entries().at("constants").floats
                             : std::vector<double>();
  if (code.empty() || code.size() % 3 != 0)
    return kernelError(name, "bad attribute ops",
                       std::to_string(code.size()) + " integers",
                       "3 per op, at least one op");
  const int64_t numIn = int64_t(in.size());
  const int64_t numOps = int64_t(code.size() / 3);
  std::vector<FusedOp> &ops = p.ops;
  ops.assign(size_t(numOps), FusedOp());
  auto validRef = [&](int64_t ref, int64_t op) {
    if (ref < 0)
      return -ref - 1 < int64_t(constants.size());
    return ref < numIn + op;
  };
  for (int64_t k = 0; k < numOps; ++k) {
    FusedOp &op = ops[size_t(k)];
    op.code = code[size_t(3 * k)];
    op.a = code[size_t(3 * k + 1)];
    op.b = code[size_t(3 * k + 2)];
    const std::string where = "op " + std::to_string(k);
    if (op.code < 0 || op.code >= math::kFusedNumOpcodes)
      return kernelError(name, "unknown opcode",
                         where + ": " + std::to_string(op.code),
                         "0 to " + std::to_string(math::kFusedNumOpcodes - 1));
    if (!validRef(op.a, k) ||
        (math::isFusedBinary(op.code) && !validRef(op.b, k)))
      return kernelError(name, "bad operand",
                         where + ": " + std::to_string(op.a) + ", " +
                             std::to_string(op.b),
                         "an input, an earlier op's result or a constant");
    if (op.code == math::kFusedPow && op.b >= 0)
      return kernelError(name, "Pow exponent is not a constant", where,
                         "a constant (negative operand)");
  }

  p.plans.assign(size_t(numIn), BroadcastPlan());
  for (int64_t i = 0; i < numIn; ++i)
    ZRT_RETURN_IF_ERROR(planBroadcast(name, y.shape, {&in[size_t(i)].shape},
                                      p.plans[size_t(i)]));
  p.constants.resize(constants.size());
  for (size_t c = 0; c < constants.size(); ++c)
    p.constants[c] = float(constants[c]);
  const bool hasTypes = attrs.has("op_types"), hasRound = attrs.has("round_to");
  if (hasTypes && hasRound)
    return kernelError(name, "both op_types and round_to", "", "one of them");
  if (hasRound) {
    const std::string round = attrs.getString("round_to", "");
    DType t = DType::F32;
    if (round == "bf16")
      t = DType::BF16;
    else if (round == "f16")
      t = DType::F16;
    else
      return kernelError(name, "bad attribute round_to", round, "bf16 or f16");
    for (FusedOp &op : ops)
      op.round = t;
  }
  if (hasTypes) {
    const std::vector<int64_t> types = attrs.getInts("op_types");
    if (int64_t(types.size()) != numOps)
      return kernelError(name, "bad attribute op_types",
                         std::to_string(types.size()) + " integers",
                         "one per op (" + std::to_string(numOps) + ")");
    for (int64_t k = 0; k < numOps; ++k) {
      const int64_t t = types[size_t(k)];
      if (t < 0 || t > 2)
        return kernelError(name, "bad attribute op_types",
                           "op " + std::to_string(k) + ": " + std::to_string(t),
                           "0 (f32), 1 (f16) or 2 (bf16)");
      ops[size_t(k)].round = t == 1 ? DType::F16 : t == 2 ? DType::BF16 : DType::F32;
    }
  }
  return Status::ok();
}

Status prepareMatMul(const std::vector<TensorRef> &in,
                     const std::vector<TensorRef> &out, MatMulLayout &l,
                     bool halfTypes) {
  ZRT_RETURN_IF_ERROR(checkArity("MatMul", in, out, 2, 2, 1, 1));
  const TensorRef &a = in[0], &b = in[1], &y = out[0];
  ZRT_RETURN_IF_ERROR(checkSameDType("MatMul", a, "input A", b, "input B"));
  ZRT_RETURN_IF_ERROR(checkSameDType("MatMul", a, "input A", y, "output"));
  if (a.rank() == 0 || b.rank() == 0)
    return kernelError("MatMul", "scalar operand",
                       shapeString(a.shape) + " and " + shapeString(b.shape),
                       "operands of rank >= 1");
  // Promote 1-D operands: A [K] -> [1, K], B [K] -> [K, 1].
  const bool aVector = a.rank() == 1, bVector = b.rank() == 1;
  l.m = aVector ? 1 : a.shape[size_t(a.rank() - 2)];
  l.k = a.shape.back();
  const int64_t kb = bVector ? b.shape[0] : b.shape[size_t(b.rank() - 2)];
  l.n = bVector ? 1 : b.shape.back();
  if (l.k != kb)
    return kernelError("MatMul", "inner dimensions differ",
                       shapeString(a.shape) + " x " + shapeString(b.shape),
                       "A's last dim equal to B's second-to-last");
  l.aBatch.assign(a.shape.begin(), a.shape.end() - (aVector ? 1 : 2));
  l.bBatch.assign(b.shape.begin(), b.shape.end() - (bVector ? 1 : 2));
  const size_t dropped = (aVector ? 0 : 1) + (bVector ? 0 : 1);
  if (y.shape.size() < dropped)
    return kernelError("MatMul", "output rank too small", shapeString(y.shape),
                       "rank >= " + std::to_string(dropped));
  l.batch.assign(y.shape.begin(), y.shape.end() - dropped);
  std::vector<int64_t> expected = l.batch;
  if (!aVector)
    expected.push_back(l.m);
  if (!bVector)
    expected.push_back(l.n);
  ZRT_RETURN_IF_ERROR(checkShape("MatMul", "output", y, expected));
  ZRT_RETURN_IF_ERROR(
      planBroadcast("MatMul", l.batch, {&l.aBatch, &l.bBatch}, l.plan));

  if (halfTypes ? !dispatchType(ProductTypes{}, a.dtype, [](auto) {})
                : !dispatchType(NumericTypes{}, a.dtype, [](auto) {}))
    return halfTypes ? dtypeError("MatMul", "input A", a.dtype, ProductTypes{})
                     : dtypeError("MatMul", "input A", a.dtype, NumericTypes{});
  return Status::ok();
}

Status prepareGemm(const std::vector<TensorRef> &in,
                   const std::vector<TensorRef> &out, const AttrMap &attrs,
                   GemmLayout &l, bool halfTypes) {
  ZRT_RETURN_IF_ERROR(checkArity("Gemm", in, out, 2, 3, 1, 1));
  const TensorRef &a = in[0], &b = in[1], &y = out[0];
  ZRT_RETURN_IF_ERROR(checkSameDType("Gemm", a, "input A", b, "input B"));
  ZRT_RETURN_IF_ERROR(checkSameDType("Gemm", a, "input A", y, "output"));
  l.transA = attrs.getInt("transA", 0) != 0;
  l.transB = attrs.getInt("transB", 0) != 0;
  l.alpha = attrs.getFloat("alpha", 1.0);
  l.beta = attrs.getFloat("beta", 1.0);
  if (a.rank() != 2 || b.rank() != 2)
    return kernelError("Gemm", "operands must be matrices",
                       shapeString(a.shape) + " and " + shapeString(b.shape),
                       "rank 2 and rank 2");
  l.m = l.transA ? a.shape[1] : a.shape[0];
  l.k = l.transA ? a.shape[0] : a.shape[1];
  const int64_t kb = l.transB ? b.shape[1] : b.shape[0];
  l.n = l.transB ? b.shape[0] : b.shape[1];
  if (l.k != kb)
    return kernelError("Gemm", "inner dimensions differ",
                       shapeString(a.shape) + " x " + shapeString(b.shape) +
                           (l.transA ? " transA" : "") +
                           (l.transB ? " transB" : ""),
                       "equal K");
  ZRT_RETURN_IF_ERROR(checkShape("Gemm", "output", y, {l.m, l.n}));
  l.hasC = hasOperand(in, 2) && l.beta != 0.0;
  if (l.hasC) {
    ZRT_RETURN_IF_ERROR(checkSameDType("Gemm", a, "input A", in[2], "input C"));
    // The checks of the broadcast copy of C to Y the kernels start with.
    BroadcastPlan plan;
    ZRT_RETURN_IF_ERROR(planBroadcastCopy("Gemm", in[2], y, plan));
  } else {
    l.beta = 0.0;
  }
  if (halfTypes ? !dispatchType(ProductTypes{}, a.dtype, [](auto) {})
                : !dispatchType(NumericTypes{}, a.dtype, [](auto) {}))
    return halfTypes ? dtypeError("Gemm", "input A", a.dtype, ProductTypes{})
                     : dtypeError("Gemm", "input A", a.dtype, NumericTypes{});
  return Status::ok();
}

} // namespace kernels
} // namespace zrt
