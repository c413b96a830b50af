//===- ThreadPoolTest.cpp - ParallelFor under concurrent callers ----------===//
//
// Every index is visited exactly once, ranges are contiguous and balanced, and
// several streams (threads) using the pool at once, or nested calls from inside a
// chunk, all finish.
//
//===----------------------------------------------------------------------===//

#include "cpu/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

using zrt::cpu::ThreadPool;

namespace {

TEST(ThreadPool, VisitsEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.numThreads(), threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> seen(size_t(n) + 1);
      std::atomic<int> calls{0};
      pool.parallelFor(n, [&](int64_t b, int64_t e) {
        ++calls;
        EXPECT_LT(b, e);
        for (int64_t i = b; i < e; ++i)
          ++seen[size_t(i)];
      });
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(seen[size_t(i)].load(), 1) << "n=" << n << " i=" << i;
      EXPECT_EQ(calls.load(), int(std::min<int64_t>(n, threads)));
    }
  }
}

TEST(ThreadPool, ServesConcurrentAndNestedCallers) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> streams;
  for (int s = 0; s < 4; ++s)
    streams.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep)
        pool.parallelFor(10, [&](int64_t b, int64_t e) {
          pool.parallelFor(e - b, [&](int64_t ib, int64_t ie) {
            total += ie - ib;
          });
        });
    });
  for (std::thread &t : streams)
    t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 10);
}

} // namespace
