//===- WatchdogTest.cpp - The collective watchdog ---------------------------===//
//
// A collective that stays in progress past the timeout is reported once, with
// its slot and tag; one that ends in time, or an idle slot, never is. And an
// executor run whose collective is stuck fails with the watchdog's message.
//
//===----------------------------------------------------------------------===//

#include "ProgramWriter.h"

#include "zrt/Executor.h"
#include "zrt/Watchdog.h"
#include "zrt/CpuBackend.h"
#include "zrt/Communicator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

using namespace zrt;
using ::testing::HasSubstr;

namespace {

TEST(Watchdog, ReportsACollectivePastItsTimeoutOnce) {
  std::promise<std::pair<size_t, uint64_t>> fired;
  auto start = std::chrono::steady_clock::now();
  Watchdog w(0.2, 3, [&](size_t slot, uint64_t tag) {
    fired.set_value({slot, tag});
  });
  w.begin(0, 5);
  w.end(0); // finished in time
  w.begin(2, 42);
  std::future<std::pair<size_t, uint64_t>> result = fired.get_future();
  ASSERT_EQ(result.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  EXPECT_EQ(result.get(), (std::pair<size_t, uint64_t>{2, 42}));
  EXPECT_GE(seconds, 0.2);
  EXPECT_LT(seconds, 2.0);
}

TEST(Watchdog, StaysQuietWhileCollectivesFinishInTime) {
  bool fired = false;
  {
    Watchdog w(0.1, 1, [&](size_t, uint64_t) { fired = true; });
    for (int i = 0; i < 30; ++i) {
      Watchdog::Scope scope(&w, 0, uint64_t(i));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_FALSE(fired);
}

/// A communicator whose collectives never complete until cancelled (as when
/// a peer stopped), polling like the MPI path without MPI_THREAD_MULTIPLE.
class StuckCommunicator final : public Communicator {
public:
  std::string name() const override { return "stuck"; }
  int rank() const override { return 0; }
  int worldSize() const override { return 1; }
  int localSize() const override { return 1; }
  Status setup(const std::vector<ProcessGroupDesc> &groups, int) override {
    setGroups(groups);
    return Status::ok();
  }
  Status allGather(const TensorRef &, const TensorRef &,
                   const CommContext &ctx) override {
    return stuck(ctx);
  }
  Status reduceScatter(const TensorRef &, const TensorRef &,
                       const CommContext &ctx) override {
    return stuck(ctx);
  }
  Status allReduce(const TensorRef &, const TensorRef &,
                   const CommContext &ctx) override {
    return stuck(ctx);
  }
  Status broadcast(const TensorRef &, const TensorRef &, int,
                   const CommContext &ctx) override {
    return stuck(ctx);
  }
  Status allToAll(const TensorRef &, const TensorRef &,
                  const CommContext &ctx) override {
    return stuck(ctx);
  }
  Status send(const TensorRef &, int, int, const CommContext &ctx) override {
    return stuck(ctx);
  }
  Status recv(const TensorRef &, int, int, const CommContext &ctx) override {
    return stuck(ctx);
  }
  std::vector<int> failedRanks(bool localOk) override {
    return localOk ? std::vector<int>() : std::vector<int>{0};
  }
  std::vector<std::string> gatherToRoot(const std::string &text) override {
    return {text};
  }
  Status broadcastBytes(void *, uint64_t, int) override { return Status::ok(); }
  void barrier() override {}
  [[noreturn]] void abortJob(int code) override { std::_Exit(code); }

private:
  static Status stuck(const CommContext &ctx) {
    while (!ctx.cancelled->load())
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return Status::error("cancelled");
  }
};

TEST(Watchdog, FailsARunWhoseCollectiveDoesNotComplete) {
  test::LinearModel m = test::makeLinearModel(1);
  std::unique_ptr<Backend> backend = createCpuBackend(1);
  StuckCommunicator comm;
  ExecutorOptions options;
  options.collectiveTimeoutSeconds = 0.3;
  Expected<std::unique_ptr<Executor>> executor =
      Executor::create(m.program, *backend, comm, options);
  ASSERT_TRUE(executor.isOk()) << executor.status().message();
  Status status = (*executor)->run();
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.message(),
            "rank 0: collective AllGather (instruction 0, \"gather.w\") did not "
            "complete within 0.3 s; a rank may have stopped or be running a "
            "different program");
}

} // namespace
