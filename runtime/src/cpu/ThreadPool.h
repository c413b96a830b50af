//===- ThreadPool.h - Worker threads behind ParallelFor ---------*- C++ -*-===//
//
// The CPU backend's kernels split loops with KernelContext::parallelFor. Several
// program streams may run kernels at once, so the pool takes jobs from any number
// of callers: a job is split into at most `threads` contiguous chunks, the caller
// works on its own job's chunks too (so a job always finishes even when every
// worker is busy, and nested parallelFor calls cannot deadlock), and workers pick
// chunks from the oldest unfinished job.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_CPU_THREADPOOL_H
#define ZRT_CPU_THREADPOOL_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace zrt {
namespace cpu {

class ThreadPool {
public:
  /// A pool with `threads - 1` workers (the caller is the last thread).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int numThreads() const { return threads_; }
  /// Runs fn(begin, end) over disjoint ranges covering [0, n); returns when
  /// all have finished.
  void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)> &fn);

private:
  struct Job {
    const std::function<void(int64_t, int64_t)> *fn;
    int64_t n;
    int chunks;
    std::atomic<int> next{0};
    std::atomic<int> done{0};
  };
  /// Runs chunks of `job` until none are left; returns how many it ran.
  static int runChunks(Job &job);
  void workerLoop();

  int threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable workAvailable_;
  std::condition_variable jobFinished_;
  std::deque<std::shared_ptr<Job>> jobs_;
  bool stopping_ = false;
  /// Jobs queued (mirrors jobs_.size() for spinning readers) and the stop
  /// flag, read without the mutex.
  std::atomic<int> queued_{0};
  std::atomic<bool> stoppingFlag_{false};
};

} // namespace cpu
} // namespace zrt

#endif // ZRT_CPU_THREADPOOL_H
