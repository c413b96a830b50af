//===- KernelHarness.h - Calling CPU kernels from unit tests ----*- C++ -*-===//
//
// The CPU kernel table and a KernelContext whose parallelFor splits work
// over k real threads (as a pool would), so kernel tests can check the same
// bits at any thread count. Shared by the kernel unit tests.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TEST_KERNELHARNESS_H
#define ZRT_TEST_KERNELHARNESS_H

#include "zrt/Kernel.h"

#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace zrt {
namespace test {

inline const KernelTable &cpuKernels() {
  static const KernelTable table = [] {
    KernelTable t;
    registerCpuKernels(t);
    return t;
  }();
  return table;
}

/// A context with `k` threads whose parallelFor splits [0, n) into k pieces,
/// as a pool of k threads would.
inline KernelContext contextWithThreads(int k) {
  KernelContext ctx;
  ctx.numThreads = k;
  ctx.parallelFor = [k](int64_t n, const std::function<void(int64_t, int64_t)> &fn) {
    std::vector<std::thread> threads;
    for (int64_t t = 0; t < k; ++t) {
      const int64_t b = n * t / k, e = n * (t + 1) / k;
      if (b < e)
        threads.emplace_back([&fn, b, e] { fn(b, e); });
    }
    for (std::thread &th : threads)
      th.join();
  };
  return ctx;
}

/// Runs kernel `op` of the CPU table.
inline Status runKernel(const std::string &op, const std::vector<TensorRef> &in,
                        const std::vector<TensorRef> &out, const AttrMap &attrs,
                        const KernelContext &ctx = contextWithThreads(1)) {
  KernelFn fn = cpuKernels().lookup(op);
  if (!fn)
    return Status::error("no kernel " + op);
  return fn(ctx, in, out, attrs);
}

} // namespace test
} // namespace zrt

#endif // ZRT_TEST_KERNELHARNESS_H
