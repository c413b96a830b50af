//===- VecMathSweepTool.cpp - Every f32 input through math/VecMath.h ------===//
//
// zrt-vecmath-sweep [--stride S] [--threads T] [FUNCTION...]: scores each
// VecMath function (default: all) on every S-th f32 bit pattern (default 1:
// all 2^32) against libm in double rounded to float, and prints the largest
// error in ulps, where it occurs, and how many results differ with FMA
// contraction. Exits 1 if a function exceeds its documented bound or gets a
// NaN, inf or zero wrong. Built with the tests, not run by ctest: the full
// sweep takes minutes.
//
//===----------------------------------------------------------------------===//

#include "VecMathSweep.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace zrt::vecmath_sweep;

namespace {

template <typename Fn> bool report(uint32_t stride, unsigned threads) {
  const Worst w = sweepPatterns<Fn>(0, 0xffffffffu, stride, threads);
  std::printf(
      "%-8s %11llu inputs  max %lld ulp (bound %lld) at %.9g (0x%08x)"
      "  max real %.3f ulp at %.9g  fma differs %llu  bad specials %llu",
      Fn::kName, (unsigned long long)w.checked, (long long)w.ulps,
      (long long)Fn::kMaxUlps, double(zrt::math::bitsToFloat(w.input)), w.input,
      w.realUlps, double(zrt::math::bitsToFloat(w.realInput)),
      (unsigned long long)w.fmaDiffers, (unsigned long long)w.badSpecials);
  if (w.badSpecials)
    std::printf(" (first 0x%08x)", w.badSpecialInput);
  std::printf("\n");
  std::fflush(stdout);
  return w.ulps <= Fn::kMaxUlps && w.badSpecials == 0;
}

} // namespace

int main(int argc, char **argv) {
  uint32_t stride = 1;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--stride") && i + 1 < argc)
      stride = uint32_t(std::strtoul(argv[++i], nullptr, 10));
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = unsigned(std::strtoul(argv[++i], nullptr, 10));
    else if (argv[i][0] == '-') {
      std::fprintf(stderr,
                   "usage: zrt-vecmath-sweep [--stride S] [--threads T] "
                   "[exp|log|tanh|erf|sigmoid ...]\n");
      return 2;
    } else
      names.push_back(argv[i]);
  }
  if (stride == 0)
    stride = 1;
  std::printf("stride %u, %u threads, FMA variant %s\n", stride, threads,
              haveFma() ? "checked" : "not available");
  auto wanted = [&](const char *name) {
    return names.empty() ||
           std::find(names.begin(), names.end(), name) != names.end();
  };
  bool ok = true;
  if (wanted(Exp::kName))
    ok &= report<Exp>(stride, threads);
  if (wanted(Log::kName))
    ok &= report<Log>(stride, threads);
  if (wanted(Tanh::kName))
    ok &= report<Tanh>(stride, threads);
  if (wanted(Erf::kName))
    ok &= report<Erf>(stride, threads);
  if (wanted(Sigmoid::kName))
    ok &= report<Sigmoid>(stride, threads);
  return ok ? 0 : 1;
}
