//===- TrainingRunTest.cpp - The training mode (zrt/TrainingRun.h) --------===//
//
// planTrainingSteps, resumeTraining and runTraining on the CPU backend with
// the single-process communicator, on the test support's training program
// (squared error of w * x against y, clipped gradients, AdamW, a
// WarmupDecayLR schedule): every step's loss, gradient norm and learning
// rate against the same run computed here in double, step by step from the
// optimizer's one-step formula; a loss that is not finite stops the run at
// its step; checkpoints when due, and a resumed run that goes on as the
// uninterrupted one; the plan's errors. Evaluations, on a token program whose
// loss is the mean of its token ids: every N steps and after the last, each
// the mean over its batches of the windows TokenData draws.
//
//===----------------------------------------------------------------------===//

#include "ProgramWriter.h"
#include "RunFixture.h"

#include "zrt/Bindings.h"
#include "zrt/Communicator.h"
#include "zrt/CpuBackend.h"
#include "zrt/Executor.h"
#include "zrt/TensorFile.h"
#include "zrt/TrainingCheckpoint.h"
#include "zrt/TrainingRun.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <unistd.h>

using namespace zrt;
using ::testing::HasSubstr;

namespace {

constexpr int64_t kB = 2, kD = 4, kSteps = 4;

std::string tempDir() {
  char pattern[] = "/tmp/zrt-training-run-test-XXXXXX";
  const char *dir = mkdtemp(pattern);
  return dir ? dir : "/tmp";
}

float xAt(int64_t s, int64_t i, int64_t j) {
  return float(std::sin(1.0 + 0.7 * s + 1.3 * i + 0.37 * j));
}
float yAt(int64_t s, int64_t i, int64_t j) {
  return float(0.5 * std::cos(0.4 + 0.9 * s + 0.6 * i + 0.21 * j));
}
std::vector<float> initialWeights() {
  std::vector<float> w;
  for (int64_t j = 0; j < kD; ++j)
    w.push_back(float(0.8 * std::sin(0.5 + 1.7 * j)));
  return w;
}

/// Records what rank 0 is given.
struct RecordingSink : TrainingSink {
  std::vector<StepRecord> steps;
  Status record(const StepRecord &r) override {
    steps.push_back(r);
    return Status::ok();
  }
  Status recordEval(const EvalRecord &) override {
    return Status::error("no evaluation was asked for");
  }
};

/// The run computed in double: step t's loss and gradient over its B rows
/// at the weights so far, clip_grad_norm_'s scale, DeepSpeed's
/// WarmupDecayLR (warm-up 3 steps from 0.01 to 0.1, decay to step 8), and
/// one AdamW step (beta1 0.9, beta2 0.999, eps 1e-8, weight decay 0.01).
struct Trajectory {
  std::vector<double> loss, gradNorm, lr;
};
Trajectory expectedRun(int64_t steps) {
  Trajectory r;
  const std::vector<float> w0 = initialWeights();
  std::vector<double> w(w0.begin(), w0.end());
  std::vector<double> m(size_t(kD), 0.0), v(size_t(kD), 0.0);
  for (int64_t t = 1; t <= steps; ++t) {
    const int64_t s = t - 1, k = t - 2;
    double loss = 0;
    std::vector<double> grad(size_t(kD), 0.0);
    for (int64_t i = 0; i < kB; ++i)
      for (int64_t j = 0; j < kD; ++j) {
        const double x = xAt(s, i, j);
        const double d = w[size_t(j)] * x - yAt(s, i, j);
        loss += d * d / double(kB);
        grad[size_t(j)] += 2.0 / double(kB) * d * x;
      }
    double norm = 0;
    for (double g : grad)
      norm += g * g;
    norm = std::sqrt(norm);
    const double scale = std::min(1.0 / (norm + 1e-6), 1.0);
    const double gamma = k < 0   ? 0.0
                         : k < 3 ? double(k) / 3.0
                                 : std::max(0.0, (8.0 - k) / 5.0);
    const double lr = double(float(0.01 + 0.09 * gamma));
    for (int64_t j = 0; j < kD; ++j) {
      const double g = grad[size_t(j)] * scale;
      w[size_t(j)] *= 1 - lr * 0.01;
      m[size_t(j)] = 0.9 * m[size_t(j)] + 0.1 * g;
      v[size_t(j)] = 0.999 * v[size_t(j)] + 0.001 * g * g;
      w[size_t(j)] -=
          lr / (1 - std::pow(0.9, double(t))) * m[size_t(j)] /
          (std::sqrt(v[size_t(j)]) / std::sqrt(1 - std::pow(0.999, double(t))) +
           1e-8);
    }
    r.loss.push_back(loss);
    r.gradNorm.push_back(norm);
    r.lr.push_back(lr);
  }
  return r;
}

/// The training program, its weights and kSteps steps of data in a
/// directory; load() gives a fresh executor with the weights bound.
struct TrainingSetup {
  std::string dir = tempDir();
  test::TrainingModel model = test::makeTrainingModel(1, kB, kD);
  std::unique_ptr<Backend> backend = createCpuBackend(2);
  std::unique_ptr<Communicator> comm = createLocalCommunicator();
  Expected<Program> program = Status::error("not loaded");
  std::unique_ptr<Executor> executor;
  RunContext context;
  ~TrainingSetup() {
    executor.reset();
    if (dir.rfind("/tmp/zrt-", 0) == 0) // made by tempDir()
      std::filesystem::remove_all(dir);
  }

  /// `poisonStep` (1-based; 0: none): a y of NaN in that step.
  Status write(int64_t poisonStep = 0) {
    ZRT_RETURN_IF_ERROR(test::writeFile(dir + "/train.zrt",
                                        test::serializeProgram(model.program)));
    std::vector<float> w = initialWeights();
    ZRT_RETURN_IF_ERROR(writeSafetensors(dir + "/weights.safetensors",
                                         {{"w", DType::F32, {kD}, w.data()}}));
    std::vector<float> x, y;
    for (int64_t s = 0; s < kSteps; ++s)
      for (int64_t i = 0; i < kB; ++i)
        for (int64_t j = 0; j < kD; ++j) {
          x.push_back(xAt(s, i, j));
          y.push_back(s + 1 == poisonStep
                          ? std::numeric_limits<float>::quiet_NaN()
                          : yAt(s, i, j));
        }
    return writeSafetensors(dir + "/data.safetensors",
                            {{"x", DType::F32, {kSteps, kB, kD}, x.data()},
                             {"y", DType::F32, {kSteps, kB, kD}, y.data()}});
  }
  Status load() {
    context.comm = comm.get();
    return test::loadProgramWithWeights(dir + "/train.zrt",
                                        dir + "/weights.safetensors", *backend,
                                        *comm, program, executor);
  }
  TrainingPlanOptions planOptions(int64_t steps) const {
    TrainingPlanOptions o;
    o.model = dir + "/train.zrt";
    o.data = dir + "/data.safetensors";
    o.steps = steps;
    return o;
  }
};

void expectSteps(const std::vector<StepRecord> &got, const Trajectory &want,
                 int64_t first) {
  for (size_t n = 0; n < got.size(); ++n) {
    const StepRecord &r = got[n];
    const size_t t = size_t(first) + n;
    ASSERT_LE(t, want.loss.size());
    EXPECT_EQ(r.step, int64_t(t));
    EXPECT_NEAR(r.loss, want.loss[t - 1],
                1e-5 * std::max(1.0, want.loss[t - 1]))
        << "step " << t;
    ASSERT_TRUE(r.gradNorm && r.lr) << "step " << t;
    EXPECT_NEAR(*r.gradNorm, want.gradNorm[t - 1], 1e-5) << "step " << t;
    EXPECT_NEAR(*r.lr, want.lr[t - 1], 1e-7) << "step " << t;
    EXPECT_FALSE(r.skipped); // not an fp16 program
    EXPECT_DOUBLE_EQ(r.samplesPerSecond,
                     r.seconds > 0 ? double(kB) / r.seconds : 0);
  }
}

TEST(TrainingRun, EveryStepMatchesTheRunComputedInDouble) {
  TrainingSetup run;
  ASSERT_TRUE(run.write().isOk());
  ASSERT_TRUE(run.load().isOk());
  TrainingPlan plan;
  Status planned = planTrainingSteps(*run.program, 0, run.planOptions(0), plan);
  ASSERT_TRUE(planned.isOk()) << planned.message();
  EXPECT_EQ(plan.totalSteps, kSteps); // every step of the data
  EXPECT_EQ(plan.firstStep, 1);
  RecordingSink sink;
  RunTimings timings;
  std::atomic<int64_t> current{0};
  run.context.currentStep = &current;
  Expected<TrainingOutcome> outcome = runTraining(
      *run.executor, run.context, plan, TrainingRunOptions(), sink, timings);
  ASSERT_TRUE(outcome.isOk()) << outcome.status().message();
  EXPECT_EQ(outcome->nonFiniteStep, 0);
  ASSERT_EQ(sink.steps.size(), size_t(kSteps));
  expectSteps(sink.steps, expectedRun(kSteps), 1);
  EXPECT_EQ(timings.iterationSeconds.size(), size_t(kSteps));
  EXPECT_EQ(current.load(), kSteps);
}

TEST(TrainingRun, ANonFiniteLossStopsTheRunAtItsStep) {
  TrainingSetup run;
  ASSERT_TRUE(run.write(/*poisonStep=*/3).isOk());
  ASSERT_TRUE(run.load().isOk());
  TrainingPlan plan;
  ASSERT_TRUE(
      planTrainingSteps(*run.program, 0, run.planOptions(0), plan).isOk());
  RecordingSink sink;
  RunTimings timings;
  Expected<TrainingOutcome> outcome = runTraining(
      *run.executor, run.context, plan, TrainingRunOptions(), sink, timings);
  ASSERT_TRUE(outcome.isOk()) << outcome.status().message();
  EXPECT_EQ(outcome->nonFiniteStep, 3);
  EXPECT_TRUE(std::isnan(outcome->nonFiniteLoss));
  ASSERT_EQ(sink.steps.size(), 2u); // the steps before it
  expectSteps(sink.steps, expectedRun(2), 1);
}

TEST(TrainingRun, AResumedRunGoesOnAsTheUninterruptedOne) {
  TrainingSetup run;
  ASSERT_TRUE(run.write().isOk());
  ASSERT_TRUE(run.load().isOk());
  // Two steps, saving every step into dir/ckpt.
  TrainingPlan plan;
  ASSERT_TRUE(
      planTrainingSteps(*run.program, 0, run.planOptions(2), plan).isOk());
  TrainingRunOptions options;
  options.saveDir = run.dir + "/ckpt";
  options.saveEvery = 1;
  RecordingSink first;
  RunTimings timings;
  Expected<TrainingOutcome> outcome =
      runTraining(*run.executor, run.context, plan, options, first, timings);
  ASSERT_TRUE(outcome.isOk()) << outcome.status().message();
  EXPECT_TRUE(std::filesystem::exists(run.dir + "/ckpt/step-00000001"));
  Expected<CheckpointInfo> latest = readLatestCheckpoint(options.saveDir);
  ASSERT_TRUE(latest.isOk()) << latest.status().message();
  EXPECT_EQ(latest->step, 2);

  // A fresh executor resumes from step 2's checkpoint and runs steps 3, 4.
  ASSERT_TRUE(run.load().isOk());
  TrainingPlan resumed;
  ASSERT_TRUE(
      planTrainingSteps(*run.program, 0, run.planOptions(kSteps), resumed)
          .isOk());
  Status status =
      resumeTraining(*run.executor, *run.comm, options.saveDir, resumed);
  ASSERT_TRUE(status.isOk()) << status.message();
  EXPECT_EQ(resumed.firstStep, 3);
  RecordingSink second;
  outcome = runTraining(*run.executor, run.context, resumed,
                        TrainingRunOptions(), second, timings);
  ASSERT_TRUE(outcome.isOk()) << outcome.status().message();
  ASSERT_EQ(second.steps.size(), 2u);
  expectSteps(second.steps, expectedRun(kSteps), 3);

  // Resuming at the last step asks for nothing more.
  TrainingPlan done;
  ASSERT_TRUE(
      planTrainingSteps(*run.program, 0, run.planOptions(2), done).isOk());
  status = resumeTraining(*run.executor, *run.comm, options.saveDir, done);
  EXPECT_THAT(
      status.message(),
      HasSubstr("the checkpoint is at step 2, --steps 2 asks for no more"));
}

TEST(TrainingRun, PlanErrorsNameTheOption) {
  TrainingSetup run;
  ASSERT_TRUE(run.write().isOk());
  ASSERT_TRUE(run.load().isOk());
  TrainingPlan plan;
  Status status =
      planTrainingSteps(*run.program, 0, run.planOptions(kSteps + 1), plan);
  EXPECT_THAT(status.message(),
              HasSubstr("--steps 5 asks for more steps than --data " + run.dir +
                        "/data.safetensors holds (4)"));
  // No data and no inputs given: the program's inputs are named.
  TrainingPlanOptions none;
  none.model = "train.zrt";
  TrainingPlan bare;
  status = planTrainingSteps(*run.program, 0, none, bare);
  EXPECT_EQ(status.message(),
            "train.zrt is a training program with inputs (x, y); pass "
            "--data PATH (or --input for a single step)");
  // With inputs bound already: one step.
  none.inputsGiven = true;
  ASSERT_TRUE(planTrainingSteps(*run.program, 0, none, bare).isOk());
  EXPECT_EQ(bare.totalSteps, 1);
  EXPECT_FALSE(bare.data || bare.tokens || bare.evalTokens);
}

TEST(TrainingRun, ASinkErrorStopsTheRun) {
  struct FailingSink : RecordingSink {
    Status record(const StepRecord &r) override {
      (void)RecordingSink::record(r);
      return Status::error("sink full");
    }
  };
  TrainingSetup run;
  ASSERT_TRUE(run.write().isOk());
  ASSERT_TRUE(run.load().isOk());
  TrainingPlan plan;
  ASSERT_TRUE(
      planTrainingSteps(*run.program, 0, run.planOptions(0), plan).isOk());
  FailingSink sink;
  RunTimings timings;
  Expected<TrainingOutcome> outcome = runTraining(
      *run.executor, run.context, plan, TrainingRunOptions(), sink, timings);
  ASSERT_FALSE(outcome.isOk());
  EXPECT_EQ(outcome.status().message(), "sink full");
  EXPECT_EQ(sink.steps.size(), 1u);
}

/// A token program: input_ids i64[2, 3]; loss = ReduceMean(Cast(input_ids))
/// (both run by an evaluation step too); no parameters.
Program tokenMeanProgram() {
  Program p;
  p.path = "token-mean.zrt";
  p.version = kFormatVersion;
  p.arenas = {{"activations", 128, 128, 128}};
  p.buffers = {{"input_ids", DType::I64, {2, 3}, 0, 0},
               {"ids.f", DType::F32, {2, 3}, 0, 64},
               {"loss", DType::F32, {}, 0, 96}};
  p.streams = {{"compute", StreamKind::Compute}};
  p.inputs = {{"input_ids", 0}};
  p.outputs = {{"loss", 2}};
  p.training = TrainingDesc{"loss", "", "", 1, ""};
  Instruction cast = test::makeInstruction("Cast", 0, {0}, {1}, "cast");
  Instruction mean = test::makeInstruction("ReduceMean", 0, {1}, {2}, "mean");
  mean.attrs.set("keepdims", AttrValue{{0}, {}, ""});
  cast.eval = mean.eval = true;
  p.instructions = {cast, mean};
  return p;
}

/// The mean of the 2 windows of 3 tokens that TokenData draws for `step`.
double windowMean(const std::vector<uint16_t> &tokens, uint64_t seed,
                  int64_t step) {
  double sum = 0;
  for (int64_t row = 0; row < 2; ++row) {
    const uint64_t first = tokenWindow(seed, step, row, tokens.size() - 3 + 1);
    for (uint64_t t = 0; t < 3; ++t)
      sum += tokens[first + t];
  }
  return sum / 6;
}

TEST(TrainingRun, EvaluatesEveryNStepsAndAfterTheLast) {
  const std::string dir = tempDir();
  std::vector<uint16_t> train, eval;
  for (int i = 0; i < 64; ++i)
    train.push_back(uint16_t((i * 37) % 101));
  for (int i = 0; i < 32; ++i)
    eval.push_back(uint16_t(1000 + (i * 13) % 29));
  auto writeTokens = [](const std::string &path,
                        const std::vector<uint16_t> &t) {
    FILE *f = std::fopen(path.c_str(), "wb");
    ASSERT_TRUE(f);
    ASSERT_EQ(std::fwrite(t.data(), 2, t.size(), f), t.size());
    ASSERT_EQ(std::fclose(f), 0);
  };
  writeTokens(dir + "/train.bin", train);
  writeTokens(dir + "/eval.bin", eval);
  std::unique_ptr<Backend> backend = createCpuBackend(1);
  std::unique_ptr<Communicator> comm = createLocalCommunicator();
  Program program = tokenMeanProgram();
  ASSERT_TRUE(validateProgram(program, &backend->kernels()).isOk());
  Expected<std::unique_ptr<Executor>> executor =
      Executor::create(program, *backend, *comm);
  ASSERT_TRUE(executor.isOk()) << executor.status().message();

  TrainingPlanOptions planOptions;
  planOptions.tokens = dir + "/train.bin";
  planOptions.evalTokens = dir + "/eval.bin";
  planOptions.seed = 7;
  planOptions.steps = 5;
  TrainingPlan plan;
  Status planned = planTrainingSteps(program, 0, planOptions, plan);
  ASSERT_TRUE(planned.isOk()) << planned.message();
  TrainingRunOptions options;
  options.evalEvery = 2;
  options.evalBatches = 3;
  struct EvalSink : RecordingSink {
    std::vector<EvalRecord> evals;
    std::vector<int64_t> order; ///< step records as +step, evaluations as -step
    Status record(const StepRecord &r) override {
      order.push_back(r.step);
      return RecordingSink::record(r);
    }
    Status recordEval(const EvalRecord &r) override {
      order.push_back(-r.step);
      evals.push_back(r);
      return Status::ok();
    }
  } sink;
  RunContext context;
  context.comm = comm.get();
  RunTimings timings;
  Expected<TrainingOutcome> outcome =
      runTraining(**executor, context, plan, options, sink, timings);
  ASSERT_TRUE(outcome.isOk()) << outcome.status().message();
  // Evaluations after steps 2 and 4 and after the last, each after its step.
  EXPECT_EQ(sink.order, (std::vector<int64_t>{1, 2, -2, 3, 4, -4, 5, -5}));
  ASSERT_EQ(sink.steps.size(), 5u);
  for (int64_t s = 0; s < 5; ++s)
    EXPECT_NEAR(sink.steps[size_t(s)].loss, windowMean(train, 7, s), 1e-4)
        << "step " << s + 1;
  // Each evaluation: the mean over its batches, batch e the windows of step e
  // of the evaluation file, whatever the training step.
  const double want = (windowMean(eval, 7, 0) + windowMean(eval, 7, 1) +
                       windowMean(eval, 7, 2)) /
                      3;
  ASSERT_EQ(sink.evals.size(), 3u);
  for (const EvalRecord &e : sink.evals) {
    EXPECT_NEAR(e.loss, want, 1e-4) << "after step " << e.step;
    EXPECT_EQ(e.batches, 3);
    EXPECT_GE(e.seconds, 0);
  }
  executor->reset();
  plan = TrainingPlan();
  if (dir.rfind("/tmp/zrt-", 0) == 0) // made by tempDir()
    std::filesystem::remove_all(dir);
}

TEST(TrainingRun, SamplesAndTokensPerStep) {
  test::TrainingModel model = test::makeTrainingModel(2, 3, kD);
  EXPECT_EQ(samplesPerStep(model.program), 6.0); // b x world
  EXPECT_EQ(tokensPerStep(model.program), 0.0);  // f32 inputs: not token ids
}

} // namespace
