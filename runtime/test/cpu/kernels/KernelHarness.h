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
#include "zrt/CpuBackend.h"

#include <functional>
#include <map>
#include <mutex>
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

/// ConstantOperands for kernel tests: every operand is constant unless
/// listed in `written`; prepared forms are kept by (address, layout) and
/// counted, so a test can see that a kernel prepared its operand once.
class TestConstants final : public ConstantOperands {
public:
  ~TestConstants() override {
    for (auto &kv : prepared_)
      ::operator delete(kv.second, std::align_val_t{64});
  }
  bool isConstant(const TensorRef &t) const override {
    for (const void *w : written)
      if (w == t.data)
        return false;
    return true;
  }
  const void *prepared(const TensorRef &source, const std::string &layout,
                       size_t bytes,
                       const std::function<void(void *)> &prepare) override {
    std::lock_guard<std::mutex> lock(mutex_);
    void *&slot = prepared_[{source.data, layout}];
    if (!slot) {
      slot = ::operator new(bytes ? bytes : 1, std::align_val_t{64});
      prepare(slot);
      ++preparations;
    }
    return slot;
  }
  std::vector<const void *> written; ///< operands that are not constant
  int preparations = 0;              ///< prepared forms made so far

private:
  std::mutex mutex_;
  std::map<std::pair<const void *, std::string>, void *> prepared_;
};

/// contextWithThreads(k) whose kernels see `constants`.
inline KernelContext contextWithConstants(int k, ConstantOperands *constants) {
  KernelContext ctx = contextWithThreads(k);
  ctx.constants = constants;
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
