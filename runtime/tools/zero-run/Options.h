//===- Options.h - zero-run's command line ------------------------*- C++ -*-===//
//
// zero-run's options, their usage text and their checks: each option alone
// as it is parsed, all of them together, and those that depend on the
// program (training options need a training program). Every error here is a
// usage error (exit status 2).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TOOLS_ZERORUN_OPTIONS_H
#define ZRT_TOOLS_ZERORUN_OPTIONS_H

#include "zrt/Bindings.h"
#include "zrt/Program.h"
#include "zrt/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zrt {

/// zero-run --help.
extern const char *const kZeroRunUsage;
/// zero-run --help's part on --simulate (printed after kZeroRunUsage).
extern const char *const kSimulateUsage;

struct Options {
  std::string model;
  std::string weights;
  std::vector<InputSource> inputs;
  std::string output;
  bool report = false;
  std::string reportJson;
  std::string trace;
  int threads = 0;
  double peakTflops = 0; ///< --peak-tflops; 0: the CPU's estimate
  std::string overlap = "auto"; ///< --overlap: auto, on, off
  int repeat = 1; ///< timed runs
  int warmup = 0; ///< untimed runs before them
  bool repeatGiven = false, warmupGiven = false;
  // Training programs.
  std::string data;       ///< --data
  std::string tokens;     ///< --tokens
  std::string evalTokens; ///< --eval-tokens
  int64_t evalEvery = 0;  ///< --eval-every; 0: --log-every's value
  int64_t evalBatches = 0; ///< --eval-batches; 0: 8
  int tokenBytes = 2;     ///< --tokens-dtype: 2 (u16) or 4 (u32)
  uint64_t seed = 0;      ///< --seed
  bool nextLabels = false; ///< --labels next
  int64_t steps = 0;      ///< --steps; 0: every step of the data
  int64_t logEvery = 0;   ///< --log-every; 0: steps_per_print, else 1
  std::string logJson;    ///< --log-json
  std::string save;       ///< --save
  std::string saveOptimizer; ///< --save-optimizer
  std::string saveDir;    ///< --save-dir
  int64_t saveEvery = 0;  ///< --save-every; 0: after the last step only
  std::string resume;     ///< --resume
  bool checkCollectives = false; ///< --check-collectives
  bool noPrepack = false;        ///< --no-prepack
  /// The training options given, for "only for training programs".
  std::vector<std::string> trainingFlags;
  double timeout = 600; ///< seconds a collective may take; 0: no limit
  std::string backend = "cpu";
  bool help = false;
  /// --simulate MACHINE.json: simulate every rank on that machine instead
  /// of running (no kernel, no MPI); --nodes K spreads the ranks over K nodes.
  std::string simulate;
  int nodes = 0;
};

/// Parses argv; `--opt value` and `--opt=value` are both accepted. Checks
/// each option's value and the options together (not the program's).
Status parseArguments(int argc, char **argv, Options &opts);

/// Checks that no output overwrites what the run reads, nor another output.
Status checkOutputPaths(const Options &opts);

/// The cores this process may run on (its affinity mask), or 0 if unknown.
int allowedCores();

/// Threads per rank when --threads is not given: the cores this rank may run
/// on (its affinity mask: one when mpirun binds ranks to cores), shared with
/// the other local ranks when they all run on the same cores. Results never
/// depend on it (kernels split work by shape); only speed does.
int defaultKernelThreads(int localRanks);

/// Whether argv holds `flag` ("--flag" or "--flag=value").
bool givesOption(int argc, char **argv, const std::string &flag);

/// Whether argv asks for --simulate (checked before MPI is started, which a
/// simulation does not use).
bool wantsSimulation(int argc, char **argv);

/// Checks that a --simulate command line has only the options a simulation
/// reads (--simulate, --nodes, --report, --report-json, --trace).
Status checkSimulationOptions(int argc, char **argv);

/// Checks the options that depend on whether the program trains: the
/// training options need a training program, and a training program refuses
/// --repeat/--warmup (they would train extra steps).
Status checkProgramOptions(const Options &opts, const Program &program);

} // namespace zrt

#endif // ZRT_TOOLS_ZERORUN_OPTIONS_H
