//===- LossTest.cpp - Losses, training Dropout, the rank's shard ----------===//
//
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss against their
// definitions, training-mode Dropout's mask and scale, and LocalShard.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace zrt::kerneltest;

namespace {

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// Reference SoftmaxCrossEntropyLoss per element: -log softmax(x)[label].
double nll(const std::vector<float> &scores, int64_t c, int64_t d, int64_t n,
           int64_t label, int64_t j) {
  double max = -INFINITY, sum = 0;
  for (int64_t k = 0; k < c; ++k)
    max = std::max(max, double(scores[size_t((n * c + k) * d + j)]));
  for (int64_t k = 0; k < c; ++k)
    sum += std::exp(double(scores[size_t((n * c + k) * d + j)]) - max);
  return -(double(scores[size_t((n * c + label) * d + j)]) - max -
           std::log(sum));
}

TEST(Loss, SoftmaxCrossEntropyMeanSumNone) {
  Tensors t;
  const std::vector<float> sv = randomFloats(12, 31);
  TensorRef scores = t.input<float>({3, 4}, sv);
  TensorRef labels = t.input<int64_t>({3}, {1, 3, 0});
  TensorRef loss = t.output<float>({});
  EXPECT_OK(run("SoftmaxCrossEntropyLoss", {scores, labels}, {loss}));
  const double l0 = nll(sv, 4, 1, 0, 1, 0), l1 = nll(sv, 4, 1, 1, 3, 0),
               l2 = nll(sv, 4, 1, 2, 0, 0);
  expectNear(values<float>(loss), {(l0 + l1 + l2) / 3});
  EXPECT_OK(run("SoftmaxCrossEntropyLoss", {scores, labels}, {loss},
                attrs({{"reduction", str("sum")}})));
  expectNear(values<float>(loss), {l0 + l1 + l2});
  TensorRef none = t.output<float>({3});
  TensorRef logProb = t.output<float>({3, 4});
  EXPECT_OK(run("SoftmaxCrossEntropyLoss", {scores, labels}, {none, logProb},
                attrs({{"reduction", str("none")}})));
  expectNear(values<float>(none), {l0, l1, l2});
  expectNear(values<float>(logProb), naiveSoftmax(sv, {3, 4}, 1, true));
}

TEST(Loss, SoftmaxCrossEntropyWeightsIgnoreAndSpatial) {
  Tensors t;
  const std::vector<float> sv = randomFloats(2 * 3 * 2, 32);
  TensorRef scores = t.input<float>({2, 3, 2}, sv);
  TensorRef labels = t.input<int32_t>({2, 2}, {2, -100, 0, 1});
  TensorRef weights = t.input<float>({3}, {0.5f, 2, 1});
  TensorRef loss = t.output<float>({});
  EXPECT_OK(run("SoftmaxCrossEntropyLoss", {scores, labels, weights}, {loss},
                attrs({{"ignore_index", ints({-100})}})));
  const double a = nll(sv, 3, 2, 0, 2, 0) * 1, b = nll(sv, 3, 2, 1, 0, 0) * 0.5,
               c = nll(sv, 3, 2, 1, 1, 1) * 2;
  expectNear(values<float>(loss), {(a + b + c) / (1 + 0.5 + 2)});
  // Without weights, mean divides by the count of non-ignored targets.
  EXPECT_OK(run("SoftmaxCrossEntropyLoss", {scores, labels}, {loss},
                attrs({{"ignore_index", ints({-100})}})));
  expectNear(values<float>(loss), {(a + b / 0.5 + c / 2) / 3});
  TensorRef none = t.output<float>({2, 2});
  EXPECT_OK(
      run("SoftmaxCrossEntropyLoss", {scores, labels}, {none},
          attrs({{"ignore_index", ints({-100})}, {"reduction", str("none")}})));
  expectNear(values<float>(none), {a, 0, b / 0.5, c / 2});
  // Without ignore_index, -100 is an error.
  EXPECT_FALSE(run("SoftmaxCrossEntropyLoss", {scores, labels}, {loss}).isOk());
}

TEST(Loss, NegativeLogLikelihood) {
  Tensors t;
  TensorRef logp = t.input<float>({2, 3}, {-1, -2, -3, -0.5f, -1.5f, -2.5f});
  TensorRef labels = t.input<int64_t>({2}, {2, 0});
  TensorRef loss = t.output<float>({});
  EXPECT_OK(run("NegativeLogLikelihoodLoss", {logp, labels}, {loss}));
  expectNear(values<float>(loss), {1.75});
}

//===----------------------------------------------------------------------===//
// Training-mode Dropout and the rank's shard
//===----------------------------------------------------------------------===//

// Tests TrainingDropout against its definition: y = x / (1 - ratio) where the
// mask keeps the element, 0 elsewhere; about `ratio` of the elements dropped;
// the same bits at 1 and 4 threads; another step or stream, another mask;
// ratio 0 keeps everything.
TEST(TrainingDropout, MaskScaleStepsAndThreads) {
  const int64_t n = 4096;
  std::vector<float> xs(n);
  for (int64_t i = 0; i < n; ++i)
    xs[size_t(i)] = 1.0f + float(i % 7);
  auto dropout = [&](double ratio, int64_t step, int64_t stream, const KernelContext &ctx,
                     std::vector<float> &y, std::vector<bool> &mask) {
    Tensors t;
    TensorRef x = t.input<float>({n}, xs);
    TensorRef s = t.input<int64_t>({}, {step});
    TensorRef out = t.output<float>({n});
    TensorRef m = t.output<bool>({n});
    AttrMap a;
    a.set("ratio", floats({ratio}));
    a.set("seed", ints({42}));
    a.set("stream", ints({stream}));
    EXPECT_OK(run("TrainingDropout", {x, s}, {out, m}, a, ctx));
    y = values<float>(out);
    mask = bools(m);
  };
  std::vector<float> y, y4, yStep, yStream, y0;
  std::vector<bool> m, m4, mStep, mStream, m0;
  dropout(0.25, 3, 9, serialContext(), y, m);
  dropout(0.25, 3, 9, threadedContext(), y4, m4);
  dropout(0.25, 4, 9, serialContext(), yStep, mStep);
  dropout(0.25, 3, 10, serialContext(), yStream, mStream);
  dropout(0.0, 3, 9, serialContext(), y0, m0);
  int64_t dropped = 0;
  for (int64_t i = 0; i < n; ++i) {
    float want = m[size_t(i)] ? xs[size_t(i)] * float(1.0 / 0.75) : 0.0f;
    EXPECT_EQ(y[size_t(i)], want) << "at " << i;
    dropped += m[size_t(i)] ? 0 : 1;
    EXPECT_EQ(y0[size_t(i)], xs[size_t(i)]);
    EXPECT_TRUE(m0[size_t(i)]);
  }
  // 5 standard deviations of a binomial(4096, 0.25): 5 * 27.7.
  EXPECT_NEAR(double(dropped), 0.25 * n, 139.0);
  EXPECT_EQ(y, y4);
  EXPECT_EQ(m, m4);
  EXPECT_NE(m, mStep);
  EXPECT_NE(m, mStream);
  AttrMap bad;
  bad.set("ratio", floats({1.0}));
  Tensors t;
  TensorRef x = t.input<float>({2}, {1, 2});
  TensorRef out = t.output<float>({2});
  EXPECT_FALSE(run("TrainingDropout", {x}, {out}, bad).isOk());
}

// Tests LocalShard: rank r of a world of 3 gets elements [2r, 2r + 2) of 6;
// a program compiled for another world size is an error.
TEST(LocalShard, PicksTheRanksBlock) {
  for (int rank = 0; rank < 3; ++rank) {
    Tensors t;
    TensorRef in = t.input<float>({6}, {0, 1, 2, 3, 4, 5});
    TensorRef out = t.output<float>({2});
    KernelContext ctx = serialContext();
    ctx.rank = rank;
    ctx.worldSize = 3;
    AttrMap a;
    a.set("world", ints({3}));
    EXPECT_OK(run("LocalShard", {in}, {out}, a, ctx));
    expectNear(values<float>(out), {2.0 * rank, 2.0 * rank + 1});
  }
  Tensors t;
  TensorRef in = t.input<float>({6}, {0, 1, 2, 3, 4, 5});
  TensorRef out = t.output<float>({3});
  AttrMap a;
  a.set("world", ints({2}));
  zrt::Status st = run("LocalShard", {in}, {out}, a);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("another world size"), std::string::npos) << st.message();
}

} // namespace
