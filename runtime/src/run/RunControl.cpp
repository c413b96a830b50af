//===- RunControl.cpp - What the run modes share --------------------------===//

#include "zrt/RunControl.h"

#include <algorithm>
#include <cctype>

namespace zrt {

namespace {

const char *const kControlStepNames[] = {
    "agreement on the program (zero-run start-up)",
    "comparison of program and weights hashes (zero-run start-up)",
    "setup of the program's process groups (zero-run start-up)",
    "agreement on weights and inputs (zero-run start-up)",
    "barrier before the run",
    "gathering of reports and traces (zero-run end)",
    "agreement on the outputs (zero-run end)",
    "exchange of the loss between ranks after training step",
    "barrier before training step",
    "writing of the --save-dir checkpoint of training step",
    "comparison of the ranks' collectives (--check-collectives) after training "
    "step",
    "evaluation (--eval-tokens) after training step",
    "gathering of the ranks' nodes (zero-run start-up)",
};

} // namespace

uint64_t controlTag(ControlStep kind, int64_t step) {
  return uint64_t(kind) | uint64_t(step) << 8;
}

std::string describeControlTag(uint64_t tag) {
  std::string name = kControlStepNames[tag & 0xff];
  if (tag >> 8)
    name += " " + std::to_string(tag >> 8);
  return name;
}

void RunTimings::add(const Program &program, const RunStats &stats) {
  iterationSeconds.push_back(stats.wallSeconds);
  if (program.pipelined())
    if (std::optional<ScheduleBubble> b = scheduleBubble(program, stats))
      iterationBubbles.push_back(b->bubble);
}

std::optional<ScheduleBubble> scheduleBubble(const Program &p,
                                             const RunStats &stats) {
  // The bubble of the schedule alone, as (S-1)/(M+S-1) counts it: of the
  // step, less the stage's own work outside the forward and backward
  // steps (F<k>, B<k>; the instructions of the prologue and the optimizer
  // step, which every stage runs on its own), the fraction in which no
  // kernel of those steps ran. A receive outside them stays in: there the
  // stage waits for another one (the last stage's drain ends in the
  // optimizer's exchange of gradient norms, which waits for the first
  // stage's last backward). Every stage is measured over the same window
  // this way (the steps of all stages end together at that exchange),
  // where the time from a stage's first to its last scheduled instruction
  // would leave out the drain of every stage but the first.
  double busy = 0, outside = 0;
  bool scheduledAny = false;
  for (const TraceEvent &e : stats.trace) {
    if (p.streams[size_t(e.stream)].kind != StreamKind::Compute)
      continue;
    const Instruction &inst = p.instructions[e.instruction];
    std::string step = inst.attrs.getString("pipeline_step", "");
    const bool scheduled = step.size() > 1 &&
                           (step[0] == 'F' || step[0] == 'B') &&
                           std::isdigit(static_cast<unsigned char>(step[1]));
    scheduledAny |= scheduled;
    if (scheduled && inst.kind == OpKind::Kernel)
      busy += double(e.durationUs);
    else if (!scheduled && !step.empty() && inst.kind != OpKind::Recv)
      outside += double(e.durationUs); // a prologue or optimizer instruction
  }
  const double span = stats.wallSeconds * 1e6 - outside;
  if (!scheduledAny || span <= 0)
    return std::nullopt;
  return ScheduleBubble{span * 1e-6, std::max(0.0, 1.0 - busy / span)};
}

} // namespace zrt
