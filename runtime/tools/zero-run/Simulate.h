//===- Simulate.h - zero-run --simulate ------------------------*- C++ -*-===//
//
// zero-run P.zrt --simulate MACHINE.json: the program's step on a described
// machine (run/Simulation.h), reported like a run (--report, --report-json,
// --trace) without running a kernel or starting MPI.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_TOOLS_ZERORUN_SIMULATE_H
#define ZRT_TOOLS_ZERORUN_SIMULATE_H

namespace zrt {

/// zero-run's main for a --simulate command line. Returns the exit code (2
/// for a usage error, 1 for a bad program or machine description).
int simulateMain(int argc, char **argv);

} // namespace zrt

#endif // ZRT_TOOLS_ZERORUN_SIMULATE_H
