//===- ElementwiseTest.cpp - Registry, binary and unary kernels -----------===//
//
// The kernel table has the contract's kernels; the dtype helpers; the binary
// kernels (broadcasting, integer and 8-bit dtypes, comparisons to Bool,
// variadics, Where) and the unary ones (math against std, the fast
// transcendentals within an ulp, activations, Cast, Clip).
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace zrt::kerneltest;

namespace {

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

} // namespace
