//===- VecMathTest.cpp - math/VecMath.h against libm ----------------------===//
//
// Each VecMath function on a dense subset of the f32 inputs: every 101st bit
// pattern of all 2^32, every 17th with 2^-12 <= |x| <= 10 (where the
// functions bend), and the special values and thresholds. Results must be
// within the documented ulps of libm's double-precision value rounded to
// float, and exactly equal to it where that is NaN, inf or zero. Every input
// is evaluated both as compiled for the baseline ISA and with FMA
// contraction (VecMathSweep.h). zrt-vecmath-sweep runs all 2^32 inputs.
//
//===----------------------------------------------------------------------===//

#include "VecMathSweep.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <string>

namespace {

using namespace zrt::vecmath_sweep;
using zrt::math::bitsToFloat;
using zrt::math::floatToBits;

// Sanitizer and debug builds (ZRT_VECMATH_TEST_SPARSE, set by
// runtime/test/CMakeLists.txt) run ~10x fewer inputs.
#ifdef ZRT_VECMATH_TEST_SPARSE
constexpr uint32_t kAllStride = 1021, kDenseStride = 257;
#else
constexpr uint32_t kAllStride = 101, kDenseStride = 17;
#endif

unsigned threads() { return std::max(1u, std::thread::hardware_concurrency()); }

std::string describe(const char *what, const Worst &w) {
  char text[256];
  std::snprintf(text, sizeof text,
                "%s: %llu inputs, max %lld ulp at %.9g (0x%08x), %llu wrong "
                "NaN/inf/zero (first 0x%08x)",
                what, (unsigned long long)w.checked, (long long)w.ulps,
                double(bitsToFloat(w.input)), w.input,
                (unsigned long long)w.badSpecials, w.badSpecialInput);
  return text;
}

template <typename Fn>
void expectWithinBound(const char *what, const Worst &w) {
  EXPECT_LE(w.ulps, Fn::kMaxUlps) << describe(what, w);
  EXPECT_EQ(w.badSpecials, 0u) << describe(what, w);
  EXPECT_GT(w.checked, 0u);
}

template <typename Fn> class VecMath : public ::testing::Test {};
using Functions = ::testing::Types<Exp, Log, Tanh, Erf, Sigmoid>;
class FunctionNames {
public:
  template <typename Fn> static std::string GetName(int) { return Fn::kName; }
};
TYPED_TEST_SUITE(VecMath, Functions, FunctionNames);

TYPED_TEST(VecMath, AllPatternsStrided) {
  expectWithinBound<TypeParam>(
      "every pattern",
      sweepPatterns<TypeParam>(0, 0xffffffffu, kAllStride, threads()));
}

TYPED_TEST(VecMath, DenseWhereTheFunctionsBend) {
  const uint32_t lo = floatToBits(0x1p-12f), hi = floatToBits(10.0f);
  Worst w = sweepPatterns<TypeParam>(lo, hi, kDenseStride, threads());
  w.merge(sweepPatterns<TypeParam>(lo | 0x80000000u, hi | 0x80000000u,
                                   kDenseStride, threads()));
  expectWithinBound<TypeParam>("2^-12 <= |x| <= 10", w);
}

TYPED_TEST(VecMath, SpecialValuesAndThresholds) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> inputs = {
      0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
      -std::numeric_limits<float>::quiet_NaN(), bitsToFloat(0x7f800001u),
      FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN, bitsToFloat(1),
      bitsToFloat(0x80000001u), bitsToFloat(0x007fffffu),
      bitsToFloat(0x807fffffu), 1.0f, -1.0f,
      // exp: the largest finite result, the first overflow, the subnormal
      // range and the last nonzero result.
      88.72283f, 88.722839f, 88.72284f, 89.0f, -87.33654f, -87.336548f,
      -103.27893f, -103.972076f, -103.972084f, -104.0f, -150.0f,
      // tanh and erf: the last results below 1 and the first equal to 1.
      9.010913f, 9.01092f, 3.9192059f, 3.919206f, 3.92f, 0.625f, -0.625f,
      0.6249999f};
  // Both neighbours of each threshold as well.
  for (size_t i = 0, n = inputs.size(); i < n; ++i) {
    inputs.push_back(std::nextafter(inputs[i], inf));
    inputs.push_back(std::nextafter(inputs[i], -inf));
  }
  Worst w;
  scoreBlock<TypeParam>(inputs, w);
  expectWithinBound<TypeParam>("special values", w);
}

/// The exact results the header documents, bit for bit.
TEST(VecMath, DocumentedSpecialValues) {
  namespace m = zrt::math;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto same = [](float a, float b) {
    return (std::isnan(a) && std::isnan(b)) || floatToBits(a) == floatToBits(b);
  };
  const struct {
    const char *what;
    float got, expected;
  } cases[] = {
      {"exp(+0)", m::exp(0.0f), 1.0f},
      {"exp(-0)", m::exp(-0.0f), 1.0f},
      {"exp(inf)", m::exp(inf), inf},
      {"exp(-inf)", m::exp(-inf), 0.0f},
      {"exp(NaN)", m::exp(nan), nan},
      {"exp(89)", m::exp(89.0f), inf},
      {"exp(-104)", m::exp(-104.0f), 0.0f},
      {"exp(-103.9)", m::exp(-103.9f), bitsToFloat(1)},
      {"log(+0)", m::log(0.0f), -inf},
      {"log(-0)", m::log(-0.0f), -inf},
      {"log(1)", m::log(1.0f), 0.0f},
      {"log(inf)", m::log(inf), inf},
      {"log(-1)", m::log(-1.0f), nan},
      {"log(-inf)", m::log(-inf), nan},
      {"log(NaN)", m::log(nan), nan},
      {"tanh(+0)", m::tanh(0.0f), 0.0f},
      {"tanh(-0)", m::tanh(-0.0f), -0.0f},
      {"tanh(inf)", m::tanh(inf), 1.0f},
      {"tanh(-inf)", m::tanh(-inf), -1.0f},
      {"tanh(NaN)", m::tanh(nan), nan},
      {"tanh(9.1)", m::tanh(9.1f), 1.0f},
      {"tanh(min subnormal)", m::tanh(bitsToFloat(1)), bitsToFloat(1)},
      {"erf(+0)", m::erf(0.0f), 0.0f},
      {"erf(-0)", m::erf(-0.0f), -0.0f},
      {"erf(inf)", m::erf(inf), 1.0f},
      {"erf(-inf)", m::erf(-inf), -1.0f},
      {"erf(NaN)", m::erf(nan), nan},
      {"erf(4)", m::erf(4.0f), 1.0f},
      {"sigmoid(+0)", m::sigmoid(0.0f), 0.5f},
      {"sigmoid(-0)", m::sigmoid(-0.0f), 0.5f},
      {"sigmoid(inf)", m::sigmoid(inf), 1.0f},
      {"sigmoid(-inf)", m::sigmoid(-inf), 0.0f},
      {"sigmoid(NaN)", m::sigmoid(nan), nan},
      {"sigmoid(18)", m::sigmoid(18.0f), 1.0f},
      {"sigmoid(-103.9)", m::sigmoid(-103.9f), bitsToFloat(1)},
  };
  for (const auto &c : cases)
    EXPECT_TRUE(same(c.got, c.expected))
        << c.what << " = " << c.got << ", expected " << c.expected;
}

} // namespace
