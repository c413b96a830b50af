//===- SpatialTest.cpp - Convolution, pooling, resampling, selection ------===//
//
// Conv and ConvTranspose against direct loops, pooling windows,
// BatchNormalization, Resize's modes, TopK and OneHot.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace zrt::kerneltest;

namespace {

//===----------------------------------------------------------------------===//
// Convolution, pooling, resampling, selection
//===----------------------------------------------------------------------===//

/// A direct N-d convolution (or, transposed, its adjoint scattered from X)
/// in double: the independent reference of the Conv / ConvTranspose tests.
struct ConvCase {
  std::vector<int64_t> x, w;
  int64_t group;
  std::vector<int64_t> strides, dilations, pads; // pads: begins, then ends
  bool bias;
};

std::vector<int64_t> convOutShape(const ConvCase &c, bool transposed) {
  const size_t k = c.x.size() - 2;
  std::vector<int64_t> out{c.x[0], transposed ? c.w[1] * c.group : c.w[0]};
  for (size_t i = 0; i < k; ++i) {
    const int64_t extent = (c.w[2 + i] - 1) * c.dilations[i] + 1;
    out.push_back(transposed
                      ? c.strides[i] * (c.x[2 + i] - 1) + extent - c.pads[i] -
                            c.pads[k + i]
                      : (c.x[2 + i] + c.pads[i] + c.pads[k + i] - extent) /
                                c.strides[i] +
                            1);
  }
  return out;
}

std::vector<double> naiveConv(const ConvCase &c, const std::vector<float> &x,
                              const std::vector<float> &w,
                              const std::vector<float> &b, bool transposed) {
  const size_t k = c.x.size() - 2;
  const std::vector<int64_t> yShape = convOutShape(c, transposed);
  std::vector<double> y(size_t(product(yShape)), 0.0);
  const int64_t cIn = c.x[1], mOut = yShape[1];
  const int64_t cg = cIn / c.group, mg = mOut / c.group;
  std::vector<int64_t> kShape(c.w.begin() + 2, c.w.end());
  std::vector<int64_t> xSpatial(c.x.begin() + 2, c.x.end());
  std::vector<int64_t> ySpatial(yShape.begin() + 2, yShape.end());
  const int64_t kSize = product(kShape), xSize = product(xSpatial),
                ySize = product(ySpatial);
  for (int64_t n = 0; n < c.x[0]; ++n)
    for (int64_t m = 0; m < mOut; ++m) {
      const int64_t g = m / mg;
      for (int64_t ci = 0; ci < cg; ++ci)
        for (int64_t t = 0; t < kSize; ++t) {
          const std::vector<int64_t> tap = unflatten(t, kShape);
          const int64_t channel = g * cg + ci;
          const double wv = transposed
                                ? w[size_t((channel * mg + m % mg) * kSize + t)]
                                : w[size_t((m * cg + ci) * kSize + t)];
          if (!transposed) {
            for (int64_t o = 0; o < ySize; ++o) {
              const std::vector<int64_t> oi = unflatten(o, ySpatial);
              int64_t flat = 0;
              bool inside = true;
              for (size_t d = 0; d < k; ++d) {
                const int64_t p =
                    oi[d] * c.strides[d] - c.pads[d] + tap[d] * c.dilations[d];
                inside &= p >= 0 && p < xSpatial[d];
                flat = flat * xSpatial[d] + p;
              }
              if (inside)
                y[size_t((n * mOut + m) * ySize + o)] +=
                    wv * x[size_t((n * cIn + channel) * xSize + flat)];
            }
          } else {
            for (int64_t i = 0; i < xSize; ++i) {
              const std::vector<int64_t> ii = unflatten(i, xSpatial);
              int64_t flat = 0;
              bool inside = true;
              for (size_t d = 0; d < k; ++d) {
                const int64_t p =
                    ii[d] * c.strides[d] - c.pads[d] + tap[d] * c.dilations[d];
                inside &= p >= 0 && p < ySpatial[d];
                flat = flat * ySpatial[d] + p;
              }
              if (inside)
                y[size_t((n * mOut + m) * ySize + flat)] +=
                    wv * x[size_t((n * cIn + channel) * xSize + i)];
            }
          }
        }
      if (!b.empty())
        for (int64_t o = 0; o < ySize; ++o)
          y[size_t((n * mOut + m) * ySize + o)] += b[size_t(m)];
    }
  return y;
}

AttrMap convAttrs(const ConvCase &c) {
  return attrs({{"group", ints({c.group})},
                {"strides", ints(c.strides)},
                {"dilations", ints(c.dilations)},
                {"pads", ints(c.pads)}});
}

// Tests that Conv (im2col + GEMM, and the 1x1 path) and ConvTranspose
// (GEMM + col2im) match a direct loop in double, 1-D to 3-D, with groups,
// strides, dilations, asymmetric pads and bias, on 1 and 4 threads.
TEST(Conv, ConvAndConvTransposeMatchDirectLoops) {
  const std::vector<ConvCase> cases = {
      {{2, 4, 9, 7}, {6, 2, 3, 3}, 2, {1, 1}, {1, 1}, {1, 0, 1, 2}, true},
      {{1, 3, 11, 10}, {5, 3, 3, 2}, 1, {2, 3}, {2, 1}, {0, 1, 2, 0}, false},
      {{2, 6, 5, 5},
       {6, 1, 3, 3},
       6,
       {1, 1},
       {1, 1},
       {1, 1, 1, 1},
       true}, // depthwise
      {{2, 8, 6, 6},
       {4, 8, 1, 1},
       1,
       {1, 1},
       {1, 1},
       {0, 0, 0, 0},
       true},                                             // pointwise
      {{3, 4, 33}, {6, 2, 3}, 2, {2}, {1}, {1, 1}, true}, // 1-D
      {{1, 2, 4, 5, 3},
       {4, 2, 2, 3, 2},
       1,
       {1, 2, 1},
       {1, 1, 2},
       {1, 0, 0, 0, 1, 1},
       false},
      {{2, 3, 40, 40},
       {8, 3, 8, 8},
       1,
       {8, 8},
       {1, 1},
       {0, 0, 0, 0},
       true}, // patches
  };
  for (bool transposed : {false, true})
    for (const ConvCase &base : cases) {
      ConvCase c = base;
      if (transposed) // W [C, M/group, K...]
        c.w = {c.x[1], c.w[0] / c.group};
      if (transposed)
        c.w.insert(c.w.end(), base.w.begin() + 2, base.w.end());
      const std::vector<int64_t> yShape = convOutShape(c, transposed);
      Tensors t;
      std::vector<float> xv = randomFloats(size_t(product(c.x)), 1);
      std::vector<float> wv = randomFloats(size_t(product(c.w)), 2);
      std::vector<float> bv =
          c.bias ? randomFloats(size_t(yShape[1]), 3) : std::vector<float>();
      std::vector<TensorRef> in{t.input<float>(c.x, xv),
                                t.input<float>(c.w, wv)};
      if (c.bias)
        in.push_back(t.input<float>({yShape[1]}, bv));
      const std::vector<double> want = naiveConv(c, xv, wv, bv, transposed);
      for (int threads : {1, 4}) {
        TensorRef y = t.output<float>(yShape);
        EXPECT_OK(run(transposed ? "ConvTranspose" : "Conv", in, {y},
                      convAttrs(c), contextWithThreads(threads)));
        SCOPED_TRACE(std::string(transposed ? "ConvTranspose " : "Conv ") +
                     zrt::shapeString(c.x) + " * " + zrt::shapeString(c.w));
        expectNear(values<float>(y), want, 1e-4);
      }
    }
}

TEST(Conv, ErrorsNameTheOperand) {
  Tensors t;
  TensorRef x = t.input<float>({1, 4, 5, 5}, std::vector<float>(100, 1.0f));
  TensorRef w = t.input<float>({6, 3, 3, 3}, std::vector<float>(162, 1.0f));
  TensorRef y = t.output<float>({1, 6, 3, 3});
  zrt::Status st = run("Conv", {x, w}, {y},
                       attrs({{"group", ints({2})},
                              {"strides", ints({1, 1})},
                              {"dilations", ints({1, 1})},
                              {"pads", ints({0, 0, 0, 0})}}));
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(
      st.message().find("Conv: W's shape (got 6x3x3x3, expected [M, C/group"),
      std::string::npos)
      << st.message();
  TensorRef xi = t.input<int32_t>({1, 2, 3}, std::vector<int32_t>(6, 1));
  TensorRef wi = t.input<int32_t>({1, 2, 1}, std::vector<int32_t>(2, 1));
  TensorRef yi = t.output<int32_t>({1, 1, 3});
  st = run("Conv", {xi, wi}, {yi}, {});
  EXPECT_EQ(
      st.message(),
      "Conv: unsupported dtype of input X (got i32, expected f32 or f64)");
}

// Tests pooling on a hand-derivable 1x1x4x4 input (values 0..15): window
// maxima, means with and without the padding counted, ceil mode, dilation.
TEST(Pool, MaxAndAverageWindows) {
  Tensors t;
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i)
    v[size_t(i)] = float(i);
  TensorRef x = t.input<float>({1, 1, 4, 4}, v);
  auto pool = [&](const char *op, std::vector<int64_t> outHW, AttrMap a) {
    TensorRef y = t.output<float>({1, 1, outHW[0], outHW[1]});
    EXPECT_OK(run(op, {x}, {y}, a));
    return values<float>(y);
  };
  AttrMap twoByTwo =
      attrs({{"kernel_shape", ints({2, 2})}, {"strides", ints({2, 2})}});
  expectNear(pool("MaxPool", {2, 2}, twoByTwo), {5, 7, 13, 15});
  expectNear(pool("AveragePool", {2, 2}, twoByTwo), {2.5, 4.5, 10.5, 12.5});
  // 3x3 windows, stride 2, pads 1 all round: corners see 4 real elements of
  // 9 window positions (count_include_pad counts all 9).
  AttrMap padded = attrs({{"kernel_shape", ints({3, 3})},
                          {"strides", ints({2, 2})},
                          {"pads", ints({1, 1, 1, 1})}});
  expectNear(pool("MaxPool", {2, 2}, padded), {5, 7, 13, 15});
  expectNear(pool("AveragePool", {2, 2}, padded), {2.5, 4.0, 8.5, 10.0});
  padded.set("count_include_pad", ints({1}));
  expectNear(pool("AveragePool", {2, 2}, padded),
             {10.0 / 9, 24.0 / 9, 51.0 / 9, 10.0});
  // ceil mode: a third window starting at 4 would begin past the input and
  // padding; with kernel 2, stride 3 the last window [3, 5) is clipped.
  AttrMap ceil = attrs({{"kernel_shape", ints({2, 2})},
                        {"strides", ints({3, 3})},
                        {"ceil_mode", ints({1})}});
  expectNear(pool("MaxPool", {2, 2}, ceil), {5, 7, 13, 15});
  expectNear(pool("AveragePool", {2, 2}, ceil), {2.5, 5, 12.5, 15});
  // dilation 2: taps 0 and 2 of each dim.
  AttrMap dilated =
      attrs({{"kernel_shape", ints({2, 2})}, {"dilations", ints({2, 2})}});
  expectNear(pool("MaxPool", {2, 2}, dilated), {10, 11, 14, 15});
  // Integers for MaxPool.
  TensorRef xi = t.input<int8_t>({1, 1, 4}, {-3, 7, -1, 2});
  TensorRef yi = t.output<int8_t>({1, 1, 2});
  EXPECT_OK(run("MaxPool", {xi}, {yi},
                attrs({{"kernel_shape", ints({2})}, {"strides", ints({2})}})));
  EXPECT_EQ(values<int8_t>(yi), (std::vector<int8_t>{7, 2}));
}

TEST(Normalization, BatchNormalizationInference) {
  Tensors t;
  TensorRef x = t.input<float>({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  TensorRef scale = t.input<float>({2}, {2, 0.5f});
  TensorRef bias = t.input<float>({2}, {1, -1});
  TensorRef mean = t.input<float>({2}, {1, 2});
  TensorRef var = t.input<float>({2}, {4, 0.25f});
  TensorRef y = t.output<float>({2, 2, 2});
  EXPECT_OK(run("BatchNormalization", {x, scale, bias, mean, var}, {y},
                attrs({{"epsilon", floats({0.0})}})));
  // channel 0: (x - 1) / 2 * 2 + 1 = x; channel 1: (x - 2) / 0.5 * 0.5 - 1 = x
  // - 3.
  expectNear(values<float>(y), {1, 2, 0, 1, 5, 6, 4, 5});
}

// Tests Resize along one dim of [1, 1, 1, 2] = [1, 2] -> 4 elements, worked
// out by hand from ONNX's coordinate transformations.
TEST(Resize, NearestLinearCubicCoordinateModes) {
  Tensors t;
  TensorRef x = t.input<float>({1, 1, 1, 2}, {1, 2});
  auto resize = [&](AttrMap a) {
    a.set("scales", floats({1, 1, 1, 2}));
    TensorRef y = t.output<float>({1, 1, 1, 4});
    EXPECT_OK(run("Resize", {x}, {y}, a));
    return values<float>(y);
  };
  expectNear(resize(attrs({{"mode", str("linear")}})), {1, 1.25, 1.75, 2});
  expectNear(
      resize(attrs({{"mode", str("linear")},
                    {"coordinate_transformation_mode", str("asymmetric")}})),
      {1, 1.5, 2, 2});
  expectNear(
      resize(attrs({{"mode", str("linear")},
                    {"coordinate_transformation_mode", str("align_corners")}})),
      {1, 4.0 / 3, 5.0 / 3, 2});
  expectNear(
      resize(attrs({{"mode", str("nearest")},
                    {"coordinate_transformation_mode", str("asymmetric")},
                    {"nearest_mode", str("floor")}})),
      {1, 1, 2, 2});
  // half_pixel: x = -0.25, 0.25, 0.75, 1.25; round_prefer_ceil rounds 0.75 up.
  expectNear(resize(attrs({{"mode", str("nearest")},
                           {"nearest_mode", str("round_prefer_ceil")}})),
             {1, 1, 2, 2});
  // Cubic (A = -0.75), taps clamped at the edges: the values of ONNX's
  // reference (onnx.reference.ops.op_resize).
  expectNear(resize(attrs({{"mode", str("cubic")}})),
             {0.89453125, 1.2265625, 1.7734375, 2.10546875});
  // Integers resize with nearest only.
  TensorRef xi = t.input<int64_t>({2}, {5, 9});
  TensorRef yi = t.output<int64_t>({4});
  EXPECT_OK(run("Resize", {xi}, {yi}, attrs({{"scales", floats({2})}})));
  EXPECT_EQ(values<int64_t>(yi), (std::vector<int64_t>{5, 5, 9, 9}));
  TensorRef yl = t.output<int64_t>({4});
  zrt::Status st =
      run("Resize", {xi}, {yl},
          attrs({{"scales", floats({2})}, {"mode", str("linear")}}));
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("Resize: unsupported dtype"), std::string::npos)
      << st.message();
}

TEST(Selection, TopKTiesNaNAndAxes) {
  Tensors t;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  TensorRef x = t.input<float>({2, 5}, {3, 1, 3, 2, 3, 0, nan, 5, -1, 5});
  TensorRef v = t.output<float>({2, 3});
  TensorRef i = t.output<int64_t>({2, 3});
  EXPECT_OK(
      run("TopK", {x}, {v, i}, attrs({{"k", ints({3})}, {"axis", ints({1})}})));
  // Ties: the lower index first; NaN is the largest.
  EXPECT_EQ(values<int64_t>(i), (std::vector<int64_t>{0, 2, 4, 1, 2, 4}));
  std::vector<float> got = values<float>(v);
  EXPECT_EQ(got[0], 3);
  EXPECT_TRUE(std::isnan(got[3]));
  EXPECT_EQ(got[4], 5);
  TensorRef v2 = t.output<float>({1, 5});
  TensorRef i2 = t.output<int64_t>({1, 5});
  EXPECT_OK(run(
      "TopK", {x}, {v2, i2},
      attrs({{"k", ints({1})}, {"axis", ints({0})}, {"largest", ints({0})}})));
  EXPECT_EQ(values<int64_t>(i2), (std::vector<int64_t>{1, 0, 0, 1, 0}));
  TensorRef bad = t.output<float>({2, 6});
  TensorRef badI = t.output<int64_t>({2, 6});
  zrt::Status st = run("TopK", {x}, {bad, badI},
                       attrs({{"k", ints({6})}, {"axis", ints({1})}}));
  EXPECT_EQ(st.message(),
            "TopK: k (got 6, expected 0 <= k <= 5 (the axis' size))");
}

TEST(Selection, OneHotAxesNegativeAndOutOfRange) {
  Tensors t;
  TensorRef idx = t.input<int64_t>({3}, {0, -1, 7});
  TensorRef vals = t.input<float>({2}, {-1, 4});
  TensorRef y = t.output<float>({3, 3});
  EXPECT_OK(run("OneHot", {idx, vals}, {y},
                attrs({{"depth", ints({3})}, {"axis", ints({1})}})));
  expectNear(values<float>(y), {4, -1, -1, -1, -1, 4, -1, -1, -1});
  TensorRef y0 = t.output<float>({3, 3});
  EXPECT_OK(run("OneHot", {idx, vals}, {y0},
                attrs({{"depth", ints({3})}, {"axis", ints({0})}})));
  expectNear(values<float>(y0), {4, -1, -1, -1, -1, -1, -1, 4, -1});
}

} // namespace
