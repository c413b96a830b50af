//===- ZeroRun.cpp - Run a .zrt program on this machine's ranks -----------===//
//
// zero-run is started once per rank (mpirun -np N zero-run model.zrt ...) or as
// a single process without a launcher. Error policy: everything before
// execution (arguments, program, weights, inputs) is checked on every rank and
// the ranks agree on the outcome, so that every rank prints its problem (or
// which rank failed) and exits non-zero instead of leaving the others waiting
// in a collective; an error during execution is printed and aborts the whole
// MPI job. Before the first collective of the program, the ranks check that
// they loaded the same program and read the same weights layout (mismatched
// collectives would wait for each other forever), and a watchdog (--timeout)
// ends the job when one collective, of the program or of zero-run itself, does
// not complete in time because a rank stopped.
//
// The modes are the library's (zrt/ForwardRun.h, zrt/TrainingRun.h): this
// file parses the options, opens the program, the backend and the
// communicator, calls the mode, and writes the outputs and reports. A
// training program (one with a `training` table) runs once per optimizer
// step: the inputs of each step come from --data (or --input, for one step),
// parameters and optimizer state stay in their buffers between steps, rank 0
// logs the loss (the mean over ranks) and writes --log-json, --save and
// --save-optimizer only after the last step; a loss that is not finite stops
// the run at once and writes nothing.
//
//===----------------------------------------------------------------------===//

#include "Calibrate.h"
#include "JobFailure.h"
#include "Options.h"
#include "RunReport.h"
#include "Simulate.h"
#include "Training.h"

#include "zrt/Agreement.h"
#include "zrt/Backend.h"
#include "zrt/Bindings.h"
#include "zrt/Communicator.h"
#include "zrt/CpuBackend.h"
#include "zrt/CudaBackend.h"
#include "zrt/Executor.h"
#include "zrt/ForwardRun.h"
#include "zrt/MpiCommunicator.h"
#include "zrt/OutputFile.h"
#include "zrt/Placement.h"
#include "zrt/Program.h"
#include "zrt/RunControl.h"
#include "zrt/TrainingCheckpoint.h"
#include "zrt/TrainingRun.h"
#include "zrt/Watchdog.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <unistd.h>

using namespace zrt;

namespace {

/// The pre-execution agreement: true when every rank succeeded. Otherwise
/// every rank prints either its own error or the ranks that failed.
bool agree(Communicator &comm, const Status &local) {
  Status agreed = agreeOnOutcome(comm, local);
  if (agreed.isOk())
    return true;
  printError(comm, agreed.message());
  return false;
}

/// "600", "2.5": seconds as given.
std::string secondsString(double seconds) {
  std::ostringstream os;
  os << seconds;
  return os.str();
}





Status writeText(const std::string &path, const std::string &text) {
  return writeFileAtomically(path, [&](int fd) {
    return writeAllToFd(fd, text.data(), text.size());
  });
}

struct Runtime {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Communicator> dataComm; // NCCL on the CUDA backend
};

Status createBackend(const Options &opts, Communicator &world, int threads,
                     Runtime &rt) {
  if (opts.backend == "cpu") {
    ZRT_RETURN_IF_ERROR(checkCpuKernelIsa());
    rt.backend = createCpuBackend(threads);
    rt.backend->setRank(world.rank(), world.worldSize());
    return Status::ok();
  }
#ifdef ZRT_HAVE_CUDA
  Expected<int> selected = cudaDeviceForRank(world.localRank());
  if (!selected)
    return selected.status();
  const int device = *selected;
  Expected<std::unique_ptr<Backend>> cuda = createCudaBackend(device);
  if (!cuda)
    return cuda.status();
  rt.backend = std::move(*cuda);
  rt.backend->setRank(world.rank(), world.worldSize());
  if (world.worldSize() > 1) {
    Expected<std::unique_ptr<Communicator>> nccl =
        createNcclCommunicator(world, device);
    if (!nccl)
      return nccl.status();
    rt.dataComm = std::move(*nccl);
  }
  return Status::ok();
#else
  return Status::error("no backend " + opts.backend);
#endif
}

/// Prints `status` and ends the job (a failure during the steps may leave
/// other ranks inside a collective with this one). Returns the exit code.
int failDuringRun(Communicator &comm, const Status &status) {
  printError(comm, status.message());
  if (comm.worldSize() > 1)
    endJob(comm, 1);
  return 1;
}

/// A step whose mean loss is not finite (and not an fp16 skip) stops the
/// run: rank 0 says which step and output, nothing is saved, and
/// --log-json keeps the steps before it.
void reportNonFiniteLoss(Communicator &comm, TrainingLog &log, const Program &program,
                         int64_t step, double meanLoss) {
  log.finish();
  if (comm.rank() != 0)
    return;
  const int world = comm.worldSize();
  Status flushed = log.flush();
  std::fprintf(stderr,
               "zero-run: step %lld: loss is %s (output \"%s\" of %s%s); "
               "stopped: nothing is saved; --log-json, if given, holds the "
               "steps before it\n",
               (long long)step, std::isnan(meanLoss) ? "nan"
                                : meanLoss > 0       ? "inf"
                                                     : "-inf",
               program.training->loss.c_str(), program.path.c_str(),
               world > 1 ? (", mean over " + std::to_string(world) + " ranks").c_str()
                         : "");
  if (!flushed.isOk())
    printError(comm, flushed.message());
  std::fflush(stderr);
}

/// Everything one rank's run sets up, from the backend to the timings. It
/// outlives the executor, which keeps references to the program, the backend
/// and the communicators; the members are destroyed in the reverse order of
/// their set-up.
struct RankRun {
  RankRun(const Options &opts, Communicator &comm) : opts(opts), comm(comm) {}

  /// The communicator of the program's collectives (NCCL on the CUDA
  /// backend, else the world).
  Communicator &dataComm() { return rt.dataComm ? *rt.dataComm : comm; }
  /// Puts zero-run's own collective `step` under the watchdog until released.
  std::unique_ptr<Watchdog::Scope> watch(ControlStep kind, int64_t step = 0) {
    return std::make_unique<Watchdog::Scope>(watchdog.get(), 0, controlTag(kind, step));
  }
  /// " (during training step 12)" while a training step runs, else "".
  std::string stepContext() const {
    const int64_t step = currentStep.load();
    return step > 0 ? " (during training step " + std::to_string(step) + ")" : "";
  }
  /// "; ranks on other nodes than this one (zc1n0): zc1n1: ranks 2-3": where
  /// a collective's missing ranks may be when a node is lost ("" on one node).
  std::string otherNodesContext() const {
    if (!placement || placement->numNodes() < 2)
      return "";
    return "; ranks on other nodes than this one (" +
           placement->node(comm.rank()) +
           "): " + placement->describe(placement->node(comm.rank()));
  }
  /// Whether the program trains (each run is one optimizer step).
  bool training() { return program->training.has_value(); }
  /// Where the run modes run: the world, the data communicator, the
  /// watchdog, zero-run's error line, the step for the watchdogs' messages.
  RunContext context() {
    RunContext context;
    context.comm = &comm;
    context.dataComm = rt.dataComm.get();
    context.watchdog = watchdog.get();
    context.reportError = [this](const Status &error) {
      printError(comm, error.message());
    };
    context.currentStep = &currentStep;
    return context;
  }

  const Options &opts;
  Communicator &comm;
  std::unique_ptr<Watchdog> watchdog;
  /// Every rank's node (a job of several ranks), for the failure messages.
  std::optional<JobPlacement> placement;
  Runtime rt;
  Expected<Program> program = Status::error("");
  Expected<SafetensorsFile> weightsFile = Status::error("no --weights");
  ExecutorOptions execOptions;
  bool inOrderPlan = false;
  std::unique_ptr<Executor> executor;
  WeightsStats weights;
  // A training run's steps: their inputs (--data, --tokens), the evaluation
  // batches (--eval-tokens), the first (after --resume's) and the last.
  TrainingPlan plan;
  int threads = 1; ///< kernel threads per rank
  RunTimings timings;
  std::unique_ptr<TrainingLog> trainingLog;
  /// The training step running (for the watchdogs' messages); 0 outside.
  std::atomic<int64_t> currentStep{0};
  /// Rank 0's lock on --save-dir, held for the whole run.
  std::unique_ptr<DirectoryLock> saveDirLock;
};

/// The watchdog of zero-run's own collectives, which get the same time limit
/// as the program's; none with --timeout 0.
std::unique_ptr<Watchdog> startWatchdog(RankRun &run) {
  if (run.opts.timeout <= 0)
    return nullptr;
  return std::make_unique<Watchdog>(
      run.opts.timeout, 1, [&run](size_t, uint64_t step) {
        Communicator &comm = run.comm;
        printError(comm, "rank " + std::to_string(comm.rank()) +
                             ": collective " + describeControlTag(step) +
                             " did not complete within " +
                             secondsString(run.opts.timeout) +
                             " s; a rank may have stopped or be running a "
                             "different program" +
                             run.otherNodesContext());
        endJob(comm, 1);
      });
}

/// A job of several ranks: learns every rank's node (for the failure
/// messages), prints a note naming the rank, its node and the step if mpirun
/// ends this rank, and warns (rank 0) when a lost node would leave mpirun
/// waiting.
void prepareForNodeLoss(RankRun &run) {
  Communicator &comm = run.comm;
  if (comm.worldSize() < 2)
    return;
  // Set once, after the renumbering and while no collective is watched: the
  // watchdog's thread reads it.
  run.placement = JobPlacement::of(comm);
  noteTermination(comm.rank(), *run.placement, &run.currentStep);
  if (comm.rank() != 0)
    return;
  if (std::optional<std::string> warning =
          lostNodeWarning(run.opts.timeout, run.placement->numNodes())) {
    std::fprintf(stderr, "zero-run: %s\n", warning->c_str());
    std::fflush(stderr);
  }
}

/// This rank's kernel threads: --threads (with a warning when that is more
/// than the cores it may run on), else defaultKernelThreads().
int kernelThreads(const Options &opts, const Communicator &comm) {
  int threads = opts.threads;
  if (threads == 0)
    threads = defaultKernelThreads(comm.localSize());
  else if (const int allowed = allowedCores(); allowed > 0 && threads > allowed)
    std::fprintf(stderr,
                 "[rank %d] zero-run: warning: --threads %d exceeds the %d "
                 "core(s) this rank may run on; threads will share cores "
                 "(results are the same, only slower)\n",
                 comm.rank(), threads, allowed);
  return threads;
}

/// Before any work: every output can be created when its time comes (rank
/// 0 writes the files; every rank writes into --save-dir), and rank 0 holds
/// --save-dir's lock for the whole run, so a second job on the same
/// directory fails now, naming the first.
Status checkOutputsCreatable(RankRun &run) {
  const Options &opts = run.opts;
  if (run.comm.rank() == 0)
    for (const auto &[flag, path] : {std::pair<const char *, std::string>{"--output", opts.output},
                                     {"--report-json", opts.reportJson},
                                     {"--trace", opts.trace},
                                     {"--log-json", opts.logJson},
                                     {"--save", opts.save},
                                     {"--save-optimizer", opts.saveOptimizer}})
      if (!path.empty())
        ZRT_RETURN_IF_ERROR(checkCreatable(flag, path));
  if (opts.saveDir.empty())
    return Status::ok();
  ZRT_RETURN_IF_ERROR(checkCreatableDirectory("--save-dir", opts.saveDir));
  if (run.comm.rank() != 0)
    return Status::ok();
  Expected<std::unique_ptr<DirectoryLock>> lock = DirectoryLock::acquire("--save-dir", opts.saveDir);
  if (!lock)
    return lock.status();
  run.saveDirLock = std::move(*lock);
  return Status::ok();
}

/// Phase 1 on this rank: the backend, the program (compiled for this world
/// size, fitting the options) and the weights file's header. Sets
/// `usageError` when the options do not fit the program.
Status openProgram(RankRun &run, int threads, bool &usageError) {
  const Options &opts = run.opts;
  ZRT_RETURN_IF_ERROR(createBackend(opts, run.comm, threads, run.rt));
  run.program = loadProgram(opts.model, &run.rt.backend->kernels());
  if (!run.program)
    return run.program.status();
  Program &program = *run.program;
  if (program.worldSize != run.comm.worldSize())
    return Status::error(
        opts.model + ": the program was compiled for " +
        std::to_string(program.worldSize) + " rank(s) but zero-run runs on " +
        std::to_string(run.comm.worldSize()) + "; start it with mpirun -np " +
        std::to_string(program.worldSize));
  if (Status fits = checkProgramOptions(opts, program); !fits.isOk()) {
    usageError = true;
    return Status::error(fits.message() + " (zero-run --help for usage)");
  }
  if (countWeightGlobals(program) > 0 && opts.weights.empty())
    return Status::error(opts.model + ": the program has " +
                         std::to_string(countWeightGlobals(program)) +
                         " weight tensor(s); pass --weights FILE.safetensors");
  if (!opts.weights.empty()) {
    run.weightsFile = SafetensorsFile::open(opts.weights);
    if (!run.weightsFile)
      return run.weightsFile.status();
  }
  return Status::ok();
}

/// Phase 1, once every rank has the program: which program rank each process
/// is on the launcher's nodes (zrt/Placement.h), decided by rank 0 and taken
/// by every rank before anything depends on a rank (weights and data shards,
/// file names, reports). A placement that splits one of the program's node
/// groups ends every rank here, rank 0 printing why in one line; with more
/// than one node rank 0 prints the placement. Returns 0, else the exit code.
int placeRanksOnNodes(RankRun &run) {
  Communicator &comm = run.comm;
  const std::vector<std::string> nodes = comm.nodeNames();
  std::vector<int32_t> rankOf(nodes.size(), -1); // all -1: refused
  std::string refusal;
  if (comm.rank() == 0) {
    Expected<std::vector<int>> placed = placeRanks(nodes, run.program->groups);
    if (placed)
      std::copy(placed->begin(), placed->end(), rankOf.begin());
    else
      refusal = placed.status().message();
  }
  auto watched = run.watch(kPlaceRanks);
  Status status =
      comm.broadcastBytes(rankOf.data(), rankOf.size() * sizeof(int32_t), 0);
  if (status.isOk() && rankOf[0] < 0) {
    if (comm.rank() == 0)
      std::fprintf(stderr, "zero-run: error: %s\n", refusal.c_str());
    std::fflush(stderr);
    return 1;
  }
  const std::vector<int> programRank(rankOf.begin(), rankOf.end());
  bool identity = true;
  for (size_t r = 0; r < programRank.size(); ++r)
    identity = identity && programRank[r] == int(r);
  if (status.isOk() && !identity)
    status = comm.reorder(programRank);
  if (!status.isOk())
    return failDuringRun(comm, status);
  run.rt.backend->setRank(comm.rank(), comm.worldSize());
  if (comm.rank() == 0 &&
      std::count(nodes.begin(), nodes.end(), nodes[0]) != int64_t(nodes.size()))
    for (const std::string &line : describePlacement(nodes, programRank))
      std::printf("zero-run: %s\n", line.c_str());
  std::fflush(stdout);
  return 0;
}

/// Phase 1: every rank opens the program, the backend and the weights
/// header, then the ranks agree that all did and that they run the same
/// program (and the same collectives, with --check-collectives). Returns 0,
/// else the exit code.
int openProgramOnEveryRank(RankRun &run) {
  const Options &opts = run.opts;
  Communicator &comm = run.comm;
  bool usageError = false;
  run.threads = kernelThreads(opts, comm);
  Status status = openProgram(run, run.threads, usageError);
  {
    auto watched = run.watch(kAgreeOnProgram);
    if (!agree(comm, status))
      return usageError ? 2 : 1;
  }
  if (int code = placeRanksOnNodes(run))
    return code;
  prepareForNodeLoss(run);
  {
    auto watched = run.watch(kAgreeOnProgram);
    if (!agree(comm, checkOutputsCreatable(run)))
      return 1;
  }
  if (opts.checkCollectives) {
    auto watched = run.watch(kCompareHashes);
    if (!agree(comm, checkCollectiveSequence(comm, *run.program, opts.model)))
      return 1;
  }
  auto watched = run.watch(kCompareHashes);
  uint64_t weightsHash = run.weightsFile
                             ? weightsLayoutHash(*run.program, *run.weightsFile)
                             : kHashSeed;
  status = checkSameProgram(comm, opts.model, run.program->contentHash, opts.weights,
                            weightsHash);
  return agree(comm, status) ? 0 : 1;
}

/// Phase 2 begins: the executor's options (what the reports need, the time
/// limit, whether the streams take turns, how a failure ends the job) and
/// the executor, whose creation agrees across ranks by itself. Returns 0,
/// else the exit code.
int createExecutor(RankRun &run) {
  const Options &opts = run.opts;
  Communicator &comm = run.comm;
  Backend &backend = *run.rt.backend;
  ExecutorOptions &execOptions = run.execOptions;
  execOptions.trackMemory = opts.report || !opts.reportJson.empty();
  // Instruction timings also give the report's per-stream busy/idle times.
  execOptions.trace = !opts.trace.empty() || execOptions.trackMemory;
  execOptions.collectiveTimeoutSeconds = opts.timeout;
  execOptions.prepareConstants = !opts.noPrepack;
  // --overlap auto: the streams take turns when this rank has no core to
  // spare for its communication thread (its kernel threads take all of its
  // cores), so a collective never spins against the kernels.
  execOptions.serializeStreams =
      opts.overlap == "off" ||
      (opts.overlap == "auto" && backend.name() == "cpu" &&
       backend.numThreads() >= defaultKernelThreads(comm.localSize()));
  // Streams that take turns run a communication step only once compute
  // waits for it, so a prefetched gather can take the bytes the previous
  // layer just freed, as it would without prefetch: the program's in-order
  // plan (if it has one). Host streams only, whose kernels finish within
  // their turn.
  run.inOrderPlan = execOptions.serializeStreams && backend.name() == "cpu" &&
                    run.program->hasInOrderPlan();
  if (run.inOrderPlan)
    run.program->useInOrderPlan();
  // Through the data communicator: NCCL's aborts its communicators first.
  execOptions.onTimeout = [&run](const Status &error) {
    printError(run.comm,
               error.message() + run.stepContext() + run.otherNodesContext());
    endJob(run.dataComm(), 1);
  };
  // A failure may leave other ranks inside a collective with this one (and
  // this rank's other streams in a blocking one), so it ends the whole job
  // at once.
  if (comm.worldSize() > 1)
    execOptions.onError = [&run](const Status &error) {
      printError(run.comm, error.message());
      endJob(run.dataComm(), 1);
    };
  Expected<std::unique_ptr<Executor>> executor = Status::error("");
  {
    auto watched = run.watch(kPrepareProgram);
    executor =
        Executor::create(*run.program, backend, run.dataComm(), execOptions);
  }
  if (!executor) {
    printError(comm, executor.status().message());
    return 1;
  }
  run.executor = std::move(*executor);
  return 0;
}

/// The training plan's options: --data, --tokens, --eval-tokens, --steps.
TrainingPlanOptions trainingPlanOptions(const Options &opts) {
  TrainingPlanOptions plan;
  plan.model = opts.model;
  plan.data = opts.data;
  plan.tokens = opts.tokens;
  plan.evalTokens = opts.evalTokens;
  plan.tokenBytes = opts.tokenBytes;
  plan.seed = opts.seed;
  plan.nextLabels = opts.nextLabels;
  plan.steps = opts.steps;
  plan.inputsGiven = !opts.inputs.empty();
  return plan;
}

/// Phase 2: the weights (or zeroed state), the steps of a training run, the
/// --resume checkpoint and the inputs; the ranks agree that all of them
/// loaded. Returns 0, else the exit code.
int bindWeightsAndInputs(RankRun &run) {
  const Options &opts = run.opts;
  // A weights file with checksums (zero-opt --weights-out, zero-run --save)
  // is checked first, the ranks sharing its tensors.
  Status status = run.weightsFile ? run.weightsFile->verifyChecksums(
                                        size_t(run.comm.rank()), size_t(run.comm.worldSize()))
                                  : Status::ok();
  if (status.isOk())
    status = run.weightsFile ? loadGlobals(*run.executor, *run.weightsFile, run.comm.rank(),
                                           &run.weights)
                             : zeroStateGlobals(*run.executor, run.comm.rank());
  const bool training = run.training();
  if (status.isOk() && training)
    status = planTrainingSteps(*run.program, run.comm.rank(),
                               trainingPlanOptions(opts), run.plan);
  if (status.isOk() && !opts.resume.empty())
    status = training ? resumeTraining(*run.executor, run.comm, opts.resume,
                                       run.plan)
                      : Status::error("--resume: " + opts.model +
                                      " is not a training program");
  // Offloaded optimizer state starts on disk: what loading it (masters
  // widened, a checkpoint's state) brought into memory goes back out.
  if (status.isOk())
    run.executor->swapOutOffloaded();
  if (status.isOk() && !(training && (run.plan.data || run.plan.tokens)))
    status = bindInputs(*run.executor, opts.inputs);
  auto watched = run.watch(kAgreeOnInputs);
  return agree(run.comm, status) ? 0 : 1;
}

/// A rank's peak FLOP/s for the MFU: --peak-tflops, else on the CPU
/// backend threads x 2 FMA pipes x the kernels' ISA's f32 lanes (16, 8, 4;
/// 32 for a program with bf16 globals at avx512bf16, whose bf16 products do
/// two products per lane) x 2 FLOPs x the clock (cpufreq's maximum, else
/// /proc/cpuinfo's "cpu MHz"); 0 when unknown (no MFU is shown).
double peakFlopsPerSecond(const Options &opts, const Program &program, int threads) {
  if (opts.peakTflops > 0)
    return opts.peakTflops * 1e12;
  if (opts.backend != "cpu")
    return 0;
  double hz = 0;
  if (std::ifstream f("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"); f) {
    double khz = 0;
    if (f >> khz && khz > 0)
      hz = khz * 1e3;
  }
  if (hz == 0)
    if (std::ifstream f("/proc/cpuinfo"); f)
      for (std::string line; std::getline(f, line);)
        if (line.rfind("cpu MHz", 0) == 0) {
          const size_t colon = line.find(':');
          if (colon != std::string::npos)
            hz = std::strtod(line.c_str() + colon + 1, nullptr) * 1e6;
          break;
        }
  const std::string isa = cpuKernelIsa();
  const bool bf16 = std::any_of(program.globals.begin(), program.globals.end(),
                                [](const GlobalDesc &g) { return g.dtype == DType::BF16; });
  const double lanes = isa == "avx512bf16" ? (bf16 ? 32 : 16)
                       : isa == "avx512"   ? 16
                       : isa == "avx2"     ? 8
                                           : 4;
  return double(threads) * 2 * lanes * 2 * hz;
}

/// Phase 3 of a training program: its optimizer steps (zrt/TrainingRun.h),
/// logged on rank 0. A failure keeps the steps done so far in --log-json
/// (rank 0's) and ends the job. Returns 0, else the exit code.
int runTrainingSteps(RankRun &run) {
  const Options &opts = run.opts;
  Communicator &comm = run.comm;
  const TrainingDesc &training = *run.program->training;
  // --log-every, else the config's steps_per_print, else every step.
  const int64_t logEvery =
      opts.logEvery > 0 ? opts.logEvery : std::max<int64_t>(1, training.stepsPerPrint);
  run.trainingLog = std::make_unique<TrainingLog>(
      run.plan.totalSteps, logEvery,
      comm.rank() == 0 && isatty(STDERR_FILENO) == 1,
      comm.rank() == 0 ? opts.logJson : std::string());
  TrainingLog &log = *run.trainingLog;
  if (comm.rank() == 0 && !training.csvMonitor.empty())
    if (Status s = log.openCsvMonitor(training.csvMonitor,
                                      samplesPerStep(*run.program));
        !s.isOk())
      return failDuringRun(comm, s);
  TrainingRunOptions options;
  // --eval-tokens: every --eval-every steps (else --log-every's) and after
  // the last, the mean loss of --eval-batches batches (else 8).
  options.evalEvery = opts.evalEvery > 0 ? opts.evalEvery : logEvery;
  options.evalBatches = opts.evalBatches > 0 ? opts.evalBatches : 8;
  options.saveDir = opts.saveDir;
  options.saveEvery = opts.saveEvery;
  options.checkCollectives = opts.checkCollectives;
  options.peakFlopsPerSecond =
      peakFlopsPerSecond(opts, *run.program, run.threads) * comm.worldSize();
  Expected<TrainingOutcome> outcome = runTraining(
      *run.executor, run.context(), run.plan, options, log, run.timings);
  if (!outcome) {
    log.finish();
    if (Status flushed = log.flush(); !flushed.isOk())
      printError(comm, flushed.message());
    return failDuringRun(comm, outcome.status());
  }
  if (outcome->nonFiniteStep) {
    reportNonFiniteLoss(comm, log, *run.program, outcome->nonFiniteStep,
                        outcome->nonFiniteLoss);
    return 1;
  }
  log.finish();
  return 0;
}

/// Phase 3 of a forward program: --warmup untimed runs then --repeat timed
/// ones (zrt/ForwardRun.h). A failure may leave other ranks inside a
/// collective with this one, so it ends the whole job. Returns 0, else the
/// exit code.
int runForwardRuns(RankRun &run) {
  ForwardOptions options;
  options.inputs = run.opts.inputs;
  options.warmup = run.opts.warmup;
  options.repeat = run.opts.repeat;
  Status status =
      runForward(*run.executor, run.context(), options, run.timings);
  return status.isOk() ? 0 : failDuringRun(run.comm, status);
}

/// A training run's results: --save and --save-optimizer (every rank takes
/// part: sharded globals are gathered to rank 0), then --log-json (rank 0).
/// `status` keeps the first error; nothing more is written after one.
void saveTrainingResults(RankRun &run, Status &status) {
  const Options &opts = run.opts;
  if (!opts.save.empty()) {
    Status saved = saveGlobals(*run.executor, run.comm, true, opts.save);
    if (status.isOk())
      status = saved;
  }
  if (!opts.saveOptimizer.empty()) {
    Status saved =
        saveGlobals(*run.executor, run.comm, false, opts.saveOptimizer);
    if (status.isOk())
      status = saved;
  }
  if (run.comm.rank() == 0 && status.isOk() && !opts.logJson.empty())
    status = writeText(opts.logJson, run.trainingLog->json().dump(2) + "\n");
}

/// --report and --report-json: every rank's figures, gathered to rank 0,
/// which prints the report and writes the JSON file. `status` keeps the
/// first error; the file is not written after one.
void reportRun(RankRun &run, Status &status) {
  const Options &opts = run.opts;
  Communicator &comm = run.comm;
  std::vector<std::string> ranks;
  {
    auto watched = run.watch(kGatherReports);
    ranks = comm.gatherToRoot(
        describeRank(*run.executor, run.dataComm(), run.weights,
                     run.timings.iterationSeconds, run.timings.iterationBubbles)
            .dump());
  }
  if (comm.rank() != 0)
    return;
  std::vector<nlohmann::json> parsed;
  for (const std::string &r : ranks)
    parsed.push_back(nlohmann::json::parse(r));
  Backend &backend = *run.rt.backend;
  nlohmann::json report =
      describeRun(*run.program, backend.name(), run.dataComm(),
                  backend.numThreads(), parsed);
  report["streams_take_turns"] = run.execOptions.serializeStreams;
  report["in_order_plan"] = run.inOrderPlan;
  if (opts.report)
    std::fputs(formatReport(report).c_str(), stdout);
  if (status.isOk() && !opts.reportJson.empty())
    status = writeText(opts.reportJson, report.dump(2) + "\n");
}

/// --trace: every rank's trace events, gathered to rank 0, which writes the
/// trace. `status` keeps the first error; the file is not written after one.
void writeTrace(RankRun &run, Status &status) {
  Communicator &comm = run.comm;
  std::vector<std::string> ranks;
  {
    auto watched = run.watch(kGatherReports);
    ranks = comm.gatherToRoot(traceEvents(*run.executor, comm.rank()).dump());
  }
  if (comm.rank() != 0)
    return;
  nlohmann::json all = nlohmann::json::array();
  for (const std::string &r : ranks)
    for (nlohmann::json &e : nlohmann::json::parse(r))
      all.push_back(std::move(e));
  if (status.isOk())
    status =
        writeText(run.opts.trace, traceDocument(std::move(all)).dump() + "\n");
}

/// Phase 4: the outputs, a training run's results and the reports (files
/// written by rank 0), then the ranks agree that all were written. Returns
/// the exit code.
int writeResults(RankRun &run) {
  const Options &opts = run.opts;
  Status status = Status::ok();
  if (run.comm.rank() == 0 && !opts.output.empty())
    status = writeOutputs(*run.executor, opts.output);
  if (run.training())
    saveTrainingResults(run, status);
  if (opts.report || !opts.reportJson.empty())
    reportRun(run, status);
  if (!opts.trace.empty())
    writeTrace(run, status);
  std::fflush(stdout);
  auto watched = run.watch(kAgreeOnOutputs);
  return agree(run.comm, status) ? 0 : 1;
}

/// Parses the arguments and runs the program on this rank, phase by phase.
/// Returns the exit code.
int runMain(int argc, char **argv, Communicator &comm) {
  Options opts;
  Status status = parseArguments(argc, argv, opts);
  if (opts.help && status.isOk()) {
    if (comm.rank() == 0)
      std::fputs(kZeroRunUsage, stdout);
    std::fputs(kSimulateUsage, stdout);
    std::fputs(kCalibrateUsage, stdout);
    return 0;
  }
  if (!status.isOk()) {
    agree(comm,
          Status::error(status.message() + " (zero-run --help for usage)"));
    return 2;
  }
  RankRun run(opts, comm);
  run.watchdog = startWatchdog(run);
  if (int code = openProgramOnEveryRank(run))
    return code;
  if (int code = createExecutor(run))
    return code;
  if (int code = bindWeightsAndInputs(run))
    return code;
  if (int code = run.training() ? runTrainingSteps(run) : runForwardRuns(run))
    return code;
  return writeResults(run);
}

} // namespace

int main(int argc, char **argv) {
  // A simulation runs nothing: it starts no MPI and needs no launcher.
  if (wantsSimulation(argc, argv))
    return simulateMain(argc, argv);
  Expected<std::unique_ptr<Communicator>> comm =
      createWorldCommunicator(&argc, &argv);
  if (!comm) {
    std::fprintf(stderr, "zero-run: error: %s\n", comm.status().message().c_str());
    return 1;
  }
  if (wantsCalibration(argc, argv))
    return calibrateMain(argc, argv, **comm);
  int code;
  try {
    code = runMain(argc, argv, **comm);
  } catch (const std::exception &e) {
    // The runtime reports errors as Status values; this is the last resort for
    // what the standard library throws (std::bad_alloc on a huge allocation).
    printError(**comm, std::string("internal error: ") + e.what());
    if ((*comm)->worldSize() > 1)
      endJob(**comm, 1);
    return 1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  return code;
}
