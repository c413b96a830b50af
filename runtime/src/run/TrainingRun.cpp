//===- TrainingRun.cpp - The training mode: optimizer steps ---------------===//
//
// Each step: its inputs, a barrier, the run, the loss agreed between ranks,
// the collectives compared and a checkpoint when due, an evaluation when
// due, and rank 0's records. The run's own collectives are under the
// watchdog, tagged with the step (zrt/RunControl.h).
//
//===----------------------------------------------------------------------===//

#include "zrt/TrainingRun.h"

#include "zrt/Agreement.h"
#include "zrt/TrainingCheckpoint.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>

namespace zrt {

TrainingSink::~TrainingSink() = default;

Expected<float> readScalarOutput(const Executor &executor,
                                 const std::string &name) {
  const BindingDesc *out = executor.program().findOutput(name);
  if (!out)
    return Status::error(executor.program().path + ": no output \"" + name +
                         "\"");
  float value = 0;
  ZRT_RETURN_IF_ERROR(executor.readBuffer(out->buffer, &value, sizeof value));
  return value;
}

double samplesPerStep(const Program &program) {
  if (program.inputs.empty())
    return 0;
  const BufferDesc &b = program.buffers[program.inputs[0].buffer];
  return double(b.shape.empty() ? 1 : b.shape[0]) * program.dataParallelSize();
}

double tokensPerStep(const Program &program) {
  if (program.inputs.empty())
    return 0;
  const BufferDesc &b = program.buffers[program.inputs[0].buffer];
  if ((b.dtype != DType::I64 && b.dtype != DType::I32) || b.shape.size() != 2)
    return 0;
  return samplesPerStep(program) * double(b.shape[1]);
}

namespace {

/// A schedule's total_num_steps "auto" (-1 in the program: the Hugging Face
/// Trainer's max_steps) becomes the run's last step.
Status resolveScheduleSteps(Program &program, int64_t totalSteps) {
  for (Instruction &inst : program.instructions) {
    if (inst.op != "LrSchedule" ||
        inst.attrs.getInt("total_num_steps", 0) != -1)
      continue;
    const int64_t warmup = inst.attrs.getInt("warmup_num_steps", 0);
    if (totalSteps < warmup)
      return Status::error(
          program.path +
          ": the schedule's total_num_steps \"auto\" is this "
          "run's " +
          std::to_string(totalSteps) +
          " steps, fewer than its "
          "warmup_num_steps " +
          std::to_string(warmup) +
          "; run more steps (--steps) or give total_num_steps in the config");
    AttrValue v;
    v.ints = {totalSteps};
    inst.attrs.set("total_num_steps", v);
  }
  return Status::ok();
}

/// --data: every step of the file unless fewer are asked for.
Status planDataSteps(Program &program, int rank,
                     const TrainingPlanOptions &options, TrainingPlan &plan) {
  // Rank r reads its data-parallel replica's rows: r mod dp in a pipeline,
  // whose stages all read them.
  Expected<TrainingData> data =
      TrainingData::open(options.data, program, program.dataParallelSize(),
                         rank % program.dataParallelSize());
  if (!data)
    return data.status();
  plan.data.emplace(std::move(*data));
  if (plan.data->steps() == 0)
    return Status::error("--data " + options.data + " holds no steps");
  if (options.steps > plan.data->steps())
    return Status::error("--steps " + std::to_string(options.steps) +
                         " asks for more steps than --data " + options.data +
                         " holds (" + std::to_string(plan.data->steps()) + ")");
  plan.totalSteps = options.steps > 0 ? options.steps : plan.data->steps();
  ZRT_RETURN_IF_ERROR(resolveScheduleSteps(program, plan.totalSteps));
  // Token ids out of an embedding's range are a data error, found now
  // rather than at their step (or silently wrapped, as ONNX Gather would).
  return plan.data->checkTokenIds(plan.totalSteps);
}

} // namespace

Status planTrainingSteps(Program &program, int rank,
                         const TrainingPlanOptions &options,
                         TrainingPlan &plan) {
  const int dp = program.dataParallelSize();
  if (!options.evalTokens.empty()) {
    // Batch e of every evaluation: the windows of step e of that file.
    Expected<TokenData> eval =
        TokenData::open({options.evalTokens, options.tokenBytes, options.seed,
                         options.nextLabels, "--eval-tokens"},
                        program, dp, rank % dp);
    if (!eval)
      return eval.status();
    plan.evalTokens.emplace(std::move(*eval));
  }
  if (!options.tokens.empty()) {
    // Each replica draws its rows of every step's windows; a pipeline's
    // stages all draw their replica's.
    Expected<TokenData> tokens = TokenData::open(
        {options.tokens, options.tokenBytes, options.seed, options.nextLabels},
        program, dp, rank % dp);
    if (!tokens)
      return tokens.status();
    plan.tokens.emplace(std::move(*tokens));
    plan.totalSteps = options.steps;
    return resolveScheduleSteps(program, plan.totalSteps);
  }
  if (!options.data.empty())
    return planDataSteps(program, rank, options, plan);
  plan.totalSteps = options.steps > 0 ? options.steps : 1;
  ZRT_RETURN_IF_ERROR(resolveScheduleSteps(program, plan.totalSteps));
  if (!options.inputsGiven && !program.inputs.empty()) {
    std::string names;
    for (const BindingDesc &b : program.inputs)
      names += (names.empty() ? "" : ", ") + b.name;
    return Status::error(options.model +
                         " is a training program with inputs (" + names +
                         "); pass --data PATH (or --input for a single step)");
  }
  return Status::ok();
}

Status resumeTraining(Executor &executor, const Communicator &comm,
                      const std::string &dir, TrainingPlan &plan) {
  Expected<CheckpointInfo> ckpt = readLatestCheckpoint(dir);
  if (!ckpt)
    return ckpt.status();
  if (ckpt->step >= plan.totalSteps)
    return Status::error("--resume " + dir + ": the checkpoint is at step " +
                         std::to_string(ckpt->step) + ", --steps " +
                         std::to_string(plan.totalSteps) + " asks for no more");
  Status status =
      loadCheckpoint(executor, *ckpt, comm.rank(), comm.worldSize());
  plan.firstStep = ckpt->step + 1;
  return status;
}

namespace {

/// The loss as logged: the mean over ranks, summed in rank order on rank 0
/// (the same bits whatever the MPI library's reduction order; a pipeline's
/// losses arrive on its first stage's ranks, one per data-parallel replica),
/// and the slowest rank's `seconds`; every rank gets both.
Expected<std::pair<double, double>>
agreeOnLoss(Communicator &comm, const Program &program, double loss,
            double seconds, Watchdog *watchdog, uint64_t tag) {
  const int world = comm.worldSize();
  if (world == 1)
    return std::make_pair(loss, seconds);
  Watchdog::Scope watched(watchdog, 0, tag);
  double mine[2] = {loss, seconds};
  std::vector<std::string> all = comm.gatherToRoot(
      std::string(reinterpret_cast<const char *>(mine), sizeof mine));
  double agreed[2] = {0, 0};
  if (comm.rank() == 0) {
    const int losses = program.pipelined() ? program.dataParallelSize() : world;
    for (int r = 0; r < int(all.size()); ++r) {
      double theirs[2] = {0, 0};
      std::memcpy(theirs, all[size_t(r)].data(),
                  std::min(all[size_t(r)].size(), sizeof theirs));
      if (r < losses)
        agreed[0] += theirs[0];
      agreed[1] = std::max(agreed[1], theirs[1]);
    }
    agreed[0] /= losses;
  }
  ZRT_RETURN_IF_ERROR(comm.broadcastBytes(agreed, sizeof agreed, 0));
  return std::make_pair(agreed[0], agreed[1]);
}

/// What one optimizer step does, for its rates: samples and tokens (0 when
/// unknown), the compiler's product FLOPs over every rank, and the peak the
/// MFU is taken against (0: none).
struct StepWork {
  double samples = 0, tokens = 0, flops = 0, peakFlopsPerSecond = 0;
};

/// The log record of optimizer step `step`: the loss (mean over ranks) and
/// time (slowest rank) agreed on, its rates and MFU, whether it was skipped
/// (fp16), and the scalar outputs the program names (grad norm, lr, loss
/// scale).
Expected<StepRecord> stepRecord(const Executor &executor, int64_t step,
                                double meanLoss, double seconds, bool skipped,
                                const StepWork &work) {
  const TrainingDesc &training = *executor.program().training;
  StepRecord record;
  record.step = step;
  record.loss = meanLoss;
  record.seconds = seconds;
  record.samplesPerSecond = seconds > 0 ? work.samples / seconds : 0;
  record.tokensPerSecond = seconds > 0 ? work.tokens / seconds : 0;
  record.flopsPerSecond = seconds > 0 ? work.flops / seconds : 0;
  if (record.flopsPerSecond > 0 && work.peakFlopsPerSecond > 0)
    record.mfu = record.flopsPerSecond / work.peakFlopsPerSecond;
  if (!training.skipped.empty())
    record.skipped = skipped;
  for (auto [name, target] :
       {std::make_pair(&training.gradNorm, &record.gradNorm),
        std::make_pair(&training.lr, &record.lr),
        std::make_pair(&training.lossScale, &record.lossScale)}) {
    if (name->empty())
      continue;
    Expected<float> value = readScalarOutput(executor, *name);
    if (!value)
      return value.status();
    *target = double(*value);
  }
  return record;
}

/// One training run in progress: what every step uses.
struct Trainer {
  Executor &executor;
  const RunContext &context;
  TrainingPlan &plan;
  const TrainingRunOptions &options;
  TrainingSink &sink;
  RunTimings &timings;
  StepWork work;

  Communicator &comm() const { return *context.comm; }
  const Program &program() const { return executor.program(); }

  /// After step `step` (every rank): --check-collectives compares the
  /// ranks' collectives so far and ends the job on a difference, and a
  /// checkpoint is written when one is due.
  Status checkAndSave(int64_t step) {
    if (options.checkCollectives) {
      Watchdog::Scope watched(context.watchdog, 0,
                              controlTag(kCompareCollectives, step));
      Status same = agreeOnOutcome(
          comm(), checkCollectiveCounts(comm(), context.data(), step));
      if (!same.isOk()) {
        if (context.reportError)
          context.reportError(same);
        comm().abortJob(1);
      }
    }
    if (options.saveDir.empty() ||
        (step != plan.totalSteps &&
         (options.saveEvery == 0 || step % options.saveEvery != 0)))
      return Status::ok();
    Watchdog::Scope watched(context.watchdog, 0, controlTag(kCheckpoint, step));
    return saveCheckpoint(executor, comm(), options.saveDir, step);
  }

  /// Every evalEvery steps and after the last: the mean loss of the
  /// evaluation batches, each run as an evaluation step.
  Expected<std::optional<EvalRecord>> evaluate(int64_t step) {
    if (!plan.evalTokens ||
        (step % options.evalEvery != 0 && step != plan.totalSteps))
      return std::optional<EvalRecord>();
    const auto start = std::chrono::steady_clock::now();
    double sum = 0;
    for (int64_t e = 0; e < options.evalBatches; ++e) {
      ZRT_RETURN_IF_ERROR(plan.evalTokens->bindStep(executor, e));
      {
        Watchdog::Scope watched(context.watchdog, 0,
                                controlTag(kEvaluate, step));
        comm().barrier();
      }
      ZRT_RETURN_IF_ERROR(executor.run(RunMode::Eval));
      Expected<float> loss =
          readScalarOutput(executor, program().training->loss);
      if (!loss)
        return loss.status();
      Expected<std::pair<double, double>> agreed =
          agreeOnLoss(comm(), program(), *loss, 0, context.watchdog,
                      controlTag(kEvaluate, step));
      if (!agreed)
        return agreed.status();
      sum += agreed->first;
    }
    EvalRecord record;
    record.step = step;
    record.loss = sum / double(options.evalBatches);
    record.batches = options.evalBatches;
    record.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    return std::optional<EvalRecord>(record);
  }

  /// Binds step `step`'s inputs (if they change per step) and runs it;
  /// returns its loss, the mean over ranks, and the slowest rank's time.
  Expected<std::pair<double, double>> runStep(int64_t step) {
    if (plan.data)
      ZRT_RETURN_IF_ERROR(plan.data->bindStep(executor, step - 1));
    else if (plan.tokens)
      ZRT_RETURN_IF_ERROR(plan.tokens->bindStep(executor, step - 1));
    {
      Watchdog::Scope watched(context.watchdog, 0,
                              controlTag(kStartStep, step));
      comm().barrier();
    }
    if (context.currentStep)
      *context.currentStep = step;
    ZRT_RETURN_IF_ERROR(executor.run());
    const double seconds = executor.stats().wallSeconds;
    timings.add(program(), executor.stats());
    Expected<float> loss = readScalarOutput(executor, program().training->loss);
    if (!loss)
      return loss.status();
    return agreeOnLoss(comm(), program(), *loss, seconds, context.watchdog,
                       controlTag(kExchangeLoss, step));
  }

  /// Step `step` whole; sets `outcome` when its loss stops the run.
  Status step(int64_t step, TrainingOutcome &outcome) {
    const TrainingDesc &training = *program().training;
    Expected<std::pair<double, double>> agreed = runStep(step);
    if (!agreed)
      return agreed.status();
    const double meanLoss = agreed->first, seconds = agreed->second;
    // fp16: a step whose gradients overflowed was skipped (nothing was
    // updated); its loss may be inf, and training goes on, as DeepSpeed's.
    bool skipped = false;
    if (!training.skipped.empty()) {
      Expected<float> flag = readScalarOutput(executor, training.skipped);
      if (!flag)
        return flag.status();
      skipped = *flag != 0;
    }
    if (!std::isfinite(meanLoss) && !skipped) {
      outcome.nonFiniteStep = step;
      outcome.nonFiniteLoss = meanLoss;
      return Status::ok();
    }
    ZRT_RETURN_IF_ERROR(checkAndSave(step));
    Expected<StepRecord> record =
        stepRecord(executor, step, meanLoss, seconds, skipped, work);
    if (!record)
      return record.status();
    // The evaluation runs after the step's outputs are read: its batches
    // reuse their bytes.
    Expected<std::optional<EvalRecord>> evaluated = evaluate(step);
    if (!evaluated)
      return evaluated.status();
    if (comm().rank() != 0)
      return Status::ok();
    ZRT_RETURN_IF_ERROR(sink.record(*record));
    if (*evaluated)
      ZRT_RETURN_IF_ERROR(sink.recordEval(**evaluated));
    return Status::ok();
  }
};

} // namespace

Expected<TrainingOutcome> runTraining(Executor &executor,
                                      const RunContext &context,
                                      TrainingPlan &plan,
                                      const TrainingRunOptions &options,
                                      TrainingSink &sink, RunTimings &timings) {
  Trainer trainer{executor, context, plan, options, sink, timings, {}};
  const Program &program = executor.program();
  trainer.work.samples = samplesPerStep(program);
  trainer.work.tokens = tokensPerStep(program);
  // The compiler's count of the step's product FLOPs, every rank's.
  for (int r = 0; r < context.comm->worldSize(); ++r)
    trainer.work.flops += double(program.flopsOn(r));
  trainer.work.peakFlopsPerSecond = options.peakFlopsPerSecond;
  TrainingOutcome outcome;
  for (int64_t step = plan.firstStep; step <= plan.totalSteps; ++step) {
    ZRT_RETURN_IF_ERROR(trainer.step(step, outcome));
    if (outcome.nonFiniteStep)
      break;
  }
  return outcome;
}

} // namespace zrt
