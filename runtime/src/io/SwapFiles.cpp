//===- SwapFiles.cpp - ZeRO-Offload's swap files ---------------------------===//
//
// See SwapFiles.h.
//
//===----------------------------------------------------------------------===//

#include "io/SwapFiles.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <fcntl.h>
#include <mutex>
#include <sys/mman.h>
#include <thread>
#include <unordered_map>
#include <vector>

namespace zrt {
namespace {

struct Mapping {
  char *base;
  size_t bytes;
  int fd;
};

using Clock = std::chrono::steady_clock;

std::atomic<unsigned long long> bytesIn{0}, bytesOut{0}, streamNanos{0}, writerNanos{0},
    readerNanos{0};

unsigned long long nanosSince(Clock::time_point t) {
  return (unsigned long long)std::chrono::duration_cast<std::chrono::nanoseconds>(
             Clock::now() - t)
      .count();
}

std::mutex mappingsMutex;
std::vector<Mapping> &mappings() {
  static std::vector<Mapping> all;
  return all;
}

/// A thread of the process that runs the jobs queued to it, one after the
/// other, beside the streams; started by the first job, it lives as long as
/// the process (never destroyed: it may still run at exit).
template <typename Job> class Worker {
public:
  explicit Worker(void (*run)(const Job &)) : run_(run) {}
  void push(Job job) {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
    if (!started_) {
      started_ = true;
      std::thread([this] { loop(); }).detach();
    }
    wake_.notify_one();
  }

private:
  void loop() {
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return !jobs_.empty(); });
      Job job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      run_(job);
    }
  }
  void (*run_)(const Job &);
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool started_ = false;
};

/// The writes SwapOut queues (a sync_file_range may wait for the device's
/// queue; the kernels must not).
struct WriteJob {
  int fd;
  off64_t offset, bytes;
};
Worker<WriteJob> &writer() {
  static auto *w = new Worker<WriteJob>([](const WriteJob &j) {
    // A descriptor closed meanwhile (its executor gone) fails harmlessly.
    const Clock::time_point t = Clock::now();
    sync_file_range(j.fd, j.offset, j.bytes, SYNC_FILE_RANGE_WRITE);
    writerNanos += nanosSince(t);
  });
  return *w;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 // Linux 5.14
#endif

/// SwapOuts per range start so far: a read-ahead still queued when its
/// range went out again is dropped (it would map the pages back).
std::mutex outMutex;
std::unordered_map<const void *, uint64_t> &outCounts() {
  static std::unordered_map<const void *, uint64_t> counts;
  return counts;
}
uint64_t outCount(const void *p) {
  std::lock_guard<std::mutex> lock(outMutex);
  auto it = outCounts().find(p);
  return it == outCounts().end() ? 0 : it->second;
}

/// The read-aheads SwapIn queues: the reader maps each range's pages in
/// (MADV_POPULATE_WRITE: the pages read from the file where they are not in
/// the page cache, and the page tables filled in one call instead of a fault
/// per page when the kernels touch them). Where the kernel lacks it,
/// MADV_WILLNEED's read-ahead is what remains.
struct ReadJob {
  void *p;
  size_t n;
  uint64_t outs; ///< the range's SwapOuts when it was queued
};
Worker<ReadJob> &reader() {
  static auto *r = new Worker<ReadJob>([](const ReadJob &j) {
    if (outCount(j.p) != j.outs)
      return; // swapped out again before its turn: leave it out
    // A range unmapped meanwhile (its executor gone) fails harmlessly.
    const Clock::time_point t = Clock::now();
    madvise(j.p, j.n, MADV_POPULATE_WRITE);
    readerNanos += nanosSince(t);
  });
  return *r;
}

} // namespace

void registerSwapFile(void *base, size_t bytes, int fd) {
  std::lock_guard<std::mutex> lock(mappingsMutex);
  mappings().push_back({static_cast<char *>(base), bytes, fd});
}

void unregisterSwapFile(void *base) {
  std::lock_guard<std::mutex> lock(mappingsMutex);
  std::vector<Mapping> &all = mappings();
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].base == base) {
      all.erase(all.begin() + long(i));
      return;
    }
}

void swapInPages(void *p, size_t n) {
  const Clock::time_point t = Clock::now();
  madvise(p, n, MADV_WILLNEED); // advice: a failure costs only speed
  reader().push({p, n, outCount(p)});
  bytesIn += n;
  streamNanos += nanosSince(t);
}

void swapOutPages(void *p, size_t n) {
  const Clock::time_point t = Clock::now();
  char *c = static_cast<char *>(p);
  {
    std::lock_guard<std::mutex> lock(mappingsMutex);
    for (const Mapping &m : mappings())
      if (c >= m.base && c + n <= m.base + m.bytes) {
        // The dirty pages' writes, started by the writer thread.
        writer().push({m.fd, off64_t(c - m.base), off64_t(n)});
        break;
      }
  }
  {
    std::lock_guard<std::mutex> lock(outMutex);
    ++outCounts()[p];
  }
  // Unmapped from this process (its RSS); the bytes stay in the page cache
  // (and, once written, the file), and a later touch maps them again.
  madvise(p, n, MADV_DONTNEED);
  bytesOut += n;
  streamNanos += nanosSince(t);
}

SwapCounters swapCounters() {
  SwapCounters c;
  c.bytesIn = bytesIn.load();
  c.bytesOut = bytesOut.load();
  c.streamSeconds = double(streamNanos.load()) * 1e-9;
  c.writerSeconds = double(writerNanos.load()) * 1e-9;
  c.readerSeconds = double(readerNanos.load()) * 1e-9;
  return c;
}

} // namespace zrt
