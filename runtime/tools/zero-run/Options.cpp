//===- Options.cpp - zero-run's command line -------------------------------===//
//
// The usage text, the option tables and the parsing and checks Options.h
// declares.
//
//===----------------------------------------------------------------------===//

#include "Options.h"

#include "zrt/OutputFile.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>
#include <utility>
#ifdef __linux__
#include <sched.h>
#endif

namespace zrt {

const char *const kZeroRunUsage =
    "usage: [mpirun -np N] zero-run MODEL.zrt [options]\n"
    "  --weights FILE.safetensors   parameters and state (each rank reads its "
    "shards)\n"
    "  --input NAME=FILE.npy        one program input (repeatable)\n"
    "  --input FILE.safetensors     every tensor named like a program input\n"
    "  --output FILE.safetensors    write the program outputs (rank 0)\n"
    "  --report                     print time, memory and communication "
    "figures\n"
    "  --report-json FILE           write the same figures as JSON (rank 0)\n"
    "  --trace FILE.json            write a Chrome/Perfetto trace of all ranks\n"
    "  --threads N                  kernel threads per rank (default: the cores "
    "this rank may run on)\n"
    "  --overlap auto|on|off        communication overlaps computation (on), or the\n"
    "                               streams take turns (off); auto: off when the\n"
    "                               kernel threads take every core of the rank\n"
    "  --repeat K                   run the program K times, timing each "
    "(default 1); the report gives min and median\n"
    "  --warmup W                   untimed runs first (default 0)\n"
    "  --no-prepack                 keep no packed copy of constant GEMM weights\n"
    "                               (less memory, slower products)\n"
    "  --timeout SECONDS            end the job when one collective takes "
    "longer (default 600; 0: wait forever)\n"
    "  --check-collectives          compare every rank's collectives (kind, bytes, "
    "group) with rank 0's\n"
    "                               before the run and after every step; stop "
    "naming the first difference\n"
    "training programs (each run is one optimizer step):\n"
    "  --data PATH                  a safetensors file, or a directory of them "
    "(name order),\n"
    "                               with an array [steps, B, ...] per program "
    "input (B = batch x ranks)\n"
    "  --tokens FILE                a flat file of token ids (nanoGPT's train.bin): "
    "each step draws\n"
    "                               B windows of the sequence length at seeded "
    "random offsets,\n"
    "                               the same at any world size (needs --steps)\n"
    "  --tokens-dtype u16|u32       the file's token type (default u16)\n"
    "  --seed S                     the windows' seed (default 0)\n"
    "  --labels same|next           the input \"labels\": the window itself "
    "(default; Hugging\n"
    "                               Face models shift inside) or the next "
    "token's window\n"
    "  --eval-tokens FILE           evaluate on this token file (same dtype and "
    "labels as --tokens):\n"
    "                               the loss's forward only, dropout off, "
    "nothing updated; every\n"
    "                               --eval-every steps and after the last, the "
    "mean loss of\n"
    "                               --eval-batches fixed batches (batch e: the "
    "windows of step e)\n"
    "  --eval-every K               steps between evaluations (default: "
    "--log-every's)\n"
    "  --eval-batches E             batches per evaluation (default 8)\n"
    "  --peak-tflops T              a rank's peak TFLOP/s for the MFU on the "
    "progress line (default\n"
    "                               on the CPU: threads x 2 FMA pipes x the "
    "ISA's f32 lanes x 2 x clock)\n"
    "  --steps N                    steps to run (default: every step of "
    "--data; --input gives one)\n"
    "  --log-every K                log every K steps on stdout (default: the "
    "config's steps_per_print,\n"
    "                               else 1; the last step always)\n"
    "  --log-json FILE              every step's loss, grad_norm, lr and "
    "time as JSON (rank 0)\n"
    "  --save FILE.safetensors      the trained parameters (f32), after the "
    "last step (rank 0)\n"
    "  --save-optimizer FILE        the optimizer state and step counter "
    "(rank 0)\n"
    "  --save-dir DIR               checkpoints (parameters, optimizer state, "
    "manifest) in DIR/step-N,\n"
    "                               DIR/latest naming the newest; atomic\n"
    "  --save-every K               a checkpoint every K steps (default: after "
    "the last step)\n"
    "  --resume DIR                 continue from DIR's newest checkpoint up to "
    "--steps (any world\n"
    "                               size or pipeline layout)\n"
#ifdef ZRT_HAVE_CUDA
    "  --backend cpu|cuda           where to run (default cpu)\n"
#endif
    "  --help                       this text\n"
    "environment:\n"
    "  ZRT_CPU_ISA=avx512bf16|avx512|avx2|generic  lower the instruction set of "
    "the CPU kernels' products\n"
    "                               (default: the CPU's best); bits may differ "
    "between ISAs,\n"
    "                               never between layouts on one\n";

const char *const kSimulateUsage =
    "simulation (no kernel runs, no MPI; docs/simulate.md):\n"
    "  --simulate MACHINE.json      simulate one step of every rank on the "
    "machine\n"
    "                               described there (machines/*.json); "
    "--report,\n"
    "                               --report-json and --trace as for a run\n"
    "  --nodes K                    spread the ranks over K nodes (default: "
    "rank r\n"
    "                               on node r / devices_per_node)\n";

namespace {

/// The options that take no value, and the member each sets.
const std::pair<const char *, bool Options::*> kFlagOptions[] = {
    {"--help", &Options::help},
    {"-h", &Options::help},
    {"--report", &Options::report},
    {"--check-collectives", &Options::checkCollectives},
    {"--no-prepack", &Options::noPrepack},
};

/// The options whose value is kept as given.
const std::pair<const char *, std::string Options::*> kTextOptions[] = {
    {"--weights", &Options::weights},        {"--output", &Options::output},
    {"--report-json", &Options::reportJson}, {"--trace", &Options::trace},
    {"--backend", &Options::backend},        {"--simulate", &Options::simulate},
};

/// The training options that name a file or a directory.
const std::pair<const char *, std::string Options::*> kTrainingPathOptions[] = {
    {"--data", &Options::data},
    {"--tokens", &Options::tokens},
    {"--eval-tokens", &Options::evalTokens},
    {"--log-json", &Options::logJson},
    {"--save", &Options::save},
    {"--save-optimizer", &Options::saveOptimizer},
    {"--save-dir", &Options::saveDir},
    {"--resume", &Options::resume},
};

/// The training options that take a positive count.
const std::pair<const char *, int64_t Options::*> kTrainingCountOptions[] = {
    {"--steps", &Options::steps},
    {"--log-every", &Options::logEvery},
    {"--save-every", &Options::saveEvery},
    {"--eval-every", &Options::evalEvery},
    {"--eval-batches", &Options::evalBatches},
};

/// The other options that take a value, each checked by storeCheckedValue.
const char *const kCheckedValueOptions[] = {
    "--input",  "--threads",     "--overlap",      "--timeout",
    "--repeat", "--warmup",      "--tokens-dtype", "--seed",
    "--labels", "--peak-tflops", "--nodes"};

/// The entry of `table` for option `name`, or null.
template <typename Entry, size_t N>
const Entry *findOption(const Entry (&table)[N], const std::string &name) {
  for (const Entry &entry : table)
    if (name == entry.first)
      return &entry;
  return nullptr;
}

/// Whether option `name` takes a value.
bool takesValue(const std::string &name) {
  return findOption(kTextOptions, name) ||
         findOption(kTrainingPathOptions, name) ||
         findOption(kTrainingCountOptions, name) ||
         std::find(std::begin(kCheckedValueOptions),
                   std::end(kCheckedValueOptions),
                   name) != std::end(kCheckedValueOptions);
}

/// A base-10 count in [lowest, highest] that is all of `text`, or nothing.
std::optional<long long> parseCount(const std::string &text, long long lowest,
                                    long long highest) {
  char *end = nullptr;
  long long n = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || n < lowest || n > highest)
    return std::nullopt;
  return n;
}

/// --input NAME=FILE.npy, or --input FILE.safetensors.
Status storeInput(const std::string &value, Options &opts) {
  size_t eq = value.find('=');
  if (eq != std::string::npos) {
    if (eq == 0 || eq + 1 == value.size())
      return Status::error("--input " + value + ": expected NAME=FILE.npy");
    std::string path = value.substr(eq + 1);
    if (path.size() < 4 || path.compare(path.size() - 4, 4, ".npy") != 0)
      return Status::error("--input " + value +
                           ": NAME=FILE takes a .npy file; pass "
                           "safetensors files without NAME=");
    opts.inputs.push_back({value.substr(0, eq), path});
  } else if (value.size() >= 4 &&
             value.compare(value.size() - 4, 4, ".npy") == 0) {
    return Status::error("--input " + value +
                         ": .npy inputs need NAME=FILE.npy (the "
                         "program input's name); pass --input NAME=" +
                         value);
  } else {
    opts.inputs.push_back({"", value});
  }
  return Status::ok();
}

/// The value of --input, --overlap, --timeout, --repeat, --warmup or
/// --threads, checked.
Status storeCheckedValue(const std::string &arg, const std::string &value,
                         Options &opts) {
  if (arg == "--input")
    return storeInput(value, opts);
  if (arg == "--tokens-dtype" || arg == "--seed" || arg == "--labels")
    opts.trainingFlags.push_back(arg);
  if (arg == "--nodes") {
    std::optional<long long> n = parseCount(value, 1, 100000);
    if (!n)
      return Status::error("--nodes " + value +
                           ": expected a positive count of nodes");
    opts.nodes = int(*n);
    return Status::ok();
  }
  if (arg == "--peak-tflops") {
    opts.trainingFlags.push_back(arg);
    char *end = nullptr;
    const double t = std::strtod(value.c_str(), &end);
    if (value.empty() || *end || !std::isfinite(t) || t <= 0)
      return Status::error("--peak-tflops " + value +
                           ": expected a rank's peak in TFLOP/s (a positive number)");
    opts.peakTflops = t;
  } else if (arg == "--tokens-dtype") {
    if (value != "u16" && value != "u32")
      return Status::error("--tokens-dtype " + value + ": expected u16 or u32");
    opts.tokenBytes = value == "u16" ? 2 : 4;
  } else if (arg == "--seed") {
    char *end = nullptr;
    errno = 0;
    const unsigned long long seed = std::strtoull(value.c_str(), &end, 10);
    if (value.empty() || *end || value[0] == '-' || errno == ERANGE)
      return Status::error("--seed " + value + ": expected a non-negative integer");
    opts.seed = seed;
  } else if (arg == "--labels") {
    if (value != "same" && value != "next")
      return Status::error("--labels " + value + ": expected same or next");
    opts.nextLabels = value == "next";
  } else if (arg == "--overlap") {
    if (value != "auto" && value != "on" && value != "off")
      return Status::error("--overlap " + value + ": expected auto, on or off");
    opts.overlap = value;
  } else if (arg == "--timeout") {
    char *end = nullptr;
    double t = std::strtod(value.c_str(), &end);
    if (value.empty() || *end || !std::isfinite(t) || t < 0 || t > 1e9)
      return Status::error("--timeout " + value +
                           ": expected seconds (0 waits forever)");
    opts.timeout = t;
  } else if (arg == "--repeat" || arg == "--warmup") {
    const bool repeat = arg == "--repeat";
    const long long lowest = repeat ? 1 : 0;
    std::optional<long long> n = parseCount(value, lowest, 1000000);
    if (!n)
      return Status::error(arg + " " + value +
                           ": expected a count >= " + std::to_string(lowest));
    (repeat ? opts.repeat : opts.warmup) = int(*n);
    (repeat ? opts.repeatGiven : opts.warmupGiven) = true;
  } else {
    std::optional<long long> n = parseCount(value, 1, 4096);
    if (!n)
      return Status::error("--threads " + value +
                           ": expected a positive count");
    opts.threads = int(*n);
  }
  return Status::ok();
}

/// Stores the value of `arg`, an option that takes one.
Status storeValue(const std::string &arg, const std::string &value,
                  Options &opts) {
  if (const auto *text = findOption(kTextOptions, arg)) {
    opts.*(text->second) = value;
    return Status::ok();
  }
  if (const auto *path = findOption(kTrainingPathOptions, arg)) {
    if (value.empty())
      return Status::error(arg + " needs a path");
    opts.*(path->second) = value;
    opts.trainingFlags.push_back(arg);
    return Status::ok();
  }
  if (const auto *count = findOption(kTrainingCountOptions, arg)) {
    std::optional<long long> n = parseCount(value, 1, 1ll << 40);
    if (!n)
      return Status::error(arg + " " + value + ": expected a positive count");
    opts.*(count->second) = int64_t(*n);
    opts.trainingFlags.push_back(arg);
    return Status::ok();
  }
  return storeCheckedValue(arg, value, opts);
}

/// Checks that this zero-run has the --backend asked for.
Status checkBackendName(const Options &opts) {
  if (opts.backend != "cpu"
#ifdef ZRT_HAVE_CUDA
      && opts.backend != "cuda"
#endif
  )
    return Status::error("--backend " + opts.backend +
                         ": this zero-run has the backends: cpu"
#ifdef ZRT_HAVE_CUDA
                         ", cuda"
#endif
    );
  return Status::ok();
}

/// Checks the options together, once all are parsed.
Status checkArguments(const Options &opts) {
  if (!opts.help && opts.model.empty())
    return Status::error("no program given");
  if (opts.saveEvery > 0 && opts.saveDir.empty())
    return Status::error("--save-every needs --save-dir DIR");
  if (opts.nodes > 0 && opts.simulate.empty())
    return Status::error(
        "--nodes K: only with --simulate MACHINE.json (a run learns "
        "the nodes from the launcher)");
  // Outputs never overwrite what the run reads, nor each other.
  ZRT_RETURN_IF_ERROR(checkOutputPaths(opts));
  return checkBackendName(opts);
}

} // namespace

/// Checks that no output overwrites what the run reads, nor another output.
Status checkOutputPaths(const Options &opts) {
  std::vector<std::pair<std::string, std::string>> reads = {
      {"the program", opts.model},
      {"--weights", opts.weights},
      {"--data", opts.data},
      {"--tokens", opts.tokens},
      {"--eval-tokens", opts.evalTokens},
      {"--simulate", opts.simulate}};
  for (const auto &[name, path] : opts.inputs)
    reads.push_back({"--input", path});
  std::vector<std::pair<std::string, std::string>> writes = {
      {"--output", opts.output},
      {"--report-json", opts.reportJson},
      {"--trace", opts.trace},
      {"--log-json", opts.logJson},
      {"--save", opts.save},
      {"--save-optimizer", opts.saveOptimizer}};
  for (size_t i = 0; i < writes.size(); ++i) {
    const auto &[flag, path] = writes[i];
    if (path.empty())
      continue;
    for (const auto &[what, source] : reads)
      if (!source.empty() && (path == source || isSameFile(path, source)))
        return Status::error(flag + " " + path + " is " + what +
                             "'s file; writing it would destroy an input; "
                             "choose another path");
    for (size_t j = 0; j < i; ++j)
      if (path == writes[j].second && path != "/dev/null")
        return Status::error(flag + " and " + writes[j].first + " both name " +
                             path + "; give each output its own file");
  }
  return Status::ok();
}

int allowedCores() {
#ifdef __linux__
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0)
    return CPU_COUNT(&mask);
#endif
  return 0;
}

int defaultKernelThreads(int localRanks) {
  int cores = int(std::thread::hardware_concurrency());
  const int allowed = allowedCores();
  if (allowed > 0 && allowed < cores)
    return allowed;
  return std::max(1, cores / std::max(1, localRanks));
}

bool givesOption(int argc, char **argv, const std::string &flag) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == flag || arg.rfind(flag + "=", 0) == 0)
      return true;
  }
  return false;
}

bool wantsSimulation(int argc, char **argv) {
  return givesOption(argc, argv, "--simulate");
}

Status checkSimulationOptions(int argc, char **argv) {
  const char *const read[] = {
      "--simulate", "--nodes", "--report", "--report-json",
      "--trace",    "--help",  "-h"};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("-", 0) != 0 || arg.size() < 2)
      continue;
    arg = arg.substr(0, arg.find('='));
    if (std::find(std::begin(read), std::end(read), arg) == std::end(read))
      return Status::error(
          arg + ": not used by --simulate, which runs nothing (it reads "
                "the program and the machine description only; it "
                "takes --nodes, --report, --report-json and --trace)");
    if (takesValue(arg) && argv[i][arg.size()] != '=')
      ++i; // its value
  }
  return Status::ok();
}

/// Parses argv; `--opt value` and `--opt=value` are both accepted.
Status parseArguments(int argc, char **argv, Options &opts) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    bool hasValue = false;
    if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        hasValue = true;
      }
    }
    if (const auto *flag = findOption(kFlagOptions, arg)) {
      if (hasValue)
        return Status::error(arg + " takes no value");
      opts.*(flag->second) = true;
    } else if (takesValue(arg)) {
      if (!hasValue) {
        if (i + 1 >= argc)
          return Status::error(arg + " needs a value");
        value = argv[++i];
      }
      ZRT_RETURN_IF_ERROR(storeValue(arg, value, opts));
    } else if (arg.rfind("-", 0) == 0 && arg.size() > 1) {
      return Status::error("unknown option " + arg);
    } else if (opts.model.empty()) {
      opts.model = arg;
    } else {
      return Status::error("unexpected argument " + arg + " (the model is " +
                           opts.model + ")");
    }
  }
  return checkArguments(opts);
}

/// Checks the options that depend on whether the program trains: the
/// training options need a training program, and a training program refuses
/// --repeat/--warmup (they would train extra steps). Errors are usage errors.
Status checkProgramOptions(const Options &opts, const Program &program) {
  if (!program.training) {
    if (!opts.trainingFlags.empty()) {
      std::vector<std::string> seen;
      std::string flags;
      for (const std::string &f : opts.trainingFlags)
        if (std::find(seen.begin(), seen.end(), f) == seen.end()) {
          seen.push_back(f);
          flags += (flags.empty() ? "" : ", ") + f;
        }
      return Status::error(flags + ": only for training programs, and " +
                           program.path + " has no training table (it is a "
                           "forward program)");
    }
    return Status::ok();
  }
  if (opts.repeatGiven || opts.warmupGiven)
    return Status::error(std::string(opts.repeatGiven ? "--repeat" : "--warmup") +
                         ": " + program.path + " is a training program, where "
                         "every run is an optimizer step, so repeated runs "
                         "would train extra steps; use --steps N");
  if (int(!opts.data.empty()) + int(!opts.inputs.empty()) + int(!opts.tokens.empty()) > 1)
    return Status::error("--data, --tokens and --input each give the program's inputs; "
                         "pass one of them");
  if (!opts.tokens.empty() && opts.steps == 0)
    return Status::error("--tokens " + opts.tokens + ": a token file has no last step; "
                         "pass --steps N");
  auto given = [&](const char *flag) {
    return std::find(opts.trainingFlags.begin(), opts.trainingFlags.end(), flag) !=
           opts.trainingFlags.end();
  };
  for (const char *flag : {"--tokens-dtype", "--seed", "--labels"})
    if (opts.tokens.empty() && opts.evalTokens.empty() && given(flag))
      return Status::error(std::string(flag) + ": only with --tokens FILE or --eval-tokens FILE");
  for (const char *flag : {"--eval-every", "--eval-batches"})
    if (opts.evalTokens.empty() && given(flag))
      return Status::error(std::string(flag) + ": only with --eval-tokens FILE");
  if (!opts.evalTokens.empty() && !program.evaluable())
    return Status::error("--eval-tokens: " + program.path +
                         " does not say which instructions compute its loss (it was "
                         "compiled by an older zero-opt); compile it again");
  if (!opts.inputs.empty() && opts.steps > 1)
    return Status::error("--steps " + std::to_string(opts.steps) +
                         " with --input: --input gives the inputs of one "
                         "step; pass --data for more steps");
  return Status::ok();
}

} // namespace zrt
