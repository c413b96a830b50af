//===- Calibration.h - Measuring this machine for --simulate ----*- C++ -*-===//
//
// zero-run --calibrate (docs/simulate.md, "Calibrating this machine"): the
// figures of a machine description (run/MachineModel.h) measured on the
// machine the job runs on, with the backend's own kernels and the job's own
// communicator. Products at a ladder of shapes give the peak rate per element
// type and the efficiency curve; a large elementwise kernel the memory
// bandwidth; programs of one-element kernels run by the executor the cost
// of an instruction (the simulator's launch cost); all-reduces and
// all-gathers between the ranks of one node (and between one rank per node)
// the latency and bandwidth of each link class, fitted to the simulator's own
// collective formulas; a file written, synced and read back the NVMe link.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_RUN_CALIBRATION_H
#define ZRT_RUN_CALIBRATION_H

#include "run/MachineModel.h"

#include "zrt/Backend.h"
#include "zrt/Communicator.h"
#include "zrt/Status.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace zrt {

/// What --calibrate measures and where.
struct CalibrationOptions {
  /// Fewer shapes, sizes and repetitions (seconds, not a minute): for tests.
  bool quick = false;
  /// A folder the NVMe measurement may create a temporary folder in.
  std::string scratchDir = ".";
  /// For the description's name: the CPU's model and the kernels' ISA.
  std::string cpuModel, isa;
};

/// One timed collective: `seconds` (the median of the repetitions) for a
/// collective of `kind` over `ranks` ranks on one link class, of `bytes` as
/// collectiveSeconds counts them.
struct CollectiveTiming {
  OpKind kind = OpKind::AllReduce;
  int ranks = 2;
  double bytes = 0;
  double seconds = 0;
};

/// The latency and bandwidth of one link class that make
/// collectiveSeconds's formulas (run over `algorithm`) closest to `timings`
/// in relative error (least squares); an error when no two timings differ
/// in size or every timing is over one rank.
Expected<LinkModel> fitLink(const std::vector<CollectiveTiming> &timings,
                            CollectiveAlgorithm algorithm);

/// A measured machine: the description and the raw timings behind it.
struct Calibration {
  MachineModel machine;
  /// The description's "note": how the figures were obtained, and which
  /// were not measured (a single process has no link to time).
  std::string note;
  /// The description's "measurements": every timing, by kind.
  nlohmann::json measurements = nlohmann::json::object();
};

/// Measures this rank's device through `backend` and the links between the
/// ranks of `comm` (collective over the world: every rank calls it with the
/// same options). Every rank runs its kernels at the same time, as a
/// program's ranks do; rank 0's timings are the result (the other ranks'
/// Calibration holds theirs, without the link and NVMe figures).
Expected<Calibration> calibrateMachine(Backend &backend, Communicator &comm,
                                       const CalibrationOptions &options);

/// The machine description of `calibration` (the schema loadMachineModel
/// reads), with `sources` citing the measurement on `date`.
nlohmann::json describeCalibration(const Calibration &calibration,
                                   const std::string &date);

} // namespace zrt

#endif // ZRT_RUN_CALIBRATION_H
