//===- CpuBackend.cpp - Host threads, host memory, C++ kernels ------------===//
//
// The CPU implementation of the Backend interface. Arenas are anonymous mmap
// regions: page aligned, zero filled, and only resident once touched, so the
// process's peak RSS reflects what a run really used; large ones are advised
// for transparent huge pages. A stream is the host thread
// that executes it, so launch() simply calls the kernel; an event is a flag under
// a mutex (HostEvent), and wait() blocks the waiting stream's thread until the
// flag is set or the run is cancelled.
//
//===----------------------------------------------------------------------===//

#include "CpuHalf.h"
#include "zrt/Backend.h"
#include "zrt/CpuBackend.h"

#include "kernels/HostEvent.h"
#include "cpu/ThreadPool.h"
#include "cpu/kernels/PackedGemm.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <sys/mman.h>

extern "C" void openblas_set_num_threads(int numThreads);

namespace zrt {
namespace {

class HostAllocator final : public Allocator {
  static constexpr size_t kHugePageBytes = size_t(2) << 20;
  static bool hugePages() {
    static const bool on = [] {
      const char *v = std::getenv("ZRT_HUGEPAGES");
      return v == nullptr || std::string(v) != "0";
    }();
    return on;
  }

public:
  ~HostAllocator() override {
    for (auto &kv : sizes_)
      ::munmap(kv.first, kv.second);
  }
  Expected<void *> allocate(uint64_t bytes, const std::string &what) override {
    size_t size = size_t(std::max<uint64_t>(bytes, 1));
    void *p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      return Status::error("cannot allocate " + std::to_string(bytes) +
                           " bytes for " + what + ": " + std::strerror(errno));
    // Transparent huge pages for arenas of 2 MiB or more: a gathered weight or
    // an activation spans a few TLB entries instead of hundreds (ZeRO-3 GPT-
    // small at 2 ranks: 1.5-2.5% faster, the same peak RSS). Advice only; a
    // kernel that does not give them leaves 4 KiB pages. ZRT_HUGEPAGES=0
    // turns it off.
    if (size >= kHugePageBytes && hugePages())
      ::madvise(p, size, MADV_HUGEPAGE);
    std::lock_guard<std::mutex> lock(mutex_);
    sizes_[p] = size;
    return p;
  }
  void deallocate(void *ptr) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sizes_.find(ptr);
    if (it == sizes_.end())
      return;
    ::munmap(it->first, it->second);
    sizes_.erase(it);
  }
  bool hostAccessible() const override { return true; }
  // An empty tensor or constant may come with a null pointer, which memcpy
  // does not accept even for zero bytes.
  Status copyFromHost(void *dst, const void *src, uint64_t bytes) override {
    if (bytes != 0)
      std::memcpy(dst, src, size_t(bytes));
    return Status::ok();
  }
  Status copyToHost(void *dst, const void *src, uint64_t bytes) override {
    if (bytes != 0)
      std::memcpy(dst, src, size_t(bytes));
    return Status::ok();
  }

private:
  std::mutex mutex_;
  std::map<void *, size_t> sizes_;
};

class HostStream final : public Stream {
public:
  HostStream(cpu::ThreadPool &pool, int rank, int worldSize) {
    context_.numThreads = pool.numThreads();
    context_.rank = rank;
    context_.worldSize = worldSize;
    context_.parallelFor =
        [&pool](int64_t n, const std::function<void(int64_t, int64_t)> &fn) {
          pool.parallelFor(n, fn);
        };
  }
  Status launch(KernelFn fn, const std::vector<TensorRef> &inputs,
                const std::vector<TensorRef> &outputs,
                const AttrMap &attrs) override {
    return fn(context_, inputs, outputs, attrs);
  }
  Status synchronize() override { return Status::ok(); }
  void setConstantOperands(ConstantOperands *constants) override {
    context_.constants = constants;
  }

private:
  KernelContext context_;
};

class CpuBackend final : public Backend {
public:
  explicit CpuBackend(int numThreads) : pool_(numThreads) {
    registerCpuKernels(kernels_);
    // f16 / bf16 operands: widened to f32 around the kernels that compute.
    cpu::widenHalfKernels(kernels_);
    // OpenBLAS stays single-threaded: the MatMul kernels split products over
    // this pool, and OpenBLAS's own spinning threads would fight it.
    openblas_set_num_threads(1);
  }
  std::string name() const override { return "cpu"; }
  Allocator &allocator() override { return allocator_; }
  const KernelTable &kernels() const override { return kernels_; }
  Expected<std::unique_ptr<Stream>> createStream(int,
                                                 const StreamDesc &) override {
    return std::unique_ptr<Stream>(std::make_unique<HostStream>(pool_, rank_, worldSize_));
  }
  Expected<std::unique_ptr<Event>> createEvent() override {
    return std::unique_ptr<Event>(std::make_unique<HostEvent>());
  }
  int numThreads() const override { return pool_.numThreads(); }

private:
  HostAllocator allocator_;
  KernelTable kernels_;
  cpu::ThreadPool pool_;
};

} // namespace

std::unique_ptr<Backend> createCpuBackend(int numThreads) {
  return std::make_unique<CpuBackend>(numThreads);
}

const char *cpuKernelIsa() { return cpu::cpuIsaName(cpu::cpuIsa()); }

Status checkCpuKernelIsa() {
  const std::string problem = cpu::cpuIsaProblem();
  return problem.empty() ? Status::ok() : Status::error(problem);
}

} // namespace zrt
