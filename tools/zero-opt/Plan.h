//===- Plan.h - zero-opt --plan auto: pick a layout by simulating it ------===//
//
// The planner compiles each layout the compiler can build for a model on a
// cluster (ZeRO stage, pipeline stages x replicas, micro-batch and
// accumulation, activation checkpointing, optimizer offload, ZeRO++ across
// slow links) with zero-opt --no-weights, simulates each program with
// zero-run --simulate on the machine description, drops those that do not
// fit the memory per rank, and writes the fastest as a ds_config and a
// --zero-pipeline string (docs/simulate.md, "Planning"). A deep model's
// layouts are compiled as proxies (its first blocks, fewer micro-batches) at
// two sizes each and their simulations extrapolated.
//
//===----------------------------------------------------------------------===//

#ifndef ZERO_TOOLS_ZERO_OPT_PLAN_H
#define ZERO_TOOLS_ZERO_OPT_PLAN_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace zero::plan {

/// What the command line asked for.
struct PlanRequest {
  std::string zeroOpt; ///< this executable, to compile each layout
  std::string zeroRun; ///< beside it, to simulate each program
  std::string model;
  /// --input-shape values; dimension 0 of each is the micro-batch, set per
  /// layout.
  std::map<std::string, std::vector<int64_t>> shapes;
  /// The training flags every layout is compiled with (--loss, --optimizer,
  /// ...), as zero-opt arguments.
  std::vector<std::string> trainingArgs;
  std::string machine;    ///< the machine description (JSON)
  std::string baseConfig; ///< a ds_config whose other keys every layout keeps
  int64_t world = 0, nodes = 0, globalBatch = 0;
  int64_t memoryCap = 0; ///< bytes per rank; 0: the device's memory
  std::string outDir;
  /// Every layout compiled whole (no proxies of fewer blocks / micro-batches).
  bool exact = false;
  unsigned jobs = 0; ///< compiles at once; 0: the hardware threads
};

/// Runs the search and writes outDir/ds_config.json, zero-pipeline.txt and
/// plan.txt. Returns the process exit code; messages go to stderr.
int runPlanner(const PlanRequest &request);

} // namespace zero::plan

#endif // ZERO_TOOLS_ZERO_OPT_PLAN_H
