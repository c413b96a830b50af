//===- ReduceShapeTest.cpp - Reductions, shapes and indexing --------------===//
//
// Reductions against a naive one over every axis set, softmax and the
// normalisations, data movement (Expand, Transpose, Concat, Slice, Tile, Pad,
// Trilu), gather and scatter, and empty, size-one and rank-0 shapes.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace zrt::kerneltest;

namespace {

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Naive reduction over `axes` of a [shape] tensor: combines in double.
std::vector<double> naiveReduce(const std::vector<float> &x,
                                const std::vector<int64_t> &shape,
                                const std::vector<int64_t> &axes,
                                const std::string &op) {
  std::vector<int64_t> outShape = shape;
  for (int64_t a : axes)
    outShape[size_t(a)] = 1;
  const int64_t outCount = product(outShape);
  std::vector<std::vector<double>> groups(static_cast<size_t>(outCount));
  for (int64_t i = 0; i < product(shape); ++i) {
    std::vector<int64_t> idx = unflatten(i, shape);
    for (int64_t a : axes)
      idx[size_t(a)] = 0;
    int64_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      o = o * outShape[d] + idx[d];
    groups[size_t(o)].push_back(x[size_t(i)]);
  }
  std::vector<double> out;
  for (const std::vector<double> &g : groups) {
    double r = 0;
    if (op == "ReduceSum" || op == "ReduceMean") {
      for (double v : g)
        r += v;
      if (op == "ReduceMean")
        r /= double(g.size());
    } else if (op == "ReduceMax") {
      r = -INFINITY;
      for (double v : g)
        r = std::max(r, v);
    } else if (op == "ReduceMin") {
      r = INFINITY;
      for (double v : g)
        r = std::min(r, v);
    } else if (op == "ReduceProd") {
      r = 1;
      for (double v : g)
        r *= v;
    } else if (op == "ReduceSumSquare" || op == "ReduceL2") {
      for (double v : g)
        r += v * v;
      if (op == "ReduceL2")
        r = std::sqrt(r);
    } else if (op == "ReduceL1") {
      for (double v : g)
        r += std::fabs(v);
    } else if (op == "ReduceLogSumExp") {
      for (double v : g)
        r += std::exp(v);
      r = std::log(r);
    }
    out.push_back(r);
  }
  return out;
}

TEST(Reduce, AllOpsAllAxisSetsMatchNaive) {
  const std::vector<int64_t> shape = {3, 4, 5, 6};
  const std::vector<float> x =
      randomFloats(size_t(product(shape)), 11, 0.5f, 1.5f);
  const std::vector<std::vector<int64_t>> axisSets = {
      {0}, {1}, {3}, {0, 2}, {1, 3}, {1, 2}, {0, 1, 2, 3}, {0, 3}};
  for (const char *op :
       {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
        "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSumExp"})
    for (const std::vector<int64_t> &axes : axisSets)
      for (bool threaded : {false, true}) {
        SCOPED_TRACE(std::string(op) + " axes " + zrt::shapeString(axes));
        Tensors t;
        std::vector<int64_t> outShape = shape;
        for (int64_t a : axes)
          outShape[size_t(a)] = 1;
        TensorRef in = t.input<float>(shape, x);
        TensorRef out = t.output<float>(outShape);
        EXPECT_OK(run(op, {in}, {out}, attrs({{"axes", ints(axes)}}),
                      threaded ? threadedContext() : serialContext()));
        expectNear(values<float>(out), naiveReduce(x, shape, axes, op),
                   std::string(op) == "ReduceProd" ? 1e-4 : 1e-5);
      }
}

TEST(Reduce, KeepdimsIntegersEmptyAndLarge) {
  Tensors t;
  TensorRef x = t.input<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  TensorRef y = t.output<int64_t>({2}); // keepdims = 0
  EXPECT_OK(run("ReduceSum", {x}, {y},
                attrs({{"axes", ints({1})}, {"keepdims", ints({0})}})));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{6, 15}));
  EXPECT_OK(run("ReduceMax", {x}, {y}, attrs({{"axes", ints({1})}})));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{3, 6}));
  TensorRef y3 = t.output<int64_t>({1, 3});
  EXPECT_OK(run("ReduceMean", {x}, {y3}, attrs({{"axes", ints({0})}})));
  EXPECT_EQ(values<int64_t>(y3), (std::vector<int64_t>{2, 3, 4}));
  // Reducing an empty axis gives the identity.
  TensorRef e = t.input<float>({2, 0}, {});
  TensorRef ey = t.output<float>({2, 1});
  EXPECT_OK(run("ReduceSum", {e}, {ey}, attrs({{"axes", ints({1})}})));
  expectNear(values<float>(ey), {0, 0});
  EXPECT_OK(run("ReduceMax", {e}, {ey}, attrs({{"axes", ints({1})}})));
  expectNear(values<float>(ey), {-INFINITY, -INFINITY});
  // Rank 0 and size-1 reduction.
  TensorRef s = t.input<float>({}, {3});
  TensorRef sy = t.output<float>({});
  EXPECT_OK(run("ReduceSumSquare", {s}, {sy}, attrs({{"axes", ints({0})}})));
  expectNear(values<float>(sy), {9});
  // A large full reduction (partial sums across threads) and a large
  // leading-axis reduction (vector mode).
  std::vector<float> big = randomFloats(300000, 12, 0, 1);
  TensorRef b = t.input<float>({300000}, big);
  TensorRef by = t.output<float>({});
  EXPECT_OK(run("ReduceMean", {b}, {by}, attrs({{"axes", ints({0})}}),
                threadedContext()));
  double sum = 0;
  for (float v : big)
    sum += v;
  expectNear(values<float>(by), {sum / 300000}, 1e-5);
  EXPECT_OK(run("ReduceLogSumExp", {b}, {by}, attrs({{"axes", ints({0})}}),
                threadedContext()));
  double lse = 0;
  for (float v : big)
    lse += std::exp(double(v));
  expectNear(values<float>(by), {std::log(lse)}, 1e-5);
  TensorRef m = t.input<float>({3000, 100}, big);
  TensorRef my = t.output<float>({1, 100});
  EXPECT_OK(run("ReduceSum", {m}, {my}, attrs({{"axes", ints({0})}}),
                threadedContext()));
  expectNear(values<float>(my), naiveReduce(big, {3000, 100}, {0}, "ReduceSum"),
             1e-5);
}

TEST(Reduce, BoolMaxMin) {
  Tensors t;
  TensorRef x = t.input<bool>({2, 2}, {true, false, false, false});
  TensorRef y = t.output<bool>({2});
  EXPECT_OK(run("ReduceMax", {x}, {y}, attrs({{"axes", ints({1})}})));
  EXPECT_EQ(bools(y), (std::vector<bool>{true, false}));
  EXPECT_OK(run("ReduceMin", {x}, {y}, attrs({{"axes", ints({0})}})));
  EXPECT_EQ(bools(y), (std::vector<bool>{false, false}));
}

TEST(Reduce, ArgMaxArgMin) {
  Tensors t;
  TensorRef x = t.input<float>({2, 3, 2}, {1, 9, 5, 9, 5, 0, 7, 2, 7, 8, 1, 8});
  TensorRef y = t.output<int64_t>({2, 1, 2});
  EXPECT_OK(run("ArgMax", {x}, {y}, attrs({{"axis", ints({1})}})));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{1, 0, 0, 1}));
  EXPECT_OK(
      run("ArgMax", {x}, {y},
          attrs({{"axis", ints({1})}, {"select_last_index", ints({1})}})));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{2, 1, 1, 2}));
  EXPECT_OK(run("ArgMin", {x}, {y}, attrs({{"axis", ints({1})}})));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{0, 2, 2, 0}));
  TensorRef y2 = t.output<int64_t>({2, 3});
  EXPECT_OK(run("ArgMax", {x}, {y2},
                attrs({{"axis", ints({2})}, {"keepdims", ints({0})}})));
  EXPECT_EQ(values<int64_t>(y2), (std::vector<int64_t>{1, 1, 0, 0, 1, 1}));
  TensorRef bad = t.output<int32_t>({2, 3});
  EXPECT_FALSE(run("ArgMax", {x}, {bad}, attrs({{"axis", ints({2})}})).isOk());
}

TEST(Reduce, CumSum) {
  Tensors t;
  TensorRef x = t.input<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  TensorRef y = t.output<int64_t>({2, 3});
  EXPECT_OK(run("CumSum", {x}, {y}, attrs({{"axis", ints({1})}})));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{1, 3, 6, 4, 9, 15}));
  EXPECT_OK(run("CumSum", {x}, {y},
                attrs({{"axis", ints({1})}, {"exclusive", ints({1})}})));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{0, 1, 3, 0, 4, 9}));
  EXPECT_OK(run("CumSum", {x}, {y},
                attrs({{"axis", ints({1})}, {"reverse", ints({1})}})));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{6, 5, 3, 15, 11, 6}));
  EXPECT_OK(run("CumSum", {x}, {y},
                attrs({{"axis", ints({0})},
                       {"reverse", ints({1})},
                       {"exclusive", ints({1})}})));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{4, 5, 6, 0, 0, 0}));
  TensorRef f = t.input<float>({3}, {0.5f, 1, 2});
  TensorRef fy = t.output<float>({3});
  EXPECT_OK(run("CumSum", {f}, {fy}, attrs({{"axis", ints({0})}})));
  expectNear(values<float>(fy), {0.5, 1.5, 3.5});
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

TEST(Normalization, SoftmaxAndLogSoftmaxAnyAxis) {
  const std::vector<int64_t> shape = {3, 17, 70};
  const std::vector<float> x = randomFloats(size_t(product(shape)), 21, -8, 8);
  for (const char *op : {"Softmax", "LogSoftmax"})
    for (int64_t axis : {0, 1, 2})
      for (bool threaded : {false, true}) {
        SCOPED_TRACE(std::string(op) + " axis " + std::to_string(axis));
        Tensors t;
        TensorRef in = t.input<float>(shape, x);
        TensorRef out = t.output<float>(shape);
        EXPECT_OK(run(op, {in}, {out}, attrs({{"axis", ints({axis})}}),
                      threaded ? threadedContext() : serialContext()));
        expectNear(
            values<float>(out),
            naiveSoftmax(x, shape, axis, std::string(op) == "LogSoftmax"),
            2e-6);
      }
  Tensors t;
  TensorRef s = t.input<double>({2}, {0, std::log(3.0)});
  TensorRef sy = t.output<double>({2});
  EXPECT_OK(run("Softmax", {s}, {sy}, attrs({{"axis", ints({0})}})));
  expectNear(values<double>(sy), {0.25, 0.75}, 1e-12);
}

TEST(Normalization, LayerNormWithStatistics) {
  Tensors t;
  TensorRef x = t.input<float>({2, 4}, {1, 2, 3, 4, -1, -1, 1, 1});
  TensorRef scale = t.input<float>({4}, {1, 2, 1, 2});
  TensorRef bias = t.input<float>({4}, {0, 0, 1, 1});
  TensorRef y = t.output<float>({2, 4});
  TensorRef mean = t.output<float>({2, 1});
  TensorRef inv = t.output<float>({2, 1});
  EXPECT_OK(run("LayerNormalization", {x, scale, bias}, {y, mean, inv},
                attrs({{"axis", ints({1})}, {"epsilon", floats({0})}})));
  const double s0 = 1 / std::sqrt(1.25);
  expectNear(values<float>(y), {-1.5 * s0, -0.5 * s0 * 2, 0.5 * s0 + 1,
                                1.5 * s0 * 2 + 1, -1, -2, 2, 3});
  expectNear(values<float>(mean), {2.5, 0});
  expectNear(values<float>(inv), {s0, 1});
  // axis 1 over [2, 3, 2] with a scale of shape [2] (broadcast over dim 1).
  TensorRef x3 =
      t.input<float>({2, 3, 2}, {0, 1, 2, 3, 4, 5, 1, 1, 1, 1, 1, 1});
  TensorRef s2 = t.input<float>({2}, {1, 10});
  TensorRef y3 = t.output<float>({2, 3, 2});
  EXPECT_OK(run("LayerNormalization", {x3, s2}, {y3},
                attrs({{"axis", ints({1})}, {"epsilon", floats({1e-5})}})));
  std::vector<double> expected;
  const double var = (6.25 + 2.25 + 0.25 + 0.25 + 2.25 + 6.25) / 6;
  for (int i = 0; i < 6; ++i)
    expected.push_back((i - 2.5) / std::sqrt(var + 1e-5) * (i % 2 ? 10 : 1));
  for (int i = 0; i < 6; ++i)
    expected.push_back(0);
  expectNear(values<float>(y3), expected);
}

TEST(Normalization, RMSNorm) {
  Tensors t;
  TensorRef x = t.input<float>({2, 2}, {3, 4, 0, 2});
  TensorRef scale = t.input<float>({2}, {1, 2});
  TensorRef y = t.output<float>({2, 2});
  EXPECT_OK(run("RMSNormalization", {x, scale}, {y},
                attrs({{"axis", ints({1})}, {"epsilon", floats({0})}})));
  const double r0 = std::sqrt(12.5), r1 = std::sqrt(2.0);
  expectNear(values<float>(y), {3 / r0, 8 / r0, 0, 4 / r1});
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

TEST(Shape, CopyAndExpand) {
  Tensors t;
  TensorRef x = t.input<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  TensorRef y = t.output<int32_t>({4});
  EXPECT_OK(run("Copy", {x}, {y}));
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{1, 2, 3, 4}));
  TensorRef tooBig = t.output<int32_t>({7});
  EXPECT_FALSE(run("Copy", {x}, {tooBig}).isOk());
  TensorRef c = t.input<float>({3, 1}, {1, 2, 3});
  TensorRef e = t.output<float>({2, 3, 2});
  EXPECT_OK(run("Expand", {c}, {e}));
  expectNear(values<float>(e), {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
}

TEST(Shape, TransposeMatchesNaive) {
  struct Case {
    std::vector<int64_t> shape, perm;
  };
  const Case cases[] = {
      {{70, 45}, {1, 0}},                                         // tiled
      {{2, 5, 3, 8}, {0, 2, 1, 3}},                               // row copies
      {{2, 5, 3, 8}, {3, 1, 0, 2}}, {{4, 1, 6, 5}, {2, 0, 3, 1}}, // size-1 dim
      {{2, 3, 4}, {0, 1, 2}},                                     // identity
      {{33, 3, 65}, {2, 1, 0}},
  };
  for (const Case &c : cases)
    for (bool threaded : {false, true}) {
      SCOPED_TRACE(zrt::shapeString(c.shape) + " perm " +
                   zrt::shapeString(c.perm));
      Tensors t;
      std::vector<int64_t> xv(size_t(product(c.shape)));
      for (size_t i = 0; i < xv.size(); ++i)
        xv[i] = int64_t(i);
      std::vector<int64_t> os;
      for (int64_t p : c.perm)
        os.push_back(c.shape[size_t(p)]);
      TensorRef x = t.input<int64_t>(c.shape, xv);
      TensorRef y = t.output<int64_t>(os);
      EXPECT_OK(run("Transpose", {x}, {y}, attrs({{"perm", ints(c.perm)}}),
                    threaded ? threadedContext() : serialContext()));
      std::vector<int64_t> expected;
      for (int64_t i = 0; i < product(os); ++i) {
        const std::vector<int64_t> oi = unflatten(i, os);
        std::vector<int64_t> ii(c.shape.size());
        for (size_t d = 0; d < os.size(); ++d)
          ii[size_t(c.perm[d])] = oi[d];
        expected.push_back(broadcastFlat(ii, c.shape));
      }
      EXPECT_EQ(values<int64_t>(y), expected);
    }
  Tensors t;
  TensorRef b = t.input<bool>({2, 3}, {true, false, false, true, true, false});
  TensorRef by = t.output<bool>({3, 2});
  EXPECT_OK(run("Transpose", {b}, {by}));
  EXPECT_EQ(bools(by),
            (std::vector<bool>{true, true, false, true, false, false}));
}

TEST(Shape, ConcatAndSplit) {
  Tensors t;
  TensorRef a = t.input<float>({2, 1}, {1, 2});
  TensorRef b = t.input<float>({2, 2}, {3, 4, 5, 6});
  TensorRef e = t.input<float>({2, 0}, {});
  TensorRef y = t.output<float>({2, 3});
  EXPECT_OK(run("Concat", {a, e, b}, {y}, attrs({{"axis", ints({1})}})));
  expectNear(values<float>(y), {1, 3, 4, 2, 5, 6});
  TensorRef p = t.output<float>({2, 2});
  TensorRef q = t.output<float>({2, 1});
  EXPECT_OK(run("Split", {y}, {p, q}, attrs({{"axis", ints({1})}})));
  expectNear(values<float>(p), {1, 3, 2, 5});
  expectNear(values<float>(q), {4, 6});
  TensorRef r0 = t.output<float>({1, 3});
  TensorRef r1 = t.output<float>({1, 3});
  EXPECT_OK(run("Split", {y}, {r0, r1}, attrs({{"axis", ints({0})}})));
  expectNear(values<float>(r1), {2, 5, 6});
  TensorRef wrong = t.output<float>({2, 4});
  EXPECT_FALSE(
      run("Concat", {a, b}, {wrong}, attrs({{"axis", ints({1})}})).isOk());
}

TEST(Shape, SliceWithStepsAndNegativeSteps) {
  Tensors t;
  std::vector<int64_t> xv(20);
  for (int i = 0; i < 20; ++i)
    xv[size_t(i)] = i;
  TensorRef x = t.input<int64_t>({4, 5}, xv);
  TensorRef y = t.output<int64_t>({2, 3});
  // rows 3, 1 (step -2); columns 0, 2, 4 (step 2)
  EXPECT_OK(run("Slice", {x}, {y},
                attrs({{"starts", ints({3, 0})}, {"steps", ints({-2, 2})}})));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{15, 17, 19, 5, 7, 9}));
  TensorRef z = t.output<int64_t>({1, 2});
  EXPECT_OK(run("Slice", {x}, {z},
                attrs({{"starts", ints({2, 1})}, {"steps", ints({1, 1})}})));
  EXPECT_EQ(values<int64_t>(z), (std::vector<int64_t>{11, 12}));
  TensorRef over = t.output<int64_t>({3, 1});
  EXPECT_FALSE(run("Slice", {x}, {over},
                   attrs({{"starts", ints({3, 0})}, {"steps", ints({1, 1})}}))
                   .isOk());
}

TEST(Shape, Tile) {
  Tensors t;
  TensorRef x = t.input<int32_t>({2, 2}, {1, 2, 3, 4});
  TensorRef y = t.output<int32_t>({4, 4});
  EXPECT_OK(run("Tile", {x}, {y}));
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{1, 2, 1, 2, 3, 4, 3, 4, 1,
                                                      2, 1, 2, 3, 4, 3, 4}));
  TensorRef y2 = t.output<int32_t>({2, 6});
  EXPECT_OK(run("Tile", {x}, {y2}));
  EXPECT_EQ(values<int32_t>(y2),
            (std::vector<int32_t>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
}

TEST(Shape, PadModes) {
  Tensors t;
  TensorRef x = t.input<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  TensorRef y = t.output<float>({3, 6});
  const AttrValue pads = ints({0, 2, 1, 1});
  EXPECT_OK(
      run("Pad", {x}, {y}, attrs({{"pads", pads}, {"value", floats({9})}})));
  expectNear(values<float>(y),
             {9, 9, 1, 2, 3, 9, 9, 9, 4, 5, 6, 9, 9, 9, 9, 9, 9, 9});
  EXPECT_OK(
      run("Pad", {x}, {y}, attrs({{"pads", pads}, {"mode", str("edge")}})));
  expectNear(values<float>(y),
             {1, 1, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6, 4, 4, 4, 5, 6, 6});
  EXPECT_OK(
      run("Pad", {x}, {y}, attrs({{"pads", pads}, {"mode", str("reflect")}})));
  expectNear(values<float>(y),
             {3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2});
  EXPECT_OK(
      run("Pad", {x}, {y}, attrs({{"pads", pads}, {"mode", str("wrap")}})));
  expectNear(values<float>(y),
             {2, 3, 1, 2, 3, 1, 5, 6, 4, 5, 6, 4, 2, 3, 1, 2, 3, 1});
  // Negative pads crop.
  TensorRef c = t.output<float>({2, 2});
  EXPECT_OK(run("Pad", {x}, {c}, attrs({{"pads", ints({0, -1, 0, 0})}})));
  expectNear(values<float>(c), {2, 3, 5, 6});
  TensorRef i = t.input<int64_t>({2}, {7, 8});
  TensorRef iy = t.output<int64_t>({4});
  EXPECT_OK(run("Pad", {i}, {iy},
                attrs({{"pads", ints({1, 1})}, {"value", floats({-1})}})));
  EXPECT_EQ(values<int64_t>(iy), (std::vector<int64_t>{-1, 7, 8, -1}));
  // Pads for the listed axes only, and the constant_value spelling.
  TensorRef ya = t.output<float>({2, 4});
  EXPECT_OK(run("Pad", {x}, {ya},
                attrs({{"pads", ints({1, 0})},
                       {"axes", ints({1})},
                       {"constant_value", floats({7})}})));
  expectNear(values<float>(ya), {7, 1, 2, 3, 7, 4, 5, 6});
}

TEST(Shape, TriluFillRange) {
  Tensors t;
  TensorRef x = t.input<float>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  TensorRef y = t.output<float>({3, 3});
  EXPECT_OK(run("Trilu", {x}, {y}));
  expectNear(values<float>(y), {1, 2, 3, 0, 5, 6, 0, 0, 9});
  EXPECT_OK(
      run("Trilu", {x}, {y}, attrs({{"upper", ints({0})}, {"k", ints({-1})}})));
  expectNear(values<float>(y), {0, 0, 0, 4, 0, 0, 7, 8, 0});
  EXPECT_OK(run("Trilu", {x}, {y}, attrs({{"k", ints({1})}})));
  expectNear(values<float>(y), {0, 2, 3, 0, 0, 6, 0, 0, 0});
  TensorRef f = t.output<float>({2, 2});
  EXPECT_OK(run("Fill", {}, {f}, attrs({{"value", floats({1.5})}})));
  expectNear(values<float>(f), {1.5, 1.5, 1.5, 1.5});
  TensorRef fi = t.output<int64_t>({2});
  EXPECT_OK(run("Fill", {}, {fi},
                attrs({{"value", ints({(int64_t(1) << 60) + 1})}})));
  EXPECT_EQ(
      values<int64_t>(fi),
      (std::vector<int64_t>{(int64_t(1) << 60) + 1, (int64_t(1) << 60) + 1}));
  TensorRef fb = t.output<bool>({2});
  EXPECT_OK(run("Fill", {}, {fb}, attrs({{"value", floats({1})}})));
  EXPECT_EQ(bools(fb), (std::vector<bool>{true, true}));
  TensorRef start = t.input<float>({}, {1}), limit = t.input<float>({}, {2});
  TensorRef delta = t.input<float>({}, {0.25f});
  TensorRef r = t.output<float>({4});
  EXPECT_OK(run("Range", {start, limit, delta}, {r}));
  expectNear(values<float>(r), {1, 1.25, 1.5, 1.75});
  TensorRef s64 = t.input<int64_t>({}, {10}), l64 = t.input<int64_t>({}, {4});
  TensorRef d64 = t.input<int64_t>({}, {-3});
  TensorRef r64 = t.output<int64_t>({2});
  EXPECT_OK(run("Range", {s64, l64, d64}, {r64}));
  EXPECT_EQ(values<int64_t>(r64), (std::vector<int64_t>{10, 7}));
}

//===----------------------------------------------------------------------===//
// Gather / scatter
//===----------------------------------------------------------------------===//

TEST(Indexing, Gather) {
  Tensors t;
  TensorRef data = t.input<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  TensorRef idx = t.input<int64_t>({2, 2}, {0, -1, 1, 2});
  TensorRef y = t.output<float>({2, 2, 2});
  EXPECT_OK(run("Gather", {data, idx}, {y}, attrs({{"axis", ints({0})}})));
  expectNear(values<float>(y), {1, 2, 5, 6, 3, 4, 5, 6});
  TensorRef col = t.input<int32_t>({}, {1});
  TensorRef yc = t.output<float>({3});
  EXPECT_OK(run("Gather", {data, col}, {yc}, attrs({{"axis", ints({1})}})));
  expectNear(values<float>(yc), {2, 4, 6});
  TensorRef bad = t.input<int64_t>({1}, {3});
  TensorRef yb = t.output<float>({1, 2});
  zrt::Status s =
      run("Gather", {data, bad}, {yb}, attrs({{"axis", ints({0})}}));
  EXPECT_FALSE(s.isOk());
  EXPECT_EQ(s.message(),
            "Gather: index out of range (got 3, expected an index in [-3, 3))");
}

TEST(Indexing, GatherND) {
  Tensors t;
  TensorRef data = t.input<int32_t>({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  TensorRef idx = t.input<int64_t>({2, 2}, {0, 1, 1, 0});
  TensorRef y = t.output<int32_t>({2, 2});
  EXPECT_OK(run("GatherND", {data, idx}, {y}));
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{2, 3, 4, 5}));
  TensorRef idx3 = t.input<int64_t>({1, 3}, {1, -1, 0});
  TensorRef y3 = t.output<int32_t>({1});
  EXPECT_OK(run("GatherND", {data, idx3}, {y3}));
  EXPECT_EQ(values<int32_t>(y3), (std::vector<int32_t>{6}));
  // batch_dims = 1: per batch, indices pick rows of data[batch].
  TensorRef bidx = t.input<int64_t>({2, 1}, {1, 0});
  TensorRef by = t.output<int32_t>({2, 2});
  EXPECT_OK(
      run("GatherND", {data, bidx}, {by}, attrs({{"batch_dims", ints({1})}})));
  EXPECT_EQ(values<int32_t>(by), (std::vector<int32_t>{2, 3, 4, 5}));
}

TEST(Indexing, GatherElementsAndScatterElements) {
  Tensors t;
  TensorRef data = t.input<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  TensorRef idx = t.input<int64_t>({2, 2}, {2, 0, -1, 1});
  TensorRef y = t.output<float>({2, 2});
  EXPECT_OK(
      run("GatherElements", {data, idx}, {y}, attrs({{"axis", ints({1})}})));
  expectNear(values<float>(y), {3, 1, 6, 5});
  TensorRef idx0 = t.input<int32_t>({1, 3}, {1, 0, 1});
  TensorRef y0 = t.output<float>({1, 3});
  EXPECT_OK(
      run("GatherElements", {data, idx0}, {y0}, attrs({{"axis", ints({0})}})));
  expectNear(values<float>(y0), {4, 2, 6});

  TensorRef dup = t.input<int64_t>({1, 3}, {1, 1, 0});
  TensorRef upd = t.input<float>({1, 3}, {10, 20, 30});
  TensorRef out = t.output<float>({2, 3});
  EXPECT_OK(run("ScatterElements", {data, dup, upd}, {out},
                attrs({{"axis", ints({1})}})));
  expectNear(values<float>(out), {30, 20, 3, 4, 5, 6});
  EXPECT_OK(run("ScatterElements", {data, dup, upd}, {out},
                attrs({{"axis", ints({1})}, {"reduction", str("add")}})));
  expectNear(values<float>(out), {31, 32, 3, 4, 5, 6});
  EXPECT_OK(run("ScatterElements", {data, dup, upd}, {out},
                attrs({{"axis", ints({0})}, {"reduction", str("max")}})));
  expectNear(values<float>(out), {1, 2, 30, 10, 20, 6});
}

TEST(Indexing, ScatterND) {
  Tensors t;
  TensorRef data = t.input<int64_t>({3, 2}, {1, 2, 3, 4, 5, 6});
  TensorRef rows = t.input<int64_t>({2, 1}, {2, -3});
  TensorRef upd = t.input<int64_t>({2, 2}, {10, 20, 30, 40});
  TensorRef out = t.output<int64_t>({3, 2});
  EXPECT_OK(run("ScatterND", {data, rows, upd}, {out}));
  EXPECT_EQ(values<int64_t>(out), (std::vector<int64_t>{30, 40, 3, 4, 10, 20}));
  TensorRef cells = t.input<int64_t>({2, 2}, {0, 1, 0, 1});
  TensorRef vals = t.input<int64_t>({2}, {100, 1000});
  EXPECT_OK(run("ScatterND", {data, cells, vals}, {out},
                attrs({{"reduction", str("add")}})));
  EXPECT_EQ(values<int64_t>(out), (std::vector<int64_t>{1, 1102, 3, 4, 5, 6}));
}

//===----------------------------------------------------------------------===//
// Unusual shapes
//===----------------------------------------------------------------------===//

TEST(UnusualShapes, EmptyTensorsAndEmptyContractions) {
  Tensors t;
  TensorRef e03 = t.input<float>({0, 3}, {});
  TensorRef r3 = t.input<float>({3}, {1, 2, 3});
  TensorRef o03 = t.output<float>({0, 3});
  for (const char *op : {"Add", "Max", "Pow"})
    EXPECT_OK(run(op, {e03, r3}, {o03}));
  for (const char *op : {"Exp", "Relu", "Gelu", "Identity"})
    EXPECT_OK(run(op, {e03}, {o03}));
  for (const char *op : {"Softmax", "LogSoftmax"})
    EXPECT_OK(run(op, {e03}, {o03}, attrs({{"axis", ints({1})}})));
  TensorRef e30 = t.input<float>({3, 0}, {});
  TensorRef o30 = t.output<float>({3, 0});
  EXPECT_OK(run("Softmax", {e30}, {o30}, attrs({{"axis", ints({1})}})));
  EXPECT_OK(run("LayerNormalization", {e03, r3}, {o03},
                attrs({{"axis", ints({1})}})));
  EXPECT_OK(run("Transpose", {e03}, {t.output<float>({3, 0})}));
  EXPECT_OK(run("CumSum", {e03}, {o03}, attrs({{"axis", ints({0})}})));
  EXPECT_OK(run("ArgMax", {e03}, {t.output<int64_t>({0})},
                attrs({{"axis", ints({1})}, {"keepdims", ints({0})}})));
  EXPECT_OK(run("ReduceSum", {e03}, {t.output<float>({1, 3})},
                attrs({{"axes", ints({0})}})));
  EXPECT_OK(run("Pad", {e03}, {t.output<float>({2, 3})},
                attrs({{"pads", ints({1, 0, 1, 0})}})));
  EXPECT_OK(run("Tile", {e03}, {t.output<float>({0, 6})}));
  EXPECT_OK(run("Slice", {r3}, {t.output<float>({0})},
                attrs({{"starts", ints({0})}, {"steps", ints({1})}})));
  EXPECT_OK(run("Gather", {r3, t.input<int64_t>({0}, {})},
                {t.output<float>({0})}, attrs({{"axis", ints({0})}})));
  // Matrix products with M = 0 and with K = 0 (the result is all zeros, or
  // beta * C for Gemm).
  TensorRef b34 = t.input<float>({3, 4}, std::vector<float>(12, 1));
  EXPECT_OK(run("MatMul", {e03, b34}, {t.output<float>({0, 4})}));
  TensorRef a20 = t.input<float>({2, 0}, {});
  TensorRef b03 = t.input<float>({0, 3}, {});
  TensorRef y23 = t.output<float>({2, 3});
  EXPECT_OK(run("MatMul", {a20, b03}, {y23}));
  expectNear(values<float>(y23), {0, 0, 0, 0, 0, 0});
  TensorRef c = t.input<float>({3}, {1, 2, 3});
  EXPECT_OK(run("Gemm", {a20, b03, c}, {y23}, attrs({{"beta", floats({2})}})));
  expectNear(values<float>(y23), {2, 4, 6, 2, 4, 6});
  TensorRef ia = t.input<int64_t>({2, 0}, {}),
            ib = t.input<int64_t>({0, 2}, {});
  TensorRef iy = t.output<int64_t>({2, 2});
  EXPECT_OK(run("MatMul", {ia, ib}, {iy}));
  EXPECT_EQ(values<int64_t>(iy), (std::vector<int64_t>{0, 0, 0, 0}));
}

TEST(UnusualShapes, SizeOneDimsAndScalars) {
  Tensors t;
  TensorRef s = t.input<float>({}, {2});
  TensorRef y = t.output<float>({});
  EXPECT_OK(run("Exp", {s}, {y}));
  expectNear(values<float>(y), {std::exp(2.0)});
  TensorRef x = t.input<float>({1, 3, 1}, {1, 2, 3});
  TensorRef o = t.output<float>({1, 3, 1});
  EXPECT_OK(run("Softmax", {x}, {o}, attrs({{"axis", ints({2})}})));
  expectNear(values<float>(o), {1, 1, 1});
  EXPECT_OK(run("Softmax", {x}, {o}, attrs({{"axis", ints({1})}})));
  expectNear(values<float>(o), naiveSoftmax({1, 2, 3}, {3}, 0, false));
  TensorRef red = t.output<float>({1, 1, 1});
  // Reducing only size-1 dims keeps 3 elements: a 1-element output is wrong.
  EXPECT_FALSE(
      run("ReduceSum", {x}, {red}, attrs({{"axes", ints({0, 2})}})).isOk());
  TensorRef red3 = t.output<float>({1, 3, 1});
  EXPECT_OK(run("ReduceMax", {x}, {red3}, attrs({{"axes", ints({0, 2})}})));
  expectNear(values<float>(red3), {1, 2, 3});
  TensorRef tx = t.output<float>({3, 1, 1});
  EXPECT_OK(run("Transpose", {x}, {tx}, attrs({{"perm", ints({1, 2, 0})}})));
  expectNear(values<float>(tx), {1, 2, 3});
  TensorRef mm = t.output<float>({1, 1});
  TensorRef a = t.input<float>({1, 1}, {3});
  EXPECT_OK(run("MatMul", {a, a}, {mm}));
  expectNear(values<float>(mm), {9});
}

} // namespace
