//===- vecmath_bench.cpp - math/VecMath.h vs scalar libm ------------------===//
//
// Times each VecMath function against the scalar libm float function (expf,
// logf, tanhf, erff, and 1 / (1 + expf(-x)) for sigmoid) on the same array,
// in one process, and prints ns per element and the libm / VecMath ratio.
// VecMath is timed as compiled for the baseline ISA (SSE2 on x86-64) and as
// the kernels run it (target_clones: AVX-512F, AVX2 or baseline, picked for
// this CPU), and through the kernel itself (one thread, the KernelTable's
// Exp, Log, Tanh, Erf, Sigmoid on a [N] f32 tensor).
// Usage: zrt-vecmath-bench [elements] [repeats]
//
//===----------------------------------------------------------------------===//

#include "math/VecMath.h"
#include "zrt/Kernel.h"
#include "zrt/CpuBackend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) &&         \
    defined(__linux__)
#define DISPATCHED __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DISPATCHED
#endif

namespace {

/// Median seconds of `repeats` calls of fn, after one warm-up call.
double seconds(const std::function<void()> &fn, int repeats) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    fn();
    t.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// One loop per function and build: the baseline loops are compiled for the
// default ISA, the DISPATCHED ones like the kernels' ZRT_HOT_LOOP.
#define LOOPS(NAME, VEC, LIBM)                                                 \
  void NAME##Libm(const float *in, float *out, size_t n) {                     \
    for (size_t i = 0; i < n; ++i)                                             \
      out[i] = LIBM(in[i]);                                                    \
  }                                                                            \
  void NAME##Baseline(const float *__restrict in, float *__restrict out,       \
                      size_t n) {                                              \
    for (size_t i = 0; i < n; ++i)                                             \
      out[i] = VEC(in[i]);                                                     \
  }                                                                            \
  DISPATCHED void NAME##Dispatched(const float *__restrict in,                 \
                                   float *__restrict out, size_t n) {          \
    for (size_t i = 0; i < n; ++i)                                             \
      out[i] = VEC(in[i]);                                                     \
  }

float libmSigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

LOOPS(exp, zrt::math::exp, expf)
LOOPS(log, zrt::math::log, logf)
LOOPS(tanh, zrt::math::tanh, tanhf)
LOOPS(erf, zrt::math::erf, erff)
LOOPS(sigmoid, zrt::math::sigmoid, libmSigmoid)
#undef LOOPS

using Loop = void (*)(const float *, float *, size_t);

struct Case {
  const char *name, *kernel;
  float lo, hi; ///< inputs uniform in [lo, hi]
  Loop libm, baseline, dispatched;
};

} // namespace

int main(int argc, char **argv) {
  const size_t n = argc > 1 ? size_t(std::atol(argv[1])) : size_t(1) << 16;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 51;
  zrt::KernelTable table;
  zrt::registerCpuKernels(table);
  zrt::KernelContext ctx;
  ctx.numThreads = 1;
  ctx.parallelFor = [](int64_t count,
                       const std::function<void(int64_t, int64_t)> &fn) {
    if (count > 0)
      fn(0, count);
  };
  const Case cases[] = {
      {"exp", "Exp", -20, 20, expLibm, expBaseline, expDispatched},
      {"log", "Log", 1e-3f, 1e3f, logLibm, logBaseline, logDispatched},
      {"tanh", "Tanh", -5, 5, tanhLibm, tanhBaseline, tanhDispatched},
      {"erf", "Erf", -4, 4, erfLibm, erfBaseline, erfDispatched},
      {"sigmoid", "Sigmoid", -20, 20, sigmoidLibm, sigmoidBaseline,
       sigmoidDispatched},
  };
  std::printf("%zu f32 elements, median of %d runs, ns/element; ratio = libm / "
              "VecMath\n",
              n, repeats);
  std::printf("%-8s %8s %9s %6s %11s %6s %11s %6s\n", "function", "libm",
              "baseline", "ratio", "dispatched", "ratio", "kernel(1t)",
              "ratio");
  std::mt19937 rng(0);
  for (const Case &c : cases) {
    std::uniform_real_distribution<float> dist(c.lo, c.hi);
    std::vector<float> in(n), out(n);
    for (float &v : in)
      v = dist(rng);
    const double perElement = 1e9 / double(n);
    const double tLibm =
        seconds([&] { c.libm(in.data(), out.data(), n); }, repeats) *
        perElement;
    const double tBase =
        seconds([&] { c.baseline(in.data(), out.data(), n); }, repeats) *
        perElement;
    const double tDisp =
        seconds([&] { c.dispatched(in.data(), out.data(), n); }, repeats) *
        perElement;
    zrt::TensorRef x{in.data(), zrt::DType::F32, {int64_t(n)}};
    zrt::TensorRef y{out.data(), zrt::DType::F32, {int64_t(n)}};
    const zrt::KernelFn kernel = table.lookup(c.kernel);
    const double tKernel =
        seconds([&] { (void)kernel(ctx, {x}, {y}, zrt::AttrMap{}); }, repeats) *
        perElement;
    std::printf("%-8s %8.3f %9.3f %6.1f %11.3f %6.1f %11.3f %6.1f\n", c.name,
                tLibm, tBase, tLibm / tBase, tDisp, tLibm / tDisp, tKernel,
                tLibm / tKernel);
  }
  return 0;
}
