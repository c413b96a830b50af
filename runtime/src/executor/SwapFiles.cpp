//===- SwapFiles.cpp - ZeRO-Offload's swap files ---------------------------===//
//
// See SwapFiles.h.
//
//===----------------------------------------------------------------------===//

#include "executor/SwapFiles.h"

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

/// The writes SwapOut queues, started by one thread of the process (a
/// sync_file_range may wait for the device's queue; the kernels must not).
struct Writer {
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::pair<int, std::pair<off64_t, off64_t>>> ranges; // fd, offset, bytes
  bool started = false;

  void push(int fd, off64_t offset, off64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex);
    ranges.push_back({fd, {offset, bytes}});
    if (!started) {
      started = true;
      std::thread([this] { loop(); }).detach(); // lives as long as the process
    }
    wake.notify_one();
  }
  void loop() {
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex);
      wake.wait(lock, [&] { return !ranges.empty(); });
      auto [fd, range] = ranges.front();
      ranges.pop_front();
      lock.unlock();
      // A descriptor closed meanwhile (its executor gone) fails harmlessly.
      const Clock::time_point t = Clock::now();
      sync_file_range(fd, range.first, range.second, SYNC_FILE_RANGE_WRITE);
      writerNanos += nanosSince(t);
    }
  }
};

Writer &writer() {
  static Writer *w = new Writer; // never destroyed: its thread may still run at exit
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

/// The read-aheads SwapIn queues: one thread of the process maps each range's
/// pages in (MADV_POPULATE_WRITE: the pages read from the file where they are
/// not in the page cache, and the page tables filled in one call instead of a
/// fault per page when the kernels touch them), beside the streams. Where the
/// kernel lacks it, MADV_WILLNEED's read-ahead is what remains.
struct Reader {
  std::mutex mutex;
  std::condition_variable wake;
  struct Request {
    void *p;
    size_t n;
    uint64_t outs; ///< the range's SwapOuts when it was queued
  };
  std::deque<Request> requests;
  bool started = false;

  void push(void *p, size_t n) {
    const uint64_t outs = outCount(p);
    std::lock_guard<std::mutex> lock(mutex);
    requests.push_back({p, n, outs});
    if (!started) {
      started = true;
      std::thread([this] { loop(); }).detach(); // lives as long as the process
    }
    wake.notify_one();
  }
  void loop() {
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex);
      wake.wait(lock, [&] { return !requests.empty(); });
      Request r = requests.front();
      requests.pop_front();
      lock.unlock();
      if (outCount(r.p) != r.outs)
        continue; // swapped out again before its turn: leave it out
      // A range unmapped meanwhile (its executor gone) fails harmlessly.
      const Clock::time_point t = Clock::now();
      madvise(r.p, r.n, MADV_POPULATE_WRITE);
      readerNanos += nanosSince(t);
    }
  }
};

Reader &reader() {
  static Reader *r = new Reader; // never destroyed: its thread may still run at exit
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
  reader().push(p, n);
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
        writer().push(m.fd, off64_t(c - m.base), off64_t(n));
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
