//===- TrainingRun.h - The training mode: optimizer steps -------*- C++ -*-===//
//
// The training mode (a program with a `training` table): each run of the
// program is one optimizer step (its gradient accumulation is inside the
// program); parameters, optimizer state and the step counter stay in their
// buffers between steps. planTrainingSteps() says where each step's inputs
// come from and how many steps run, resumeTraining() starts after a
// checkpoint's step, and runTraining() runs the steps: the loss (the mean
// over ranks) and the step's figures go to a TrainingSink on rank 0, an
// evaluation runs every N steps, a checkpoint is written when one is due.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TRAININGRUN_H
#define ZRT_TRAININGRUN_H

#include "zrt/Communicator.h"
#include "zrt/Executor.h"
#include "zrt/Program.h"
#include "zrt/RunControl.h"
#include "zrt/Status.h"
#include "zrt/TokenData.h"
#include "zrt/TrainingData.h"

#include <cstdint>
#include <optional>
#include <string>

namespace zrt {

/// What one optimizer step measured (rank 0's view).
struct StepRecord {
  int64_t step = 0; ///< 1-based
  double loss = 0;  ///< mean over ranks
  std::optional<double> gradNorm, lr;
  /// fp16: the step's loss scale, and whether it overflowed and was skipped.
  std::optional<double> lossScale;
  std::optional<bool> skipped;
  double seconds = 0; ///< the slowest rank's run() time
  double samplesPerSecond = 0;
  double tokensPerSecond = 0; ///< 0: the inputs are not token ids
  /// The product kernels' floating-point operations of the step on every
  /// rank (the compiler's count) per second; 0: none counted.
  double flopsPerSecond = 0;
  /// Model FLOPs utilization: flopsPerSecond over the ranks' peak, when known.
  std::optional<double> mfu;
};

/// One evaluation: the mean loss over the evaluation batches after
/// optimizer step `step` (rank 0's view, each batch's loss the mean over
/// ranks).
struct EvalRecord {
  int64_t step = 0;
  double loss = 0;
  int64_t batches = 0;
  double seconds = 0; ///< the whole evaluation, on rank 0
};

/// Where rank 0's records go (zero-run: its log lines and --log-json). An
/// error from it stops the run.
class TrainingSink {
public:
  virtual ~TrainingSink();
  virtual Status record(const StepRecord &record) = 0;
  /// After the record of the step it followed.
  virtual Status recordEval(const EvalRecord &record) = 0;
};

/// Where a training run's inputs come from and how many steps it runs.
struct TrainingPlanOptions {
  std::string model;      ///< the program file, for messages
  std::string data;       ///< safetensors of [steps, B, ...] per input
  std::string tokens;     ///< or a token file, windows drawn per step
  std::string evalTokens; ///< the evaluation batches' token file
  int tokenBytes = 2;     ///< 2: u16 tokens, 4: u32
  uint64_t seed = 0;
  bool nextLabels = false;
  int64_t steps = 0;        ///< 0: every step of `data`, else 1
  bool inputsGiven = false; ///< the inputs are bound already (one step)
};

/// A planned training run: each step's inputs (none: bound already) and
/// the steps, `firstStep` to `totalSteps` (1-based).
struct TrainingPlan {
  std::optional<TrainingData> data;
  std::optional<TokenData> tokens;
  std::optional<TokenData> evalTokens;
  int64_t totalSteps = 1;
  int64_t firstStep = 1; ///< after a resumed checkpoint's step
};

/// Opens the data (this rank reads its data-parallel replica's rows; a
/// pipeline's stages all read them), checks it holds the steps asked for and
/// its token ids, and sets a schedule's total_num_steps "auto" to the run's
/// steps. Errors name the option and say what to do.
Status planTrainingSteps(Program &program, int rank,
                         const TrainingPlanOptions &options,
                         TrainingPlan &plan);

/// The latest checkpoint in `dir` (zrt/TrainingCheckpoint.h) replaces the
/// parameters and optimizer state, and the plan goes on from the step after
/// it; an error when it is at or past the plan's last step.
Status resumeTraining(Executor &executor, const Communicator &comm,
                      const std::string &dir, TrainingPlan &plan);

struct TrainingRunOptions {
  int64_t evalEvery = 1;   ///< evaluate every N steps and after the last
  int64_t evalBatches = 8; ///< batches of each evaluation
  std::string saveDir;     ///< checkpoints (every rank writes); "": none
  int64_t saveEvery = 0;   ///< 0: after the last step only
  /// Compare the ranks' collectives after every step; a difference ends the
  /// job (reported through RunContext::reportError).
  bool checkCollectives = false;
  /// Every rank's peak FLOP/s together, for the MFU; 0: unknown.
  double peakFlopsPerSecond = 0;
};

/// How a training run stopped without an error.
struct TrainingOutcome {
  /// The step whose mean loss was not finite (and not an fp16 skip): the
  /// run stopped there, after recording the steps before it; 0: none.
  int64_t nonFiniteStep = 0;
  double nonFiniteLoss = 0;
};

/// Runs steps plan.firstStep..plan.totalSteps on every rank. Each step:
/// its inputs bound, a barrier, the run, the loss agreed on (the mean over
/// ranks, summed in rank order) with the slowest rank's time, the
/// collectives compared and a checkpoint written when due, then an
/// evaluation when due (its batches reuse the step's outputs' bytes), and
/// rank 0's records to `sink`. Returns the first error; the caller ends the
/// job then.
Expected<TrainingOutcome> runTraining(Executor &executor,
                                      const RunContext &context,
                                      TrainingPlan &plan,
                                      const TrainingRunOptions &options,
                                      TrainingSink &sink, RunTimings &timings);

/// The value of the program's f32 scalar output `name`.
Expected<float> readScalarOutput(const Executor &executor,
                                 const std::string &name);

/// Samples per optimizer step: dim 0 of the first program input times the
/// data-parallel size (B of the --data layout); 0 for a program without
/// inputs.
double samplesPerStep(const Program &program);
/// Tokens per optimizer step: samplesPerStep() times the sequence length,
/// for a program whose first input is integer [batch, sequence] (token
/// ids); else 0.
double tokensPerStep(const Program &program);

} // namespace zrt

#endif // ZRT_TRAININGRUN_H
