//===- ForwardRunTest.cpp - The forward mode (zrt/ForwardRun.h) -----------===//
//
// runForward on the CPU backend with the single-process communicator: the
// outputs of the last run against the linear model's y = x @ w + b computed
// by the test support, one timing per timed run, inputs bound again before
// each run after the first (an input file gone by then is an error naming
// it, after the runs before it).
//
//===----------------------------------------------------------------------===//

#include "ProgramWriter.h"
#include "RunFixture.h"

#include "zrt/Bindings.h"
#include "zrt/Communicator.h"
#include "zrt/CpuBackend.h"
#include "zrt/Executor.h"
#include "zrt/ForwardRun.h"
#include "zrt/TensorFile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <unistd.h>

using namespace zrt;
using ::testing::HasSubstr;

namespace {

std::string tempDir() {
  char pattern[] = "/tmp/zrt-forward-run-test-XXXXXX";
  const char *dir = mkdtemp(pattern);
  return dir ? dir : "/tmp";
}

/// The linear model of the test support, loaded with its weights and input
/// bound, ready to run.
struct LinearRun {
  std::string dir = tempDir();
  test::LinearModel model = test::makeLinearModel(1);
  std::unique_ptr<Backend> backend = createCpuBackend(2);
  std::unique_ptr<Communicator> comm = createLocalCommunicator();
  Expected<Program> program = Status::error("not loaded");
  std::unique_ptr<Executor> executor;
  std::vector<InputSource> inputs;
  ~LinearRun() {
    executor.reset();
    if (dir.rfind("/tmp/zrt-", 0) == 0) // made by tempDir()
      std::filesystem::remove_all(dir);
  }

  Status load() {
    ZRT_RETURN_IF_ERROR(test::writeLinearModel(dir, 1));
    ZRT_RETURN_IF_ERROR(test::loadProgramWithWeights(
        dir + "/model.zrt", dir + "/weights.safetensors", *backend, *comm,
        program, executor));
    inputs = {{"x", dir + "/x.npy"}};
    return bindInputs(*executor, inputs);
  }
  std::vector<float> output(const std::string &name) {
    const BindingDesc *out = program->findOutput(name);
    std::vector<float> values(size_t(executor->buffer(out->buffer).numel()));
    EXPECT_TRUE(
        executor->readBuffer(out->buffer, values.data(), values.size() * 4)
            .isOk());
    return values;
  }
};

TEST(ForwardRun, WarmupAndRepeatGiveTheOutputsAndOneTimingPerTimedRun) {
  LinearRun run;
  ASSERT_TRUE(run.load().isOk());
  RunContext context;
  context.comm = run.comm.get();
  ForwardOptions options;
  options.inputs = run.inputs;
  options.warmup = 2;
  options.repeat = 3;
  RunTimings timings;
  Status status = runForward(*run.executor, context, options, timings);
  ASSERT_TRUE(status.isOk()) << status.message();
  EXPECT_EQ(timings.iterationSeconds.size(), 3u);
  for (double s : timings.iterationSeconds)
    EXPECT_GT(s, 0);
  EXPECT_TRUE(timings.iterationBubbles.empty()); // not a pipeline stage
  std::vector<float> y = run.output("y");
  ASSERT_EQ(y.size(), run.model.y.size());
  for (size_t i = 0; i < y.size(); ++i)
    EXPECT_NEAR(y[i], run.model.y[i], 1e-5f) << "y[" << i << "]";
  // One rank: the all-reduced sum is y itself.
  std::vector<float> ySum = run.output("y_sum");
  for (size_t i = 0; i < ySum.size(); ++i)
    EXPECT_NEAR(ySum[i], run.model.y[i], 1e-5f) << "y_sum[" << i << "]";
}

TEST(ForwardRun, BindsTheInputsAgainBeforeEveryRunAfterTheFirst) {
  LinearRun run;
  ASSERT_TRUE(run.load().isOk());
  // The input was bound by load(); the second run reads it again.
  ASSERT_EQ(std::remove((run.dir + "/x.npy").c_str()), 0);
  RunContext context;
  context.comm = run.comm.get();
  ForwardOptions options;
  options.inputs = run.inputs;
  options.repeat = 2;
  RunTimings timings;
  Status status = runForward(*run.executor, context, options, timings);
  ASSERT_FALSE(status.isOk());
  EXPECT_THAT(status.message(), HasSubstr(run.dir + "/x.npy"));
  EXPECT_EQ(timings.iterationSeconds.size(), 1u); // the first run's
}

TEST(ForwardRun, NoTimedRunRunsNothing) {
  LinearRun run;
  ASSERT_TRUE(run.load().isOk());
  RunContext context;
  context.comm = run.comm.get();
  ForwardOptions options;
  options.repeat = 0;
  RunTimings timings;
  ASSERT_TRUE(runForward(*run.executor, context, options, timings).isOk());
  EXPECT_TRUE(timings.iterationSeconds.empty());
  EXPECT_FALSE(run.executor->stats().wallSeconds > 0);
}

TEST(RunControl, ControlTagsNameTheStepAndTheTrainingStep) {
  EXPECT_EQ(describeControlTag(controlTag(kStartRun)),
            "barrier before the run");
  EXPECT_EQ(describeControlTag(controlTag(kStartStep, 12)),
            "barrier before training step 12");
  EXPECT_EQ(controlTag(kExchangeLoss, 3), uint64_t(kExchangeLoss) | 3u << 8);
}

} // namespace
