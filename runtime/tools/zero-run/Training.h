//===- Training.h - zero-run's training loop helpers ------------*- C++ -*-===//
//
// What zero-run adds for a training program (one with a `training` table):
// the per-step log (stdout lines, a progress bar on a terminal, --log-json),
// the sink of the library's training mode. The steps are the library's
// (zrt/TrainingRun.h), and so are the checkpoints (--save, --save-optimizer,
// --save-dir, --resume: zrt/TrainingCheckpoint.h).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TOOLS_ZERORUN_TRAINING_H
#define ZRT_TOOLS_ZERORUN_TRAINING_H

#include "zrt/Status.h"
#include "zrt/TrainingRun.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace zrt {

/// "step 10/200  eval_loss 5.123456  perplexity 167.89  (8 batches, 0.21 s)".
std::string formatEvalLine(const EvalRecord &record, int64_t totalSteps);

/// The per-step log of rank 0: a line on stdout every `logEvery` steps and
/// at the last one, a progress bar on stderr when it is a terminal, and every
/// step's record for --log-json, whose file (`jsonPath`, when given) is
/// rewritten (atomically) with the records so far at every logged line, so
/// that a run ended by a failure or a kill keeps what it did.
class TrainingLog : public TrainingSink {
public:
  TrainingLog(int64_t totalSteps, int64_t logEvery, bool progressBar,
              std::string jsonPath = "");
  /// Adds a step's record; an error when the --log-json file is due and
  /// cannot be written.
  Status record(const StepRecord &record) override;
  /// Adds an evaluation's record ({"step", "eval_loss", "perplexity",
  /// "eval_batches", "eval_time_s"} in --log-json), prints its line, and
  /// shows its loss on the progress bar from now on.
  Status recordEval(const EvalRecord &record) override;
  /// Removes the progress bar.
  void finish();
  /// Writes the --log-json file now, if records are missing from it.
  Status flush();
  /// The --log-json document: an array of per-step objects.
  const nlohmann::json &json() const { return json_; }
  /// DeepSpeed's csv_monitor as a second sink: from now on every step
  /// appends a row "samples,value" to DIR/Train_Samples_train_loss.csv (and
  /// _lr, _loss_scale when the program gives them), DIR created, a file's
  /// "step,NAME" header written when it is new; `samplesPerStep` is the x
  /// axis, as DeepSpeed's global_samples. Errors name the file.
  Status openCsvMonitor(const std::string &dir, double samplesPerStep);

private:
  void drawBar(const StepRecord &record);
  void clearBar();
  int64_t totalSteps_, logEvery_;
  bool progressBar_, barShown_ = false;
  double secondsSoFar_ = 0; ///< steps timed so far, for the bar's ETA
  std::optional<double> lastEvalLoss_; ///< for the bar
  int64_t stepsSoFar_ = 0;
  std::string csvDir_; ///< csv_monitor's directory; "": none
  double csvSamplesPerStep_ = 0;
  Status appendCsv(const std::string &name, int64_t step, double value);
  std::string jsonPath_;
  size_t written_ = 0; ///< records in the --log-json file
  nlohmann::json json_ = nlohmann::json::array();
};

/// "step 10/200  loss 5.543210  grad_norm 1.2345  lr 3.000e-04  time 12.3 ms
/// samples/s 650.2" (grad_norm and lr only when known, samples/s only when
/// the step has samples; fp16 adds "loss_scale 65536" and "skipped" after lr).
std::string formatStepLine(const StepRecord &record, int64_t totalSteps);

} // namespace zrt

#endif // ZRT_TOOLS_ZERORUN_TRAINING_H
