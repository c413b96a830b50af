//===- Simulate.cpp - zero-run --simulate ---------------------------------===//
//
// One process, no communicator: the program and the machine description are
// read, every rank's step simulated (run/Simulation.h), and the results
// written as a real run writes its own: the --report-json document's
// "simulation" object (docs/simulate.md) and a --trace with one process per
// rank and one track per stream, from the same trace writer.
//
//===----------------------------------------------------------------------===//

#include "Simulate.h"

#include "Options.h"
#include "RunReport.h"

#include "run/Simulation.h"

#include "zrt/OutputFile.h"
#include "zrt/Program.h"

#include <cstdio>

namespace zrt {

namespace {

Status writeJson(const std::string &path, const nlohmann::json &doc) {
  const std::string text = doc.dump(2) + "\n";
  return writeFileAtomically(
      path, [&](int fd) { return writeAllToFd(fd, text.data(), text.size()); });
}

/// The --report lines: the step and its breakdown, then each rank's peak.
void printSummary(const nlohmann::json &sim) {
  std::printf(
      "zero-run --simulate: %s on %s (%s: %d node(s), %d rank(s) per node)\n",
      sim["step"].get<std::string>().c_str(),
      sim["machine_name"].get<std::string>().c_str(),
      sim["machine"].get<std::string>().c_str(), sim["nodes"].get<int>(),
      sim["ranks_per_node"].get<int>());
  std::printf(
      "  step %.6g s: compute %.6g s, exposed communication %.6g s, "
      "offload I/O %.6g s, bubble %.6g s (means over ranks); MFU %.3f\n",
      sim["step_s"].get<double>(), sim["compute_s"].get<double>(),
      sim["exposed_communication_s"].get<double>(),
      sim["offload_io_s"].get<double>(), sim["bubble_s"].get<double>(),
      sim["mfu"].get<double>());
  for (const nlohmann::json &r : sim["ranks"])
    std::printf("  [rank %d] node %d, peak %llu bytes (device %llu%s)\n",
                r["rank"].get<int>(), r["node"].get<int>(),
                (unsigned long long)r["peak_bytes"].get<uint64_t>(),
                (unsigned long long)r["device_peak_bytes"].get<uint64_t>(),
                r["fits_device_memory"].get<bool>()
                    ? ""
                    : ", MORE than the device holds");
}

/// Reads, simulates, writes. Returns the exit code.
int simulate(const Options &opts) {
  auto fail = [](const Status &s) {
    std::fprintf(stderr, "zero-run: error: %s\n", s.message().c_str());
    return 1;
  };
  for (const auto &[flag, path] :
       {std::pair<const char *, std::string>{"--report-json", opts.reportJson},
        {"--trace", opts.trace}})
    if (!path.empty())
      if (Status s = checkCreatable(flag, path); !s.isOk())
        return fail(s);
  Expected<MachineModel> machine = loadMachineModel(opts.simulate);
  if (!machine)
    return fail(machine.status());
  Expected<Program> program = loadProgram(opts.model);
  if (!program)
    return fail(program.status());
  SimulationOptions options;
  options.nodes = opts.nodes;
  Expected<Simulation> sim = simulateProgram(*program, *machine, options);
  if (!sim)
    return fail(sim.status());
  nlohmann::json described = describeSimulation(*program, *machine, *sim);
  // Each rank's streams as a run's report gives them (busy, waiting, idle).
  for (const RankSimulation &r : sim->ranks)
    described["ranks"][size_t(r.rank)]["streams"] =
        describeStreams(*program, r.stats);
  if (opts.report || opts.reportJson.empty())
    printSummary(described);
  if (!opts.reportJson.empty()) {
    nlohmann::json doc = {{"program", program->path},
                          {"format_version", program->version},
                          {"world_size", program->worldSize},
                          {"simulation", described}};
    if (Status s = writeJson(opts.reportJson, doc); !s.isOk())
      return fail(s);
  }
  if (!opts.trace.empty()) {
    nlohmann::json events = nlohmann::json::array();
    for (const RankSimulation &r : sim->ranks)
      for (nlohmann::json &e : traceEvents(*program, r.stats, r.rank))
        events.push_back(std::move(e));
    if (Status s = writeJson(opts.trace, traceDocument(std::move(events)));
        !s.isOk())
      return fail(s);
  }
  return 0;
}

} // namespace

int simulateMain(int argc, char **argv) {
  Options opts;
  Status status = checkSimulationOptions(argc, argv);
  if (status.isOk())
    status = parseArguments(argc, argv, opts);
  if (opts.help && status.isOk()) {
    std::fputs(kZeroRunUsage, stdout);
    std::fputs(kSimulateUsage, stdout);
    return 0;
  }
  if (!status.isOk()) {
    std::fprintf(stderr, "zero-run: error: %s (zero-run --help for usage)\n",
                 status.message().c_str());
    return 2;
  }
  return simulate(opts);
}

} // namespace zrt
