//===- Calibrate.h - zero-run --calibrate ----------------------*- C++ -*-===//
//
// [mpirun -np N] zero-run --calibrate OUT.json: this machine's description
// measured (run/Calibration.h) and written where --simulate reads one.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TOOLS_ZERORUN_CALIBRATE_H
#define ZRT_TOOLS_ZERORUN_CALIBRATE_H

#include "zrt/Communicator.h"

namespace zrt {

/// zero-run --help's part on --calibrate.
extern const char *const kCalibrateUsage;

/// Whether argv asks for --calibrate.
bool wantsCalibration(int argc, char **argv);

/// zero-run's main for a --calibrate command line, on every rank of `comm`.
/// Returns the exit code (2 for a usage error, 1 when a measurement or the
/// output fails).
int calibrateMain(int argc, char **argv, Communicator &comm);

} // namespace zrt

#endif // ZRT_TOOLS_ZERORUN_CALIBRATE_H
