//===- RunControl.h - What the run modes share ------------------*- C++ -*-===//
//
// What every run mode (zrt/ForwardRun.h, zrt/TrainingRun.h) shares: the
// run's own collectives between ranks, named by a watchdog tag in its
// reports; where the modes run (the communicator, the watchdog, how an error
// that ends the job is reported); and the timings of the runs, for the
// reports.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_RUNCONTROL_H
#define ZRT_RUNCONTROL_H

#include "zrt/Communicator.h"
#include "zrt/Executor.h"
#include "zrt/Program.h"
#include "zrt/Status.h"
#include "zrt/Watchdog.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zrt {

/// The run's own collectives (not the program's), named in the watchdog's
/// report. A watchdog tag is the step kind in its low byte and, during
/// training, the optimizer step above it (controlTag()).
enum ControlStep : uint64_t {
  kAgreeOnProgram,
  kCompareHashes,
  kPrepareProgram,
  kAgreeOnInputs,
  kStartRun,
  kGatherReports,
  kAgreeOnOutputs,
  kExchangeLoss,
  kStartStep,
  kCheckpoint,
  kCompareCollectives,
  kEvaluate,
  kGatherPlacement,
};

/// The watchdog tag of control step `kind` at training step `step` (0: none).
uint64_t controlTag(ControlStep kind, int64_t step = 0);

/// "barrier before training step 12": what a watchdog tag names.
std::string describeControlTag(uint64_t tag);

/// Where a run mode runs: every rank calls the mode with its own.
struct RunContext {
  /// The world: the run's own collectives (barriers, the loss's exchange).
  Communicator *comm = nullptr;
  /// The program's collectives (NCCL on the CUDA backend); null: `comm`.
  Communicator *dataComm = nullptr;
  /// Puts the run's own collectives under a time limit; null: none.
  Watchdog *watchdog = nullptr;
  /// Prints an error after which the mode ends the job itself (the ranks
  /// disagree on their collectives); may be empty.
  std::function<void(const Status &)> reportError;
  /// Set to the training step running, for messages; may be null.
  std::atomic<int64_t> *currentStep = nullptr;

  Communicator &data() const { return dataComm ? *dataComm : *comm; }
};

/// The timed runs of a mode, for the reports: each run's wall time and, for
/// a pipeline stage, each run's scheduleBubble().
struct RunTimings {
  std::vector<double> iterationSeconds, iterationBubbles;
  /// Adds the executor's last run.
  void add(const Program &program, const RunStats &stats);
};

/// A pipeline stage's schedule in the executor's last run (which needs its
/// trace): the window (the run less the stage's own prologue and optimizer
/// instructions) and the fraction of it in which no kernel of a forward or
/// backward step ran. Nothing when the run has no such steps.
struct ScheduleBubble {
  double windowSeconds = 0;
  double bubble = 0;
};
std::optional<ScheduleBubble> scheduleBubble(const Program &program,
                                             const RunStats &stats);

} // namespace zrt

#endif // ZRT_RUNCONTROL_H
