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
#include <vector>

namespace zrt {
namespace {

struct Mapping {
  char *base;
  size_t bytes;
  int fd;
};

using Clock = std::chrono::steady_clock;

std::atomic<unsigned long long> bytesIn{0}, bytesOut{0}, streamNanos{0}, writerNanos{0};

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
  return c;
}

} // namespace zrt
