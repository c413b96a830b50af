//===- kernels_test.cpp - Tests of the CPU kernels ------------------------===//
//
// Runs every CPU kernel through the KernelTable (as the executor does) on
// small hand-derivable cases or against an independent naive computation in
// this file: broadcasting, rank-0 and empty tensors, Bool outputs, integer
// dtypes, and the parallel paths (with a 4-thread parallelFor).
//
//===----------------------------------------------------------------------===//

#include "KernelHarness.h"
#include "zrt/Kernel.h"
#include "zrt/CpuBackend.h"

#include "cpu/CpuHalf.h"
#include "kernels/KernelSupport.h"
#include "cpu/kernels/PackedGemm.h"
#include "math/HalfMath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <thread>

namespace {

using zrt::AttrMap;
using zrt::AttrValue;
using zrt::DType;
using zrt::KernelContext;
using zrt::TensorRef;

//===----------------------------------------------------------------------===//
// Harness
//===----------------------------------------------------------------------===//

template <typename T> DType dtypeOf();
template <> DType dtypeOf<float>() { return DType::F32; }
template <> DType dtypeOf<double>() { return DType::F64; }
template <> DType dtypeOf<int32_t>() { return DType::I32; }
template <> DType dtypeOf<int64_t>() { return DType::I64; }
template <> DType dtypeOf<bool>() { return DType::Bool; }
template <> DType dtypeOf<int8_t>() { return DType::I8; }
template <> DType dtypeOf<uint8_t>() { return DType::U8; }

const zrt::KernelTable &kernels() { return zrt::test::cpuKernels(); }

KernelContext serialContext() {
  KernelContext ctx;
  ctx.numThreads = 1;
  ctx.parallelFor = [](int64_t n,
                       const std::function<void(int64_t, int64_t)> &fn) {
    if (n > 0)
      fn(0, n);
  };
  return ctx;
}

using zrt::test::contextWithThreads;

/// Splits [0, n) into 4 contiguous pieces on 4 threads.
KernelContext threadedContext() { return contextWithThreads(4); }

/// Owns the storage of the tensors of one test.
class Tensors {
public:
  template <typename T>
  TensorRef input(std::vector<int64_t> shape, const std::vector<T> &values) {
    TensorRef t = output<T>(std::move(shape));
    EXPECT_EQ(size_t(t.numel()), values.size()) << "test bug: value count";
    for (size_t i = 0; i < values.size() && i < size_t(t.numel()); ++i)
      t.as<T>()[i] = values[i];
    return t;
  }
  /// A tensor filled with a garbage byte pattern.
  template <typename T> TensorRef output(std::vector<int64_t> shape) {
    return raw(dtypeOf<T>(), std::move(shape));
  }
  TensorRef raw(DType dtype, std::vector<int64_t> shape) {
    TensorRef t;
    t.dtype = dtype;
    t.shape = std::move(shape);
    storage_.push_back(std::make_unique<std::vector<char>>(
        std::max<size_t>(t.bytes(), 1), char(0x5a)));
    t.data = storage_.back()->data();
    return t;
  }

private:
  std::vector<std::unique_ptr<std::vector<char>>> storage_;
};

template <typename T> std::vector<T> values(const TensorRef &t) {
  return std::vector<T>(t.as<T>(), t.as<T>() + t.numel());
}

std::vector<bool> bools(const TensorRef &t) {
  std::vector<bool> out;
  for (int64_t i = 0; i < t.numel(); ++i)
    out.push_back(t.as<uint8_t>()[i] != 0);
  return out;
}

AttrValue ints(std::vector<int64_t> v) {
  AttrValue a;
  a.ints = std::move(v);
  return a;
}
AttrValue floats(std::vector<double> v) {
  AttrValue a;
  a.floats = std::move(v);
  return a;
}
AttrValue str(std::string s) {
  AttrValue a;
  a.str = std::move(s);
  return a;
}

AttrMap attrs(std::vector<std::pair<std::string, AttrValue>> list) {
  AttrMap m;
  for (auto &kv : list)
    m.set(kv.first, kv.second);
  return m;
}

zrt::Status run(const std::string &op, const std::vector<TensorRef> &in,
                const std::vector<TensorRef> &out, const AttrMap &a = {},
                const KernelContext &ctx = serialContext()) {
  zrt::KernelFn fn = kernels().lookup(op);
  if (!fn)
    return zrt::Status::error("no kernel " + op);
  return fn(ctx, in, out, a);
}

#define EXPECT_OK(expr)                                                        \
  do {                                                                         \
    zrt::Status s_ = (expr);                                                   \
    EXPECT_TRUE(s_.isOk()) << s_.message();                                    \
  } while (0)
#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    zrt::Status s_ = (expr);                                                   \
    ASSERT_TRUE(s_.isOk()) << s_.message();                                    \
  } while (0)

template <typename T>
void expectNear(const std::vector<T> &actual,
                const std::vector<double> &expected, double tol = 1e-5) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(double(actual[i]))) << "at " << i;
      continue;
    }
    if (std::isinf(expected[i])) {
      EXPECT_EQ(double(actual[i]), expected[i]) << "at " << i;
      continue;
    }
    EXPECT_NEAR(double(actual[i]), expected[i],
                tol * std::max(1.0, std::fabs(expected[i])))
        << "at " << i;
  }
}

std::vector<float> randomFloats(size_t n, unsigned seed, float lo = -2.0f,
                                float hi = 2.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Flat index -> multi-index, and multi-index -> flat index under a
/// broadcast (numpy) reading of `shape` right-aligned to the index.
std::vector<int64_t> unflatten(int64_t flat,
                               const std::vector<int64_t> &shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}
int64_t broadcastFlat(const std::vector<int64_t> &idx,
                      const std::vector<int64_t> &shape) {
  int64_t flat = 0;
  const size_t offset = idx.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + (shape[d] == 1 ? 0 : idx[offset + d]);
  return flat;
}

//===----------------------------------------------------------------------===//
// Registry and helpers
//===----------------------------------------------------------------------===//

TEST(Registry, HasTheContractKernels) {
  for (const char *op : {"Add",
                         "Sub",
                         "Mul",
                         "Div",
                         "Pow",
                         "Max",
                         "Min",
                         "Mod",
                         "Equal",
                         "Less",
                         "LessOrEqual",
                         "Greater",
                         "GreaterOrEqual",
                         "And",
                         "Or",
                         "Xor",
                         "Where",
                         "Neg",
                         "Abs",
                         "Sqrt",
                         "Reciprocal",
                         "Exp",
                         "Log",
                         "Tanh",
                         "Erf",
                         "Sigmoid",
                         "Relu",
                         "Sin",
                         "Cos",
                         "Floor",
                         "Ceil",
                         "Round",
                         "Sign",
                         "Softplus",
                         "IsNaN",
                         "IsInf",
                         "Not",
                         "LeakyRelu",
                         "Elu",
                         "HardSigmoid",
                         "HardSwish",
                         "Gelu",
                         "FusedElementwise",
                         "Identity",
                         "Dropout",
                         "Cast",
                         "Clip",
                         "MatMul",
                         "Gemm",
                         "Softmax",
                         "LogSoftmax",
                         "LayerNormalization",
                         "RMSNormalization",
                         "ReduceMean",
                         "ReduceSum",
                         "ReduceMax",
                         "ReduceMin",
                         "ReduceProd",
                         "ReduceL2",
                         "ReduceSumSquare",
                         "ReduceLogSumExp",
                         "ArgMax",
                         "ArgMin",
                         "Transpose",
                         "Concat",
                         "Split",
                         "Slice",
                         "Gather",
                         "GatherElements",
                         "GatherND",
                         "ScatterElements",
                         "ScatterND",
                         "Copy",
                         "Expand",
                         "Tile",
                         "Pad",
                         "Fill",
                         "Trilu",
                         "Range",
                         "CumSum",
                         "SoftmaxCrossEntropyLoss",
                         "AdamW",
                         "SGD",
                         "LrSchedule",
                         "Conv",
                         "ConvTranspose",
                         "MaxPool",
                         "AveragePool",
                         "BatchNormalization",
                         "Resize",
                         "TopK",
                         "OneHot"})
    EXPECT_NE(kernels().lookup(op), nullptr) << op;
}

TEST(Helpers, DTypeNamesAndShapes) {
  EXPECT_STREQ(zrt::dtypeName(DType::F32), "f32");
  EXPECT_STREQ(zrt::dtypeName(DType::BF16), "bf16");
  EXPECT_STREQ(zrt::dtypeName(DType::Bool), "bool");
  EXPECT_EQ(zrt::shapeString({2, 8, 64}), "2x8x64");
  EXPECT_EQ(zrt::shapeString({}), "scalar");
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

TEST(Binary, AddSameShapeAndBroadcast) {
  Tensors t;
  TensorRef a = t.input<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  TensorRef row = t.input<float>({3}, {10, 20, 30});
  TensorRef col = t.input<float>({2, 1}, {100, 200});
  TensorRef y = t.output<float>({2, 3});
  EXPECT_OK(run("Add", {a, a}, {y}));
  expectNear(values<float>(y), {2, 4, 6, 8, 10, 12});
  EXPECT_OK(run("Add", {a, row}, {y}));
  expectNear(values<float>(y), {11, 22, 33, 14, 25, 36});
  EXPECT_OK(run("Add", {col, row}, {y}));
  expectNear(values<float>(y), {110, 120, 130, 210, 220, 230});
  EXPECT_OK(run("Sub", {row, a}, {y}));
  expectNear(values<float>(y), {9, 18, 27, 6, 15, 24});
}

TEST(Binary, ScalarRankZeroAndEmpty) {
  Tensors t;
  TensorRef s = t.input<float>({}, {2});
  TensorRef a = t.input<float>({2, 2}, {1, 2, 3, 4});
  TensorRef y = t.output<float>({2, 2});
  EXPECT_OK(run("Mul", {s, a}, {y}));
  expectNear(values<float>(y), {2, 4, 6, 8});
  TensorRef ys = t.output<float>({});
  EXPECT_OK(run("Div", {s, s}, {ys}));
  expectNear(values<float>(ys), {1});
  TensorRef e = t.input<float>({0, 3}, {});
  TensorRef r = t.input<float>({3}, {1, 2, 3});
  TensorRef ye = t.output<float>({0, 3});
  EXPECT_OK(run("Add", {e, r}, {ye}));
}

TEST(Binary, IntegerArithmetic) {
  Tensors t;
  TensorRef a =
      t.input<int32_t>({4}, {-7, 7, 5, std::numeric_limits<int32_t>::min()});
  TensorRef b = t.input<int32_t>({4}, {2, -2, 0, -1});
  TensorRef y = t.output<int32_t>({4});
  EXPECT_OK(run("Div", {a, b}, {y}));
  EXPECT_EQ(
      values<int32_t>(y),
      (std::vector<int32_t>{-3, -3, 0, std::numeric_limits<int32_t>::min()}));
  TensorRef a64 = t.input<int64_t>({2, 2}, {1, 2, 3, 4});
  TensorRef b64 = t.input<int64_t>({2}, {10, 20});
  TensorRef y64 = t.output<int64_t>({2, 2});
  EXPECT_OK(run("Add", {a64, b64}, {y64}));
  EXPECT_EQ(values<int64_t>(y64), (std::vector<int64_t>{11, 22, 13, 24}));
  EXPECT_OK(run("Mul", {a64, b64}, {y64}));
  EXPECT_EQ(values<int64_t>(y64), (std::vector<int64_t>{10, 40, 30, 80}));
}

TEST(Binary, EightBitIntegers) {
  Tensors t;
  TensorRef a = t.input<int8_t>({3}, {100, -100, 7});
  TensorRef b = t.input<int8_t>({3}, {100, 27, -2});
  TensorRef y = t.output<int8_t>({3});
  EXPECT_OK(run("Add", {a, b}, {y}));
  EXPECT_EQ(values<int8_t>(y), (std::vector<int8_t>{-56, -73, 5})); // wraps
  EXPECT_OK(run("Div", {a, b}, {y}));
  EXPECT_EQ(values<int8_t>(y), (std::vector<int8_t>{1, -3, -3}));
  TensorRef u = t.input<uint8_t>({3}, {200, 3, 0});
  TensorRef v = t.input<uint8_t>({}, {100});
  TensorRef uy = t.output<uint8_t>({3});
  EXPECT_OK(run("Sub", {u, v}, {uy}));
  EXPECT_EQ(values<uint8_t>(uy), (std::vector<uint8_t>{100, 159, 156}));
  EXPECT_OK(run("Max", {u, v}, {uy}));
  EXPECT_EQ(values<uint8_t>(uy), (std::vector<uint8_t>{200, 100, 100}));
  TensorRef ub = t.output<bool>({3});
  EXPECT_OK(run("Greater", {u, v}, {ub}));
  EXPECT_EQ(bools(ub), (std::vector<bool>{true, false, false}));
  EXPECT_OK(run("Abs", {a}, {y}));
  EXPECT_EQ(values<int8_t>(y), (std::vector<int8_t>{100, 100, 7}));
}

TEST(Binary, ModBothConventions) {
  Tensors t;
  TensorRef a = t.input<int64_t>({4}, {-7, 7, -7, 7});
  TensorRef b = t.input<int64_t>({4}, {3, -3, -3, 3});
  TensorRef y = t.output<int64_t>({4});
  EXPECT_OK(run("Mod", {a, b}, {y}, attrs({{"fmod", ints({0})}})));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{2, -2, -1, 1}));
  EXPECT_OK(run("Mod", {a, b}, {y}, attrs({{"fmod", ints({1})}})));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{-1, 1, -1, 1}));
  TensorRef af = t.input<float>({2}, {-7.5f, 7.5f});
  TensorRef bf = t.input<float>({2}, {2, 2});
  TensorRef yf = t.output<float>({2});
  EXPECT_OK(run("Mod", {af, bf}, {yf}, attrs({{"fmod", ints({1})}})));
  expectNear(values<float>(yf), {-1.5, 1.5});
  EXPECT_OK(run("Mod", {af, bf}, {yf}));
  expectNear(values<float>(yf), {0.5, 1.5});
  zrt::Status bad = run("Mod", {af, bf}, {yf}, attrs({{"fmod", ints({2})}}));
  EXPECT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("Mod: bad attribute fmod (got 2"),
            std::string::npos);
}

TEST(Binary, PowMixedExponentTypes) {
  Tensors t;
  TensorRef x = t.input<float>({3}, {2, 3, 4});
  TensorRef ef = t.input<float>({3}, {0.5f, 2, -1});
  TensorRef ei = t.input<int64_t>({3}, {3, 0, 2});
  TensorRef two = t.input<float>({}, {2});
  TensorRef half = t.input<double>({1}, {0.5});
  TensorRef y = t.output<float>({3});
  EXPECT_OK(run("Pow", {x, ef}, {y}));
  expectNear(values<float>(y), {std::sqrt(2.0), 9, 0.25});
  EXPECT_OK(run("Pow", {x, ei}, {y}));
  expectNear(values<float>(y), {8, 1, 16});
  EXPECT_OK(run("Pow", {x, two}, {y}));
  expectNear(values<float>(y), {4, 9, 16});
  EXPECT_OK(run("Pow", {x, half}, {y}));
  expectNear(values<float>(y), {std::sqrt(2.0), std::sqrt(3.0), 2});
  TensorRef xi = t.input<int64_t>({3}, {2, -3, 5});
  TensorRef yi = t.output<int64_t>({3});
  EXPECT_OK(run("Pow", {xi, ei}, {yi}));
  EXPECT_EQ(values<int64_t>(yi), (std::vector<int64_t>{8, 1, 25}));
}

TEST(Binary, VariadicMaxMinSumMean) {
  Tensors t;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  TensorRef a = t.input<float>({2, 2}, {1, 5, nan, 0});
  TensorRef b = t.input<float>({2}, {3, 2});
  TensorRef c = t.input<float>({}, {4});
  TensorRef y = t.output<float>({2, 2});
  EXPECT_OK(run("Max", {a, b, c}, {y}));
  expectNear(values<float>(y), {4, 5, NAN, 4});
  EXPECT_OK(run("Min", {a, b, c}, {y}));
  expectNear(values<float>(y), {1, 2, NAN, 0});
  TensorRef d = t.input<float>({2, 2}, {1, 2, 3, 4});
  EXPECT_OK(run("Sum", {d, b, c}, {y}));
  expectNear(values<float>(y), {8, 8, 10, 10});
  EXPECT_OK(run("Mean", {d, b}, {y}));
  expectNear(values<float>(y), {2, 2, 3, 3});
  EXPECT_OK(run("Max", {b}, {y}));
  expectNear(values<float>(y), {3, 2, 3, 2});
  TensorRef i = t.input<int32_t>({3}, {1, 9, -4});
  TensorRef j = t.input<int32_t>({3}, {2, 8, -5});
  TensorRef yi = t.output<int32_t>({3});
  EXPECT_OK(run("Max", {i, j}, {yi}));
  EXPECT_EQ(values<int32_t>(yi), (std::vector<int32_t>{2, 9, -4}));
}

TEST(Binary, ComparisonsGiveBool) {
  Tensors t;
  TensorRef a = t.input<int64_t>({2, 2}, {1, 2, 3, 4});
  TensorRef b = t.input<int64_t>({}, {2});
  TensorRef y = t.output<bool>({2, 2});
  EXPECT_OK(run("Equal", {a, b}, {y}));
  EXPECT_EQ(bools(y), (std::vector<bool>{false, true, false, false}));
  EXPECT_OK(run("Less", {a, b}, {y}));
  EXPECT_EQ(bools(y), (std::vector<bool>{true, false, false, false}));
  EXPECT_OK(run("LessOrEqual", {a, b}, {y}));
  EXPECT_EQ(bools(y), (std::vector<bool>{true, true, false, false}));
  EXPECT_OK(run("Greater", {a, b}, {y}));
  EXPECT_EQ(bools(y), (std::vector<bool>{false, false, true, true}));
  EXPECT_OK(run("GreaterOrEqual", {a, b}, {y}));
  EXPECT_EQ(bools(y), (std::vector<bool>{false, true, true, true}));
  TensorRef f = t.input<float>({2}, {0.5f, NAN});
  TensorRef g = t.input<float>({2}, {0.5f, NAN});
  TensorRef yb = t.output<bool>({2});
  EXPECT_OK(run("Equal", {f, g}, {yb}));
  EXPECT_EQ(bools(yb), (std::vector<bool>{true, false}));
  TensorRef p = t.input<bool>({2}, {true, false});
  TensorRef q = t.input<bool>({2}, {true, true});
  EXPECT_OK(run("Equal", {p, q}, {yb}));
  EXPECT_EQ(bools(yb), (std::vector<bool>{true, false}));
  // Wrong output dtype is reported.
  TensorRef wrong = t.output<float>({2, 2});
  zrt::Status s = run("Less", {a, b}, {wrong});
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(
      s.message().find("Less: wrong output dtype (got f32, expected bool)"),
      std::string::npos)
      << s.message();
}

TEST(Binary, Logical) {
  Tensors t;
  TensorRef a = t.input<bool>({4}, {false, false, true, true});
  TensorRef b = t.input<bool>({4}, {false, true, false, true});
  TensorRef y = t.output<bool>({4});
  EXPECT_OK(run("And", {a, b}, {y}));
  EXPECT_EQ(bools(y), (std::vector<bool>{false, false, false, true}));
  EXPECT_OK(run("Or", {a, b}, {y}));
  EXPECT_EQ(bools(y), (std::vector<bool>{false, true, true, true}));
  EXPECT_OK(run("Xor", {a, b}, {y}));
  EXPECT_EQ(bools(y), (std::vector<bool>{false, true, true, false}));
  TensorRef f = t.input<float>({4}, {0, 1, 0, 1});
  EXPECT_FALSE(run("And", {f, b}, {y}).isOk());
}

TEST(Binary, WhereThreeWayBroadcast) {
  Tensors t;
  TensorRef cond = t.input<bool>({2, 1}, {true, false});
  TensorRef x = t.input<int64_t>({3}, {1, 2, 3});
  TensorRef y = t.input<int64_t>({}, {-1});
  TensorRef out = t.output<int64_t>({2, 3});
  EXPECT_OK(run("Where", {cond, x, y}, {out}));
  EXPECT_EQ(values<int64_t>(out), (std::vector<int64_t>{1, 2, 3, -1, -1, -1}));
  TensorRef c2 = t.input<bool>({3}, {true, false, true});
  TensorRef xf = t.input<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  TensorRef yf = t.input<float>({2, 3}, {-1, -2, -3, -4, -5, -6});
  TensorRef of = t.output<float>({2, 3});
  EXPECT_OK(run("Where", {c2, xf, yf}, {of}));
  expectNear(values<float>(of), {1, -2, 3, 4, -5, 6});
}

TEST(Binary, PRelu) {
  Tensors t;
  TensorRef x = t.input<float>({2, 2}, {-2, 3, -4, 5});
  TensorRef slope = t.input<float>({2}, {0.5f, 0.1f});
  TensorRef y = t.output<float>({2, 2});
  EXPECT_OK(run("PRelu", {x, slope}, {y}));
  expectNear(values<float>(y), {-1, 3, -2, 5});
}

TEST(Binary, LargeBroadcastMatchesNaiveThreaded) {
  Tensors t;
  const std::vector<int64_t> as = {7, 1, 33, 1}, bs = {5, 1, 9},
                             os = {7, 5, 33, 9};
  std::vector<float> av = randomFloats(size_t(product(as)), 1);
  std::vector<float> bv = randomFloats(size_t(product(bs)), 2);
  TensorRef a = t.input<float>(as, av), b = t.input<float>(bs, bv);
  TensorRef y = t.output<float>(os);
  KernelContext ctx = threadedContext();
  EXPECT_OK(run("Mul", {a, b}, {y}, {}, ctx));
  std::vector<double> expected;
  for (int64_t i = 0; i < product(os); ++i) {
    const std::vector<int64_t> idx = unflatten(i, os);
    expected.push_back(double(av[size_t(broadcastFlat(idx, as))]) *
                       double(bv[size_t(broadcastFlat(idx, bs))]));
  }
  expectNear(values<float>(y), expected);
  // Same-shape and row-broadcast fast paths over a big tensor.
  std::vector<float> big = randomFloats(200000, 3);
  TensorRef p = t.input<float>({200000}, big);
  TensorRef q = t.input<float>({1}, {3});
  TensorRef z = t.output<float>({200000});
  EXPECT_OK(run("Sub", {p, q}, {z}, {}, ctx));
  std::vector<float> zv = values<float>(z);
  for (size_t i = 0; i < big.size(); i += 997)
    EXPECT_FLOAT_EQ(zv[i], big[i] - 3);
}

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

TEST(Unary, MathMatchesStd) {
  struct Case {
    const char *op;
    double (*ref)(double);
  };
  const Case cases[] = {
      {"Neg", [](double x) { return -x; }},
      {"Abs", [](double x) { return std::fabs(x); }},
      {"Exp", [](double x) { return std::exp(x); }},
      {"Tanh", [](double x) { return std::tanh(x); }},
      {"Erf", [](double x) { return std::erf(x); }},
      {"Sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"Relu", [](double x) { return x > 0 ? x : 0; }},
      {"Sin", [](double x) { return std::sin(x); }},
      {"Cos", [](double x) { return std::cos(x); }},
      {"Atan", [](double x) { return std::atan(x); }},
      {"Floor", [](double x) { return std::floor(x); }},
      {"Ceil", [](double x) { return std::ceil(x); }},
      {"Sign", [](double x) { return double((x > 0) - (x < 0)); }},
      {"Softplus", [](double x) { return std::log(1 + std::exp(x)); }},
      {"Softsign", [](double x) { return x / (1 + std::fabs(x)); }},
      {"HardSwish",
       [](double x) { return x * std::min(1.0, std::max(0.0, x / 6 + 0.5)); }},
      {"HardSigmoid",
       [](double x) { return std::min(1.0, std::max(0.0, 0.2 * x + 0.5)); }},
      {"LeakyRelu", [](double x) { return x < 0 ? 0.01 * x : x; }},
      {"Elu", [](double x) { return x < 0 ? std::exp(x) - 1 : x; }},
      {"Selu",
       [](double x) {
         return 1.05070102214813232421875 *
                (x > 0 ? x : 1.67326319217681884765625 * (std::exp(x) - 1));
       }},
      {"Gelu",
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
  };
  std::vector<float> xs;
  for (float x = -6.0f; x <= 6.0f; x += 0.0625f)
    xs.push_back(x);
  for (const Case &c : cases) {
    SCOPED_TRACE(c.op);
    Tensors t;
    TensorRef x = t.input<float>({int64_t(xs.size())}, xs);
    TensorRef y = t.output<float>({int64_t(xs.size())});
    EXPECT_OK(run(c.op, {x}, {y}));
    std::vector<double> expected;
    for (float v : xs)
      expected.push_back(c.ref(v));
    expectNear(values<float>(y), expected, 2e-6);
    // f64 too.
    std::vector<double> xd(xs.begin(), xs.end());
    TensorRef x64 = t.input<double>({int64_t(xs.size())}, xd);
    TensorRef y64 = t.output<double>({int64_t(xs.size())});
    EXPECT_OK(run(c.op, {x64}, {y64}));
    expectNear(values<double>(y64), expected, 1e-12);
  }
}

/// Distance in ulps between two floats of the same sign class (-0 == +0).
int64_t ulpDistance(float a, float b) {
  auto ordered = [](float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return (bits & 0x80000000u) ? -int64_t(bits & 0x7fffffffu) : int64_t(bits);
  };
  return std::llabs(ordered(a) - ordered(b));
}

TEST(Unary, FastTranscendentalsWithinOneUlp) {
  // The f32 kernels run math/VecMath.h in their dispatched clone (AVX-512 or
  // AVX2 with FMA contraction where the CPU has them): every 4099th bit
  // pattern plus the specials, within 1 ulp of libm in double rounded to
  // float, NaN/inf/zero exact, and the same bits at 1 and 4 threads.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> xs = {0.0f, -0.0f, inf, -inf, NAN, 88.72283f, 88.72284f,
                           -103.972f, -104.0f, 9.02f, 3.92f};
  for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += 4099) {
    float x;
    const uint32_t b = uint32_t(bits);
    std::memcpy(&x, &b, sizeof x);
    xs.push_back(x);
  }
  struct Case {
    const char *op;
    double (*ref)(double);
  };
  const Case cases[] = {
      {"Exp", [](double x) { return std::exp(x); }},
      {"Log", [](double x) { return std::log(x); }},
      {"Tanh", [](double x) { return std::tanh(x); }},
      {"Erf", [](double x) { return std::erf(x); }},
      {"Sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }},
  };
  Tensors t;
  const int64_t n = int64_t(xs.size());
  TensorRef x = t.input<float>({n}, xs);
  TensorRef y = t.output<float>({n}), y4 = t.output<float>({n});
  for (const Case &c : cases) {
    SCOPED_TRACE(c.op);
    EXPECT_OK(run(c.op, {x}, {y}));
    EXPECT_OK(run(c.op, {x}, {y4}, {}, threadedContext()));
    const std::vector<float> got = values<float>(y), got4 = values<float>(y4);
    ASSERT_EQ(
        std::memcmp(got.data(), got4.data(), got.size() * sizeof(float)), 0);
    int failures = 0;
    for (size_t i = 0; i < xs.size() && failures < 10; ++i) {
      const float ref = float(c.ref(double(xs[i])));
      bool ok;
      if (std::isnan(ref))
        ok = std::isnan(got[i]);
      else if (!std::isfinite(ref) || !std::isfinite(got[i]) ||
               (ref == 0.0f && got[i] == 0.0f))
        ok = std::memcmp(&ref, &got[i], sizeof ref) == 0; // sign included
      else
        ok = ulpDistance(got[i], ref) <= 1;
      if (!ok) {
        ++failures;
        ADD_FAILURE() << c.op << "(" << xs[i] << ") = " << got[i] << ", libm "
                      << ref;
      }
    }
  }
}

TEST(Unary, RoundHalfToEvenAndIntegerOps) {
  Tensors t;
  TensorRef x = t.input<float>({6}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f});
  TensorRef y = t.output<float>({6});
  EXPECT_OK(run("Round", {x}, {y}));
  expectNear(values<float>(y), {0, 2, 2, 0, -2, 2});
  TensorRef i = t.input<int64_t>({3}, {-3, 0, 4});
  TensorRef yi = t.output<int64_t>({3});
  EXPECT_OK(run("Abs", {i}, {yi}));
  EXPECT_EQ(values<int64_t>(yi), (std::vector<int64_t>{3, 0, 4}));
  EXPECT_OK(run("Neg", {i}, {yi}));
  EXPECT_EQ(values<int64_t>(yi), (std::vector<int64_t>{3, 0, -4}));
  EXPECT_OK(run("Sign", {i}, {yi}));
  EXPECT_EQ(values<int64_t>(yi), (std::vector<int64_t>{-1, 0, 1}));
  EXPECT_OK(run("Relu", {i}, {yi}));
  EXPECT_EQ(values<int64_t>(yi), (std::vector<int64_t>{0, 0, 4}));
  TensorRef r = t.input<float>({3}, {4, 0.25f, 9});
  TensorRef ry = t.output<float>({3});
  EXPECT_OK(run("Sqrt", {r}, {ry}));
  expectNear(values<float>(ry), {2, 0.5, 3});
  EXPECT_OK(run("Reciprocal", {r}, {ry}));
  expectNear(values<float>(ry), {0.25, 4, 1.0 / 9});
  EXPECT_OK(run("Log", {r}, {ry}));
  expectNear(values<float>(ry), {std::log(4.0), std::log(0.25), std::log(9.0)});
  zrt::Status s = run("Sqrt", {i}, {yi});
  EXPECT_FALSE(s.isOk());
  EXPECT_EQ(s.message(),
            "Sqrt: unsupported dtype of input (got i64, expected f32 or f64)");
}

TEST(Unary, PredicatesAndNot) {
  Tensors t;
  const float inf = std::numeric_limits<float>::infinity();
  TensorRef x = t.input<float>({4}, {1, NAN, inf, -inf});
  TensorRef y = t.output<bool>({4});
  EXPECT_OK(run("IsNaN", {x}, {y}));
  EXPECT_EQ(bools(y), (std::vector<bool>{false, true, false, false}));
  EXPECT_OK(run("IsInf", {x}, {y}));
  EXPECT_EQ(bools(y), (std::vector<bool>{false, false, true, true}));
  EXPECT_OK(run("IsInf", {x}, {y}, attrs({{"detect_negative", ints({0})}})));
  EXPECT_EQ(bools(y), (std::vector<bool>{false, false, true, false}));
  TensorRef b = t.input<bool>({2}, {true, false});
  TensorRef nb = t.output<bool>({2});
  EXPECT_OK(run("Not", {b}, {nb}));
  EXPECT_EQ(bools(nb), (std::vector<bool>{false, true}));
}

TEST(Unary, ParameterisedActivations) {
  Tensors t;
  TensorRef x = t.input<float>({4}, {-2, -0.5f, 0.5f, 3});
  TensorRef y = t.output<float>({4});
  EXPECT_OK(run("LeakyRelu", {x}, {y}, attrs({{"alpha", floats({0.1})}})));
  expectNear(values<float>(y), {-0.2, -0.05, 0.5, 3});
  EXPECT_OK(run("Elu", {x}, {y}, attrs({{"alpha", floats({2.0})}})));
  expectNear(values<float>(y),
             {2 * (std::exp(-2.0) - 1), 2 * (std::exp(-0.5) - 1), 0.5, 3});
  EXPECT_OK(run("HardSigmoid", {x}, {y},
                attrs({{"alpha", floats({0.5})}, {"beta", floats({0.25})}})));
  expectNear(values<float>(y), {0, 0, 0.5, 1});
  EXPECT_OK(run("ThresholdedRelu", {x}, {y}));
  expectNear(values<float>(y), {0, 0, 0, 3});
  EXPECT_OK(run("Celu", {x}, {y}));
  expectNear(values<float>(y),
             {std::exp(-2.0) - 1, std::exp(-0.5) - 1, 0.5, 3});
  EXPECT_OK(run("Gelu", {x}, {y}, attrs({{"approximate", str("tanh")}})));
  std::vector<double> expected;
  for (double v : {-2.0, -0.5, 0.5, 3.0})
    expected.push_back(
        0.5 * v *
        (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
  expectNear(values<float>(y), expected, 2e-6);
}

TEST(Unary, Cast) {
  Tensors t;
  TensorRef f = t.input<float>({5}, {-1.7f, 0, 2.9f, 0.25f, -0.0f});
  TensorRef i = t.output<int32_t>({5});
  EXPECT_OK(run("Cast", {f}, {i}));
  EXPECT_EQ(values<int32_t>(i), (std::vector<int32_t>{-1, 0, 2, 0, 0}));
  TensorRef b = t.output<bool>({5});
  EXPECT_OK(run("Cast", {f}, {b}));
  EXPECT_EQ(bools(b), (std::vector<bool>{true, false, true, true, false}));
  TensorRef back = t.output<double>({5});
  EXPECT_OK(run("Cast", {b}, {back}));
  expectNear(values<double>(back), {1, 0, 1, 1, 0});
  TensorRef big = t.input<int64_t>({2}, {int64_t(1) << 40, -3});
  TensorRef bf = t.output<float>({2});
  EXPECT_OK(run("Cast", {big}, {bf}));
  expectNear(values<float>(bf), {std::ldexp(1.0, 40), -3});
  // f32 -> f16 -> f32 and f32 -> bf16 -> f32 round trips.
  TensorRef h = t.raw(DType::F16, {5});
  TensorRef src = t.input<float>({5}, {1.0f, -2.5f, 65504.0f, 1e-7f, 0.1f});
  TensorRef out = t.output<float>({5});
  EXPECT_OK(run("Cast", {src}, {h}));
  EXPECT_EQ(h.as<uint16_t>()[0], 0x3c00);
  EXPECT_EQ(h.as<uint16_t>()[1], 0xc100);
  EXPECT_EQ(h.as<uint16_t>()[2], 0x7bff);
  EXPECT_OK(run("Cast", {h}, {out}));
  expectNear(values<float>(out),
             {1.0, -2.5, 65504, 1.1920928955078125e-07, 0.0999755859375}, 1e-9);
  TensorRef bh = t.raw(DType::BF16, {5});
  EXPECT_OK(run("Cast", {src}, {bh}));
  EXPECT_OK(run("Cast", {bh}, {out}));
  expectNear(values<float>(out),
             {1.0, -2.5, 65536, 1.0011717677116394e-07, 0.10009765625}, 1e-9);
}

TEST(Unary, Clip) {
  Tensors t;
  TensorRef x = t.input<float>({4}, {-5, 0.5f, 2, 7});
  TensorRef y = t.output<float>({4});
  EXPECT_OK(run("Clip", {x}, {y},
                attrs({{"min", floats({0})}, {"max", floats({6})}})));
  expectNear(values<float>(y), {0, 0.5, 2, 6});
  EXPECT_OK(run("Clip", {x}, {y}, attrs({{"max", floats({1})}})));
  expectNear(values<float>(y), {-5, 0.5, 1, 1});
  EXPECT_OK(run("Clip", {x}, {y}));
  expectNear(values<float>(y), {-5, 0.5, 2, 7});
  TensorRef i = t.input<int64_t>({3}, {-9, 3, 9});
  TensorRef yi = t.output<int64_t>({3});
  EXPECT_OK(run("Clip", {i}, {yi},
                attrs({{"min", floats({-2})}, {"max", floats({4})}})));
  EXPECT_EQ(values<int64_t>(yi), (std::vector<int64_t>{-2, 3, 4}));
}

TEST(Unary, IdentityAndDropout) {
  Tensors t;
  TensorRef x = t.input<int64_t>({2, 2}, {1, 2, 3, 4});
  TensorRef y = t.output<int64_t>({2, 2});
  EXPECT_OK(run("Identity", {x}, {y}));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{1, 2, 3, 4}));
  TensorRef y2 = t.output<int64_t>({2, 2});
  TensorRef mask = t.output<bool>({2, 2});
  EXPECT_OK(run("Dropout", {x}, {y2, mask}));
  EXPECT_EQ(values<int64_t>(y2), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(bools(mask), (std::vector<bool>{true, true, true, true}));
}

//===----------------------------------------------------------------------===//
// MatMul, Gemm
//===----------------------------------------------------------------------===//

/// Naive batched matmul of [..., m, k] x [..., k, n] with broadcast batches
/// (both operands at least 2-D), in double.
std::vector<double> naiveMatMul(const std::vector<float> &a,
                                const std::vector<int64_t> &as,
                                const std::vector<float> &b,
                                const std::vector<int64_t> &bs,
                                const std::vector<int64_t> &batch) {
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  std::vector<int64_t> ab(as.begin(), as.end() - 2),
      bb(bs.begin(), bs.end() - 2);
  std::vector<double> out;
  for (int64_t i = 0; i < product(batch); ++i) {
    const std::vector<int64_t> idx = unflatten(i, batch);
    const int64_t ao = broadcastFlat(idx, ab) * m * k;
    const int64_t bo = broadcastFlat(idx, bb) * k * n;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += double(a[size_t(ao + r * k + p)]) *
                 double(b[size_t(bo + p * n + c)]);
        out.push_back(acc);
      }
  }
  return out;
}

TEST(MatMul, BatchedBroadcastAndFolded) {
  struct Case {
    std::vector<int64_t> a, b, batch;
  };
  const Case cases[] = {
      {{3, 4}, {4, 5}, {}},
      {{2, 3, 4, 5}, {5, 6}, {2, 3}},    // folded into one sgemm
      {{2, 1, 4, 5}, {3, 5, 6}, {2, 3}}, // broadcast batch
      {{4, 5}, {3, 5, 2}, {3}},          // A broadcast
      {{64, 8, 16}, {64, 16, 8}, {64}},  // many small products (parallel)
      {{130, 70}, {70, 300}, {}},        // one product, tiled by rows
      {{20, 200}, {200, 600}, {}},       // one product, tiled by columns
      {{2, 100, 64}, {2, 64, 300}, {2}}, // fewer products than threads
  };
  for (const Case &c : cases) {
    for (bool threaded : {false, true}) {
      Tensors t;
      std::vector<float> av = randomFloats(size_t(product(c.a)), 7);
      std::vector<float> bv = randomFloats(size_t(product(c.b)), 8);
      std::vector<int64_t> os = c.batch;
      os.push_back(c.a[c.a.size() - 2]);
      os.push_back(c.b.back());
      TensorRef a = t.input<float>(c.a, av), b = t.input<float>(c.b, bv);
      TensorRef y = t.output<float>(os);
      EXPECT_OK(run("MatMul", {a, b}, {y}, {},
                    threaded ? threadedContext() : serialContext()));
      expectNear(values<float>(y), naiveMatMul(av, c.a, bv, c.b, c.batch),
                 1e-4);
    }
  }
}

TEST(MatMul, VectorsAndIntegers) {
  Tensors t;
  TensorRef v = t.input<float>({3}, {1, 2, 3});
  TensorRef m = t.input<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  TensorRef y = t.output<float>({2});
  EXPECT_OK(run("MatMul", {v, m}, {y}));
  expectNear(values<float>(y), {22, 28});
  TensorRef mt = t.input<float>({2, 3}, {1, 3, 5, 2, 4, 6});
  EXPECT_OK(run("MatMul", {mt, v}, {y}));
  expectNear(values<float>(y), {22, 28});
  TensorRef s = t.output<float>({});
  EXPECT_OK(run("MatMul", {v, v}, {s}));
  expectNear(values<float>(s), {14});
  TensorRef ia = t.input<int64_t>({2, 2}, {1, 2, 3, 4});
  TensorRef ib = t.input<int64_t>({2, 2}, {5, 6, 7, 8});
  TensorRef iy = t.output<int64_t>({2, 2});
  EXPECT_OK(run("MatMul", {ia, ib}, {iy}));
  EXPECT_EQ(values<int64_t>(iy), (std::vector<int64_t>{19, 22, 43, 50}));
  TensorRef da = t.input<double>({1, 2}, {0.5, 0.25});
  TensorRef db = t.input<double>({2, 1}, {4, 8});
  TensorRef dy = t.output<double>({1, 1});
  EXPECT_OK(run("MatMul", {da, db}, {dy}));
  expectNear(values<double>(dy), {4});
  TensorRef bad = t.output<float>({3});
  EXPECT_FALSE(run("MatMul", {v, m}, {bad}).isOk());
}

TEST(Gemm, TransposesAlphaBetaAndBroadcastC) {
  Tensors t;
  // A^T is [[1,2,3],[4,5,6]] (2x3); B^T is [[1,0],[0,1],[1,1]] (3x2).
  TensorRef a = t.input<float>({3, 2}, {1, 4, 2, 5, 3, 6});
  TensorRef b = t.input<float>({2, 3}, {1, 0, 1, 0, 1, 1});
  TensorRef cRow = t.input<float>({2}, {10, 20});
  TensorRef cCol = t.input<float>({2, 1}, {1, 2});
  TensorRef y = t.output<float>({2, 2});
  // A^T B^T = [[4, 5], [10, 11]].
  EXPECT_OK(run("Gemm", {a, b}, {y},
                attrs({{"transA", ints({1})}, {"transB", ints({1})}})));
  expectNear(values<float>(y), {4, 5, 10, 11});
  EXPECT_OK(run("Gemm", {a, b, cRow}, {y},
                attrs({{"transA", ints({1})},
                       {"transB", ints({1})},
                       {"alpha", floats({2})},
                       {"beta", floats({0.5})}})));
  expectNear(values<float>(y), {13, 20, 25, 32});
  EXPECT_OK(run("Gemm", {a, b, cCol}, {y},
                attrs({{"transA", ints({1})}, {"transB", ints({1})}})));
  expectNear(values<float>(y), {5, 6, 12, 13});
  TensorRef ia = t.input<int32_t>({2, 2}, {1, 2, 3, 4});
  TensorRef ic = t.input<int32_t>({}, {100});
  TensorRef iy = t.output<int32_t>({2, 2});
  EXPECT_OK(run("Gemm", {ia, ia, ic}, {iy}, attrs({{"transB", ints({1})}})));
  EXPECT_EQ(values<int32_t>(iy), (std::vector<int32_t>{105, 111, 111, 125}));
}

TEST(Gemm, TiledTransposedMatchesNaive) {
  const int64_t m = 90, n = 260, k = 70;
  const std::vector<float> av = randomFloats(size_t(m * k), 41);
  const std::vector<float> bv = randomFloats(size_t(k * n), 42);
  const std::vector<float> cv = randomFloats(size_t(n), 43);
  for (bool transA : {false, true})
    for (bool transB : {false, true}) {
      SCOPED_TRACE(std::to_string(transA) + std::to_string(transB));
      Tensors t;
      TensorRef a = t.input<float>(
          transA ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, av);
      TensorRef b = t.input<float>(
          transB ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, bv);
      TensorRef c = t.input<float>({n}, cv);
      TensorRef y = t.output<float>({m, n});
      EXPECT_OK(run("Gemm", {a, b, c}, {y},
                    attrs({{"transA", ints({transA})},
                           {"transB", ints({transB})},
                           {"alpha", floats({0.5})},
                           {"beta", floats({2})}}),
                    threadedContext()));
      std::vector<double> expected;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc += double(av[size_t(transA ? p * m + i : i * k + p)]) *
                   double(bv[size_t(transB ? j * k + p : p * n + j)]);
          expected.push_back(0.5 * acc + 2 * double(cv[size_t(j)]));
        }
      expectNear(values<float>(y), expected, 1e-5);
    }
}

// A product large enough to be cut into a 2 x 2 grid of tiles: Gemm's C
// (every unidirectional broadcast, and C passed as Y itself) is copied into Y
// tile by tile before each tile's product.
TEST(Gemm, TiledBiasBroadcasts) {
  const int64_t m = 1200, n = 1300, k = 8;
  const std::vector<float> av = randomFloats(size_t(m * k), 44);
  const std::vector<float> bv = randomFloats(size_t(k * n), 45);
  const std::vector<float> cv = randomFloats(size_t(m * n), 46);
  std::vector<double> ab(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += double(av[size_t(i * k + p)]) * double(bv[size_t(p * n + j)]);
      ab[size_t(i * n + j)] = acc;
    }
  const std::vector<std::vector<int64_t>> cShapes = {
      {}, {n}, {1, n}, {m, 1}, {m, n}, {1, 1, n}};
  for (const std::vector<int64_t> &cShape : cShapes)
    for (bool inPlace : {false, true}) {
      if (inPlace && cShape != std::vector<int64_t>{m, n})
        continue;
      SCOPED_TRACE(zrt::shapeString(cShape) + (inPlace ? " in place" : ""));
      const int64_t cRows = cShape.size() >= 2 ? cShape[cShape.size() - 2] : 1;
      const int64_t cCols = cShape.empty() ? 1 : cShape.back();
      Tensors t;
      TensorRef a = t.input<float>({m, k}, av);
      TensorRef b = t.input<float>({k, n}, bv);
      TensorRef c = t.input<float>(
          cShape, std::vector<float>(cv.begin(), cv.begin() + cRows * cCols));
      TensorRef y = inPlace ? c : t.output<float>({m, n});
      EXPECT_OK(run("Gemm", {a, b, c}, {y}, attrs({{"beta", floats({0.5})}}),
                    threadedContext()));
      std::vector<double> expected(size_t(m * n));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          expected[size_t(i * n + j)] =
              ab[size_t(i * n + j)] +
              0.5 * double(cv[size_t((cRows == 1 ? 0 : i) * cCols +
                                     (cCols == 1 ? 0 : j))]);
      expectNear(values<float>(y), expected, 1e-5);
    }
}

//===----------------------------------------------------------------------===//
// Products over a packed constant B (cpu/kernels/PackedGemm.h)
//===----------------------------------------------------------------------===//

/// One Gemm case: shapes, transposes, C's shape, alpha, beta.
struct PackedGemmCase {
  int64_t m, n, k;
  bool transA, transB;
  std::vector<int64_t> cShape; ///< {0}: no C
  double alpha, beta;
};

std::vector<PackedGemmCase> packedGemmCases() {
  // Edges: M not a multiple of the 8-row block nor of the 256-row task, N
  // not a multiple of the 48-column panel (and under one panel), K of 1.
  return {
      {1, 16, 1, false, false, {0}, 1, 0},
      {7, 47, 5, false, true, {47}, 1, 1},
      {8, 48, 70, true, false, {1, 48}, 0.5, 2},
      {9, 49, 70, false, false, {9, 1}, 1, 1},
      {37, 100, 33, true, true, {37, 100}, -1.5, 0.25},
      {300, 130, 70, false, true, {}, 1, 1},
      {130, 291, 64, false, false, {291}, 1, 1},
      {513, 97, 20, false, true, {513, 97}, 2, -1},
      // N a multiple of 16 and B small and not transposed: read unpacked
      // (PackedGemm.h, unpackedGemmBlock) unless constant.
      {33, 64, 50, false, false, {64}, 1, 1},
      {21, 160, 9, true, false, {21, 160}, 0.5, -1},
  };
}

/// Runs Gemm case `c` on `ctx`; returns Y. With `bWritten`, B is marked
/// there as an operand the program writes (not constant: packed per call).
std::vector<float> runPackedGemmCase(const PackedGemmCase &c,
                                     const KernelContext &ctx,
                                     std::vector<double> *expected = nullptr,
                                     zrt::test::TestConstants *bWritten = nullptr) {
  const std::vector<float> av = randomFloats(size_t(c.m * c.k), 51);
  const std::vector<float> bv = randomFloats(size_t(c.k * c.n), 52);
  const bool hasC = c.cShape != std::vector<int64_t>{0};
  const std::vector<float> cv = randomFloats(size_t(product(c.cShape)), 53);
  Tensors t;
  TensorRef a = t.input<float>(c.transA ? std::vector<int64_t>{c.k, c.m}
                                        : std::vector<int64_t>{c.m, c.k},
                               av);
  TensorRef b = t.input<float>(c.transB ? std::vector<int64_t>{c.n, c.k}
                                        : std::vector<int64_t>{c.k, c.n},
                               bv);
  if (bWritten)
    bWritten->written = {b.data};
  std::vector<TensorRef> in = {a, b};
  if (hasC)
    in.push_back(t.input<float>(c.cShape, cv));
  TensorRef y = t.output<float>({c.m, c.n});
  EXPECT_OK(run("Gemm", in, {y},
                attrs({{"transA", ints({c.transA})},
                       {"transB", ints({c.transB})},
                       {"alpha", floats({c.alpha})},
                       {"beta", floats({c.beta})}}),
                ctx));
  if (expected) {
    const int64_t cRows =
        c.cShape.size() >= 2 ? c.cShape[c.cShape.size() - 2] : 1;
    const int64_t cCols = c.cShape.empty() ? 1 : c.cShape.back();
    expected->clear();
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < c.k; ++p)
          acc += double(av[size_t(c.transA ? p * c.m + i : i * c.k + p)]) *
                 double(bv[size_t(c.transB ? j * c.k + p : p * c.n + j)]);
        const double init =
            hasC ? double(cv[size_t((cRows == 1 ? 0 : i) * cCols +
                                    (cCols == 1 ? 0 : j))])
                 : 0.0;
        expected->push_back(c.alpha * acc + (hasC ? c.beta * init : 0.0));
      }
  }
  return values<float>(y);
}

// Tests that Gemm over a packed constant B matches a double-precision
// product at every edge of the blocking (rows, panels, K), with transposes,
// alpha, beta and every broadcast of C, and that B is packed once and reused.
TEST(PackedGemm, MatchesNaiveAtEdges) {
  for (const PackedGemmCase &c : packedGemmCases()) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
                 std::to_string(c.k) + " transA " + std::to_string(c.transA) +
                 " transB " + std::to_string(c.transB) + " C " +
                 zrt::shapeString(c.cShape));
    zrt::test::TestConstants constants;
    std::vector<double> expected;
    const std::vector<float> y = runPackedGemmCase(
        c, zrt::test::contextWithConstants(2, &constants), &expected);
    expectNear(y, expected, 3e-5);
    EXPECT_EQ(constants.preparations, 1);
  }
}

// Tests that the packed path gives the same bits at 1, 2, 3 and 8 threads
// (every element of C is the same FMA sequence whichever task computes it),
// for Gemm and for MatMul with A's batch folded into M.
TEST(PackedGemm, SameBitsAtAnyThreadCount) {
  for (const PackedGemmCase &c : packedGemmCases()) {
    std::vector<float> first;
    for (int threads : {1, 2, 3, 8}) {
      zrt::test::TestConstants constants;
      const std::vector<float> y = runPackedGemmCase(
          c, zrt::test::contextWithConstants(threads, &constants));
      if (threads == 1)
        first = y;
      else
        EXPECT_TRUE(y == first)
            << c.m << "x" << c.n << "x" << c.k << ": the output at " << threads
            << " threads differs from the 1-thread output";
    }
  }
  const std::vector<float> av = randomFloats(3 * 45 * 70, 54);
  const std::vector<float> bv = randomFloats(70 * 200, 55);
  std::vector<float> first;
  for (int threads : {1, 2, 3, 8}) {
    Tensors t;
    zrt::test::TestConstants constants;
    TensorRef a = t.input<float>({3, 45, 70}, av);
    TensorRef b = t.input<float>({70, 200}, bv);
    TensorRef y = t.output<float>({3, 45, 200});
    EXPECT_OK(run("MatMul", {a, b}, {y}, {},
                  zrt::test::contextWithConstants(threads, &constants)));
    EXPECT_EQ(constants.preparations, 1);
    if (threads == 1)
      first = values<float>(y);
    else
      EXPECT_TRUE(values<float>(y) == first)
          << "MatMul [3x45x70] x [70x200] at " << threads << " threads";
  }
}

// Tests that a B the context does not call constant is never packed (a
// ZeRO-3 gather's output, a trained weight), and that a constant B is packed
// on its first use only: a later call with the same B reuses its panels.
TEST(PackedGemm, PacksConstantOperandsOnceAndOthersNever) {
  const int64_t m = 64, n = 200, k = 70;
  const std::vector<float> av = randomFloats(size_t(m * k), 56);
  const std::vector<float> bv = randomFloats(size_t(n * k), 57);
  std::vector<double> expected;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += double(av[size_t(i * k + p)]) * double(bv[size_t(j * k + p)]);
      expected.push_back(acc);
    }
  for (bool written : {true, false}) {
    SCOPED_TRACE(written ? "B written by the program" : "B constant");
    Tensors t;
    zrt::test::TestConstants constants;
    TensorRef a = t.input<float>({m, k}, av);
    TensorRef b = t.input<float>({n, k}, bv);
    if (written)
      constants.written = {b.data};
    const KernelContext ctx = zrt::test::contextWithConstants(2, &constants);
    std::vector<float> first;
    for (int call = 0; call < 3; ++call) {
      TensorRef y = t.output<float>({m, n});
      EXPECT_OK(run("Gemm", {a, b}, {y}, attrs({{"transB", ints({1})}}), ctx));
      expectNear(values<float>(y), expected, 3e-5);
      if (call == 0)
        first = values<float>(y);
      else
        EXPECT_TRUE(values<float>(y) == first) << "call " << call;
    }
    EXPECT_EQ(constants.preparations, !written && 1);
  }
}

/// Every ISA this CPU runs, lowest first.
std::vector<zrt::cpu::CpuIsa> runnableIsas() {
  std::vector<zrt::cpu::CpuIsa> isas;
  for (zrt::cpu::CpuIsa isa : {zrt::cpu::CpuIsa::Generic, zrt::cpu::CpuIsa::Avx2,
                               zrt::cpu::CpuIsa::Avx512, zrt::cpu::CpuIsa::Avx512Bf16})
    if (isa <= zrt::cpu::detectedCpuIsa())
      isas.push_back(isa);
  return isas;
}

/// Runs the kernels at `isa` while alive; the environment's ISA after.
struct ScopedIsa {
  explicit ScopedIsa(zrt::cpu::CpuIsa isa) { zrt::cpu::setCpuIsa(isa); }
  ~ScopedIsa() { zrt::cpu::setCpuIsa(zrt::cpu::detectedCpuIsa()); }
};

/// Element (i, j) of alpha * op(A) op(B) + beta * C as PackedGemm.h defines
/// it for `isa`, written out one element at a time: a sequential sum over k
/// of fused multiply-adds (std::fma) on the FMA ISAs, of rounded products
/// then adds (through a volatile, so no compiler may fuse them) on generic.
float definedElement(zrt::cpu::CpuIsa isa, const float *aRow, int64_t aStep,
                     const float *bCol, int64_t bStep, int64_t k, float alpha,
                     float beta, float c) {
  const bool fused = isa != zrt::cpu::CpuIsa::Generic;
  float acc = 0.0f;
  for (int64_t p = 0; p < k; ++p) {
    if (fused) {
      acc = std::fma(aRow[p * aStep], bCol[p * bStep], acc);
    } else {
      volatile float prod = aRow[p * aStep] * bCol[p * bStep];
      acc = acc + prod;
    }
  }
  float v = alpha == 1.0f ? acc : acc * alpha;
  if (beta != 0.0f) {
    if (fused) {
      v = std::fma(beta, c, v);
    } else {
      volatile float prod = beta * c;
      v = prod + v;
    }
  }
  return v;
}

/// x rounded to f32 (to nearest even) with an unbounded exponent, then a
/// zero of its sign when under the least normal f32 (x86's flush to zero,
/// tininess after rounding), infinity past the largest.
float roundFtz(double x) {
  if (x == 0.0 || !std::isfinite(x))
    return float(x);
  int e;
  const double m = std::frexp(x, &e); // x = m * 2^e, 0.5 <= |m| < 1
  const double r = std::ldexp(std::nearbyint(std::ldexp(m, 24)), e - 24);
  if (std::fabs(r) < double(std::numeric_limits<float>::min()))
    return std::copysign(0.0f, float(x));
  return float(r);
}

/// A bf16's value, a subnormal read as a zero of its sign.
float bf16Daz(uint16_t h) {
  if ((h & 0x7f80u) == 0)
    h &= 0x8000u;
  return zrt::math::bfloat16ToFloat(h);
}

/// Element (i, j) of alpha * op(A) op(B) + beta * C for bf16 A and B as
/// PackedGemm.h's pair kernels define it (every ISA alike), one element at a
/// time: over pairs q, A[2q+1] B[2q+1] then A[2q] B[2q] (0 past K), each
/// added to the sum exactly in double and rounded once by roundFtz, inputs
/// read with bf16Daz. `c` is C's initial value in f32.
float definedBf16Element(const uint16_t *aRow, int64_t aStep, const uint16_t *bCol,
                         int64_t bStep, int64_t k, float alpha, float beta, float c) {
  float acc = 0.0f;
  for (int64_t q = 0; q < (k + 1) / 2; ++q)
    for (int64_t kk : {2 * q + 1, 2 * q}) {
      const float x = kk < k ? bf16Daz(aRow[kk * aStep]) : 0.0f;
      const float y = kk < k ? bf16Daz(bCol[kk * bStep]) : 0.0f;
      acc = roundFtz(double(x) * double(y) + double(acc));
    }
  const auto daz = [](float v) {
    return std::fabs(v) < std::numeric_limits<float>::min() ? std::copysign(0.0f, v) : v;
  };
  float v = alpha == 1.0f ? acc : roundFtz(double(acc) * double(daz(alpha)));
  if (beta != 0.0f)
    v = roundFtz(std::fma(double(daz(beta)), double(daz(c)), double(v)));
  return v;
}

/// bf16 bits of random values whose exponents run down to the subnormals:
/// (1 - tiny) of them in [-2, 2], the rest under 2^-100 in magnitude, so
/// products underflow and sums come out tiny (DAZ and FTZ decide them).
std::vector<uint16_t> randomBf16(size_t n, unsigned seed, double tiny) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::uniform_real_distribution<double> pick(0.0, 1.0);
  std::vector<uint16_t> v(n);
  for (uint16_t &h : v) {
    if (pick(gen) < tiny)
      h = uint16_t((gen() & 0x8000u) | ((gen() % 28u) << 7) | (gen() & 0x7fu));
    else
      h = zrt::math::floatToBfloat16(dist(gen));
  }
  return v;
}

// Tests that at every ISA the CPU runs (AVX512_BF16's VDPBF16PS, AVX-512F,
// AVX2, portable), the bf16 pair kernels (PackedGemm.h) give exactly the
// defined f32 element: both transposes, odd and even K (the last pair read
// in place or packed), alpha, beta, M and N off every block edge, and
// operands with tiny and subnormal values where DAZ and FTZ decide the bits.
TEST(PackedGemm, Bf16PairsGiveTheDefinedBitsAtEveryIsa) {
  struct Case {
    int64_t m, n, k;
    bool transA, transB;
    float alpha, beta;
    double tiny;
  };
  std::vector<Case> cases = {
      {1, 16, 1, false, false, 1, 0, 0},       {7, 47, 5, false, true, 1, 1, 0.3},
      {8, 48, 70, true, false, 0.5f, 2, 0.5},  {9, 49, 71, false, false, 1, 1, 0.4},
      {37, 100, 33, true, true, -1.5f, 0.25f, 0.2}, {300, 130, 64, false, true, 1, 0, 0},
      {13, 97, 2, true, false, 1, -1, 0.9},    {21, 160, 9, false, false, 1e-30f, 1e-8f, 0.6},
  };
  // And random ones: any shape, transposes, alpha and beta, share of tiny
  // values.
  std::mt19937 shapes(91);
  for (int r = 0; r < 16; ++r)
    cases.push_back({int64_t(1 + shapes() % 40), int64_t(1 + shapes() % 120),
                     int64_t(1 + shapes() % 90), shapes() % 2 == 1, shapes() % 2 == 1,
                     shapes() % 3 == 0 ? 1.0f : float(int(shapes() % 7) - 3) / 2.0f,
                     shapes() % 3 == 0 ? 0.0f : float(int(shapes() % 5) - 2) / 4.0f,
                     double(shapes() % 4) / 4.0});
  for (zrt::cpu::CpuIsa isa : runnableIsas()) {
    ScopedIsa scoped(isa);
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(zrt::cpu::cpuIsaName(isa)) + " " + std::to_string(c.m) + "x" +
                   std::to_string(c.n) + "x" + std::to_string(c.k) +
                   (c.transA ? " A^T" : "") + (c.transB ? " B^T" : ""));
      const std::vector<uint16_t> a = randomBf16(size_t(c.m * c.k), 81, c.tiny);
      const std::vector<uint16_t> b = randomBf16(size_t(c.k * c.n), 82, c.tiny);
      std::vector<float> init(size_t(c.m * c.n));
      for (size_t i = 0; i < init.size(); ++i)
        init[i] = bf16Daz(randomBf16(1, unsigned(83 + i), c.tiny)[0]);
      const int64_t lda = c.transA ? c.m : c.k, ldb = c.transB ? c.k : c.n;
      std::vector<uint32_t> packed(zrt::cpu::pairPackedWords(c.k, c.n));
      zrt::cpu::packBf16PairsB(b.data(), ldb, c.transB, c.k, c.n, 0,
                               zrt::cpu::packedPanels(c.n), packed.data());
      std::vector<uint32_t> aPairs(size_t(zrt::cpu::pairRows(c.k) * c.m));
      zrt::cpu::Bf16PairA pa{a.data(), lda, 2, c.k / 2, c.k % 2 == 1};
      if (c.transA) {
        zrt::cpu::packBf16PairsTransA(a.data(), lda, c.k, 0, c.m, aPairs.data());
        pa = {reinterpret_cast<const uint16_t *>(aPairs.data()), 2, 2 * c.m,
              zrt::cpu::pairRows(c.k), false};
      }
      std::vector<float> y = init;
      const int64_t panelWords = zrt::cpu::pairPanelRows(c.k) * zrt::cpu::kPanelCols;
      for (int64_t p = 0; p < zrt::cpu::packedPanels(c.n); ++p) {
        const int64_t j0 = p * zrt::cpu::kPanelCols;
        zrt::cpu::bf16PairGemmBlock(0, c.m, std::min(zrt::cpu::kPanelCols, c.n - j0),
                                    c.alpha, pa, packed.data() + p * panelWords, c.beta,
                                    y.data() + j0, c.n);
      }
      int64_t wrong = 0, tinyOnes = 0;
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          const float want = definedBf16Element(
              a.data() + (c.transA ? i : i * lda), c.transA ? lda : 1,
              b.data() + (c.transB ? j * ldb : j), c.transB ? 1 : ldb, c.k, c.alpha, c.beta,
              init[size_t(i * c.n + j)]);
          const float got = y[size_t(i * c.n + j)];
          tinyOnes += std::fabs(want) < 1e-30f;
          if (std::memcmp(&want, &got, 4) != 0 && wrong++ < 3)
            ADD_FAILURE() << "element (" << i << ", " << j << "): " << got << " want "
                          << want;
        }
      EXPECT_EQ(wrong, 0);
      if (c.tiny > 0.5)
        EXPECT_GT(tinyOnes, 0) << "the case has no tiny element to check";
    }
  }
}

// Tests that at every ISA the CPU runs, Gemm (both transposes, alpha, beta,
// broadcast C), with B constant (packed once) or written by the program
// (packed per call), gives exactly the bits of PackedGemm.h's definition,
// element by element: so an element depends on its row of A and column of
// B only, and the two FMA ISAs agree bit for bit.
TEST(PackedGemm, EveryIsaGivesTheDefinedBits) {
  for (zrt::cpu::CpuIsa isa : runnableIsas()) {
    ScopedIsa scoped(isa);
    for (const PackedGemmCase &c : packedGemmCases()) {
      for (bool constantB : {true, false}) {
        SCOPED_TRACE(std::string(zrt::cpu::cpuIsaName(isa)) + " " +
                     std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
                     std::to_string(c.k) + (constantB ? " constant B" : ""));
        // runPackedGemmCase's operands.
        const std::vector<float> av = randomFloats(size_t(c.m * c.k), 51);
        const std::vector<float> bv = randomFloats(size_t(c.k * c.n), 52);
        const bool hasC = c.cShape != std::vector<int64_t>{0};
        const std::vector<float> cv =
            randomFloats(size_t(product(c.cShape)), 53);
        zrt::test::TestConstants constants;
        const std::vector<float> got = runPackedGemmCase(
            c, zrt::test::contextWithConstants(3, &constants), nullptr,
            constantB ? nullptr : &constants);
        EXPECT_EQ(constants.preparations, constantB ? 1 : 0);
        const int64_t cRows =
            c.cShape.size() >= 2 ? c.cShape[c.cShape.size() - 2] : 1;
        const int64_t cCols = c.cShape.empty() ? 1 : c.cShape.back();
        int64_t wrong = 0;
        for (int64_t i = 0; i < c.m; ++i)
          for (int64_t j = 0; j < c.n; ++j) {
            const float init =
                hasC ? cv[size_t((cRows == 1 ? 0 : i) * cCols +
                                 (cCols == 1 ? 0 : j))]
                     : 0.0f;
            const float want = definedElement(
                isa, av.data() + (c.transA ? i : i * c.k), c.transA ? c.m : 1,
                bv.data() + (c.transB ? j * c.k : j), c.transB ? 1 : c.n, c.k,
                float(c.alpha), hasC ? float(c.beta) : 0.0f, init);
            if (std::memcmp(&want, &got[size_t(i * c.n + j)], 4) != 0 &&
                wrong++ < 3)
              ADD_FAILURE() << "element (" << i << ", " << j << "): "
                            << got[size_t(i * c.n + j)] << ", defined "
                            << want;
          }
        EXPECT_EQ(wrong, 0);
      }
    }
  }
}

// Tests, at every ISA, the property pipeline micro-batching and ZeRO rest on:
// any run of consecutive rows of A (a micro-batch) multiplied alone gives
// exactly those rows of the whole product, for MatMul with a batch folded
// into M and batched MatMul (B with a batch: attention).
TEST(PackedGemm, RowsAloneGiveTheWholeProductsBits) {
  std::mt19937 rng(77);
  for (zrt::cpu::CpuIsa isa : runnableIsas()) {
    ScopedIsa scoped(isa);
    for (int trial = 0; trial < 12; ++trial) {
      const int64_t batch = 1 + int64_t(rng() % 4);
      const int64_t m = 1 + int64_t(rng() % 70), k = 1 + int64_t(rng() % 90);
      const int64_t n = 1 + int64_t(rng() % 130);
      const bool bBatched = trial % 2 == 1;
      SCOPED_TRACE(std::string(zrt::cpu::cpuIsaName(isa)) + " [" +
                   std::to_string(batch) + "x" + std::to_string(m) + "x" +
                   std::to_string(k) + "] x [" +
                   (bBatched ? std::to_string(batch) + "x" : std::string()) +
                   std::to_string(k) + "x" + std::to_string(n) + "]");
      const std::vector<float> av =
          randomFloats(size_t(batch * m * k), 60 + uint32_t(trial));
      const std::vector<float> bv = randomFloats(
          size_t((bBatched ? batch : 1) * k * n), 80 + uint32_t(trial));
      const std::vector<int64_t> bShape =
          bBatched ? std::vector<int64_t>{batch, k, n}
                   : std::vector<int64_t>{k, n};
      auto product3 = [&](int64_t r0, int64_t r1, int threads) {
        // Rows [r0, r1) of every batch entry's A.
        std::vector<float> part;
        for (int64_t e = 0; e < batch; ++e)
          part.insert(part.end(), av.begin() + (e * m + r0) * k,
                      av.begin() + (e * m + r1) * k);
        Tensors t;
        TensorRef a = t.input<float>({batch, r1 - r0, k}, part);
        TensorRef b = t.input<float>(bShape, bv);
        TensorRef y = t.output<float>({batch, r1 - r0, n});
        EXPECT_OK(run("MatMul", {a, b}, {y}, {}, zrt::test::contextWithThreads(threads)));
        return values<float>(y);
      };
      const std::vector<float> whole = product3(0, m, 2);
      const int64_t r0 = int64_t(rng() % uint32_t(m));
      const int64_t r1 = r0 + 1 + int64_t(rng() % uint32_t(m - r0));
      const std::vector<float> part = product3(r0, r1, 1 + trial % 3);
      bool same = true;
      for (int64_t e = 0; e < batch; ++e)
        for (int64_t i = r0; i < r1; ++i)
          same = same &&
                 std::memcmp(&part[size_t((e * (r1 - r0) + i - r0) * n)],
                             &whole[size_t((e * m + i) * n)],
                             size_t(n) * 4) == 0;
      EXPECT_TRUE(same) << "rows [" << r0 << ", " << r1
                        << ") alone differ from the whole product's";
    }
  }
}

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

std::vector<double> naiveSoftmax(const std::vector<float> &x,
                                 const std::vector<int64_t> &shape,
                                 int64_t axis, bool log) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < shape.size(); ++d)
    inner *= shape[d];
  const int64_t len = shape[size_t(axis)];
  std::vector<double> out(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double max = -INFINITY, sum = 0;
      for (int64_t a = 0; a < len; ++a)
        max = std::max(max, double(x[size_t((o * len + a) * inner + i)]));
      for (int64_t a = 0; a < len; ++a)
        sum += std::exp(double(x[size_t((o * len + a) * inner + i)]) - max);
      for (int64_t a = 0; a < len; ++a) {
        const size_t k = size_t((o * len + a) * inner + i);
        const double z = double(x[k]) - max;
        out[k] = log ? z - std::log(sum) : std::exp(z) / sum;
      }
    }
  return out;
}

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

//===----------------------------------------------------------------------===//
// Thread-count independence
//===----------------------------------------------------------------------===//

struct ThreadCase {
  std::string op;
  std::vector<std::vector<int64_t>> inputs;
  std::vector<int64_t> output;
  AttrMap attrs;
};

// Tests that every kernel whose work is split (products tiled, reductions cut
// into partial sums, elementwise chunks with vector tails) gives the same bits
// at 1, 2, 3 and 8 threads: the split is a function of the shapes only.
TEST(ThreadCount, SameBitsAtAnyThreadCount) {
  const std::vector<ThreadCase> cases = {
      {"MatMul", {{128, 768}, {768, 768}}, {128, 768}, {}},
      {"MatMul", {{1, 64, 256}, {256, 1000}}, {1, 64, 1000}, {}},
      {"MatMul", {{3, 37, 64}, {3, 64, 129}}, {3, 37, 129}, {}},
      {"MatMul", {{16, 64}, {64, 256}}, {16, 256}, {}},
      {"Gemm",
       {{96, 256}, {700, 256}},
       {96, 700},
       attrs({{"transB", ints({1})}})},
      // Row tiles (tall A), a 2 x 3 grid, wide column tiles with a short
      // last one and a bias, products cut under OpenBLAS's small-matrix size.
      {"MatMul", {{1024, 256}, {256, 768}}, {1024, 768}, {}},
      {"MatMul", {{2048, 32}, {32, 3072}}, {2048, 3072}, {}},
      {"Gemm",
       {{64, 128}, {5000, 128}, {5000}},
       {64, 5000},
       attrs({{"transB", ints({1})}})},
      {"MatMul", {{12, 128, 64}, {12, 64, 128}}, {12, 128, 128}, {}},
      {"ReduceSum",
       {{2, 300000}},
       {2, 1},
       attrs({{"axes", ints({1})}, {"keepdims", ints({1})}})},
      {"ReduceMean",
       {{5, 70001}},
       {5},
       attrs({{"axes", ints({1})}, {"keepdims", ints({0})}})},
      {"ReduceSum",
       {{300001}},
       {1},
       attrs({{"axes", ints({0})}, {"keepdims", ints({1})}})},
      {"Softmax", {{3, 40000}}, {3, 40000}, attrs({{"axis", ints({1})}})},
      {"Softmax", {{2, 50, 700}}, {2, 50, 700}, attrs({{"axis", ints({1})}})},
      {"LayerNormalization",
       {{64, 3000}, {3000}, {3000}},
       {64, 3000},
       attrs({{"axis", ints({1})}, {"epsilon", floats({1e-5})}})},
      {"Tanh", {{100003}}, {100003}, {}},
      {"Erf", {{100003}}, {100003}, {}},
      {"Exp", {{100003}}, {100003}, {}},
      {"Mul", {{333, 1001}, {1001}}, {333, 1001}, {}},
      {"Conv",
       {{2, 16, 40, 40}, {32, 8, 3, 3}, {32}},
       {2, 32, 40, 40},
       attrs({{"group", ints({2})},
              {"strides", ints({1, 1})},
              {"dilations", ints({1, 1})},
              {"pads", ints({1, 1, 1, 1})}})},
      {"Conv",
       {{1, 16, 301}, {24, 16, 3}},
       {1, 24, 151},
       attrs({{"strides", ints({2})},
              {"dilations", ints({1})},
              {"pads", ints({1, 1})}})},
      {"ConvTranspose",
       {{2, 16, 20, 20}, {16, 8, 4, 4}},
       {2, 8, 40, 40},
       attrs({{"strides", ints({2, 2})},
              {"dilations", ints({1, 1})},
              {"pads", ints({1, 1, 1, 1})}})},
      {"MaxPool",
       {{4, 16, 50, 50}},
       {4, 16, 25, 25},
       attrs({{"kernel_shape", ints({3, 3})},
              {"strides", ints({2, 2})},
              {"pads", ints({1, 1, 1, 1})}})},
      {"AveragePool",
       {{4, 16, 50, 50}},
       {4, 16, 25, 25},
       attrs({{"kernel_shape", ints({3, 3})},
              {"strides", ints({2, 2})},
              {"pads", ints({1, 1, 1, 1})},
              {"count_include_pad", ints({1})}})},
      {"Resize",
       {{2, 8, 30, 30}},
       {2, 8, 75, 75},
       attrs({{"mode", str("cubic")}, {"scales", floats({1, 1, 2.5, 2.5})}})},
      {"Resize",
       {{2, 8, 60, 60}},
       {2, 8, 24, 24},
       attrs({{"mode", str("linear")},
              {"antialias", ints({1})},
              {"scales", floats({1, 1, 0.4, 0.4})}})},
  };
  for (const ThreadCase &c : cases) {
    Tensors t;
    std::vector<TensorRef> in;
    unsigned seed = 100;
    for (const std::vector<int64_t> &shape : c.inputs)
      in.push_back(t.input<float>(
          shape, randomFloats(size_t(product(shape)), seed++, -3.0f, 3.0f)));
    std::vector<char> first;
    for (int threads : {1, 2, 3, 8}) {
      TensorRef y = t.output<float>(c.output);
      EXPECT_OK(run(c.op, in, {y}, c.attrs, contextWithThreads(threads)));
      std::vector<char> bytes(static_cast<const char *>(y.data),
                              static_cast<const char *>(y.data) + y.bytes());
      if (threads == 1)
        first = bytes;
      else
        EXPECT_TRUE(bytes == first)
            << c.op << " " << zrt::shapeString(c.inputs[0])
            << ": the output at " << threads
            << " threads differs from the 1-thread output";
    }
  }
}

//===----------------------------------------------------------------------===//
// FusedElementwise
//===----------------------------------------------------------------------===//

/// One op of a fused program: the single kernel it stands for, its opcode
/// and operand references (inputs, earlier results, -1-k: constant k).
struct FusedStep {
  const char *op;
  int64_t code, a, b;
};

/// Runs `steps` op by op through the single kernels (constants as [1]
/// tensors, results at `shape`) and as one FusedElementwise at 1 and 3
/// threads, and expects the same bytes.
void expectFusedMatchesUnfused(const std::vector<int64_t> &shape,
                               const std::vector<std::vector<int64_t>> &inShapes,
                               const std::vector<double> &constants,
                               const std::vector<FusedStep> &steps,
                               unsigned seed) {
  Tensors t;
  std::vector<TensorRef> inputs;
  for (const std::vector<int64_t> &s : inShapes)
    inputs.push_back(t.input<float>(
        s, randomFloats(size_t(product(s)), seed++, -3.0f, 3.0f)));
  std::vector<TensorRef> consts;
  for (double c : constants)
    consts.push_back(t.input<float>({1}, {float(c)}));
  std::vector<TensorRef> results;
  auto resolve = [&](int64_t ref) -> TensorRef {
    if (ref < 0)
      return consts[size_t(-ref - 1)];
    if (ref < int64_t(inputs.size()))
      return inputs[size_t(ref)];
    return results[size_t(ref) - inputs.size()];
  };
  std::vector<int64_t> program;
  for (const FusedStep &s : steps) {
    TensorRef y = t.output<float>(shape);
    const bool binary = s.code <= 4;
    std::vector<TensorRef> in{resolve(s.a)};
    if (binary)
      in.push_back(resolve(s.b));
    EXPECT_OK(run(s.op, in, {y}));
    results.push_back(y);
    program.insert(program.end(), {s.code, s.a, binary ? s.b : 0});
  }
  const TensorRef &expected = results.back();
  AttrMap a = attrs({{"ops", ints(program)}, {"constants", floats(constants)}});
  for (int threads : {1, 3}) {
    TensorRef y = t.output<float>(shape);
    EXPECT_OK(run("FusedElementwise", inputs, {y}, a,
                  contextWithThreads(threads)));
    EXPECT_EQ(std::memcmp(y.data, expected.data, size_t(y.bytes())), 0)
        << "FusedElementwise differs from the op-by-op kernels at " << threads
        << " threads, shape " << zrt::shapeString(shape);
  }
}

TEST(Fused, GeluTanhChainBitIdentical) {
  // GPT-2's gelu_new after a bias add with broadcasting: x [B,T,C] + b [C].
  // Inputs: 0 = x, 1 = b; results start at 2.
  const std::vector<FusedStep> gelu = {
      {"Add", 0, 0, 1},   // 2: h = x + b
      {"Mul", 2, 2, -1},  // 3: 0.5 h
      {"Pow", 4, 2, -2},  // 4: h^3
      {"Mul", 2, 4, -3},  // 5: 0.044715 h^3
      {"Add", 0, 2, 5},   // 6
      {"Mul", 2, 6, -4},  // 7: sqrt(2/pi) (...)
      {"Tanh", 12, 7, 0}, // 8
      {"Add", 0, 8, -5},  // 9: 1 + tanh
      {"Mul", 2, 3, 9},   // 10
  };
  const std::vector<double> c = {0.5, 3.0, 0.044714998453855515,
                                 0.7978845834732056, 1.0};
  for (const std::vector<int64_t> &shape :
       std::vector<std::vector<int64_t>>{{3, 7, 131}, {4, 64, 300}, {1, 1, 5}})
    expectFusedMatchesUnfused(shape, {shape, {shape.back()}}, c, gelu, 11);
}

TEST(Fused, EveryOpcodeWithBroadcasting) {
  // Inputs: 0 = x [5,9,67], 1 = mask [5,1,67], 2 = scale [1], 3 = row [9,1].
  const std::vector<int64_t> shape = {5, 9, 67};
  const std::vector<FusedStep> steps = {
      {"Mul", 2, 0, 2},         // 4
      {"Add", 0, 4, 1},         // 5
      {"Sub", 1, 5, 3},         // 6
      {"Div", 3, 6, -1},        // 7
      {"Erf", 13, 7, 0},        // 8
      {"Sigmoid", 14, 8, 0},    // 9
      {"Neg", 5, 9, 0},         // 10
      {"Abs", 6, 10, 0},        // 11
      {"Sqrt", 8, 11, 0},       // 12
      {"Log", 11, 12, 0},       // 13
      {"Exp", 10, 13, 0},       // 14
      {"Relu", 7, 7, 0},        // 15
      {"Reciprocal", 9, 14, 0}, // 16
      {"Pow", 4, 16, -2},       // 17: ^2
      {"Pow", 4, 17, -3},       // 18: ^0.5
      {"Pow", 4, 18, -4},       // 19: ^-1
      {"Pow", 4, 19, -5},       // 20: ^1
      {"Pow", 4, 20, -6},       // 21: ^2.5 (powf)
      {"Add", 0, 21, 15},       // 22
      {"Div", 3, -1, 22},       // 23: constant / value
      {"Sub", 1, 23, 0},        // 24
  };
  const std::vector<double> c = {1.5, 2.0, 0.5, -1.0, 1.0, 2.5};
  expectFusedMatchesUnfused(shape, {shape, {5, 1, 67}, {1}, {9, 1}}, c, steps,
                            21);
}

TEST(Fused, RejectsBadPrograms) {
  Tensors t;
  TensorRef x = t.input<float>({4}, {1, 2, 3, 4});
  TensorRef y = t.output<float>({4});
  // Opcode out of range, a forward reference, Pow by a non-constant, and an
  // undefined constant.
  for (const std::vector<int64_t> &ops : std::vector<std::vector<int64_t>>{
           {99, 0, 0}, {5, 1, 0}, {4, 0, 0}, {0, 0, -3}, {}}) {
    zrt::Status s = run("FusedElementwise", {x}, {y},
                        attrs({{"ops", ints(ops)}, {"constants", floats({2})}}));
    EXPECT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("FusedElementwise"), std::string::npos)
        << s.message();
  }
  TensorRef i = t.input<int64_t>({4}, {1, 2, 3, 4});
  EXPECT_FALSE(run("FusedElementwise", {i}, {y}, attrs({{"ops", ints({5, 0, 0})}}))
                   .isOk());
}

} // namespace

//===----------------------------------------------------------------------===//
// f16 and bf16 operands (cpu/HalfWidening.cpp, MatMul.cpp's 16-bit products)
//===----------------------------------------------------------------------===//

namespace {

bool isHalfType(DType t) { return t == DType::F16 || t == DType::BF16; }

uint16_t narrowOne(DType t, float v) {
  return t == DType::F16 ? zrt::math::floatToHalf(v) : zrt::math::floatToBfloat16(v);
}
float widenOne(DType t, uint16_t h) {
  return t == DType::F16 ? zrt::math::halfToFloat(h) : zrt::math::bfloat16ToFloat(h);
}

/// `values` rounded to `t` (to nearest even): a tensor of 16-bit bits.
TensorRef halfInput(Tensors &t, DType dt, std::vector<int64_t> shape,
                    const std::vector<float> &values) {
  TensorRef r = t.raw(dt, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i)
    r.as<uint16_t>()[i] = narrowOne(dt, values[i]);
  return r;
}

/// A 16-bit tensor's values as f32 (exact).
std::vector<float> widened(const TensorRef &h) {
  std::vector<float> out;
  for (int64_t i = 0; i < h.numel(); ++i)
    out.push_back(widenOne(h.dtype, h.as<uint16_t>()[i]));
  return out;
}

/// The CPU backend's table: every computing kernel behind its 16-bit
/// trampoline (what zero-run runs).
const zrt::KernelTable &widenedKernels() {
  static const zrt::KernelTable table = [] {
    zrt::KernelTable t;
    zrt::registerCpuKernels(t);
    zrt::cpu::widenHalfKernels(t);
    return t;
  }();
  return table;
}

/// Runs `op` with every 16-bit operand of `in`/`out` through the backend's
/// table, and the f32 kernel on widened copies of the same inputs; expects
/// each 16-bit output to hold exactly the f32 result rounded once (and any
/// other output the same bits), at 1 and 3 threads.
void expectWidenedBits(const std::string &op, const std::vector<TensorRef> &in,
                       const std::vector<TensorRef> &out, const AttrMap &a = {}) {
  Tensors t;
  std::vector<TensorRef> win, wout;
  for (const TensorRef &x : in) {
    if (!isHalfType(x.dtype)) {
      win.push_back(x);
      continue;
    }
    win.push_back(t.input<float>(x.shape, widened(x)));
  }
  for (const TensorRef &y : out)
    wout.push_back(isHalfType(y.dtype) ? t.output<float>(y.shape) : t.raw(y.dtype, y.shape));
  ASSERT_OK(run(op, win, wout, a));
  for (int threads : {1, 3}) {
    SCOPED_TRACE(op + " at " + std::to_string(threads) + " threads");
    ASSERT_OK(widenedKernels().lookup(op)(contextWithThreads(threads), in, out, a));
    for (size_t o = 0; o < out.size(); ++o) {
      int64_t wrong = 0;
      for (int64_t i = 0; i < out[o].numel(); ++i) {
        bool same;
        if (isHalfType(out[o].dtype))
          same = out[o].as<uint16_t>()[i] == narrowOne(out[o].dtype, wout[o].as<float>()[i]);
        else
          same = std::memcmp(static_cast<char *>(out[o].data) + i * zrt::dtypeSize(out[o].dtype),
                             static_cast<char *>(wout[o].data) + i * zrt::dtypeSize(out[o].dtype),
                             zrt::dtypeSize(out[o].dtype)) == 0;
        if (!same && wrong++ < 3)
          ADD_FAILURE() << "output " << o << " element " << i;
      }
      EXPECT_EQ(wrong, 0);
    }
  }
}

} // namespace

// Tests that the vectorised row conversions give math/HalfMath.h's bits: every
// f16 and bf16 widened, and f32 values of every exponent and sign (random
// mantissas, the rounding ties and their neighbours, the overflow and
// subnormal edges, infinities and NaNs with payloads) rounded, to 16-bit
// bits and in place (roundHalfRow).
TEST(Half, RowConversionsGiveHalfMathsBits) {
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(zrt::dtypeName(dt));
    std::vector<uint16_t> all(65536);
    for (size_t i = 0; i < all.size(); ++i)
      all[i] = uint16_t(i);
    std::vector<float> wide(all.size());
    zrt::kernels::widenHalfRow(dt, all.data(), wide.data(), int64_t(all.size()));
    int64_t wrong = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      const float want = widenOne(dt, all[i]);
      if (std::memcmp(&want, &wide[i], 4) != 0 && wrong++ < 3)
        ADD_FAILURE() << "widening " << std::hex << i;
    }
    std::mt19937 rng(7);
    std::vector<uint32_t> bits;
    const uint32_t edges[] = {0u,       1u,       0xfffu,   0x1000u,  0x1001u,  0x1fffu,
                              0x2000u,  0x3000u,  0x7fffu,  0x8000u,  0x8001u,  0x17fffu,
                              0x18000u, 0x7fffffu, 0x7ff000u, 0x7fe000u};
    for (uint32_t sign : {0u, 0x80000000u})
      for (uint32_t e = 0; e < 256; ++e) {
        for (uint32_t m : edges)
          bits.push_back(sign | (e << 23) | m);
        for (int r = 0; r < 512; ++r)
          bits.push_back(sign | (e << 23) | (rng() & 0x7fffffu));
      }
    for (uint32_t b : {0x477ff000u, 0x477fefffu, 0x477fe000u, 0x38800000u, 0x387fffffu,
                       0x33000000u, 0x33000001u, 0x7f800001u, 0x7fc00000u, 0x7fbfffffu})
      bits.push_back(b);
    std::vector<float> in(bits.size());
    std::memcpy(in.data(), bits.data(), bits.size() * 4);
    std::vector<uint16_t> out(in.size());
    zrt::kernels::narrowHalfRow(dt, in.data(), out.data(), int64_t(in.size()));
    for (size_t i = 0; i < in.size(); ++i)
      if (out[i] != narrowOne(dt, in[i]) && wrong++ < 6)
        ADD_FAILURE() << "rounding 0x" << std::hex << bits[i] << ": 0x" << out[i]
                      << ", HalfMath 0x" << narrowOne(dt, in[i]);
    // Rounded in place: the widening of HalfMath's rounding.
    std::vector<float> inPlace = in;
    zrt::kernels::roundHalfRow(dt, inPlace.data(), int64_t(inPlace.size()));
    for (size_t i = 0; i < in.size(); ++i) {
      const float want = widenOne(dt, narrowOne(dt, in[i]));
      if (std::memcmp(&want, &inPlace[i], 4) != 0 && wrong++ < 9)
        ADD_FAILURE() << "rounding in place 0x" << std::hex << bits[i];
    }
    EXPECT_EQ(wrong, 0);
  }
}

// Tests that a 16-bit Gemm (f16 and bf16; both transposes, alpha, beta, every
// broadcast of C; B constant or written; A widened whole or a task's rows at
// a time for a long K) at every ISA gives exactly PackedGemm.h's defined
// element rounded once to 16 bits: for f16 the f32 element on the widened
// operands, for bf16 the pair kernels' (definedBf16Element).
TEST(Half, GemmIsTheDefinedElementRoundedOnce) {
  std::vector<PackedGemmCase> cases = packedGemmCases();
  // K long enough that A (64 x 70000 as f32) is over the 16 MiB widened whole.
  cases.push_back({64, 17, 70000, false, true, {17}, 1, 1});
  cases.push_back({40, 50, 110000, true, false, {0}, 1, 0});
  for (zrt::cpu::CpuIsa isa : runnableIsas()) {
    ScopedIsa scoped(isa);
    for (DType dt : {DType::F16, DType::BF16})
      for (const PackedGemmCase &c : cases)
        for (bool constantB : {true, false}) {
          if (c.k > 1000 && (constantB || isa != zrt::cpu::detectedCpuIsa()))
            continue; // the long-K cases once, B written, at the machine's ISA
          SCOPED_TRACE(std::string(zrt::cpu::cpuIsaName(isa)) + " " + zrt::dtypeName(dt) +
                       " " + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
                       std::to_string(c.k) + (constantB ? " constant B" : ""));
          Tensors t;
          const bool hasC = c.cShape != std::vector<int64_t>{0};
          TensorRef a = halfInput(t, dt, c.transA ? std::vector<int64_t>{c.k, c.m}
                                                  : std::vector<int64_t>{c.m, c.k},
                                  randomFloats(size_t(c.m * c.k), 61));
          TensorRef b = halfInput(t, dt, c.transB ? std::vector<int64_t>{c.n, c.k}
                                                  : std::vector<int64_t>{c.k, c.n},
                                  randomFloats(size_t(c.k * c.n), 62));
          std::vector<TensorRef> in = {a, b};
          if (hasC)
            in.push_back(halfInput(t, dt, c.cShape, randomFloats(size_t(product(c.cShape)), 63)));
          TensorRef y = t.raw(dt, {c.m, c.n});
          zrt::test::TestConstants constants;
          if (!constantB)
            constants.written = {b.data};
          ASSERT_OK(run("Gemm", in, {y},
                        attrs({{"transA", ints({c.transA})},
                               {"transB", ints({c.transB})},
                               {"alpha", floats({c.alpha})},
                               {"beta", floats({c.beta})}}),
                        zrt::test::contextWithConstants(3, &constants)));
          EXPECT_EQ(constants.preparations, constantB ? 1 : 0);
          const std::vector<float> av = widened(a), bv = widened(b);
          const std::vector<float> cv = hasC ? widened(in[2]) : std::vector<float>{};
          const int64_t cRows = c.cShape.size() >= 2 ? c.cShape[c.cShape.size() - 2] : 1;
          const int64_t cCols = c.cShape.empty() ? 1 : c.cShape.back();
          int64_t wrong = 0;
          for (int64_t i = 0; i < c.m; ++i)
            for (int64_t j = 0; j < c.n; ++j) {
              const float init =
                  hasC ? cv[size_t((cRows == 1 ? 0 : i) * cCols + (cCols == 1 ? 0 : j))] : 0.0f;
              const float want =
                  dt == DType::BF16
                      ? definedBf16Element(a.as<uint16_t>() + (c.transA ? i : i * c.k),
                                           c.transA ? c.m : 1,
                                           b.as<uint16_t>() + (c.transB ? j * c.k : j),
                                           c.transB ? 1 : c.n, c.k, float(c.alpha),
                                           hasC ? float(c.beta) : 0.0f, init)
                      : definedElement(isa, av.data() + (c.transA ? i : i * c.k),
                                       c.transA ? c.m : 1, bv.data() + (c.transB ? j * c.k : j),
                                       c.transB ? 1 : c.n, c.k, float(c.alpha),
                                       hasC ? float(c.beta) : 0.0f, init);
              if (y.as<uint16_t>()[i * c.n + j] != narrowOne(dt, want) && wrong++ < 3)
                ADD_FAILURE() << "element (" << i << ", " << j << ")";
            }
          EXPECT_EQ(wrong, 0);
        }
  }
}

// Tests that a batched 16-bit MatMul (attention's products, B with a batch,
// and A's batch folded into M) gives the defined element rounded once (f16:
// the f32 MatMul of the widened operands; bf16: definedBf16Element), and
// that micro-batch rows alone give the whole product's bits.
TEST(Half, BatchedMatMulIsTheDefinedProductRoundedOnce) {
  for (DType dt : {DType::F16, DType::BF16})
    for (bool bBatched : {true, false}) {
      SCOPED_TRACE(std::string(zrt::dtypeName(dt)) + (bBatched ? " batched B" : ""));
      Tensors t;
      TensorRef a = halfInput(t, dt, {3, 37, 29}, randomFloats(3 * 37 * 29, 71));
      TensorRef b = bBatched ? halfInput(t, dt, {3, 29, 53}, randomFloats(3 * 29 * 53, 72))
                             : halfInput(t, dt, {29, 53}, randomFloats(29 * 53, 72));
      TensorRef y = t.raw(dt, {3, 37, 53});
      if (dt == DType::F16) {
        expectWidenedBits("MatMul", {a, b}, {y});
      } else {
        for (int threads : {1, 3}) {
          ASSERT_OK(widenedKernels().lookup("MatMul")(contextWithThreads(threads), {a, b}, {y},
                                                      {}));
          int64_t wrong = 0;
          for (int64_t bi = 0; bi < 3; ++bi)
            for (int64_t i = 0; i < 37; ++i)
              for (int64_t j = 0; j < 53; ++j) {
                const float want = definedBf16Element(
                    a.as<uint16_t>() + (bi * 37 + i) * 29, 1,
                    b.as<uint16_t>() + (bBatched ? bi * 29 * 53 : 0) + j, 53, 29, 1.0f, 0.0f,
                    0.0f);
                if (y.as<uint16_t>()[(bi * 37 + i) * 53 + j] !=
                        zrt::math::floatToBfloat16(want) &&
                    wrong++ < 3)
                  ADD_FAILURE() << "element (" << bi << ", " << i << ", " << j << ") at "
                                << threads << " threads";
              }
          EXPECT_EQ(wrong, 0);
        }
      }
      // Rows 5..14 of the second matrix alone.
      TensorRef part = t.raw(dt, {10, 29});
      std::memcpy(part.data, a.as<uint16_t>() + (37 + 5) * 29, 10 * 29 * 2);
      TensorRef bPart = bBatched ? t.raw(dt, {29, 53}) : b;
      if (bBatched)
        std::memcpy(bPart.data, b.as<uint16_t>() + 29 * 53, 29 * 53 * 2);
      TensorRef yPart = t.raw(dt, {10, 53});
      ASSERT_OK(run("MatMul", {part, bPart}, {yPart}, {}, contextWithThreads(2)));
      EXPECT_EQ(std::memcmp(yPart.data, y.as<uint16_t>() + (37 + 5) * 53, 10 * 53 * 2), 0);
    }
}

// Tests the trampolines of the elementwise kernels on 16-bit operands: whole
// shapes, a row broadcast (bias), a scalar, in place, shapes sliced and not
// (a row longer than a slice), a mixed-dtype output (Equal), Where, sums over
// kept rows and over the innermost dim, and ScatterND's add (rows touched twice sum in f32; rows untouched keep their
// bits, a NaN payload too): each the f32 kernel on widened operands rounded
// once, at 1 and 3 threads.
// A 16-bit FusedElementwise (round_to) gives the bits of its ops run one by
// one as 16-bit kernels: GELU's tail x * 0.5 * (1 + tanh(x * c + x^3 * d)) and
// a bias add, on rows longer than a slice, with a broadcast row and a scalar,
// at 1 and 3 threads. Without round_to the f32 chain would differ (checked,
// so that the comparison can fail).
TEST(Half, FusedElementwiseRoundsEachOpLikeTheKernelsOneByOne) {
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(zrt::dtypeName(dt));
    Tensors t;
    const int64_t rows = 7, cols = 70001;
    const size_t n = size_t(rows * cols);
    TensorRef x = halfInput(t, dt, {rows, cols}, randomFloats(n, 91));
    TensorRef bias = halfInput(t, dt, {1, cols}, randomFloats(size_t(cols), 92));
    TensorRef c = halfInput(t, dt, {}, {0.7978845608f});
    TensorRef d = halfInput(t, dt, {}, {0.0356774081f});
    TensorRef half = halfInput(t, dt, {}, {0.5f});
    TensorRef one = halfInput(t, dt, {}, {1.0f});
    // One by one: h = x + bias; u = h*c; v = h*h; w = v*h; p = w*d; q = u + p;
    // r = tanh(q); s = r + 1; m = h * 0.5; y = m * s.
    const zrt::KernelTable &k = widenedKernels();
    auto step = [&](const char *op, std::vector<TensorRef> in) {
      TensorRef o = t.raw(dt, {rows, cols});
      EXPECT_OK(k.lookup(op)(contextWithThreads(2), in, {o}, {}));
      return o;
    };
    TensorRef h = step("Add", {x, bias});
    TensorRef u = step("Mul", {h, c});
    TensorRef v = step("Mul", {h, h});
    TensorRef w = step("Mul", {v, h});
    TensorRef p = step("Mul", {w, d});
    TensorRef q = step("Add", {u, p});
    TensorRef r = step("Tanh", {q});
    TensorRef s1 = step("Add", {r, one});
    TensorRef m = step("Mul", {h, half});
    TensorRef want = step("Mul", {m, s1});
    // The same program fused: inputs x, bias, c, d, 0.5, 1 (refs 0-5), op k
    // at ref 6 + k.
    const std::vector<int64_t> program = {0, 0, 1,  2, 6, 2,  2, 6, 6,  2, 8, 6, 2, 9, 3,
                                          0, 7, 10, 12, 11, 0, 0, 12, 5, 2, 6, 4, 2, 14, 13};
    for (bool round : {true, false}) {
      AttrMap a = round ? attrs({{"ops", ints(program)},
                                 {"round_to", str(dt == DType::BF16 ? "bf16" : "f16")}})
                        : attrs({{"ops", ints(program)}});
      for (int threads : {1, 3}) {
        TensorRef y = t.raw(dt, {rows, cols});
        ASSERT_OK(k.lookup("FusedElementwise")(contextWithThreads(threads),
                                               {x, bias, c, d, half, one}, {y}, a));
        int64_t differ = 0;
        for (size_t i = 0; i < n; ++i)
          differ += y.as<uint16_t>()[i] != want.as<uint16_t>()[i];
        if (round)
          EXPECT_EQ(differ, 0) << threads << " threads";
        else
          EXPECT_GT(differ, 0) << "the f32 chain should round differently somewhere";
      }
    }
  }
}

// A FusedElementwise that mixes types (op_types, its Casts opcode 15) gives
// the bits of its ops run one by one as kernels of each op's type: GPT-2's
// GELU as mixed precision writes it (its Pow in f32 between two Casts), on a
// 16-bit x, with an f32 bias (a broadcast row, read as f32), into a 16-bit
// and (a second program ending in a widening Cast and an f32 Exp) an f32
// output; at 1 and 3 threads, rows longer than a block. With every op left
// in f32 the bits would differ (checked, so the comparison can fail).
TEST(Half, FusedElementwiseMixedTypesRoundLikeTheKernelsOneByOne) {
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(zrt::dtypeName(dt));
    Tensors t;
    const int64_t rows = 5, cols = 3001;
    const size_t n = size_t(rows * cols);
    TensorRef x = halfInput(t, dt, {rows, cols}, randomFloats(n, 93));
    TensorRef bias = t.input<float>({cols}, randomFloats(size_t(cols), 94));
    TensorRef half = halfInput(t, dt, {}, {0.5f});
    TensorRef three = t.input<float>({}, {3.0f});
    TensorRef c = t.input<float>({}, {0.044715f});
    TensorRef k0 = halfInput(t, dt, {}, {0.7978845608f});
    TensorRef one = halfInput(t, dt, {}, {1.0f});
    const zrt::KernelTable &k = widenedKernels();
    auto step = [&](const char *op, std::vector<TensorRef> in, DType to) {
      TensorRef o = t.raw(to, {rows, cols});
      EXPECT_OK(k.lookup(op)(contextWithThreads(2), in, {o}, {}));
      return o;
    };
    const DType f32 = DType::F32;
    // w = f32(x) + bias; p = w^3; q = p * c; h = half(q); a = x + h;
    // m = a * k0; r = tanh(m); s = r + 1; u = x * 0.5; y = u * s;
    // then z = exp(f32(y)).
    TensorRef w0 = step("Cast", {x}, f32);
    TensorRef w = step("Add", {w0, bias}, f32);
    TensorRef p = step("Pow", {w, three}, f32);
    TensorRef q = step("Mul", {p, c}, f32);
    TensorRef h = step("Cast", {q}, dt);
    TensorRef a = step("Add", {x, h}, dt);
    TensorRef m = step("Mul", {a, k0}, dt);
    TensorRef r = step("Tanh", {m}, dt);
    TensorRef s1 = step("Add", {r, one}, dt);
    TensorRef u = step("Mul", {x, half}, dt);
    TensorRef want = step("Mul", {u, s1}, dt);
    TensorRef wantZ = step("Exp", {step("Cast", {want}, f32)}, f32);
    // Inputs x, bias (refs 0, 1); constants 3, c, k0, 1, 0.5 (-1 .. -5);
    // op j at ref 2 + j.
    const std::vector<int64_t> program = {15, 0, 0,  0, 2, 1,   4, 3, -1,  2, 4, -2,
                                          15, 5, 0,  0, 0, 6,   2, 7, -3,  12, 8, 0,
                                          0, 9, -4,  2, 0, -5,  2, 11, 10};
    const int64_t q16 = dt == DType::BF16 ? 2 : 1;
    const std::vector<int64_t> types = {0, 0, 0, 0, q16, q16, q16, q16, q16, q16, q16};
    std::vector<int64_t> programZ = program;
    for (int64_t v : {15, 12, 0, 10, 13, 0})
      programZ.push_back(v);
    std::vector<int64_t> typesZ = types;
    typesZ.push_back(0);
    typesZ.push_back(0);
    const std::vector<double> constants = {3.0, double(0.044715f),
                                           double(widened(k0)[0]), 1.0, 0.5};
    for (bool typed : {true, false}) {
      for (int threads : {1, 3}) {
        SCOPED_TRACE(std::to_string(threads) + " threads");
        auto run = [&](const std::vector<int64_t> &ops, const std::vector<int64_t> &ty,
                       DType outType) {
          AttrMap at = attrs({{"ops", ints(ops)}});
          at.set("constants", AttrValue{{}, constants, ""});
          if (typed)
            at.set("op_types", ints(ty));
          TensorRef y = t.raw(outType, {rows, cols});
          EXPECT_OK(k.lookup("FusedElementwise")(contextWithThreads(threads), {x, bias},
                                                 {y}, at));
          return y;
        };
        TensorRef y = run(program, types, dt);
        TensorRef z = run(programZ, typesZ, f32);
        int64_t differ = 0, differZ = 0;
        for (size_t i = 0; i < n; ++i) {
          differ += y.as<uint16_t>()[i] != want.as<uint16_t>()[i];
          differZ += z.as<uint32_t>()[i] != wantZ.as<uint32_t>()[i];
        }
        if (typed) {
          EXPECT_EQ(differ, 0);
          EXPECT_EQ(differZ, 0);
        } else {
          EXPECT_GT(differ, 0) << "the f32 chain should round differently somewhere";
        }
      }
    }
  }
}

TEST(Half, ElementwiseTrampolinesRoundTheF32ResultOnce) {
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(zrt::dtypeName(dt));
    Tensors t;
    for (int64_t rows : {3, 40}) {
      for (int64_t cols : {1000, 70001}) {
        const size_t n = size_t(rows * cols);
        TensorRef x = halfInput(t, dt, {rows, cols}, randomFloats(n, 81));
        TensorRef z = halfInput(t, dt, {rows, cols}, randomFloats(n, 82));
        TensorRef bias = halfInput(t, dt, {1, cols}, randomFloats(size_t(cols), 83));
        TensorRef s = halfInput(t, dt, {1, 1, 1}, {0.7071f});
        expectWidenedBits("Add", {x, z}, {t.raw(dt, {rows, cols})});
        expectWidenedBits("Add", {x, bias}, {t.raw(dt, {rows, cols})});
        expectWidenedBits("Mul", {s, x}, {t.raw(dt, {rows, cols})});
        expectWidenedBits("Tanh", {x}, {t.raw(dt, {rows, cols})});
        expectWidenedBits("Equal", {x, x}, {t.raw(DType::Bool, {rows, cols})});
        TensorRef cond = t.raw(DType::Bool, {rows, cols});
        for (size_t i = 0; i < n; ++i)
          cond.as<uint8_t>()[i] = uint8_t(i % 3 == 0);
        expectWidenedBits("Where", {cond, x, z}, {t.raw(dt, {rows, cols})});
      }
    }
    // In place: output 0 is input 0.
    TensorRef x = halfInput(t, dt, {5, 20000}, randomFloats(100000, 84));
    TensorRef y = halfInput(t, dt, {5, 20000}, randomFloats(100000, 85));
    std::vector<float> want = widened(x);
    const std::vector<float> yv = widened(y);
    for (size_t i = 0; i < want.size(); ++i)
      want[i] *= yv[i];
    ASSERT_OK(widenedKernels().lookup("Mul")(contextWithThreads(2), {x, y}, {x}, {}));
    for (size_t i = 0; i < want.size(); i += 997)
      EXPECT_EQ(x.as<uint16_t>()[i], narrowOne(dt, want[i]));
    // ScatterND add: rows 1 and 4 twice, row 2 once, row 0 holds a NaN payload.
    TensorRef table = halfInput(t, dt, {6, 70}, randomFloats(420, 86));
    TensorRef idx = t.input<int64_t>({5, 1}, {4, 1, 2, 4, 1});
    TensorRef upd = halfInput(t, dt, {5, 70}, randomFloats(350, 87));
    TensorRef out = t.raw(dt, {6, 70});
    const AttrMap add = attrs({{"reduction", str("add")}});
    expectWidenedBits("ScatterND", {table, idx, upd}, {out}, add);
    // Reductions over leading (and middle) dims keeping the innermost: rows
    // widened a tile at a time (reduceHalfKeptRows); over the innermost dim:
    // the trampoline's widened copy. The same bits either way.
    struct ReduceCase {
      std::vector<int64_t> shape, axes, outShape;
    };
    for (const ReduceCase &c : std::vector<ReduceCase>{{{1024, 3000}, {0}, {3000}},
                                                       {{3, 7, 130}, {0, 1}, {130}},
                                                       {{4, 6, 5, 70}, {0, 2}, {6, 70}},
                                                       {{9, 300}, {1}, {9}}})
      for (const char *op : {"ReduceSum", "ReduceMean", "ReduceSumSquare"}) {
        SCOPED_TRACE(std::string(op) + " " + std::to_string(c.shape.size()) + "-d");
        int64_t n = 1;
        for (int64_t d : c.shape)
          n *= d;
        TensorRef in = halfInput(t, dt, c.shape, randomFloats(size_t(n), 88));
        expectWidenedBits(op, {in}, {t.raw(dt, c.outShape)},
                          attrs({{"axes", ints(c.axes)}, {"keepdims", ints({0})}}));
      }
    table.as<uint16_t>()[3] = dt == DType::F16 ? 0x7d01 : 0x7f81; // signalling
    ASSERT_OK(widenedKernels().lookup("ScatterND")(contextWithThreads(2), {table, idx, upd},
                                                   {out}, add));
    EXPECT_EQ(out.as<uint16_t>()[3], table.as<uint16_t>()[3]);
  }
}
