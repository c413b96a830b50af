//===- RunReport.h - zero-run's --report, --report-json and --trace -*- C++ -*-===//
//
// Each rank describes its run as JSON (memory per arena, parameter bytes, bytes
// sent per collective kind, trace events); rank 0 gathers them and writes the
// human-readable report, the machine-readable one, and the Chrome trace.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TOOLS_ZERORUN_RUNREPORT_H
#define ZRT_TOOLS_ZERORUN_RUNREPORT_H

#include "zrt/Bindings.h"
#include "zrt/Communicator.h"
#include "zrt/Executor.h"
#include "zrt/RunControl.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace zrt {

/// This rank's figures (the "ranks" entries of --report-json). With more
/// than one timed run: `iterationSeconds` and, for a pipeline stage, each
/// run's scheduleBubble() (zrt/RunControl.h) in `iterationBubbles`.
nlohmann::json describeRank(const Executor &executor, const Communicator &comm,
                            const WeightsStats &weights,
                            const std::vector<double> &iterationSeconds = {},
                            const std::vector<double> &iterationBubbles = {});

/// Per stream: time spent in kernels and collectives (busy), in waits for
/// the other stream (waiting), and neither (idle: the stream had nothing to
/// run), over the run's wall time, from the instruction timings (a real
/// run's, or a simulated step's).
nlohmann::json describeStreams(const Program &program, const RunStats &stats);

/// The whole --report-json document from every rank's describeRank().
nlohmann::json describeRun(const Program &program, const std::string &backend,
                           const Communicator &comm, int threads,
                           const std::vector<nlohmann::json> &ranks);

/// The --report text for describeRun()'s document.
std::string formatReport(const nlohmann::json &run);

/// This rank's trace events (Chrome trace format, pid = rank, tid = stream).
nlohmann::json traceEvents(const Executor &executor, int rank);

/// The same from a run's figures (stats.trace and stats.memoryTimeline): a
/// real run's, or one rank's simulated step (zero-run --simulate).
nlohmann::json traceEvents(const Program &program, const RunStats &stats,
                           int rank);

/// The --trace document of every rank's traceEvents().
nlohmann::json traceDocument(nlohmann::json events);

} // namespace zrt

#endif // ZRT_TOOLS_ZERORUN_RUNREPORT_H
