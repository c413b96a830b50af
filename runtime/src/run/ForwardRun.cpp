//===- ForwardRun.cpp - The forward mode: timed runs of a program ---------===//

#include "zrt/ForwardRun.h"

namespace zrt {

Status runForward(Executor &executor, const RunContext &context,
                  const ForwardOptions &options, RunTimings &timings) {
  Communicator &comm = *context.comm;
  for (int iteration = 0; iteration < options.warmup + options.repeat;
       ++iteration) {
    if (iteration > 0)
      ZRT_RETURN_IF_ERROR(bindInputs(executor, options.inputs));
    {
      Watchdog::Scope watched(context.watchdog, 0, controlTag(kStartRun));
      comm.barrier();
    }
    ZRT_RETURN_IF_ERROR(executor.run());
    if (iteration >= options.warmup)
      timings.add(executor.program(), executor.stats());
  }
  return Status::ok();
}

} // namespace zrt
