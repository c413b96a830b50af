//===- ThreadPool.cpp - Worker threads behind ParallelFor -----------------===//
//
// Chunk i of a job of n items over k chunks is [i*n/k, (i+1)*n/k): contiguous,
// balanced to within one item, and the same split whichever thread runs it, so a
// kernel's result does not depend on scheduling.
//
//===----------------------------------------------------------------------===//

#include "cpu/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ZRT_CPU_RELAX() _mm_pause()
#else
#define ZRT_CPU_RELAX() std::this_thread::yield()
#endif

namespace zrt {
namespace cpu {

namespace {
/// How long an idle worker (or a caller waiting for its job's last chunk)
/// polls before it sleeps. Kernels follow each other within microseconds,
/// while waking a sleeping thread takes tens to hundreds of them: without
/// the spin a worker often starts its half of a millisecond product late.
/// ZRT_SPIN_US overrides it (0: sleep at once), as OMP_WAIT_POLICY /
/// GOMP_SPINCOUNT do for OpenMP runtimes.
std::chrono::microseconds spinTime() {
  static const std::chrono::microseconds t = [] {
    const char *env = std::getenv("ZRT_SPIN_US");
    long us = env && *env ? std::strtol(env, nullptr, 10) : 200;
    return std::chrono::microseconds(std::max(0L, us));
  }();
  return t;
}

/// Polls `ready` until it holds or the spin time has passed; returns whether
/// it held.
template <typename Pred> bool spinUntil(Pred ready) {
  if (spinTime().count() == 0)
    return ready();
  auto deadline = std::chrono::steady_clock::now() + spinTime();
  for (int i = 0;; ++i) {
    if (ready())
      return true;
    ZRT_CPU_RELAX();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() >= deadline)
      return ready();
  }
}
} // namespace

ThreadPool::ThreadPool(int threads) : threads_(std::max(1, threads)) {
  for (int i = 1; i < threads_; ++i)
    workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    stoppingFlag_ = true;
  }
  workAvailable_.notify_all();
  for (std::thread &t : workers_)
    t.join();
}

int ThreadPool::runChunks(Job &job) {
  int ran = 0;
  for (int i = job.next.fetch_add(1); i < job.chunks; i = job.next.fetch_add(1)) {
    int64_t begin = job.n * i / job.chunks, end = job.n * (i + 1) / job.chunks;
    (*job.fn)(begin, end);
    ++ran;
  }
  return ran;
}

void ThreadPool::parallelFor(int64_t n,
                             const std::function<void(int64_t, int64_t)> &fn) {
  if (n <= 0)
    return;
  int chunks = int(std::min<int64_t>(n, threads_));
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  job->chunks = chunks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(job);
    ++queued_;
  }
  workAvailable_.notify_all();
  int ran = runChunks(*job);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job->done += ran;
    // The job leaves the queue once all of its chunks are claimed.
    auto it = std::find(jobs_.begin(), jobs_.end(), job);
    if (it != jobs_.end()) {
      jobs_.erase(it);
      --queued_;
    }
  }
  if (spinUntil([&] { return job->done.load() == job->chunks; }))
    return;
  std::unique_lock<std::mutex> lock(mutex_);
  jobFinished_.wait(lock, [&] { return job->done.load() == job->chunks; });
}

void ThreadPool::workerLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (!stopping_ && jobs_.empty()) {
      lock.unlock();
      spinUntil([&] { return stoppingFlag_.load() || queued_.load() > 0; });
      lock.lock();
    }
    workAvailable_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (stopping_)
      return;
    std::shared_ptr<Job> job = jobs_.front();
    lock.unlock();
    int ran = runChunks(*job);
    lock.lock();
    if (job->next.load() >= job->chunks) {
      auto it = std::find(jobs_.begin(), jobs_.end(), job);
      if (it != jobs_.end()) {
        jobs_.erase(it);
        --queued_;
      }
    }
    job->done += ran;
    if (job->done.load() == job->chunks)
      jobFinished_.notify_all();
  }
}

} // namespace cpu
} // namespace zrt
