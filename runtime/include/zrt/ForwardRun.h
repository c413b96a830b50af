//===- ForwardRun.h - The forward mode: timed runs of a program -*- C++ -*-===//
//
// The forward mode (a program without a `training` table): `warmup` untimed
// runs then `repeat` timed ones, in steady state (the program loaded and the
// weights and inputs bound once before, zrt/Bindings.h). zero-run --repeat,
// --warmup.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_FORWARDRUN_H
#define ZRT_FORWARDRUN_H

#include "zrt/Bindings.h"
#include "zrt/Executor.h"
#include "zrt/RunControl.h"
#include "zrt/Status.h"

#include <vector>

namespace zrt {

struct ForwardOptions {
  /// The inputs, bound before the first run already: the memory plan may
  /// reuse an input's bytes after its last read, so they are bound again
  /// before every run after the first.
  std::vector<InputSource> inputs;
  int warmup = 0; ///< untimed runs first
  int repeat = 1; ///< timed runs
};

/// Runs the program `warmup + repeat` times on every rank, each run after a
/// barrier of the ranks (under the watchdog, kStartRun), and adds the timed
/// ones to `timings`. The program's outputs are the last run's. Returns the
/// first error; the caller ends the job then (other ranks may be inside a
/// collective with this one).
Status runForward(Executor &executor, const RunContext &context,
                  const ForwardOptions &options, RunTimings &timings);

} // namespace zrt

#endif // ZRT_FORWARDRUN_H
