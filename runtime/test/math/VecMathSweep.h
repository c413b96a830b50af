//===- VecMathSweep.h - Ulp sweeps of math/VecMath.h ------------*- C++ -*-===//
//
// Shared by VecMathTest.cpp (a dense subset of the f32 inputs, in ctest) and
// zrt-vecmath-sweep (all 2^32, by hand): evaluates each VecMath function on
// sets of bit patterns and measures its distance from the correctly rounded
// result, taken as libm's double-precision value rounded to float. Each
// function is evaluated twice, as compiled for the baseline ISA and, on
// x86-64, with FMA contraction allowed (what the kernels' AVX2/AVX-512 clones
// run), and the larger error of the two counts.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TEST_VECMATHSWEEP_H
#define ZRT_TEST_VECMATHSWEEP_H

#include "math/VecMath.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

namespace zrt {
namespace vecmath_sweep {

/// One function under test: `fast` the VecMath version, `reference` libm in
/// double, `kMaxUlps` the bound VecMath.h documents.
struct Exp {
  static constexpr const char *kName = "exp";
  static constexpr int64_t kMaxUlps = 1;
  static float fast(float x) { return math::exp(x); }
  static double reference(double x) { return std::exp(x); }
};
struct Log {
  static constexpr const char *kName = "log";
  static constexpr int64_t kMaxUlps = 1;
  static float fast(float x) { return math::log(x); }
  static double reference(double x) { return std::log(x); }
};
struct Tanh {
  static constexpr const char *kName = "tanh";
  static constexpr int64_t kMaxUlps = 1;
  static float fast(float x) { return math::tanh(x); }
  static double reference(double x) { return std::tanh(x); }
};
struct Erf {
  static constexpr const char *kName = "erf";
  static constexpr int64_t kMaxUlps = 1;
  static float fast(float x) { return math::erf(x); }
  static double reference(double x) { return std::erf(x); }
};
struct Sigmoid {
  static constexpr const char *kName = "sigmoid";
  static constexpr int64_t kMaxUlps = 1;
  static float fast(float x) { return math::sigmoid(x); }
  static double reference(double x) { return 1.0 / (1.0 + std::exp(-x)); }
};

/// out[i] = Fn::fast(in[i]), compiled for the baseline ISA.
template <typename Fn>
void evaluateBaseline(const float *in, float *out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = Fn::fast(in[i]);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ZRT_VECMATH_SWEEP_FMA 1
/// The same loop with AVX2 and FMA, where the compiler contracts a*b+c.
template <typename Fn>
__attribute__((target("avx2,fma"))) void evaluateFma(const float *in,
                                                     float *out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = Fn::fast(in[i]);
}
#endif

/// Whether this CPU runs the FMA variant.
inline bool haveFma() {
#ifdef ZRT_VECMATH_SWEEP_FMA
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

/// Bit patterns ordered like the floats they encode (-0 and +0 both 0), so
/// that the difference of two is their distance in ulps.
inline int64_t orderedBits(float f) {
  const uint32_t bits = math::floatToBits(f);
  return (bits & 0x80000000u) ? -int64_t(bits & 0x7fffffffu) : int64_t(bits);
}

/// The worst result over a set of inputs.
struct Worst {
  int64_t ulps = 0;    ///< largest distance from the correctly rounded result
  double realUlps = 0; ///< largest |result - exact| in ulps of the exact value
  uint32_t realInput = ~0u; ///< the input with the largest `realUlps`
  uint32_t input = ~0u;     ///< smallest input bits with the largest `ulps`
  uint64_t checked = 0;     ///< inputs evaluated
  uint64_t fmaDiffers = 0;  ///< inputs where the two variants disagree
  /// Inputs whose NaN, inf or zero result (or reference) differs from the
  /// reference (result): any is a failure.
  uint64_t badSpecials = 0;
  uint32_t badSpecialInput = ~0u; ///< the smallest such input's bits

  void merge(const Worst &o) {
    if (o.ulps > ulps || (o.ulps == ulps && o.input < input)) {
      ulps = o.ulps;
      input = o.input;
    }
    if (o.realUlps > realUlps ||
        (o.realUlps == realUlps && o.realInput < realInput)) {
      realUlps = o.realUlps;
      realInput = o.realInput;
    }
    checked += o.checked;
    fmaDiffers += o.fmaDiffers;
    badSpecials += o.badSpecials;
    badSpecialInput = std::min(badSpecialInput, o.badSpecialInput);
  }
};

/// The spacing of floats at |v| (2^-149 below the normals).
inline double ulpOf(double v) {
  const double a = std::fabs(v);
  if (a < double(std::numeric_limits<float>::min()))
    return std::ldexp(1.0, -149);
  int exponent;
  std::frexp(a, &exponent);
  return std::ldexp(1.0, exponent - 24);
}

/// Scores result `y` for input `x` into `w`.
template <typename Fn> void score(float x, float y, Worst &w) {
  const double exact = Fn::reference(double(x));
  const float rounded = float(exact);
  // NaN, inf and zero results (both zero) must match exactly, sign included.
  if (!std::isfinite(rounded) || !std::isfinite(y) ||
      (rounded == 0.0f && y == 0.0f)) {
    const bool same = std::isnan(rounded)
                          ? std::isnan(y)
                          : math::floatToBits(rounded) == math::floatToBits(y);
    if (!same) {
      ++w.badSpecials;
      w.badSpecialInput = std::min(w.badSpecialInput, math::floatToBits(x));
    }
    return;
  }
  const int64_t ulps = std::llabs(orderedBits(y) - orderedBits(rounded));
  // Ties go to the smallest bit pattern, whatever the order of evaluation.
  if (ulps > w.ulps || (ulps == w.ulps && math::floatToBits(x) < w.input)) {
    w.ulps = ulps;
    w.input = math::floatToBits(x);
  }
  const double real = std::fabs(double(y) - exact) / ulpOf(exact);
  if (real > w.realUlps ||
      (real == w.realUlps && math::floatToBits(x) < w.realInput)) {
    w.realUlps = real;
    w.realInput = math::floatToBits(x);
  }
}

/// Evaluates Fn on `inputs` (both variants) and scores every result.
template <typename Fn>
void scoreBlock(const std::vector<float> &inputs, Worst &w) {
  const size_t n = inputs.size();
  std::vector<float> base(n), fused(n);
  evaluateBaseline<Fn>(inputs.data(), base.data(), n);
  const bool fma = haveFma();
  w.checked += n;
#ifdef ZRT_VECMATH_SWEEP_FMA
  if (fma)
    evaluateFma<Fn>(inputs.data(), fused.data(), n);
#endif
  for (size_t i = 0; i < n; ++i) {
    score<Fn>(inputs[i], base[i], w);
    if (fma && math::floatToBits(fused[i]) != math::floatToBits(base[i])) {
      ++w.fmaDiffers;
      score<Fn>(inputs[i], fused[i], w);
    }
  }
}

/// Scores Fn on the patterns first, first + stride, ... <= last, on
/// `threads` threads (the result does not depend on their number).
template <typename Fn>
Worst sweepPatterns(uint32_t first, uint32_t last, uint32_t stride,
                    unsigned threads) {
  constexpr uint64_t kBlock = 1 << 16;
  const uint64_t count = (uint64_t(last) - first) / stride + 1;
  const uint64_t blocks = (count + kBlock - 1) / kBlock;
  threads = std::max(1u, threads);
  std::vector<Worst> partial(threads);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::vector<float> inputs;
      for (uint64_t b = t; b < blocks; b += threads) {
        inputs.clear();
        const uint64_t end = std::min(count, (b + 1) * kBlock);
        for (uint64_t i = b * kBlock; i < end; ++i)
          inputs.push_back(math::bitsToFloat(uint32_t(first + i * stride)));
        scoreBlock<Fn>(inputs, partial[t]);
      }
    });
  Worst total;
  for (unsigned t = 0; t < threads; ++t) {
    workers[t].join();
    total.merge(partial[t]);
  }
  return total;
}

} // namespace vecmath_sweep
} // namespace zrt

#endif // ZRT_TEST_VECMATHSWEEP_H
