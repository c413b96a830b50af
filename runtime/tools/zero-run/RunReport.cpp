//===- RunReport.cpp - zero-run's --report, --report-json and --trace -----===//
//
// The figures and their meaning are documented in docs/program-format.md
// ("Reports"); the key names here are an interface that tests assert on.
//
//===----------------------------------------------------------------------===//

#include "RunReport.h"

#include "zrt/Backend.h"
#include "zrt/CpuBackend.h"
#include "zrt/Communicator.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>
#include <sstream>
#include <sys/resource.h>

namespace zrt {

namespace {

const OpKind kCollectives[] = {OpKind::AllGather, OpKind::ReduceScatter,
                               OpKind::AllReduce, OpKind::Broadcast,
                               OpKind::AllToAll,  OpKind::Send,
                               OpKind::Recv};

uint64_t peakRssBytes() {
  // VmHWM: the high-water mark of this program's address space. (getrusage's
  // ru_maxrss survives exec: a zero-run started by fork from a large parent,
  // a Python test or bench, reports the parent's resident size.)
  if (std::FILE *f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, f))
      found = std::sscanf(line, "VmHWM: %llu kB", &kib) == 1;
    std::fclose(f);
    if (found)
      return uint64_t(kib) * 1024;
  }
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0)
    return 0;
  return uint64_t(usage.ru_maxrss) * 1024; // Linux reports KiB
}

/// The "bytes_sent_by_group" keys: "world" for group -1 when a collective
/// uses it, then every program group by name ("group N" for an empty or
/// repeated name).
std::vector<std::pair<int, std::string>> groupKeys(const Program &p) {
  std::vector<std::pair<int, std::string>> keys;
  std::set<std::string> used;
  for (const Instruction &inst : p.instructions)
    if (isCollective(inst.kind) && inst.group == -1) {
      keys.push_back({-1, "world"});
      used.insert("world");
      break;
    }
  for (size_t g = 0; g < p.groups.size(); ++g) {
    std::string key = p.groups[g].name;
    if (key.empty() || !used.insert(key).second)
      key = "group " + std::to_string(g);
    keys.push_back({int(g), key});
  }
  return keys;
}

std::string humanBytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, u ? "%.2f %s" : "%.0f %s", v, units[u]);
  return text;
}

/// What this rank holds of the model states of a training program (ZeRO's
/// three kinds): its trained parameters (whole, or its shard at stage 3), their
/// gradients as the compiler recorded them held over the step (whole at
/// stages 0-1, the rank's shard at 2-3), and the optimizer state (fp32
/// masters, moments; sharded at stages 1-3). Only the globals of this rank's
/// pipeline stage count. Nothing for a forward program.
std::optional<nlohmann::json> modelStateBytes(const Program &p, int rank) {
  if (!p.training)
    return std::nullopt;
  const std::vector<bool> held = globalsUsedOn(p, rank);
  uint64_t parameters = 0, gradients = 0, optimizer = 0;
  // Of those, the bytes in swap files (ZeRO-Offload to NVMe; gradients are
  // never offloaded).
  uint64_t offloadedParameters = 0, offloadedOptimizer = 0;
  // And the bytes in host arenas (ZeRO-Offload to the CPU: pinned host
  // memory on a GPU backend).
  uint64_t hostParameters = 0, hostOptimizer = 0;
  for (size_t i = 0; i < p.globals.size(); ++i) {
    const GlobalDesc &g = p.globals[i];
    if (!held[i])
      continue;
    const uint64_t bytes = p.buffers[g.buffer].bytes();
    const bool offloaded = !p.arenas[p.buffers[g.buffer].arena].path.empty();
    const bool host = p.arenas[p.buffers[g.buffer].arena].host;
    if (g.role == GlobalRole::Parameter) {
      parameters += bytes;
      offloadedParameters += offloaded ? bytes : 0;
      hostParameters += host ? bytes : 0;
      if (g.gradient)
        gradients += g.gradient->numel * dtypeSize(g.gradient->dtype);
    } else if (g.role == GlobalRole::OptimizerState) {
      optimizer += bytes;
      offloadedOptimizer += offloaded ? bytes : 0;
      hostOptimizer += host ? bytes : 0;
    }
  }
  nlohmann::json states{{"parameters", parameters},
                        {"gradients", gradients},
                        {"optimizer", optimizer},
                        {"total", parameters + gradients + optimizer}};
  if (offloadedParameters + offloadedOptimizer > 0)
    states["offloaded"] = {{"parameters", offloadedParameters},
                           {"gradients", 0},
                           {"optimizer", offloadedOptimizer}};
  if (hostParameters + hostOptimizer > 0)
    states["host_arena"] = {{"parameters", hostParameters},
                            {"gradients", 0},
                            {"optimizer", hostOptimizer}};
  return states;
}

/// The middle value (the upper one of an even count).
double upperMedian(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

} // namespace

nlohmann::json describeStreams(const Program &p, const RunStats &stats) {
  nlohmann::json streams = nlohmann::json::array();
  for (size_t st = 0; st < p.streams.size(); ++st) {
    double busy = 0, waiting = 0;
    for (const TraceEvent &e : stats.trace) {
      if (e.stream != st)
        continue;
      const OpKind kind = p.instructions[e.instruction].kind;
      (kind == OpKind::Kernel || isCollective(kind) ? busy : waiting) +=
          e.durationUs * 1e-6;
    }
    streams.push_back({{"name", p.streams[st].name},
                       {"busy_s", busy},
                       {"waiting_s", waiting},
                       {"idle_s", std::max(0.0, stats.wallSeconds - busy - waiting)}});
  }
  return streams;
}

namespace {

/// A pipeline stage (instructions that run on some ranks only): the
/// fraction of the run this rank computed nothing, waiting for its
/// neighbours (DeepSpeed's bubble; fill/drain predicts (S-1)/(M+S-1)), and
/// the schedule's own bubble, into `rank`.
void describePipeline(const Program &p, const RunStats &stats, const Communicator &comm,
                      const std::vector<double> &iterationBubbles, nlohmann::json &rank) {
  bool pipelined = false;
  for (const Instruction &inst : p.instructions)
    pipelined |= !inst.ranks.empty();
  if (!pipelined || stats.wallSeconds <= 0)
    return;
  double kernels = 0;
  for (const TraceEvent &e : stats.trace)
    if (p.instructions[e.instruction].kind == OpKind::Kernel)
      kernels += e.durationUs * 1e-6;
  rank["pipeline_kernel_s"] = kernels;
  rank["pipeline_bubble"] = std::max(0.0, 1.0 - kernels / stats.wallSeconds);
  // The prediction: S stages, M micro-batches (the highest F<k> + 1).
  int64_t micro = 0;
  for (const Instruction &inst : p.instructions) {
    std::string step = inst.attrs.getString("pipeline_step", "");
    if (step.size() > 1 && step[0] == 'F' &&
        std::isdigit(static_cast<unsigned char>(step[1])))
      micro = std::max<int64_t>(micro, std::atoll(step.c_str() + 1) + 1);
  }
  if (p.pipelined()) {
    micro = std::max<int64_t>(micro, 1); // a forward without micro-batches
    const int64_t stages = p.worldSize / std::max(1, p.dataParallelSize());
    rank["pipeline_stage"] = comm.rank() / std::max(1, p.dataParallelSize());
    rank["pipeline_predicted_bubble"] =
        double(stages - 1) / double(micro + stages - 1);
  }
  if (std::optional<ScheduleBubble> b = scheduleBubble(p, stats)) {
    rank["pipeline_schedule_s"] = b->windowSeconds;
    rank["pipeline_schedule_bubble"] = b->bubble;
  }
  if (iterationBubbles.size() > 1) {
    rank["iteration_schedule_bubble"] = iterationBubbles;
    rank["pipeline_schedule_bubble_median"] = upperMedian(iterationBubbles);
  }
}

/// ZeRO-Offload to NVMe: the optimizer state (and with offload_param the
/// parameter shards) in swap files, at most buffer_count + 1 consumers' of
/// it resident at a time; and what the rank read from and wrote to storage
/// (/proc/self/io: the swap files' pages, the data, the weights), into `rank`.
void describeOffload(const Executor &executor, nlohmann::json &rank) {
  const Program &p = executor.program();
  const uint64_t offloaded = executor.offloadedBytes();
  if (!offloaded)
    return;
  rank["offloaded_bytes"] = offloaded;
  uint64_t resident = 0; // the plan's bound: the offload arena's lower_bound
  for (const ArenaDesc &a : p.arenas)
    if (!a.path.empty())
      resident += a.lowerBound;
  rank["offload_resident_bound_bytes"] = resident;
  // The swaps: bytes, the streams' time issuing them (not overlapped), the
  // writer thread's time in the writebacks (overlapped), and the faults
  // that waited for storage (reads not hidden by the read-ahead).
  const Executor::SwapStats swaps = executor.swapStats();
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  rank["offload_swap"] = {{"bytes_in", swaps.bytesIn},
                          {"bytes_out", swaps.bytesOut},
                          {"stream_seconds", swaps.streamSeconds},
                          {"writer_seconds", swaps.writerSeconds},
                          {"reader_seconds", swaps.readerSeconds},
                          {"major_page_faults", uint64_t(usage.ru_majflt)}};
  if (std::FILE *f = std::fopen("/proc/self/io", "r")) {
    char line[128];
    unsigned long long v = 0;
    while (std::fgets(line, sizeof line, f)) {
      if (std::sscanf(line, "read_bytes: %llu", &v) == 1)
        rank["storage_read_bytes"] = uint64_t(v);
      else if (std::sscanf(line, "write_bytes: %llu", &v) == 1)
        rank["storage_write_bytes"] = uint64_t(v);
    }
    std::fclose(f);
  }
}

/// Bytes sent and calls by collective kind, and bytes sent by process
/// group, into `rank`.
void describeCommunication(const Program &p, const Communicator &comm, nlohmann::json &rank) {
  nlohmann::json sent, calls;
  uint64_t totalSent = 0;
  for (OpKind k : kCollectives) {
    sent[opKindName(k)] = comm.bytesSent(k);
    calls[opKindName(k)] = comm.callCount(k);
    totalSent += comm.bytesSent(k);
  }
  rank["bytes_sent"] = sent;
  rank["bytes_sent_total"] = totalSent;
  rank["collective_calls"] = calls;
  nlohmann::json byGroup = nlohmann::json::object();
  for (const auto &[group, key] : groupKeys(p))
    byGroup[key] = comm.bytesSentInGroup(group);
  rank["bytes_sent_by_group"] = byGroup;
  // Each collective's exchanges with peers on other nodes, by its algorithm.
  if (std::optional<uint64_t> across = comm.bytesSentAcrossNodes())
    rank["bytes_sent_across_nodes"] = *across;
}

/// Per arena: planned, no-reuse and lower-bound bytes, and the peak live
/// and high-water bytes measured.
nlohmann::json describeArenas(const Program &p, const RunStats &stats) {
  nlohmann::json arenas = nlohmann::json::array();
  for (size_t a = 0; a < p.arenas.size(); ++a) {
    nlohmann::json arena;
    arena["name"] = p.arenas[a].name;
    arena["planned_bytes"] = p.arenas[a].size;
    arena["no_reuse_bytes"] = p.arenas[a].noReuseSize;
    arena["lower_bound_bytes"] = p.arenas[a].lowerBound;
    arena["peak_live_bytes"] =
        a < stats.peakLiveBytes.size() ? stats.peakLiveBytes[a] : 0;
    arena["high_water_bytes"] =
        a < stats.highWaterBytes.size() ? stats.highWaterBytes[a] : 0;
    arenas.push_back(arena);
  }
  return arenas;
}

} // namespace

nlohmann::json describeRank(const Executor &executor, const Communicator &comm,
                            const WeightsStats &weights,
                            const std::vector<double> &iterationSeconds,
                            const std::vector<double> &iterationBubbles) {
  const Program &p = executor.program();
  const RunStats &stats = executor.stats();
  nlohmann::json rank;
  rank["rank"] = comm.rank();
  rank["wall_time_s"] = stats.wallSeconds;
  // The streams' and pipeline's figures need the instruction timings, which
  // zero-run records whenever a report is asked for.
  if (!stats.trace.empty()) {
    rank["streams"] = describeStreams(p, stats);
    describePipeline(p, stats, comm, iterationBubbles, rank);
  }
  if (iterationSeconds.size() > 1) {
    // --repeat: every timed run, and the min and median of them.
    rank["iteration_wall_s"] = iterationSeconds;
    rank["wall_time_min_s"] =
        *std::min_element(iterationSeconds.begin(), iterationSeconds.end());
    rank["wall_time_median_s"] = upperMedian(iterationSeconds);
  }
  rank["peak_rss_bytes"] = peakRssBytes();
  rank["param_bytes_resident"] = weights.residentBytes;
  if (std::optional<nlohmann::json> states = modelStateBytes(p, comm.rank()))
    rank["model_state_bytes"] = *states;
  describeOffload(executor, rank);
  rank["prepared_operand_bytes"] = executor.stats().preparedOperandBytes;
  rank["weights_bytes_read"] = weights.bytesRead;
  describeCommunication(p, comm, rank);
  rank["arenas"] = describeArenas(p, stats);
  // Bytes written on communication streams (gathered parameters, bucket
  // rebuilds, staging) and their views, live at once: measured in this run,
  // and planned (the program run one instruction at a time in order).
  rank["peak_gathered_bytes"] = executor.stats().peakGatheredBytes;
  rank["planned_peak_gathered_bytes"] = executor.stats().plannedPeakGatheredBytes;
  return rank;
}

nlohmann::json describeRun(const Program &program, const std::string &backend,
                           const Communicator &comm, int threads,
                           const std::vector<nlohmann::json> &ranks) {
  nlohmann::json run;
  run["program"] = program.path;
  run["format_version"] = program.version;
  run["world_size"] = comm.worldSize();
  run["backend"] = backend;
  run["communicator"] = comm.name();
  run["threads_per_rank"] = threads;
  if (backend == "cpu")
    run["cpu_isa"] = cpuKernelIsa();
  double wall = 0;
  uint64_t resident = 0, read = 0, sent = 0, across = 0;
  bool acrossOnEveryRank = !ranks.empty();
  for (const nlohmann::json &r : ranks) {
    wall = std::max(wall, r["wall_time_s"].get<double>());
    resident += r["param_bytes_resident"].get<uint64_t>();
    read += r["weights_bytes_read"].get<uint64_t>();
    sent += r["bytes_sent_total"].get<uint64_t>();
    acrossOnEveryRank &= r.contains("bytes_sent_across_nodes");
    if (r.contains("bytes_sent_across_nodes"))
      across += r["bytes_sent_across_nodes"].get<uint64_t>();
  }
  run["wall_time_s"] = wall;
  run["param_bytes_resident_total"] = resident;
  run["weights_bytes_read_total"] = read;
  run["bytes_sent_total"] = sent;
  if (acrossOnEveryRank)
    run["bytes_sent_across_nodes"] = across;
  run["ranks"] = ranks;
  return run;
}

namespace {

/// The table of every rank's arenas: planned, no-reuse, lower-bound,
/// peak-live and high-water bytes.
void formatArenas(const nlohmann::json &run, std::ostringstream &os) {
  char line[512];
  os << "memory per arena (bytes; peak-live = most bytes of live buffers at "
        "once, high-water = highest byte touched):\n";
  std::snprintf(line, sizeof line, "  %-4s %-16s %14s %14s %14s %14s %14s\n",
                "rank", "arena", "planned", "no-reuse", "lower-bound",
                "peak-live", "high-water");
  os << line;
  for (const nlohmann::json &r : run["ranks"])
    for (const nlohmann::json &a : r["arenas"]) {
      std::snprintf(line, sizeof line,
                    "  %-4d %-16s %14llu %14llu %14llu %14llu %14llu\n",
                    r["rank"].get<int>(), a["name"].get<std::string>().c_str(),
                    (unsigned long long)a["planned_bytes"].get<uint64_t>(),
                    (unsigned long long)a["no_reuse_bytes"].get<uint64_t>(),
                    (unsigned long long)a["lower_bound_bytes"].get<uint64_t>(),
                    (unsigned long long)a["peak_live_bytes"].get<uint64_t>(),
                    (unsigned long long)a["high_water_bytes"].get<uint64_t>());
      os << line;
    }
}

/// One rank's lines: wall time and resident bytes, model states, streams,
/// pipeline bubble, gathered bytes, bytes sent by kind and by group.
void formatRank(const nlohmann::json &r, std::ostringstream &os) {
  char line[512];
  os << "  [rank " << r["rank"] << "] wall " << r["wall_time_s"].get<double>()
     << " s, parameters resident " << humanBytes(r["param_bytes_resident"])
     << " (+ " << humanBytes(r["prepared_operand_bytes"])
     << " packed copies of constant operands), weights read "
     << humanBytes(r["weights_bytes_read"]) << ", peak RSS "
     << humanBytes(r["peak_rss_bytes"]) << "\n";
  if (r.contains("model_state_bytes")) {
    const nlohmann::json &m = r["model_state_bytes"];
    os << "  [rank " << r["rank"] << "] model states: parameters "
       << humanBytes(m["parameters"]) << " + gradients " << humanBytes(m["gradients"])
       << " + optimizer " << humanBytes(m["optimizer"]) << " = "
       << humanBytes(m["total"]);
    if (m.contains("offloaded"))
      os << "; offloaded to NVMe: parameters "
         << humanBytes(m["offloaded"]["parameters"]) << ", optimizer "
         << humanBytes(m["offloaded"]["optimizer"]);
    if (m.contains("host_arena"))
      os << "; in host memory (offload device cpu): parameters "
         << humanBytes(m["host_arena"]["parameters"]) << ", optimizer "
         << humanBytes(m["host_arena"]["optimizer"]);
    os << "\n";
  }
  if (r.contains("streams"))
    for (const nlohmann::json &st : r["streams"]) {
      std::snprintf(line, sizeof line,
                    "  [rank %d] stream %-8s busy %.6f s, waiting %.6f s, "
                    "idle %.6f s\n",
                    r["rank"].get<int>(), st["name"].get<std::string>().c_str(),
                    st["busy_s"].get<double>(), st["waiting_s"].get<double>(),
                    st["idle_s"].get<double>());
      os << line;
    }
  if (r.contains("pipeline_bubble")) {
    std::snprintf(line, sizeof line,
                  "  [rank %d] pipeline stage %s: kernels %.6f s of the wall time, "
                  "bubble %.3f",
                  r["rank"].get<int>(),
                  r.contains("pipeline_stage")
                      ? std::to_string(r["pipeline_stage"].get<int>()).c_str()
                      : "?",
                  r["pipeline_kernel_s"].get<double>(), r["pipeline_bubble"].get<double>());
    os << line;
    if (r.contains("pipeline_predicted_bubble")) {
      std::snprintf(line, sizeof line, " (predicted (S-1)/(M+S-1) = %.3f)",
                    r["pipeline_predicted_bubble"].get<double>());
      os << line;
    }
    os << "\n";
  }
  if (r.contains("pipeline_schedule_bubble")) {
    std::snprintf(line, sizeof line,
                  "  [rank %d] pipeline schedule (the step less its own optimizer): %.6f s, "
                  "bubble %.3f\n",
                  r["rank"].get<int>(), r["pipeline_schedule_s"].get<double>(),
                  r["pipeline_schedule_bubble"].get<double>());
    os << line;
  }
  if (r.contains("peak_gathered_bytes"))
    os << "  [rank " << r["rank"] << "] peak gathered bytes: measured "
       << r["peak_gathered_bytes"].get<uint64_t>() << ", planned "
       << r["planned_peak_gathered_bytes"].get<uint64_t>() << "\n";
  os << "  [rank " << r["rank"] << "] bytes sent:";
  for (auto it = r["bytes_sent"].begin(); it != r["bytes_sent"].end(); ++it)
    if (it.value().get<uint64_t>() || r["collective_calls"][it.key()] != 0)
      os << " " << it.key() << " " << humanBytes(it.value()) << " ("
         << r["collective_calls"][it.key()] << " calls)";
  os << " total " << humanBytes(r["bytes_sent_total"]);
  if (r.contains("bytes_sent_across_nodes"))
    os << ", across nodes " << humanBytes(r["bytes_sent_across_nodes"]);
  os << "\n";
  if (r["bytes_sent_by_group"].size() > 1) {
    os << "  [rank " << r["rank"] << "] bytes sent by group:";
    for (auto it = r["bytes_sent_by_group"].begin();
         it != r["bytes_sent_by_group"].end(); ++it)
      os << " " << it.key() << " " << humanBytes(it.value());
    os << "\n";
  }
}

} // namespace

std::string formatReport(const nlohmann::json &run) {
  std::ostringstream os;
  char line[512];
  os << "zero-run report: " << run["program"].get<std::string>() << ", "
     << run["world_size"] << " rank(s), " << run["backend"].get<std::string>()
     << " backend";
  if (run.contains("cpu_isa"))
    os << " (" << run["cpu_isa"].get<std::string>() << ")";
  os << ", " << run["threads_per_rank"] << " thread(s) per rank";
  if (run.contains("streams_take_turns"))
    os << (run["streams_take_turns"].get<bool>()
               ? ", streams take turns (no core to spare for communication)"
               : ", communication overlaps computation");
  if (run.value("in_order_plan", false))
    os << " (in-order memory plan)";
  os << "\n";
  std::snprintf(line, sizeof line, "wall time: %.6f s (slowest rank)\n",
                run["wall_time_s"].get<double>());
  os << line;
  for (const nlohmann::json &r : run["ranks"])
    if (r.contains("iteration_wall_s")) {
      std::snprintf(line, sizeof line,
                    "  [rank %d] %zu timed runs: min %.6f s, median %.6f s\n",
                    r["rank"].get<int>(), r["iteration_wall_s"].size(),
                    r["wall_time_min_s"].get<double>(),
                    r["wall_time_median_s"].get<double>());
      os << line;
    }
  formatArenas(run, os);
  os << "per rank:\n";
  for (const nlohmann::json &r : run["ranks"])
    formatRank(r, os);
  os << "totals: parameters resident "
     << humanBytes(run["param_bytes_resident_total"]) << ", weights read "
     << humanBytes(run["weights_bytes_read_total"]) << ", bytes sent "
     << humanBytes(run["bytes_sent_total"]);
  if (run.contains("bytes_sent_across_nodes"))
    os << ", across nodes " << humanBytes(run["bytes_sent_across_nodes"]);
  os << "\n";
  return os.str();
}

nlohmann::json traceDocument(nlohmann::json events) {
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

nlohmann::json traceEvents(const Executor &executor, int rank) {
  return traceEvents(executor.program(), executor.stats(), rank);
}

nlohmann::json traceEvents(const Program &p, const RunStats &stats, int rank) {
  nlohmann::json events = nlohmann::json::array();
  // A pipeline: one process per stage replica, and a "schedule" track whose
  // spans are the training schedule's steps (F3: micro-batch 3's forward,
  // B1: micro-batch 1's backward), each from the first to the last compute
  // instruction of that step.
  std::string process = "rank " + std::to_string(rank);
  if (p.pipelined())
    process = "stage " + std::to_string(rank / p.dataParallelSize()) + " (" + process + ")";
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank},
                    {"args", {{"name", process}}}});
  for (size_t s = 0; s < p.streams.size(); ++s)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank},
                      {"tid", s}, {"args", {{"name", p.streams[s].name}}}});
  const size_t scheduleTrack = p.streams.size();
  std::string step;
  double stepStart = 0, stepEnd = 0;
  auto closeStep = [&] {
    if (!step.empty())
      events.push_back({{"name", step}, {"cat", "schedule"}, {"ph", "X"},
                        {"ts", stepStart}, {"dur", stepEnd - stepStart}, {"pid", rank},
                        {"tid", scheduleTrack}});
  };
  bool anyStep = false;
  for (const TraceEvent &e : stats.trace) {
    const Instruction &inst = p.instructions[e.instruction];
    const char *cat = inst.kind == OpKind::Kernel  ? "kernel"
                      : isCollective(inst.kind) ? "collective"
                                                : "sync";
    nlohmann::json args = {{"loc", inst.loc}, {"instruction", e.instruction}};
    std::string mine = inst.attrs.getString("pipeline_step", "");
    if (!mine.empty()) {
      args["step"] = mine;
      anyStep = true;
      if (p.streams[size_t(e.stream)].kind == StreamKind::Compute) {
        if (mine != step) {
          closeStep();
          step = mine;
          stepStart = stepEnd = double(e.startUs);
        }
        stepEnd = std::max(stepEnd, double(e.startUs + e.durationUs));
      }
    }
    events.push_back({{"name", inst.op},
                      {"cat", cat},
                      {"ph", "X"},
                      {"ts", e.startUs},
                      {"dur", e.durationUs},
                      {"pid", rank},
                      {"tid", e.stream},
                      {"args", args}});
  }
  closeStep();
  // Memory over time (with --report or --report-json): a counter track per
  // arena, its live bytes at every change (scripts/plot_memory.py draws them).
  for (const MemorySample &m : stats.memoryTimeline)
    events.push_back({{"name", "live bytes: " + p.arenas[m.arena].name},
                      {"cat", "memory"},
                      {"ph", "C"},
                      {"ts", m.us},
                      {"pid", rank},
                      {"args", {{"bytes", m.bytes}}}});
  if (anyStep)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank},
                      {"tid", scheduleTrack}, {"args", {{"name", "schedule"}}}});
  return events;
}

} // namespace zrt
