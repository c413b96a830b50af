//===- Calibrate.cpp - zero-run --calibrate -------------------------------===//
//
// Every rank parses the same command line, opens the CPU backend with its
// share of the cores (as a run would) and takes part in the measurement;
// rank 0 writes the description atomically (a temporary file renamed, so no
// partial file is ever under OUT's name). The ranks agree on the outcome
// before the measurement (OUT can be created) and after it, so that a
// failure on one rank ends every rank with its message.
//
//===----------------------------------------------------------------------===//

#include "Calibrate.h"

#include "JobFailure.h"
#include "Options.h"

#include "run/Calibration.h"

#include "zrt/Agreement.h"
#include "zrt/CpuBackend.h"
#include "zrt/OutputFile.h"

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

namespace zrt {

const char *const kCalibrateUsage =
    "calibration (docs/simulate.md, \"Calibrating this machine\"):\n"
    "  [mpirun -np N] zero-run --calibrate OUT.json [--threads T] [--quick]\n"
    "                             [--calibrate-dir DIR]\n"
    "                               measure this machine's kernels, memory, "
    "links\n"
    "                               and disk into a machine description for\n"
    "                               --simulate (DIR: where the disk is timed;\n"
    "                               default OUT's folder)\n";

namespace {

struct CalibrateOptions {
  std::string out, dir;
  int threads = 0;
  bool quick = false, help = false;
};

/// Parses a --calibrate command line: only the options it reads.
Status parseCalibrateOptions(int argc, char **argv, CalibrateOptions &opts) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    const size_t eq = arg.find('=');
    const bool inlineValue = arg.rfind("--", 0) == 0 && eq != std::string::npos;
    if (inlineValue) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    if (arg == "--quick" || arg == "--help" || arg == "-h") {
      (arg == "--quick" ? opts.quick : opts.help) = true;
      continue;
    }
    if (arg != "--calibrate" && arg != "--threads" && arg != "--calibrate-dir")
      return Status::error(
          arg + ": not used by --calibrate (it takes --threads, --quick and "
                "--calibrate-dir)");
    if (!inlineValue) {
      if (i + 1 >= argc)
        return Status::error(arg + ": expected a value");
      value = argv[++i];
    }
    if (arg == "--calibrate")
      opts.out = value;
    else if (arg == "--calibrate-dir")
      opts.dir = value;
    else {
      char *end = nullptr;
      const long t = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end || t < 1 || t > 4096)
        return Status::error("--threads " + value +
                             ": expected a positive number of threads");
      opts.threads = int(t);
    }
  }
  if (opts.out.empty() && !opts.help)
    return Status::error("--calibrate: expected the output file OUT.json");
  if (opts.dir.empty()) {
    opts.dir = std::filesystem::path(opts.out).parent_path().string();
    if (opts.dir.empty())
      opts.dir = ".";
  }
  return Status::ok();
}

/// /proc/cpuinfo's "model name", or "" where there is none.
std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 &&
        line.find(':') != std::string::npos) {
      std::string name = line.substr(line.find(':') + 1);
      return name.substr(name.find_first_not_of(' '));
    }
  return "";
}

std::string utcNow() {
  const std::time_t now = std::time(nullptr);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return text;
}

/// Rank 0 checks that OUT can be created and DIR is a folder.
Status checkOutputs(const CalibrateOptions &opts, const Communicator &comm) {
  if (comm.rank() != 0)
    return Status::ok();
  ZRT_RETURN_IF_ERROR(checkCreatable("--calibrate", opts.out));
  if (!std::filesystem::is_directory(opts.dir))
    return Status::error("--calibrate-dir " + opts.dir + ": not a folder");
  return Status::ok();
}

/// Measures, and on rank 0 writes OUT and says what it measured.
Status calibrate(const CalibrateOptions &opts, Communicator &comm) {
  ZRT_RETURN_IF_ERROR(checkCpuKernelIsa());
  std::unique_ptr<Backend> backend = createCpuBackend(
      opts.threads ? opts.threads : defaultKernelThreads(comm.localSize()));
  backend->setRank(comm.rank(), comm.worldSize());
  CalibrationOptions options;
  options.quick = opts.quick;
  options.scratchDir = opts.dir;
  options.cpuModel = cpuModel();
  options.isa = cpuKernelIsa();
  Expected<Calibration> calibration = calibrateMachine(*backend, comm, options);
  if (!calibration)
    return calibration.status();
  if (comm.rank() != 0)
    return Status::ok();
  const std::string text =
      describeCalibration(*calibration, utcNow()).dump(2) + "\n";
  ZRT_RETURN_IF_ERROR(writeFileAtomically(opts.out, [&](int fd) {
    return writeAllToFd(fd, text.data(), text.size());
  }));
  const MachineModel &m = calibration->machine;
  std::printf("zero-run --calibrate: %s: %s\n"
              "  f32 %.4g FLOP/s, bf16 %.4g, f16 %.4g; memory %.4g B/s; "
              "launch %.3g s\n"
              "  intra_node %.4g B/s + %.3g s; nvme %.4g B/s + %.3g s\n",
              opts.out.c_str(), m.name.c_str(), m.device.peakF32,
              m.device.peakBF16, m.device.peakF16, m.device.memoryBandwidth,
              m.device.launchSeconds, m.link(LinkClass::IntraNode).bandwidth,
              m.link(LinkClass::IntraNode).latency,
              m.link(LinkClass::Nvme).bandwidth,
              m.link(LinkClass::Nvme).latency);
  return Status::ok();
}

} // namespace

bool wantsCalibration(int argc, char **argv) {
  return givesOption(argc, argv, "--calibrate");
}

int calibrateMain(int argc, char **argv, Communicator &comm) {
  CalibrateOptions opts;
  Status status = parseCalibrateOptions(argc, argv, opts);
  if (!status.isOk()) { // the same on every rank: rank 0 says it
    if (comm.rank() == 0)
      std::fprintf(stderr, "zero-run: error: %s (zero-run --help for usage)\n",
                   status.message().c_str());
    return 2;
  }
  if (opts.help) {
    if (comm.rank() == 0)
      std::fputs(kCalibrateUsage, stdout);
    return 0;
  }
  for (bool measured : {false, true}) {
    Status agreed = agreeOnOutcome(comm, measured ? calibrate(opts, comm)
                                                  : checkOutputs(opts, comm));
    if (!agreed.isOk()) {
      printError(comm, agreed.message());
      return 1;
    }
  }
  std::fflush(stdout);
  return 0;
}

} // namespace zrt
